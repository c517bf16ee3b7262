"""ScienceWorld (Wang et al. 2022; ``pip install 'groundrl[scienceworld]'``, Java 17): elementary
science tasks in a simulated house, registered as ``groundrl/ScienceWorld-<task>-v0`` for each of
its 30 tasks (``boil``, ``find-animal``, ``grow-plant``, ...).

A reset plays one of the task's variations of the chosen split (``split``; the package's train,
dev and test variations are disjoint): ``reset(seed=s)`` plays the split's ``s``-th variation
(modulo their number). The prompt is the task, the room, the inventory and the last action with
its answer. Rewards are the changes of the task's score, in [0, 1] units (the package counts
0-100): an episode that completes the task has earned 1 in all. It terminates when the task is
completed (``info["success"]``) or failed (a negative score: the package's "wrong focus"), and is
truncated after ``max_steps`` actions.

The valid actions. ScienceWorld checks every template against every visible object: hundreds of
actions in most rooms (976 in the kitchen of ``boil``). groundrl offers that list filtered:

1. actions on the agent itself (``focus on agent``, ``use thermometer on agent``) and
   ``reset task`` (which would restart the episode inside it) are left out;
2. if more than ``max_actions`` remain, they are ordered and cut at ``max_actions``: first the
   ways to move (``go to``, ``teleport to``) and the actions on no object (``look around``,
   ``inventory``, ``wait``), then those on one object (opening, focusing, picking up, activating:
   the package's gold paths are mostly these), then those on two (``move X to Y``, ``pour X into
   Y``, ``use X on Y``), each group in alphabetical order.

So with a cap, an action the task needs can be missing in a crowded room; ``max_actions=None``
offers them all (``benchmarks/worlds.py`` reports how many states exceed the cap).

A seed reproduces the variation and its observations (the simulator's object lists are put in
alphabetical order); not always the names of the valid actions (see ``exact_replay`` below).
"""

from __future__ import annotations

import itertools
import re

from groundrl.envs.external import ExternalTextEnv, java_heap, require
from groundrl.errors import InvalidArgumentError

TASKS = (
    "boil", "change-the-state-of-matter-of", "chemistry-mix", "chemistry-mix-paint-secondary-color",
    "chemistry-mix-paint-tertiary-color", "find-animal", "find-living-thing", "find-non-living-thing", "find-plant",
    "freeze", "grow-fruit", "grow-plant", "identify-life-stages-1", "identify-life-stages-2",
    "inclined-plane-determine-angle", "inclined-plane-friction-named-surfaces",
    "inclined-plane-friction-unnamed-surfaces", "lifespan-longest-lived", "lifespan-longest-lived-then-shortest-lived",
    "lifespan-shortest-lived", "measure-melting-point-known-substance", "measure-melting-point-unknown-substance",
    "melt", "mendelian-genetics-known-plant", "mendelian-genetics-unknown-plant", "power-component",
    "power-component-renewable-vs-nonrenewable-energy", "test-conductivity", "test-conductivity-of-unknown-substances",
    "use-thermometer",
)
"""ScienceWorld's tasks, by the package's names (each registered as ``groundrl/ScienceWorld-<task>-v0``)."""

SPLITS = ("train", "dev", "test")
SIMPLIFICATIONS = ("easy", "teleportAction", "openDoors", "openContainers", "selfWateringFlowerPots",
                   "noElectricalAction")
_LEFT_OUT = re.compile(r"\bagent\b|^reset task$")
_SYNONYMS = {"drop": "put down", "turn on": "activate", "turn off": "deactivate", "take": "pick up",
             "get": "pick up", "stir": "mix", "consume": "eat"}
"""The simulator parser's other words for a one-object template's verb (its gold paths say "drop
buzzer" where the valid actions say "put down buzzer"). Not "examine" (look at): the paths examine a
heating substance at every tick, and an unplayed step is the no-op, which keeps that pace and is
skipped where the path outruns ``max_steps`` (played as "look at", boil's bound fell 0.7 -> 0.6)."""
_MOVES = ("go to ", "teleport to ")


def canonical(text: str) -> str:
    r"""ScienceWorld's text with its lists in alphabetical order: the simulator lists a room's objects
    (and the doors it sees) in an order that differs between simulator processes, so that the same
    state would read differently after a restore.

    >>> canonical("You see:\n\tthe agent\n\ta table. On it:\n\t\ta pot\n\t\ta cup\n\ta chair").split("\n")
    ['You see:', '\ta chair', '\ta table. On it:', '\t\ta cup', '\t\ta pot', '\tthe agent']
    >>> canonical("You also see: A door to the yard (open), A door to the hall (open).")
    'You also see: A door to the hall (open), A door to the yard (open).'
    >>> canonical("\ta table. On the table is: a cup (containing red, blue), a cup (containing blue).")
    '\ta table. On the table is: a cup (containing blue), a cup (containing red, blue).'
    """
    lines, out, i = [_sorted_list(line) for line in text.split("\n")], [], 0
    while i < len(lines):
        if not lines[i].startswith("\t"):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith("\t"):
            j += 1
        out.extend(_sorted_items(lines[i:j]))
        i = j
    return "\n".join(out)


def _sorted_list(line: str) -> str:
    """A line's list after its last colon in order ("You also see: A door to ..., A door to ...",
    "On the table is: a cup, a pot")."""
    head, sep, items = line.rpartition(": ")
    if not sep or "," not in items:
        return line
    end = "." if items.endswith(".") else ""
    return head + sep + ", ".join(sorted(_top_level_items(items.removesuffix(".")))) + end


def _top_level_items(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses: ``"a cup (containing a, b), a pot"`` ->
    ``["a cup (containing a, b)", "a pot"]``."""
    items, depth, start = [], 0, 0
    for k, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0 and text[k + 1 : k + 2] == " ":
            items.append(text[start:k])
            start = k + 2
    return items + [text[start:]]


def _sorted_items(lines: list[str]) -> list[str]:
    """Tab-indented list lines, sorted as items (a line of the least depth with the deeper lines below it)."""
    depth = min(len(line) - len(line.lstrip("\t")) for line in lines)
    items: list[list[str]] = []
    for line in lines:
        if len(line) - len(line.lstrip("\t")) == depth or not items:
            items.append([line])
        else:
            items[-1].append(line)
    items = [[item[0], *(_sorted_items(item[1:]) if len(item) > 1 else [])] for item in items]
    return [line for item in sorted(items) for line in item]


class ScienceWorldEnv(ExternalTextEnv):
    """One ScienceWorld task.

    Args:
        task: one of :data:`TASKS`.
        split: ``"train"``, ``"dev"`` or ``"test"``: which variations a reset plays.
        simplifications: the package's simplifications, comma-separated (``"easy"``: teleporting,
            doors and containers open, self-watering pots, no electrical actions; ``""``: none).
        max_actions: the cap of the filtered valid actions (module docstring); ``None``: no cap.
        max_steps: actions before the episode is truncated.

    ``info``: ``valid_actions``, ``success``, ``score`` (0-1), ``valid_actions_total`` (before the
    cap). ``gold_actions``: the package's gold path of the episode's variation (the parser's words,
    not always spelled as the valid actions are, and some say what is done already: "open door to
    kitchen" where doors are open).
    """

    backend_kind = "scienceworld"
    # An object of several names ("seed", "apple seed", "organism in cup containing apple seed") is
    # named in the valid actions by one chosen anew at each load of a variation, even in one simulator
    # process: a reset with the same seed, or a restored copy (pickle, or a trainer's replay), reaches
    # the same state and observation, but where such objects are in sight its valid actions can be
    # named (hence sorted) otherwise. An unpickled copy then warns (ReplayMismatchWarning); a trainer
    # sees a replay that does not match, warns and starts those episodes over.
    exact_replay = False
    gold_no_op = "wait1"
    pool_size = 2
    java_heap = "1g"
    """The cap of a simulator's Java heap (``-Xmx``; with 1 GiB a simulator process holds ~0.4 GiB
    and steps ~15% slower than one left to grow to 4 GiB and more). ``JAVA_TOOL_OPTIONS=-Xmx...``
    overrides it."""
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, task: str = "boil", split: str = "train", simplifications: str = "easy",
                 max_actions: int | None = 256, max_steps: int = 100, render_mode: str | None = None):
        if task not in TASKS:
            raise InvalidArgumentError(f"task must be one of ScienceWorld's {len(TASKS)} tasks "
                                       f"({', '.join(TASKS[:4])}, ...), not {task!r}")
        if split not in SPLITS:
            raise InvalidArgumentError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
        unknown = [s for s in simplifications.split(",") if s and s not in SIMPLIFICATIONS]
        if unknown:
            raise InvalidArgumentError(f"simplifications: {unknown[0]!r} is not one of {', '.join(SIMPLIFICATIONS)}")
        if max_actions is not None and (not isinstance(max_actions, int) or max_actions < 1):
            raise InvalidArgumentError(f"max_actions must be a positive integer or None, not {max_actions!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be a positive integer, not {max_steps!r}")
        self._options = {"task": task, "split": split, "simplifications": simplifications,
                         "max_actions": max_actions, "max_steps": max_steps, "render_mode": render_mode}
        self.task, self.split, self.simplifications = task, split, simplifications
        self.max_actions, self.max_steps = max_actions, max_steps
        self._set_render_mode(render_mode)
        self._text, self._score, self._actions_now, self._total = "", 0, [], 0
        self._variations: list[int] | None = None

    def _new_backend(self):
        module = require("scienceworld", "scienceworld", "scienceworld", java=True)
        with java_heap(self.java_heap):  # by default its JVM grows to 4 GiB and more over a long run
            return module.ScienceWorldEnv("", envStepLimit=10**9)  # groundrl truncates at max_steps itself

    def _game_seed(self, seed: int | None) -> int:
        if self._variations is None:
            backend = self._backend
            backend.load(self.task, 0, self.simplifications)  # the package lists a task's variations once loaded
            self._variations = list({"train": backend.get_variations_train, "dev": backend.get_variations_dev,
                                     "test": backend.get_variations_test}[self.split]())
        index = int(self.np_random.integers(len(self._variations))) if seed is None else seed
        return self._variations[index % len(self._variations)]

    def _start(self, game_seed: int):
        backend = self._backend
        if self._variations is None:
            self._game_seed(0)  # a pickled copy: the variations of its split
        backend.load(self.task, game_seed, self.simplifications, generateGoldPath=True)
        observation, info = backend.reset()
        self._steps, self._score = 0, info["score"]
        self.gold_actions = list(backend.get_gold_action_sequence())
        return self._observe(observation, info, None)

    def _observe(self, observation: str, info: dict, action: str | None):
        parts = [info["taskDesc"].replace("Task Description:", "").strip(), canonical(info["look"]).strip(),
                 canonical(info["inv"]).strip()]
        if action is not None:
            parts += [f"> {action}", canonical(observation).strip()]
        self._text = "\n".join(parts)
        self._actions_now = self._filter(info["valid"])
        return self._text, {"valid_actions": list(self._actions_now), "success": self._score >= 100,
                            "score": self._score / 100, "valid_actions_total": self._total}

    def _filter(self, valid: list[str]) -> list[str]:
        kept = sorted({a for a in valid if not _LEFT_OUT.search(a)})
        self._total = len(kept)
        if self.max_actions is None or len(kept) <= self.max_actions:
            return kept
        objects = {entry["action"]: len(entry["obj_ids"])
                   for entry in self._backend.get_valid_action_object_combinations_with_templates()}
        kept.sort(key=lambda a: (0 if a.startswith(_MOVES) else min(objects.get(a, 2), 2), a))
        return kept[: self.max_actions]

    def same_command(self, command: str) -> str | None:
        """The valid action that is ``command`` with its objects named otherwise, or None.

        ScienceWorld gives an object several names ("wood cup containing red paint", "wood cup",
        "cup") and its parser takes any; the valid actions use one, which its gold paths need not.
        Nor need they use the template's verb (:data:`_SYNONYMS`: "drop" is "put down").
        """
        for synonym, verb in _SYNONYMS.items():
            if command.startswith(synonym + " "):
                command = verb + command[len(synonym):]
                break
        backend = self._backend
        templates = {t["template_id"]: t["action_example"] for t in backend.get_possible_actions_with_IDs()}
        names = {int(key): value["referents"]
                 for key, value in backend.get_all_object_ids_types_referents_LUTJSON().items()}
        offered = set(self._actions_now)
        for entry in backend.get_valid_action_object_combinations_with_templates():
            parts = templates.get(entry["template_id"], "").split("OBJ")
            if entry["action"] not in offered or len(parts) != len(entry["obj_ids"]) + 1 \
                    or not command.startswith(parts[0]):
                continue
            for filling in itertools.product(*(names.get(i, ()) for i in entry["obj_ids"])):
                if "".join(part + name for part, name in zip(parts, (*filling, ""))) == command:
                    return entry["action"]
        return None

    def _valid_actions(self) -> list[str]:
        return self._actions_now

    def _play(self, action: str):
        observation, _, completed, info = self._backend.step(action)
        self._steps += 1
        reward = (info["score"] - self._score) / 100
        self._score = info["score"]
        text, public = self._observe(observation, info, action)
        terminated = bool(completed) or self._score < 0
        truncated = not terminated and self._steps >= self.max_steps
        return text, float(reward), terminated, truncated, public

    def render(self):
        return self._text if self.render_mode == "ansi" else None
