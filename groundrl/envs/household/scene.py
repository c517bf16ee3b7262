"""The scene of a household task, declared: rooms, the things in them, and the action strings
that name them (:func:`parse_action`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from groundrl.errors import InvalidArgumentError


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
