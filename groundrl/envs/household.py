"""A small household simulator: a scene graph, VirtualHome's executor rules, and text tasks on top.

TWOSOME's VirtualHome tasks run VirtualHome's pure-Python "evolving graph" executor on one house.
This module implements the rules of that executor that household tasks need, on a compact scene
graph, so that a task is a short declaration and not new engine code:

- a :class:`Scene`: rooms, and the things in them (what each rests on or is inside, whether it can
  be grabbed, opened, switched, sat on, and what it faces);
- a :class:`HouseholdTask`: the scene, the action strings (parsed: ``walk to the X``, ``grab the
  X``, ``put the X in the Y``, ``put the X on the Y``, ``open the X``, ``close the X``, ``turn on
  the X``, ``turn off the X``, ``sit on the X``, ``stand up from the X``), the boolean features the
  agent observes (named in a small language: ``in_kitchen``, ``see_pancake``, ``close_to_tv``,
  ``hold_milk``, ``is_microwave_open``, ``is_tv_on``, ``is_face_tv``, ``is_sit_sofa``,
  ``pancake_in_microwave``, ``chips_on_coffeetable``), a goal over those features, and how a state
  reads as a prompt with its valid actions (by default, a generic description; TWOSOME's tasks
  bring their own, see :mod:`groundrl.envs.virtualhome`);
- :class:`HouseholdEnv`, the gymnasium environment that runs a task.

The executor rules (VirtualHome's, as TWOSOME uses them):

- every thing an action names must be observable: in the agent's room and not inside something
  closed, or held;
- ``walk to`` fails while sitting; it puts the agent in the target's room, close to the target,
  to what the target rests on or is inside, to what an openable target holds, and to what the agent
  holds; it clears what the agent faced;
- ``grab`` needs the thing close, grabbable, not inside something closed, and a free hand (two
  hands); the agent becomes close to where it was;
- ``open`` needs it close, openable, closed, switched off, and a free hand; ``close`` needs it
  close and open;
- ``put X in Y`` needs X held, Y close, and Y open if Y opens; ``put X on Y`` needs X held and Y
  close;
- ``turn on`` / ``turn off`` need it close, switchable, in the other state, and a free hand;
- ``sit on`` needs it close and sittable, and the agent standing; the agent then faces what the seat
  faces; ``stand up`` needs the agent sitting and only ends the sitting;
- an action whose preconditions fail changes nothing (the step is spent).

What the agent observes is limited to what it sees: every feature about a thing is 0 while that
thing is not observable.

Adding a task
-------------
>>> from groundrl.envs.household import HouseholdEnv, HouseholdTask, Scene, Thing
>>> scene = Scene(
...     rooms=("kitchen", "hall"),
...     start_room="hall",
...     things=(
...         Thing("fridge", "kitchen", openable=True),
...         Thing("apple", "kitchen", on=("table",), grabbable=True),
...         Thing("table", "kitchen"),
...     ),
... )
>>> task = HouseholdTask(
...     name="StoreApple",
...     scene=scene,
...     actions=("walk to the kitchen", "walk to the hall", "walk to the apple", "walk to the fridge",
...              "grab the apple", "open the fridge", "close the fridge", "put the apple in the fridge"),
...     features=("in_kitchen", "see_apple", "hold_apple", "is_fridge_open", "apple_in_fridge"),
...     goal=lambda f: f["in_kitchen"] and f["apple_in_fridge"],
...     goal_text="put the apple in the fridge",
... )
>>> env = HouseholdEnv(task)
>>> obs, info = env.reset()
>>> obs
'There are two rooms: the kitchen and hall. You are in the hall. You notice nothing. You are not holding anything. In order to put the apple in the fridge, your next step is to'
>>> info["valid_actions"]
['walk to the kitchen']
>>> for action in ["walk to the kitchen", "walk to the apple", "grab the apple", "walk to the fridge",
...                "open the fridge", "put the apple in the fridge"]:
...     obs, reward, terminated, truncated, info = env.step(action)
>>> reward, terminated, info["success"]
(1.0, True, True)
"""  # noqa: E501 (doctest output)

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from groundrl.envs.base import TextEnv, join_words, resolve_action
from groundrl.errors import InvalidArgumentError

# -- the scene -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Thing:
    """An object in a scene, with its starting place and what can be done with it.

    ``on`` names the things it rests on, ``inside`` the container it is in (None: directly in the
    room); ``faces`` what a person sitting on it faces.
    """

    name: str
    room: str
    on: tuple[str, ...] = ()
    inside: str | None = None
    grabbable: bool = False
    openable: bool = False
    is_open: bool = False
    switchable: bool = False
    is_on: bool = False
    sittable: bool = False
    faces: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scene:
    """Rooms (in the order the prompt lists them), things, and the room the agent starts in."""

    rooms: tuple[str, ...]
    things: tuple[Thing, ...]
    start_room: str

    def __post_init__(self):
        names = [t.name for t in self.things]
        duplicates = {n for n in names if names.count(n) > 1} | (set(names) & set(self.rooms))
        if duplicates:
            raise InvalidArgumentError(f"scene names must be unique; repeated: {', '.join(sorted(duplicates))}")
        if self.start_room not in self.rooms:
            raise InvalidArgumentError(f"start_room {self.start_room!r} is not one of the rooms {self.rooms}")
        for t in self.things:
            if t.room not in self.rooms:
                raise InvalidArgumentError(f"{t.name!r} is in {t.room!r}, which is not one of the rooms {self.rooms}")
            for other in (*t.on, *t.faces, *([t.inside] if t.inside else [])):
                if other not in names:
                    raise InvalidArgumentError(f"{t.name!r} refers to {other!r}, which is not a thing of the scene")


class Action(NamedTuple):
    """A parsed action string: ``verb`` is walk, grab, put_in, put_on, open, close, switch_on,
    switch_off, sit or stand_up; ``target`` is the thing or room it acts on, ``destination`` where
    a put puts it."""

    verb: str
    target: str
    destination: str | None = None


_ACTION_FORMS = (
    ("put_in", re.compile(r"put the (.+) in the (.+)")),
    ("put_on", re.compile(r"put the (.+) on the (.+)")),
    ("walk", re.compile(r"walk to the (.+)")),
    ("grab", re.compile(r"grab the (.+)")),
    ("open", re.compile(r"open the (.+)")),
    ("close", re.compile(r"close the (.+)")),
    ("switch_on", re.compile(r"turn on the (.+)")),
    ("switch_off", re.compile(r"turn off the (.+)")),
    ("sit", re.compile(r"sit on the (.+)")),
    ("stand_up", re.compile(r"stand up from the (.+)")),
)


def parse_action(text: str, scene: Scene) -> Action:
    """Parse an action string against a scene.

    >>> scene = Scene(rooms=("kitchen",), start_room="kitchen",
    ...               things=(Thing("pancake", "kitchen"), Thing("microwave", "kitchen")))
    >>> parse_action("put the pancake in the microwave", scene)
    Action(verb='put_in', target='pancake', destination='microwave')
    """
    known = {t.name for t in scene.things} | set(scene.rooms)
    for verb, form in _ACTION_FORMS:
        match = form.fullmatch(text)
        if match and all(name in known for name in match.groups()):
            return Action(verb, *match.groups())
    raise InvalidArgumentError(
        f"cannot read the action {text!r}: use 'walk to the X', 'grab the X', 'put the X in/on the Y', "
        "'open/close the X', 'turn on/off the X', 'sit on the X' or 'stand up from the X', with X and Y "
        "rooms or things of the scene"
    )


def feature_key(name: str) -> str:
    """How a room or thing is named inside feature names: ``"coffee table"`` -> ``"coffeetable"``."""
    return name.replace(" ", "").lower()


# -- the world: the scene's state, and the executor -----------------------------------------------


class World:
    """The mutable state of a scene: where things are, their open/on states, and the agent."""

    def __init__(self, scene: Scene):
        self.scene = scene
        self.thing = {t.name: t for t in scene.things}
        self.room_of = {t.name: t.room for t in scene.things}
        self.supports = {t.name: set(t.on) for t in scene.things}
        self.container = {t.name: t.inside for t in scene.things}
        self.opened = {t.name for t in scene.things if t.is_open}
        self.switched_on = {t.name for t in scene.things if t.is_on}
        self.agent_room = scene.start_room
        self.close: set[str] = set()
        self.facing: set[str] = set()
        self.hands: list[str | None] = [None, None]
        self.seat: str | None = None

    def copy(self) -> World:
        other = object.__new__(World)
        other.scene, other.thing = self.scene, self.thing
        other.room_of = dict(self.room_of)
        other.supports = {name: set(s) for name, s in self.supports.items()}
        other.container = dict(self.container)
        other.opened, other.switched_on = set(self.opened), set(self.switched_on)
        other.agent_room = self.agent_room
        other.close, other.facing = set(self.close), set(self.facing)
        other.hands, other.seat = list(self.hands), self.seat
        return other

    def snapshot(self) -> tuple:
        """Everything that can change, hashable: equal snapshots are the same state."""
        return (
            self.agent_room, frozenset(self.close), frozenset(self.facing), tuple(self.hands), self.seat,
            tuple(sorted(self.room_of.items())), tuple(sorted((n, frozenset(s)) for n, s in self.supports.items())),
            tuple(sorted(self.container.items(), key=lambda item: item[0])),
            frozenset(self.opened), frozenset(self.switched_on),
        )

    # what the agent perceives

    def holds(self, name: str) -> bool:
        return name in self.hands

    def observable(self, name: str) -> bool:
        """Rooms always; things held, or in the agent's room and not inside something closed."""
        if name in self.scene.rooms or self.holds(name):
            return True
        return self.room(name) == self.agent_room and not self.enclosed(name)

    def room(self, name: str) -> str:
        """The room a thing is in: that of the outermost container it is inside, or the agent's."""
        while self.container[name] is not None:
            name = self.container[name]
        return self.agent_room if self.holds(name) else self.room_of[name]

    def enclosed(self, name: str) -> bool:
        """Whether ``name`` is inside something closed (at any depth)."""
        box = self.container[name]
        while box is not None:
            if box not in self.opened:
                return True
            box = self.container[box]
        return False

    def visible_things(self) -> list[str]:
        return [t.name for t in self.scene.things if self.observable(t.name)]

    # the executor

    def can(self, action: Action) -> bool:
        """Whether ``action``'s preconditions hold now."""
        verb, target, destination = action
        if not all(self.observable(name) for name in (target, destination) if name is not None):
            return False
        free_hand = None in self.hands
        if verb == "walk":
            return self.seat is None
        if verb == "stand_up":
            return self.seat is not None
        thing = self.thing.get(target)
        if thing is None:  # a room: only walking applies
            return False
        is_close = target in self.close
        if verb == "grab":
            return thing.grabbable and is_close and not self.holds(target) and not self.enclosed(target) and free_hand
        if verb in ("open", "close"):
            want_open = verb == "open"
            return (thing.openable and is_close and (target in self.opened) != want_open
                    and (not want_open or (free_hand and target not in self.switched_on)))
        if verb in ("put_in", "put_on"):
            box = self.thing.get(destination)
            if box is None or not self.holds(target) or destination not in self.close:
                return False
            return verb == "put_on" or not box.openable or destination in self.opened
        if verb in ("switch_on", "switch_off"):
            return (thing.switchable and is_close and free_hand
                    and (target in self.switched_on) != (verb == "switch_on"))
        if verb == "sit":
            return thing.sittable and is_close and self.seat is None
        raise AssertionError(f"unknown verb {verb!r}")

    def execute(self, action: Action) -> bool:
        """Carry ``action`` out if its preconditions hold; return whether it did."""
        if not self.can(action):
            return False
        verb, target, destination = action
        held = [h for h in self.hands if h is not None]
        if verb == "walk":
            if target in self.scene.rooms:
                self.agent_room = target
                self.close = set(held)
            else:
                self.agent_room = self.room(target)
                self.close = {target, *self.supports[target], *held}
                if self.container[target] is not None:
                    self.close.add(self.container[target])
                if self.thing[target].openable:
                    self.close.update(name for name, box in self.container.items() if box == target)
            for name in held:
                self.room_of[name] = self.agent_room
            self.facing = set()
        elif verb == "grab":
            self.close.add(target)
            self.close.update(self.supports[target])  # and what it was on or in
            if self.container[target] is not None:
                self.close.add(self.container[target])
            self.supports[target], self.container[target] = set(), None
            self.hands[self.hands.index(None)] = target
        elif verb == "open":
            self.opened.add(target)
        elif verb == "close":
            self.opened.discard(target)
        elif verb in ("put_in", "put_on"):
            self.hands[self.hands.index(target)] = None
            self.room_of[target] = self.room(destination)
            if verb == "put_in":
                self.supports[target], self.container[target] = set(), destination
            else:
                self.supports[target], self.container[target] = {destination}, None
            self.close.add(destination)
        elif verb == "switch_on":
            self.switched_on.add(target)
        elif verb == "switch_off":
            self.switched_on.discard(target)
        elif verb == "sit":
            self.seat = target
            self.facing.update(self.thing[target].faces)
        elif verb == "stand_up":
            self.seat = None
        return True

    def describe(self) -> str:
        """The whole state in words, one line for the agent and one per thing."""
        held = [f"the {h}" for h in self.hands if h]
        lines = [
            f"agent: in the {self.agent_room}, holding {' and '.join(held) or 'nothing'}"
            + (f", close to the {', the '.join(sorted(self.close))}" if self.close else "")
            + (f", sitting on the {self.seat}" if self.seat else "")
            + (f", facing the {', the '.join(sorted(self.facing))}" if self.facing else "")
        ]
        for t in self.scene.things:
            if self.holds(t.name):
                where = "held by the agent"
            else:
                where = f"in the {self.room(t.name)}"
                if self.container[t.name]:
                    where += f", inside the {self.container[t.name]}"
                if self.supports[t.name]:
                    where += f", on the {', the '.join(sorted(self.supports[t.name]))}"
            states = [("open" if t.name in self.opened else "closed")] if t.openable else []
            states += [("on" if t.name in self.switched_on else "off")] if t.switchable else []
            seen = "" if self.observable(t.name) else " (not visible)"
            lines.append(f"{t.name}: {where}" + "".join(f", {s}" for s in states) + seen)
        return "\n".join(lines)


# -- features: what the agent observes, as named booleans ------------------------------------------

_FEATURE_FORMS = (
    ("in", re.compile(r"in_(\w+)")),
    ("see", re.compile(r"see_(\w+)")),
    ("close", re.compile(r"close_to_(\w+)")),
    ("hold", re.compile(r"hold_(\w+)")),
    ("face", re.compile(r"is_face_(\w+)")),
    ("sit", re.compile(r"is_sit_(\w+)")),
    ("open", re.compile(r"is_(\w+)_open")),
    ("on_state", re.compile(r"is_(\w+)_on")),
    ("inside", re.compile(r"(\w+)_in_(\w+)")),
    ("on_top", re.compile(r"(\w+)_on_(\w+)")),
)

FeatureFn = Callable[[World], bool]


def _thing_feature(kind: str, x: str, y: str) -> FeatureFn:
    """The feature ``kind`` of the thing ``x`` (and ``y``, for a feature of two things)."""
    seen = World.observable
    return {
        "see": lambda w: seen(w, x),
        "close": lambda w: seen(w, x) and x in w.close,
        "hold": lambda w: w.holds(x),
        "face": lambda w: seen(w, x) and x in w.facing,
        "sit": lambda w: seen(w, x) and w.seat == x,
        "open": lambda w: seen(w, x) and x in w.opened,
        "on_state": lambda w: seen(w, x) and x in w.switched_on,
        "inside": lambda w: seen(w, x) and seen(w, y) and w.container[x] == y,
        "on_top": lambda w: seen(w, x) and seen(w, y) and y in w.supports[x],
    }[kind]


def compile_feature(feature: str, scene: Scene) -> FeatureFn:
    """Turn a feature name into a function of the world (see the module docstring for the names)."""
    rooms = {feature_key(r): r for r in scene.rooms}
    things = {feature_key(t.name): t.name for t in scene.things}
    for kind, form in _FEATURE_FORMS:
        match = form.fullmatch(feature)
        if not match:
            continue
        if kind == "in":
            if match[1] in rooms:
                room = rooms[match[1]]
                return lambda w: w.agent_room == room
            continue
        names = [things.get(key) for key in match.groups()]
        if None in names:
            continue
        return _thing_feature(kind, names[0], names[-1])
    raise InvalidArgumentError(
        f"cannot read the feature {feature!r}: use in_ROOM, see_X, close_to_X, hold_X, is_X_open, is_X_on, "
        f"is_face_X, is_sit_X, X_in_Y or X_on_Y with X, Y among {sorted(things)} and ROOM among {sorted(rooms)}"
    )


# -- tasks ----------------------------------------------------------------------------------------

Features = Mapping[str, int]
Description = tuple[str, Sequence[int]]


@dataclass(frozen=True)
class HouseholdTask:
    """A household task, declared.

    ``actions`` is the task's action template (the order that ``info["action_ids"]`` indexes);
    ``features`` the booleans the agent observes; ``goal`` is checked on them after every step.
    ``describe`` maps the features to the prompt and the indices (into ``actions``) of the valid
    actions; None gives :func:`describe_generically`. ``words`` substitutes words in everything the
    agent reads (prompt, actions, render), to make variants with the same dynamics.
    """

    name: str
    scene: Scene
    actions: tuple[str, ...]
    features: tuple[str, ...]
    goal: Callable[[Features], bool]
    goal_text: str
    describe: Callable[[Features], Description] | None = None
    words: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        parsed = tuple(parse_action(a, self.scene) for a in self.actions)
        compiled = tuple(compile_feature(f, self.scene) for f in self.features)
        object.__setattr__(self, "parsed_actions", parsed)
        object.__setattr__(self, "feature_fns", compiled)
        object.__setattr__(self, "_substitute", _substitution(self.words))

    def variant(self, name: str, words: Mapping[str, str]) -> HouseholdTask:
        """The same task with ``words`` substituted in what the agent reads."""
        return HouseholdTask(name, self.scene, self.actions, self.features, self.goal,
                             self.goal_text, self.describe, {**self.words, **words})

    def features_of(self, world: World) -> dict[str, int]:
        return {name: int(fn(world)) for name, fn in zip(self.features, self.feature_fns)}

    def read(self, world: World, features: Features) -> tuple[str, list[int]]:
        """The prompt and valid action indices for a state, before word substitution."""
        if self.describe is not None:
            prompt, ids = self.describe(features)
            return prompt, list(ids)
        return describe_generically(self, world)

    def substitute(self, text: str) -> str:
        return self._substitute(text)


def _substitution(words: Mapping[str, str]) -> Callable[[str], str]:
    if not words:
        return lambda text: text
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + r")\b")
    return lambda text: pattern.sub(lambda m: words[m[0]], text)


_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _enumerate(names: Sequence[str]) -> str:
    return join_words([f"the {n}" for n in names])


def describe_generically(task: HouseholdTask, world: World) -> tuple[str, list[int]]:
    """A plain description of what the agent perceives, and as valid actions every action whose
    preconditions hold now (minus walks that would not move the agent; all actions when none
    holds, so that an episode always goes on to its step limit)."""
    rooms = task.scene.rooms
    if len(rooms) == 1:
        text = f"There is one room: the {rooms[0]}. "
    else:
        count = _NUMBERS[len(rooms)] if len(rooms) < len(_NUMBERS) else str(len(rooms))
        listed = ", ".join(rooms[:-1]) + (", and " if len(rooms) > 2 else " and ") + rooms[-1]
        text = f"There are {count} rooms: the {listed}. "
    text += f"You are in the {world.agent_room}. "
    held = [h for h in world.hands if h]
    around = [n for n in world.visible_things() if n not in held]
    text += f"You notice {_enumerate(around)}. " if around else "You notice nothing. "
    text += f"You are holding {_enumerate(held)}. " if held else "You are not holding anything. "
    near = [n for n in around if n in world.close]
    if near:
        names = _enumerate(near)
        text += f"{names[0].upper()}{names[1:]} {'is' if len(near) == 1 else 'are'} close to you. "
    for name in around:
        thing = world.thing[name]
        if thing.openable:
            text += f"The {name} is {'open' if name in world.opened else 'closed'}. "
        if thing.switchable:
            text += f"The {name} is {'on' if name in world.switched_on else 'off'}. "
    if world.seat:
        text += f"You are sitting on the {world.seat}. "
    text += f"In order to {task.goal_text}, your next step is to"
    valid = []
    for index, action in enumerate(task.parsed_actions):
        pointless_walk = action.verb == "walk" and (action.target == world.agent_room or action.target in world.close)
        if not pointless_walk and world.can(action):
            valid.append(index)
    # a dead end (say, seated with no way to stand up): every action stays offered, and fails
    return text, valid or list(range(len(task.actions)))


# -- the environment ------------------------------------------------------------------------------


class HouseholdEnv(TextEnv):
    """Runs a :class:`HouseholdTask` under the groundrl environment contract.

    ``obs`` is the task's prompt; ``info`` holds ``valid_actions``, ``action_ids`` (their indices
    in ``task.actions``), ``features`` (the observed booleans, in ``task.features`` order, as an
    int8 array), ``executed`` (whether the last action's preconditions held) and, at the end,
    ``success``. Reward 1 and ``terminated`` when the goal holds; ``truncated`` after
    ``max_steps`` steps. Reset is deterministic (the seed only seeds ``np_random``).
    """

    @property
    def action_vocabulary(self) -> tuple[str, ...]:
        return tuple(self.task.substitute(a) for a in self.task.actions)

    def __init__(self, task: HouseholdTask, max_steps: int = 50, render_mode: str | None = None):
        if max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be at least 1, not {max_steps}")
        self.task = task
        self.max_steps = max_steps
        self._set_render_mode(render_mode)
        self.feature_names = task.features
        self.action_template = tuple(task.substitute(a) for a in task.actions)
        self.world = World(task.scene)
        self._steps = 0
        self._prompt, self._valid_ids, self._features = "", [], {}
        self._executed = True

    def _observe(self) -> None:
        self._features = self.task.features_of(self.world)
        prompt, self._valid_ids = self.task.read(self.world, self._features)
        self._prompt = self.task.substitute(prompt)

    @property
    def valid_actions(self) -> list[str]:
        return [self.action_template[i] for i in self._valid_ids]

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {
            "valid_actions": self.valid_actions,
            "action_ids": list(self._valid_ids),
            "features": np.array([self._features[n] for n in self.feature_names], dtype=np.int8),
            "executed": self._executed,
            **extra,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.world = World(self.task.scene)
        self._steps = 0
        self._executed = True
        self._observe()
        return self._prompt, self._info()

    def _step(self, action):
        index = resolve_action(action, self.valid_actions)
        self._executed = self.world.execute(self.task.parsed_actions[self._valid_ids[index]])
        self._steps += 1
        self._observe()
        terminated = bool(self.task.goal(self._features))
        truncated = not terminated and self._steps >= self.max_steps
        extra = {"success": terminated} if terminated or truncated else {}
        return self._prompt, float(terminated), terminated, truncated, self._info(**extra)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        header = f"{self.task.name} · step {self._steps}/{self.max_steps}"
        return self.task.substitute(f"{header}\n{self.world.describe()}")

