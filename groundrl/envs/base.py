"""The environment contract shared by every groundrl environment, ours and adapters.

- ``reset(seed=...) -> (obs, info)`` and ``step(action) -> (obs, reward, terminated, truncated, info)``;
- ``obs`` is the text observation;
- ``info["valid_actions"]`` lists the action strings valid now; the other keys groundrl reads
  (``success``, ``macro_steps``, ``features``, ...) are declared, with their types and readers, by
  :class:`StepInfo`, and :func:`check_info` checks an ``info`` against it;
- ``step`` takes one of those strings or its index in the list; anything else raises
  ``ValueError`` and leaves the environment as it was;
- ``step`` before the first ``reset``, or after a step that returned ``terminated`` or
  ``truncated``, raises :class:`ResetNeededError` and leaves the environment as it was;
- ``step`` and ``reset`` after ``close()`` raise :class:`ClosedEnvironmentError`.

Agents that do not read text (symbolic PPO, action-head agents) also need a fixed action
vocabulary: an environment whose valid actions vary names all of them in ``action_vocabulary``
and gives ``info["action_ids"]``, the position of each valid action in it (see
:func:`action_ids`); where every action is always valid, the ids are the positions.
"""

# No `from __future__ import annotations` here: TypedDict finds StepInfo's Required[...] key only
# in annotations evaluated when the class is made (a string hides it from __required_keys__).

import reprlib
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Required, TypedDict

import gymnasium as gym
import numpy as np

from groundrl.errors import GroundrlError, InvalidArgumentError


class StepInfo(TypedDict, total=False):
    """The keys of an environment's ``info`` (from ``reset`` and ``step``) that groundrl reads outside
    the environments, each with its type and its readers. Only ``valid_actions`` is always there; an
    environment may add keys of its own (``score``, ``executed``, ``descriptions``, ...), which only
    its own users read, and GiGPO's ``group.state_key`` may name any key.
    """

    valid_actions: Required[list[str]]
    """The action strings valid now (distinct): what every agent chooses among (the rollout collector
    of training and evaluation, PPO's and DRRN's bootstrap from an episode's last state, eval.drift)."""

    action_ids: list[int]
    """The position of each valid action in the environment's ``action_vocabulary`` (absent: every
    action is always valid, the ids are the positions; see :func:`action_ids`): agents with an action
    head or a symbolic observation (agents.symbolic, agents.llm_agent)."""

    success: bool
    """At the end of an episode, whether it reached its goal: the success rates of training and
    evaluation (train.collector; absent: an episode that terminated with a positive reward succeeded)."""

    macro_steps: int
    """The primitive steps the last action took (Overcooked's macro-actions): PPO discounts the
    decision by ``gamma ** macro_steps`` (train.collector; absent: 1)."""

    features: np.ndarray
    """The state as numbers (VirtualHome's booleans, Overcooked's positions): agent.kind=symbolic
    with network=mlp (agents.symbolic)."""

    image: np.ndarray
    """BabyAI's symbolic 7x7x3 view: agent.kind=symbolic with network=cnn (agents.symbolic)."""

    mission: str
    """The goal in words (BabyAI): the symbolic cnn agent (agents.symbolic), GLAM's prompt and the
    word rewriting (envs.prompts)."""

    achieved_missions: list[str]
    """The missions this step accomplished, the episode's own or others about the same objects, in
    the words the environment would give them as a mission, checked by the environment's own verifier
    (BabyAI-Text with ``hindsight=True``); ``reset(options={"mission": m})`` starts the same episode
    with one of them as its mission: what hindsight relabelling replays (train.self_imitation)."""

    elapsed_steps: int
    """The steps the episode has run (primitive ones where an action is a macro, as its time limit
    counts them): with ``max_episode_steps``, the time left, which the time-aware critic reads
    (``agent.llm.critic_time``; BabyAI-Text, Overcooked)."""

    max_episode_steps: int
    """The episode's time limit: it is truncated once ``elapsed_steps`` reaches it (the time-aware
    critic, with ``elapsed_steps``)."""

    start_steps: int
    """At a reset under :class:`~groundrl.envs.starts.ExploringStarts` (training's ``explore.start_steps``):
    the steps of the way to the state the episode began in."""

    observation: str
    """The environment's own observation, where a prompt wrapper (envs.prompts) replaced it with a
    prompt: what PPO's novelty bonus counts and GiGPO's step groups compare (train.algorithms)."""


_INFO_TYPES = typing.get_type_hints(StepInfo)


def check_info(info: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` unless ``info`` fits :class:`StepInfo`: its required keys present, and each
    key it declares holding a value of the declared type (numpy's integers count as ``int``; the
    environment's own keys are not checked).

    >>> check_info({"valid_actions": ["go"], "success": True, "score": "anything"})
    >>> check_info({"valid_actions": ["go"], "macro_steps": 2.0})
    Traceback (most recent call last):
    ...
    TypeError: info['macro_steps'] should be int, not float 2.0
    >>> check_info({"success": True})
    Traceback (most recent call last):
    ...
    TypeError: info has no 'valid_actions' (its keys: 'success')
    """
    missing = [key for key in sorted(StepInfo.__required_keys__) if key not in info]
    if missing:
        keys = ", ".join(repr(key) for key in info) or "none"
        raise TypeError(f"info has no {', '.join(repr(key) for key in missing)} (its keys: {keys})")
    for key, kind in _INFO_TYPES.items():
        if key in info and not _fits(info[key], kind):
            value = info[key]
            raise TypeError(f"info[{key!r}] should be {_type_name(kind)}, not {_type_name(type(value))} "
                            f"{reprlib.repr(value)}")


def _type_name(kind: Any) -> str:
    """``int``, ``list[str]``, ``numpy.ndarray``: a numpy boolean is no ``bool``, and says so."""
    if not isinstance(kind, type):
        return str(kind)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _fits(value: Any, kind: Any) -> bool:
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if kind is int:  # numpy's integers are integers; a bool is not a count
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    return isinstance(value, kind)


class ResetNeededError(GroundrlError, gym.error.ResetNeeded):
    """``step`` when no episode is under way: before the first ``reset``, or after the end."""


class ClosedEnvironmentError(GroundrlError, gym.error.ClosedEnvironmentError):
    """``step`` or ``reset`` of an environment after its ``close()``."""


def check_open(closed: bool) -> None:
    # a closed adapter has given its game server back to the pool (another environment may be using
    # it), and a closed environment of ours has let go of what it held: neither can go on
    if closed:
        raise ClosedEnvironmentError("the environment is closed; make a new one")


def check_episode_running(ended: str | None) -> None:
    """Refuse a step when ``ended`` says no episode is under way: ``"not started"``, ``"terminated"``
    or ``"truncated"`` (``None`` while an episode runs)."""
    if ended == "not started":
        raise ResetNeededError("no episode has started; call reset() before step()")
    if ended is not None:
        raise ResetNeededError(f"the episode has ended ({ended}); call reset() to start a new one")


def episode_end(terminated: bool, truncated: bool) -> str | None:
    """What :func:`check_episode_running` is told after a step."""
    return "terminated" if terminated else "truncated" if truncated else None


class TextSpace(gym.spaces.Text):
    """A text space that holds any string up to ``max_length`` characters (gymnasium's ``Text``
    only admits a fixed character set, too narrow for prompts in other languages)."""

    def __init__(self, max_length: int = 100_000):
        super().__init__(max_length=max_length, min_length=0)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


def resolve_action(action: Any, valid_actions: Sequence[str]) -> int:
    """The index of ``action`` (a valid action string, or an index into ``valid_actions``).

    >>> resolve_action("turn left", ["turn left", "go forward"])
    0
    >>> resolve_action(1, ["turn left", "go forward"])
    1
    """
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        if 0 <= action < len(valid_actions):
            return int(action)
        raise ValueError(f"action index {action} is out of range: {len(valid_actions)} actions are valid now")
    if isinstance(action, str):
        try:
            return list(valid_actions).index(action)
        except ValueError:
            shown = ", ".join(_shortened(a) for a in valid_actions[:10])
            more = f", ... ({len(valid_actions)} in all)" if len(valid_actions) > 10 else ""
            raise ValueError(f"action {_shortened(action)} is not valid now; valid actions: {shown}{more}") from None
    raise ValueError(f"an action is a string from info['valid_actions'] or its index, not {type(action).__name__}")


def _shortened(text: str, keep: int = 80) -> str:
    """``text`` quoted, cut after ``keep`` characters: an action comes from a model or a user, and an
    error message that echoed megabytes of it would bury what it says.

    >>> _shortened("go north"), _shortened("x" * 100, keep=4)
    ("'go north'", "'xxxx'... (100 characters)")
    """
    return repr(text) if len(text) <= keep else f"{text[:keep]!r}... ({len(text)} characters)"


def action_ids(info: dict) -> list[int]:
    """The positions of ``info["valid_actions"]`` in the environment's ``action_vocabulary``.

    >>> action_ids({"valid_actions": ["a", "b"], "action_ids": [3, 7]}), action_ids({"valid_actions": ["a", "b"]})
    ([3, 7], [0, 1])
    """
    return [int(i) for i in info["action_ids"]] if "action_ids" in info else list(range(len(info["valid_actions"])))


def action_vocabulary(env: gym.Env) -> tuple[str, ...]:
    """Every action ``env`` can offer, in the order ``info["action_ids"]`` indexes."""
    vocabulary = getattr(env.unwrapped, "action_vocabulary", None)
    if not vocabulary:
        name = env.spec.id if env.spec else type(env.unwrapped).__name__
        raise InvalidArgumentError(f"{name} declares no action_vocabulary, which agents with an action head or "
                                   "a symbolic observation need; LLM-scoring agents play it")
    return tuple(vocabulary)


def join_words(words: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``.

    >>> join_words(["a tomato", "a lettuce", "an onion"])
    'a tomato, a lettuce and an onion'
    """
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


class TextEnv(gym.Env):
    """Base class of groundrl's text environments: spaces, and the checks of the contract.

    A subclass implements ``_step`` (what ``step`` does while an episode runs) and calls
    ``super().reset(seed=seed)`` first in its ``reset`` (and ``super().close()`` in a ``close`` of its
    own); ``step`` refuses to run outside an episode, and both after ``close()``.
    """

    metadata = {"render_modes": ["ansi"]}
    observation_space = TextSpace()
    action_space = TextSpace(max_length=1000)
    # Class defaults, so that subclasses need no call to an __init__ here for them.
    _ended: str | None = "not started"
    _closed = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_open(self._closed)
        super().reset(seed=seed, options=options)
        self._ended = None

    def step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        check_open(self._closed)
        check_episode_running(self._ended)
        observation, reward, terminated, truncated, info = self._step(action)
        self._ended = episode_end(terminated, truncated)
        return observation, reward, terminated, truncated, info

    def _step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the environment holds; ``step`` and ``reset`` are refused from then on (a
        subclass that overrides it calls ``super().close()``)."""
        self._closed = True
        super().close()

    # Environments pickled before groundrl tracked episodes (training checkpoints) are mid-episode.
    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"_ended": None, **state})

    def _set_render_mode(self, render_mode: str | None) -> None:
        """Keep ``render_mode`` if this environment draws that way, or say which ones it has."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            modes = ", ".join(repr(m) for m in self.metadata["render_modes"])
            raise InvalidArgumentError(f"render_mode {render_mode!r} is not supported; use {modes} or None")
        self.render_mode = render_mode


class EpisodeGuard(gym.Wrapper):
    """Refuse ``step`` when no episode is under way, however it ended: wrappers end episodes too
    (gymnasium's ``TimeLimit`` truncates them without the environment knowing); and ``step`` and
    ``reset`` after ``close()``. ``make_env`` puts it outermost, so that it also answers before any
    wrapper below looks at the action."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._ended: str | None = "not started"
        self._closed = False

    def reset(self, **kwargs) -> tuple[str, StepInfo]:
        check_open(self._closed)
        result = self.env.reset(**kwargs)
        self._ended = None
        return result

    def step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        check_open(self._closed)
        check_episode_running(self._ended)
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._ended = episode_end(terminated, truncated)
        return observation, reward, terminated, truncated, info

    def close(self) -> None:
        self._closed = True
        super().close()
