"""groundrl: turn a pretrained language model into an RL agent for text environments, and ground
it there with online RL (GLAM and TWOSOME).

>>> import groundrl
>>> llm = groundrl.load_llm("tiny-llama")
>>> env = groundrl.make_env("groundrl/FollowInstruction-v0")
"""

from groundrl import envs  # registers the environments with gymnasium
from groundrl.envs import list_envs, make_env
from groundrl.errors import GroundrlError


def __getattr__(name: str):
    """``groundrl.LLM`` and ``groundrl.load_llm``, imported when first used: ``import groundrl``
    stays quick (the environments alone) for a user of the environments."""
    if name in ("LLM", "load_llm"):
        from groundrl import llm  # start-up time: torch and transformers take seconds

        return getattr(llm, name)
    raise AttributeError(f"module 'groundrl' has no attribute {name!r}")


__version__ = "0.1.0"
__all__ = ["LLM", "GroundrlError", "envs", "list_envs", "load_llm", "make_env", "__version__"]
