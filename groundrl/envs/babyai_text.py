"""BabyAI-Text (GLAM): BabyAI grid worlds from ``minigrid``, described in sentences.

Each step the agent reads what its 7x7 egocentric view shows, in GLAM's words and order: what it
carries, the walls straight forward, left and right, then every other visible object, column by
column from left to right and, within a column, far to near::

    You see a wall 2 steps forward, You see a wall 3 steps left, You see a red ball 1 step left and 2 steps forward

``obs`` is that list of sentences joined by ", "; ``info["mission"]`` is the goal ("go to the red
ball"), ``info["descriptions"]`` the sentences, ``info["image"]`` the symbolic 7x7x3 view (for
baselines) and ``info["valid_actions"]`` the action names. An agent sees the goal and a short
history through :class:`groundrl.envs.prompts.GlamPrompt` (``groundrl.make_env`` applies it).

Any minigrid BabyAI level works (``BabyAITextEnv("BabyAI-UnlockLocal-v0")``); GLAM's own levels are
in :mod:`groundrl.envs.babyai_levels`. Reward (minigrid's): ``1 - 0.9 * steps / max_steps`` on
success, 0 otherwise; an episode succeeds when its reward is positive.

>>> env = BabyAITextEnv("GoToLocal")
>>> obs, info = env.reset(seed=17)
>>> info["mission"]
'go to a purple key'
>>> obs
'You see a wall 2 steps forward, You see a wall 1 step right, You see a purple key 3 steps left and 1 step forward'
>>> info["valid_actions"]
['turn left', 'turn right', 'go forward', 'pick up', 'drop', 'toggle']
>>> obs, reward, terminated, truncated, info = env.step("turn left")
>>> info["descriptions"][-1]
'You see a purple key 1 step right and 3 steps forward'
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
from minigrid.core.constants import COLOR_NAMES, IDX_TO_COLOR, IDX_TO_OBJECT, OBJECT_TO_IDX
from minigrid.envs.babyai.core.verifier import ActionInstr

from groundrl.envs.babyai_levels import LOCAL_LEVELS, LocalLevel, PickupLocal, achievable_instructions
from groundrl.envs.base import StepInfo, TextEnv, resolve_action
from groundrl.errors import InvalidArgumentError

DONE = 6  # minigrid's no-op action; every action name past the sixth maps to it (GLAM)

ACTION_SETS = {
    "default": ("turn left", "turn right", "go forward", "pick up", "drop", "toggle"),
    "move": ("turn left", "turn right", "go forward"),
    "extended": ("turn left", "turn right", "go forward", "pick up", "drop", "toggle", "sleep", "do nothing", "think"),
    "synonyms": ("rotate left", "rotate right", "move ahead", "take", "release", "switch"),
    "french": ("tourner à gauche", "tourner à droite", "aller tout droit", "attraper", "lâcher", "basculer"),
}
"""Named action sets; the i-th name is minigrid's action i (left, right, forward, pickup, drop,
toggle), names past the sixth are its no-op ``done``."""

LEVELS = ("GoToLocal", "PickupLocal", "PutNextLocal", "OpenLocal", "PickUpThenGoToLocal", "MixedTrainLocal",
          "MixedTestLocal", "PickUpSeqPickUpLocal")
"""GLAM's level names (minigrid's GoToLocal and PutNextLocal, and :data:`LOCAL_LEVELS`)."""

_MINIGRID_LEVELS = {"GoToLocal": "BabyAI-GoToLocal-v0", "PutNextLocal": "BabyAI-PutNextLocal-v0"}


@dataclass(frozen=True)
class Language:
    """The words of the text observation in one language."""

    carry: str  # {color} {type}
    wall: str  # {distance}
    thing: str  # {color} {type} {distance}
    door: str  # {state} {color} {distance}
    steps: str  # {n} {s} {direction}
    forward: str
    left: str
    right: str
    conjunction: str
    types: dict = field(default_factory=dict)
    colors: dict = field(default_factory=dict)
    states: tuple = ("open", "closed", "locked")
    plural: bool = True


ENGLISH = Language(
    carry="You carry a {color} {type}",
    wall="You see a wall {distance}",
    thing="You see a {color} {type} {distance}",
    door="You see a {state} {color} door {distance}",
    steps="{n} step{s} {direction}",
    forward="forward",
    left="left",
    right="right",
    conjunction=" and ",
)

# GLAM's French (its generalization test): every object is feminine in French, so are the colors.
FRENCH = Language(
    carry="Tu portes une {type} {color}",
    wall="Tu vois un mur à {distance}",
    thing="Tu vois une {type} {color} {distance}",
    door="Tu vois une porte {color} {state} {distance}",
    steps="{n} pas {direction}",
    forward="devant",
    left="à gauche",
    right="à droite",
    conjunction=" et ",
    types={"key": "clef", "ball": "balle", "box": "boîte", "door": "porte", "goal": "but", "lava": "lave",
           "floor": "sol"},
    colors={"red": "rouge", "green": "verte", "blue": "bleue", "purple": "violette", "yellow": "jaune",
            "grey": "grise"},
    states=("ouverte", "fermée", "fermée à clef"),
    plural=False,
)

LANGUAGES = {"english": ENGLISH, "french": FRENCH}

_UNSEEN, _EMPTY, _WALL, _DOOR = (OBJECT_TO_IDX[name] for name in ("unseen", "empty", "wall", "door"))


def describe(image: np.ndarray, carrying: tuple[str, str] | None = None, language: str = "english") -> list[str]:
    """GLAM's sentences for an egocentric view.

    Args:
        image: minigrid's encoded view, shape (width, height, 3) indexed ``[x][y]``, the agent at
            the bottom centre looking up (``y`` decreasing); invisible cells are "unseen".
        carrying: ``(color, type)`` of the object the agent carries, if any.
        language: ``"english"`` or ``"french"``.

    >>> from minigrid.core.constants import OBJECT_TO_IDX as O, COLOR_TO_IDX as C
    >>> view = np.zeros((7, 7, 3), dtype=np.uint8); view[:, :, 0] = O["empty"]
    >>> view[:, 3, 0] = O["wall"]                       # a wall 3 steps ahead
    >>> view[1, 5] = (O["ball"], C["red"], 0)           # 2 left, 1 forward
    >>> describe(view, carrying=("blue", "key"))
    ['You carry a blue key', 'You see a wall 3 steps forward', 'You see a red ball 2 steps left and 1 step forward']
    """
    words = LANGUAGES[language]
    width, height = image.shape[:2]
    ax, ay = width // 2, height - 1
    kinds = image[:, :, 0]
    sentences = []
    if carrying is not None:
        color, kind = carrying
        sentences.append(words.carry.format(color=words.colors.get(color, color), type=words.types.get(kind, kind)))

    def distance(n: int, direction: str) -> str:
        return words.steps.format(n=n, s="s" if n > 1 and words.plural else "", direction=direction)

    # A wall is named only if it is the first thing seen on the line straight forward, left or right;
    # unseen cells do not stop the look (as in GLAM).
    for direction, cells in ((words.forward, [(ax, y) for y in range(ay - 1, -1, -1)]),
                             (words.left, [(x, ay) for x in range(ax - 1, -1, -1)]),
                             (words.right, [(x, ay) for x in range(ax + 1, width)])):
        for n, (x, y) in enumerate(cells, start=1):
            if kinds[x, y] in (_UNSEEN, _EMPTY):
                continue
            if kinds[x, y] == _WALL:
                sentences.append(words.wall.format(distance=distance(n, direction)))
            break

    for x in range(width):
        for y in range(height):
            if kinds[x, y] in (_UNSEEN, _EMPTY, _WALL) or (x, y) == (ax, ay):
                continue
            side, ahead = x - ax, ay - y
            if side == 0:
                where = distance(ahead, words.forward)
            else:
                where = distance(abs(side), words.left if side < 0 else words.right)
                if ahead:
                    where += words.conjunction + distance(ahead, words.forward)
            kind, color = IDX_TO_OBJECT[int(kinds[x, y])], IDX_TO_COLOR[int(image[x, y, 1])]
            color = words.colors.get(color, color)
            if kinds[x, y] == _DOOR:
                sentences.append(words.door.format(state=words.states[int(image[x, y, 2])], color=color,
                                                   distance=where))
            else:
                sentences.append(words.thing.format(color=color, type=words.types.get(kind, kind), distance=where))
    return sentences


_COLOR = "|".join(COLOR_NAMES)
_OBJECT = re.compile(rf"\b(the|a) (?:({_COLOR}) )?(key|ball|box|door|object)"
                     r"(?: (in front of you|behind you|on your left|on your right))?")
_FRENCH_MASCULINE_COLORS = {"red": "rouge", "green": "vert", "blue": "bleu", "purple": "violet", "yellow": "jaune",
                            "grey": "gris"}
_FRENCH_LOCATIONS = {"in front of you": "devant toi", "behind you": "derrière toi", "on your left": "à ta gauche",
                     "on your right": "à ta droite"}


def translate_mission(mission: str) -> str:
    """A BabyAI instruction in French (go to, pick up, open, put next to, and their sequences).

    >>> translate_mission("go to the red ball")
    'aller à la balle rouge'
    >>> translate_mission("go to a box after you pick up the grey key")
    'attraper la clef grise, puis aller à une boîte'
    """
    after = re.fullmatch(r"(.+) after you (.+)", mission)
    if after:
        return translate_mission(f"{after.group(2)}, then {after.group(1)}")
    if ", then " in mission:
        return ", puis ".join(translate_mission(part) for part in mission.split(", then "))
    if " and " in mission:
        return " et ".join(translate_mission(part) for part in mission.split(" and "))

    def phrase(match: re.Match) -> str:
        article, color, kind, location = match.groups()
        masculine = kind == "object"
        french = "objet" if masculine else FRENCH.types[kind]
        article = {"the": "le" if masculine else "la", "a": "un" if masculine else "une"}[article]
        if color:
            french += " " + (_FRENCH_MASCULINE_COLORS if masculine else FRENCH.colors)[color]
        if location:
            french += " " + _FRENCH_LOCATIONS[location]
        return f"{article} {french}"

    for english, french in (("go to ", "aller à "), ("pick up ", "attraper "), ("open ", "ouvrir "),
                            ("put ", "mettre ")):
        if mission.startswith(english):
            text = french + _OBJECT.sub(phrase, mission[len(english):])
            return text.replace(" next to ", " à côté de ")
    raise InvalidArgumentError(f"cannot translate the mission {mission!r} into French")


def make_level(level: str, render_mode: str | None = None):
    """A minigrid BabyAI environment (unwrapped) from one of :data:`LEVELS` or a minigrid id."""
    if level in LOCAL_LEVELS:
        return LocalLevel(**LOCAL_LEVELS[level], render_mode=render_mode)
    if level == "PickupLocal":
        return PickupLocal(render_mode=render_mode)
    level_id = _MINIGRID_LEVELS.get(level, level)
    if level_id.startswith("BabyAI-") and level_id in gym.registry:
        return gym.make(level_id, render_mode=render_mode, disable_env_checker=True).unwrapped
    raise InvalidArgumentError(f"unknown BabyAI level {level!r}; use one of {', '.join(LEVELS)} or a minigrid "
                               "BabyAI id such as 'BabyAI-UnlockLocal-v0'")


class BabyAITextEnv(TextEnv):
    """A minigrid BabyAI level as a text environment (GLAM's BabyAI-Text).

    Args:
        level: one of :data:`LEVELS` (GLAM's levels) or any minigrid BabyAI id.
        actions: a name in :data:`ACTION_SETS` (``"default"``: 6 actions; ``"move"``: 3;
            ``"extended"``: 9; ``"synonyms"``; ``"french"``) or a list of names, the i-th being
            minigrid's action i (names past the sixth do nothing). Default: the language's own.
        language: ``"english"`` or ``"french"`` (observations, mission and default actions).
        render_mode: ``"rgb_array"`` (minigrid's picture) or ``"ansi"`` (its text grid).
        hindsight: report in ``info["achieved_missions"]`` the missions each step accomplished, by
            minigrid's own verifiers of every go-to, pick-up, open and put-next instruction about the
            episode's objects (:func:`~groundrl.envs.babyai_levels.achievable_instructions`).

    ``reset(seed=s, options={"mission": m})`` plays episode ``s`` with mission ``m`` in place of its
    own, ``m`` one of those instructions (as ``achieved_missions`` words them): the same level, its
    reward and end decided by ``m``'s verifier; this is how a relabelled episode is replayed.
    """

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 10, "prompt": "glam"}

    def __init__(self, level: str = "GoToLocal", actions: str | Sequence[str] | None = None,
                 language: str = "english", render_mode: str | None = None, hindsight: bool = False):
        if language not in LANGUAGES:
            raise InvalidArgumentError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
        if actions is None:
            actions = "french" if language == "french" else "default"
        if isinstance(actions, str):
            if actions not in ACTION_SETS:
                raise InvalidArgumentError(f"unknown action set {actions!r}; use one of {', '.join(ACTION_SETS)} "
                                           "or a list of action names")
            actions = ACTION_SETS[actions]
        actions = list(actions)
        if not actions or len(set(actions)) != len(actions) or not all(isinstance(a, str) and a for a in actions):
            raise InvalidArgumentError("actions must be distinct non-empty names")
        self._set_render_mode(render_mode)
        self.level = level
        self.language = language
        self.actions = actions
        self.minigrid = make_level(level, render_mode="rgb_array" if render_mode == "rgb_array" else None)
        self.hindsight = bool(hindsight)
        self._achievable: dict[str, ActionInstr] = {}  # mission (the env's language) -> its verifier
        self._obs: dict = {}

    @property
    def action_vocabulary(self) -> tuple[str, ...]:
        return tuple(self.actions)

    def minigrid_action(self, index: int) -> int:
        """The minigrid action the ``index``-th action name stands for."""
        return min(index, DONE)

    def action_index(self, minigrid_action: int) -> int | None:
        """The index of the first action name standing for ``minigrid_action`` (None if none does)."""
        return next((i for i in range(len(self.actions)) if self.minigrid_action(i) == minigrid_action), None)

    def _observe(self) -> tuple[str, StepInfo]:
        carrying = self.minigrid.carrying
        descriptions = describe(self._obs["image"], (carrying.color, carrying.type) if carrying else None,
                                self.language)
        mission = self.minigrid.mission
        info = {
            "valid_actions": list(self.actions),
            "mission": translate_mission(mission) if self.language == "french" else mission,
            "descriptions": descriptions,
            "image": self._obs["image"],
            "direction": int(self._obs["direction"]),
            "elapsed_steps": int(self.minigrid.step_count),
            "max_episode_steps": int(self.minigrid.max_steps),
        }
        return ", ".join(descriptions), info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, StepInfo]:
        unknown = sorted(set(options or {}) - {"mission"})
        if unknown:
            raise InvalidArgumentError(f"unknown reset options {unknown}; BabyAI-Text takes 'mission' only")
        super().reset(seed=seed)
        # minigrid prints every rejected level sample ("Sampling rejected: ..."): not for our users
        with contextlib.redirect_stdout(io.StringIO()):
            self._obs, _ = self.minigrid.reset(seed=seed)
        if (options or {}).get("mission") is not None:
            self._set_mission(options["mission"], seed)
        self._achievable = self._instructions() if self.hindsight else {}
        return self._observe()

    def _instructions(self) -> dict[str, ActionInstr]:
        """The instructions about this episode's objects by mission, in the environment's language."""
        found = achievable_instructions(self.minigrid)
        return {translate_mission(m) if self.language == "french" else m: i for m, i in found.items()}

    def _set_mission(self, mission: str, seed: int | None) -> None:
        """Give the episode just reset ``mission`` in place of its own (its verifier and step limit)."""
        instructions = self._instructions()
        if mission not in instructions:
            raise InvalidArgumentError(f"mission {mission!r} is about no object of this episode (seed "
                                       f"{seed}); give one of info['achieved_missions'] of its steps")
        level = self.minigrid
        level.instrs, level.mission = instructions[mission], instructions[mission].surface(level)
        if not level.fixed_max_steps:  # as the level's reset sets it for its own instruction
            rooms = level.num_rows * level.num_cols
            level.max_steps = level.num_navs_needed(level.instrs) * level.room_size ** 2 * rooms

    def _step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        index = resolve_action(action, self.actions)
        self._obs, reward, terminated, truncated, _ = self.minigrid.step(self.minigrid_action(index))
        obs, info = self._observe()
        if self.hindsight:
            info["achieved_missions"] = self._achieved(self.minigrid_action(index))
        if terminated or truncated:
            info["success"] = bool(reward > 0)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _achieved(self, minigrid_action: int) -> list[str]:
        """The missions the step just taken accomplished, by their own verifiers (each keeps its state)."""
        achieved = []
        for mission, instruction in self._achievable.items():
            if minigrid_action == self.minigrid.actions.drop:  # objects moved: as the level does for its own
                instruction.update_objs_poss()
            if instruction.verify(minigrid_action) == "success":
                achieved.append(mission)
        return achieved

    def render(self):
        if self.render_mode == "rgb_array":
            return self.minigrid.render()
        if self.render_mode == "ansi":
            return f"{self.minigrid.mission}\n{self.minigrid.pprint_grid()}"
        return None

    def close(self):
        self.minigrid.close()
        super().close()


NEW_NOUNS = {"key": "chair", "ball": "table", "box": "car"}
INVENTED_WORDS = {"key": "dax", "ball": "xolo", "box": "afze", "red": "faze", "green": "jatu", "blue": "croh",
                  "purple": "vurst", "yellow": "gakul", "grey": "sil"}


@dataclass(frozen=True)
class GeneralizationTest:
    """One of GLAM's generalization tests: an environment, its options, and words rewritten in the
    whole prompt (``groundrl.make_env(test.env_id, **test.make_env_kwargs())``)."""

    env_id: str
    description: str
    env_kwargs: dict = field(default_factory=dict)
    rewrite: dict = field(default_factory=dict)

    def make_env_kwargs(self) -> dict:
        return {**self.env_kwargs, **({"rewrite": self.rewrite} if self.rewrite else {})}


_MIXED_TRAIN = "groundrl/BabyAI-MixedTrainLocal-v0"
GENERALIZATION_TESTS = {
    "new-seeds": GeneralizationTest(_MIXED_TRAIN, "the training levels on new seeds"),
    "new-objects": GeneralizationTest("groundrl/BabyAI-MixedTestLocal-v0",
                                      "only the held-out color-noun pairs (yellow box, red key, red door, ...)"),
    "new-nouns": GeneralizationTest(_MIXED_TRAIN, "key, ball, box renamed chair, table, car in the whole prompt",
                                    rewrite=NEW_NOUNS),
    "invented-words": GeneralizationTest(_MIXED_TRAIN,
                                         "nouns and colors replaced by invented words (dax, xolo, faze, ...)",
                                         rewrite=INVENTED_WORDS),
    "new-composition": GeneralizationTest("groundrl/BabyAI-PickUpSeqPickUpLocal-v0",
                                          "pick up A, then pick up B: a sequence never trained"),
    "synonym-actions": GeneralizationTest(_MIXED_TRAIN, "actions renamed rotate left, rotate right, move ahead, take, "
                                          "release, switch", env_kwargs={"actions": "synonyms"}),
    "french": GeneralizationTest("groundrl/BabyAI-GoToLocalFrench-v0",
                                 "GoToLocal in French: observations, goal, actions"),
}
"""GLAM's generalization suite (section 4 of the paper), by name; seeds should differ from training's."""

_GOTO_LOCAL = "groundrl/BabyAI-GoToLocal-v0"
GOTO_LOCAL_TESTS = {
    "new-seeds": GeneralizationTest(_GOTO_LOCAL, "GoToLocal on new seeds"),
    "new-nouns": GeneralizationTest(_GOTO_LOCAL, "GoToLocal with key, ball, box renamed chair, table, car",
                                    rewrite=NEW_NOUNS),
    "invented-words": GeneralizationTest(_GOTO_LOCAL, "GoToLocal with nouns and colors replaced by invented words",
                                         rewrite=INVENTED_WORDS),
    "synonym-actions": GeneralizationTest(_GOTO_LOCAL, "GoToLocal with the actions renamed rotate left, rotate "
                                          "right, move ahead, take, release, switch",
                                          env_kwargs={"actions": "synonyms"}),
    "french": GENERALIZATION_TESTS["french"],
}
"""GLAM's tests that apply to an agent trained on GoToLocal alone. Its instructions name every
color-noun pair and no sequence, so "new objects" and "new composition" test nothing new there."""
