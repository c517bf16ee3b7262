"""Prompts built from an environment's observations: GLAM's template with a short history, and
word rewrites for generalization tests. Both are gymnasium wrappers, so every environment of a
vector environment keeps its own history, and any text environment can use them.

>>> import groundrl
>>> from groundrl.envs.babyai_text import BabyAITextEnv
>>> env = GlamPrompt(BabyAITextEnv("GoToLocal"))
>>> prompt, info = env.reset(seed=17)
>>> prompt, *_ = env.step("turn left")
>>> for line in prompt.splitlines(): print(repr(line))
'Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle '
' Goal of the agent: go to a purple key '
' Observation 0: You see a wall 2 steps forward, You see a wall 1 step right, You see a purple key 3 steps left and 1 step forward, '
' Action 0: turn left '
' Observation 1: You see a wall 6 steps forward, You see a wall 2 steps right, You see a purple key 3 steps left and 4 steps forward, You see a grey box 2 steps left and 1 step forward, You see a grey ball 1 step left and 5 steps forward, You see a blue ball 1 step left and 1 step forward, You see a grey box 1 step right and 4 steps forward, You see a purple key 1 step right and 3 steps forward, '
' Action 1: '
"""  # noqa: E501 (doctest output)

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence

import gymnasium as gym

from groundrl.envs.base import resolve_action
from groundrl.errors import InvalidArgumentError

# (list of the actions, goal) headings of GLAM's template, per language
GLAM_HEADINGS = {
    "english": ("Possible action of the agent:", "Goal of the agent:"),
    "french": ("Actions possibles pour l'agent:", "But de l'agent:"),
}


def glam_prompt(actions: Sequence[str], goal: str | None, observations: Sequence[str], taken: Sequence[str],
                language: str = "english") -> str:
    """GLAM's prompt: the possible actions, the goal, then observations and the actions taken between
    them, numbered from 0, ending with ``"Action k: "`` for the action to choose.

    ``observations`` has one more element than ``taken``. Each observation is followed by ", "
    (GLAM ends every sentence of its list so); the goal line is left out when ``goal`` is None.

    >>> glam_prompt(["turn left", "go forward"], "go to the red ball", ["You see a wall 2 steps forward",
    ...             "You see a red ball 1 step forward"], ["turn left"])  # doctest: +NORMALIZE_WHITESPACE
    'Possible action of the agent: turn left, go forward \\n Goal of the agent: go to the red ball
     \\n Observation 0: You see a wall 2 steps forward, \\n Action 0: turn left
     \\n Observation 1: You see a red ball 1 step forward, \\n Action 1: '
    """
    if len(observations) != len(taken) + 1:
        raise ValueError("a GLAM prompt needs one more observation than actions taken")
    actions_heading, goal_heading = GLAM_HEADINGS[language]
    text = f"{actions_heading} {', '.join(actions)}"
    if goal is not None:
        text += f" \n {goal_heading} {goal}"
    for i, observation in enumerate(observations):
        text += f" \n Observation {i}: " + (f"{observation}, " if observation else "")
        text += f"\n Action {i}: " + (taken[i] if i < len(taken) else "")
    return text


class GlamPrompt(gym.Wrapper):
    """Replace the observation by GLAM's prompt: the valid actions, ``info["mission"]`` as the goal
    (if the environment has one), and the last ``window`` observations with the ``window - 1``
    actions taken between them. The history is cleared when the environment resets.

    The raw observation stays in ``info["observation"]``.

    Args:
        env: any groundrl text environment.
        window: how many observations the prompt shows (GLAM: 3).
        language: headings' language; by default the environment's ``language`` attribute, or English.
    """

    def __init__(self, env: gym.Env, window: int = 3, language: str | None = None):
        super().__init__(env)
        if not isinstance(window, int) or window < 1:
            raise InvalidArgumentError(f"the prompt window must be a positive number of observations, not {window!r}")
        language = language or getattr(env.unwrapped, "language", "english")
        if language not in GLAM_HEADINGS:
            raise InvalidArgumentError(f"no GLAM prompt in {language!r}; use one of {', '.join(GLAM_HEADINGS)}")
        self.window = window
        self.language = language
        self._observations: deque[str] = deque(maxlen=window)
        self._taken: deque[str] = deque(maxlen=window - 1)
        self._valid_actions: list[str] = []

    def _prompt(self, observation: str, info: dict) -> tuple[str, dict]:
        self._observations.append(observation)
        self._valid_actions = list(info["valid_actions"])
        prompt = glam_prompt(self._valid_actions, info.get("mission"), self._observations, self._taken, self.language)
        return prompt, {**info, "observation": observation}

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        self._observations.clear()
        self._taken.clear()
        return self._prompt(observation, info)

    def step(self, action):
        # The environment judges the action first: its error (an invalid action, no episode under
        # way) is the one to see, and the history stays as it was.
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._taken.append(self._valid_actions[resolve_action(action, self._valid_actions)])
        prompt, info = self._prompt(observation, info)
        return prompt, reward, terminated, truncated, info


def actions_prompt(observation: str, actions: Sequence[str]) -> str:
    r"""The observation preceded by the valid actions: it raises a small model's prior (SmolLM2-135M's
    exact success in Food Preparation: 0.0012 -> 0.014 per episode; Entertainment 0.00002 -> 0.0012),
    as a menu read first makes the actions' words likelier where the prompt asks for a step.

    >>> actions_prompt("You are in the kitchen. Your next step is to", ["open the fridge", "walk to the sofa"])
    'Possible actions: open the fridge, walk to the sofa.\nYou are in the kitchen. Your next step is to'
    """
    return f"Possible actions: {', '.join(actions)}.\n{observation}"


class ActionsPrompt(gym.Wrapper):
    """Replace the observation by :func:`actions_prompt` of it (the raw observation stays in
    ``info["observation"]``)."""

    def _prompt(self, observation: str, info: dict) -> tuple[str, dict]:
        return (actions_prompt(observation, [str(a) for a in info["valid_actions"]]),
                {**info, "observation": observation})

    def reset(self, **kwargs):
        return self._prompt(*self.env.reset(**kwargs))

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation, info = self._prompt(observation, info)
        return observation, reward, terminated, truncated, info


class RewriteWords(gym.Wrapper):
    """Replace whole words (or phrases) of the observation and of ``info["mission"]``: GLAM's tests
    of new nouns, invented words and reworded templates. Wrap it around :class:`GlamPrompt` to
    rewrite the whole prompt, as GLAM did. The valid actions are left as they are.

    >>> import groundrl
    >>> env = RewriteWords(GlamPrompt(groundrl.make_env("groundrl/BabyAI-GoToLocal-v0", prompt=None)),
    ...                    {"ball": "xolo", "blue": "croh"})
    >>> prompt, info = env.reset(seed=27)
    >>> info["mission"]
    'go to the croh xolo'
    """

    def __init__(self, env: gym.Env, replacements: Mapping[str, str]):
        super().__init__(env)
        if not replacements:
            raise InvalidArgumentError("RewriteWords needs at least one replacement")
        self.replacements = dict(replacements)
        # longest first, so that a phrase wins over a word it contains
        words = sorted(self.replacements, key=len, reverse=True)
        self._pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b")

    def rewrite(self, text: str) -> str:
        return self._pattern.sub(lambda match: self.replacements[match.group(1)], text)

    def _apply(self, observation: str, info: dict) -> tuple[str, dict]:
        if "mission" in info:
            info = {**info, "mission": self.rewrite(info["mission"])}
        return self.rewrite(observation), info

    def reset(self, **kwargs):
        return self._apply(*self.env.reset(**kwargs))

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation, info = self._apply(observation, info)
        return observation, reward, terminated, truncated, info
