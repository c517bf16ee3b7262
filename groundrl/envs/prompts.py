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
import numpy as np

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
        return prompt, {"observation": observation, **info}  # an inner wrapper's (the environment's own) wins

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
                {"observation": observation, **info})  # an inner wrapper's (the environment's own) wins

    def reset(self, **kwargs):
        return self._prompt(*self.env.reset(**kwargs))

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation, info = self._prompt(observation, info)
        return observation, reward, terminated, truncated, info


class WordRewriter:
    """Replace whole words or phrases of a text, the longest first (a phrase wins over a word it contains)."""

    def __init__(self, replacements: Mapping[str, str]):
        self.replacements = dict(replacements)
        words = sorted(self.replacements, key=len, reverse=True)
        self.pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b")

    def __call__(self, text: str) -> str:
        return self.pattern.sub(lambda match: self.replacements[match.group(1)], text)


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
        self.rewrite = WordRewriter(self.replacements)

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


_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_INVENTED_STREAM = 0x1D0  # mixed into the reset seed: the words' draws are not the environment's own stream


def invented_word(rng: np.random.Generator) -> str:
    """A pronounceable word of 2 or 3 syllables that means nothing (``"dakimo"``)."""
    return "".join(_CONSONANTS[rng.integers(len(_CONSONANTS))] + _VOWELS[rng.integers(len(_VOWELS))]
                   for _ in range(int(rng.integers(2, 4))))


class InventedWords(gym.Wrapper):
    """In a share of the episodes, replace ``words`` by invented ones, the same all episode long, in the
    observation, the valid actions and the mission: a policy trained so reads what the sentences say
    of a thing ("the X is opened", "put the X in the Y"), not only which thing it is, and can carry that
    to tasks with other things (Food Preparation's agent to Laundry's washing machine). Drawn from the
    reset seed, so an episode replays from its seed. The environment's own observation stays in
    ``info["observation"]`` (what the novelty bonus counts: a renamed state is not a new one).

    >>> import groundrl
    >>> env = InventedWords(groundrl.make_env("groundrl/FoodPreparation-v0", prompt=None), ["pancake", "microwave"])
    >>> observation, info = env.reset(seed=0)
    >>> info["valid_actions"][3:]
    ['walk to the fako', 'walk to the vato']
    """

    def __init__(self, env: gym.Env, words: Sequence[str], share: float = 1.0):
        super().__init__(env)
        words = [str(w) for w in words]
        if not words or not all(w.strip() for w in words):
            raise InvalidArgumentError("invented words need the words to replace, e.g. [pancake, microwave]")
        if not 0 < share <= 1:
            raise InvalidArgumentError(f"the share of episodes with invented words is in (0, 1], not {share}")
        self.words, self.share = words, share
        self._rewrite: WordRewriter | None = None  # this episode's, or None: its words as they are
        self._unseeded = np.random.default_rng()

    def _apply(self, observation: str, info: dict) -> tuple[str, dict]:
        rewrite = self._rewrite
        if rewrite is None:
            return observation, info
        info = {**info, "observation": info.get("observation", observation),
                "valid_actions": [rewrite(str(a)) for a in info["valid_actions"]]}
        if "mission" in info:
            info["mission"] = rewrite(info["mission"])
        return rewrite(observation), info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        rng = self._unseeded if seed is None else np.random.default_rng([seed, _INVENTED_STREAM])
        renamed = rng.random() < self.share
        self._rewrite = WordRewriter({w: invented_word(rng) for w in self.words}) if renamed else None
        return self._apply(*self.env.reset(seed=seed, options=options))

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation, info = self._apply(observation, info)
        return observation, reward, terminated, truncated, info

