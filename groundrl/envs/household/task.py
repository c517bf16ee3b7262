"""A household task, declared (:class:`HouseholdTask`): its scene, actions, the features the agent
observes (named booleans, compiled into functions of the world by :func:`compile_feature`), its
goal, and how a state reads as a prompt (by default :func:`describe_generically`).

What the agent observes is limited to what it sees: every feature about a thing is 0 while that
thing is not observable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from groundrl.envs.base import join_words
from groundrl.envs.household.scene import Scene, feature_key, parse_action
from groundrl.envs.household.world import World
from groundrl.errors import InvalidArgumentError

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
    """Turn a feature name into a function of the world (the names: see :mod:`groundrl.envs.household`)."""
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
