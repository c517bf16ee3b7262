"""GLAM's BabyAI levels, written on minigrid's BabyAI level machinery.

minigrid ships GoToLocal and PutNextLocal as GLAM used them; the others (PickupLocal, OpenLocal,
PickUpThenGoToLocal, MixedTrainLocal, MixedTestLocal, PickUpSeqPickUpLocal) are :class:`LocalLevel`
with different task kinds and held-out rules:

- one 8x8 room (6x6 free cells) with 8 to 10 objects (keys, balls, boxes in six colors); the "open"
  kind adds a second room behind a locked door whose key lies in the agent's room;
- the task kind is drawn from the episode's seed at every reset (GLAM fixed one kind per
  environment instance for its whole life, unseeded; drawing it per episode makes runs reproducible);
- the color-noun pairs in :data:`HELD_OUT_PAIRS` never appear in a MixedTrainLocal instruction,
  and every pair named in a MixedTestLocal instruction is one of them.

>>> level = LocalLevel(kinds=("goto", "pickup"), held_out="exclude")
>>> _ = level.reset(seed=3)
>>> level.kind, level.mission
('pickup', 'pick up the blue key')
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from typing import Literal

from minigrid.core.constants import COLOR_NAMES
from minigrid.envs.babyai.core.levelgen import LevelGen
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling, RoomGridLevel
from minigrid.envs.babyai.core.verifier import (
    OBJ_TYPES,
    ActionInstr,
    AfterInstr,
    BeforeInstr,
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

from groundrl.errors import InvalidArgumentError

HELD_OUT_PAIRS = frozenset({("yellow", "box"), ("red", "key"), ("red", "door"), ("green", "ball"), ("grey", "door")})
"""Color-noun pairs kept out of MixedTrainLocal's instructions (GLAM's "new objects" test)."""

TASK_KINDS = ("goto", "pickup", "putnext", "open", "pickup-then-goto", "pickup-then-pickup")
MIXED_KINDS = ("goto", "pickup", "open", "putnext", "pickup-then-goto")

# how many objects each kind scatters in the room (GLAM: 8 distractors, plus 1 or 2)
_OBJECTS = {"goto": 9, "pickup": 9, "putnext": 10, "open": 8, "pickup-then-goto": 10, "pickup-then-pickup": 10}
_PAIR = re.compile(rf"\b({'|'.join(COLOR_NAMES)}) (key|ball|box|door)\b")


def color_noun_pairs(instruction: str) -> list[tuple[str, str]]:
    """The (color, noun) pairs an instruction names.

    >>> color_noun_pairs("put the red key next to a grey box")
    [('red', 'key'), ('grey', 'box')]
    """
    return _PAIR.findall(instruction)


class LocalLevel(RoomGridLevel):
    """A BabyAI level of one room (two for "open") whose task kind is drawn at every reset.

    Args:
        kinds: task kinds to draw from (:data:`TASK_KINDS`): ``goto``, ``pickup``, ``putnext``,
            ``open`` (a locked door to a second room; the key is in the agent's room),
            ``pickup-then-goto`` and ``pickup-then-pickup`` (two-step sequences).
        held_out: ``None``; ``"exclude"``: no instruction names a pair of :data:`HELD_OUT_PAIRS`
            (doors are yellow, green, blue or purple, and named by color half of the time);
            ``"only"``: every pair named is held out (doors are red or grey and always named by color).
        seq_orders: how sequences are phrased: ``"before"`` ("pick up A, then go to B") and/or
            ``"after"`` ("go to B after you pick up A").
        num_objects: objects in the room (default: 9 for go-to and pick-up, 10 for put-next and
            sequences, 8 besides the key for open).
        room_size: side of a room, walls included.
    """

    def __init__(
        self,
        kinds: Sequence[str] = MIXED_KINDS,
        held_out: Literal["exclude", "only"] | None = None,
        seq_orders: Sequence[str] = ("before", "after"),
        num_objects: int | None = None,
        room_size: int = 8,
        **kwargs,
    ):
        unknown = [kind for kind in kinds if kind not in TASK_KINDS]
        if not kinds or unknown:
            raise InvalidArgumentError(f"unknown task kinds {unknown or kinds}; choose from {', '.join(TASK_KINDS)}")
        if held_out not in (None, "exclude", "only"):
            raise InvalidArgumentError(f"held_out must be None, 'exclude' or 'only', not {held_out!r}")
        if not seq_orders or set(seq_orders) - {"before", "after"}:
            raise InvalidArgumentError(f"seq_orders must be 'before' and/or 'after', not {seq_orders!r}")
        self.kinds = tuple(kinds)
        self.held_out = held_out
        self.seq_orders = tuple(seq_orders)
        self.num_objects = num_objects
        self.kind = self.kinds[0]
        super().__init__(room_size=room_size, num_rows=1, num_cols=1, **kwargs)

    def _gen_grid(self, width, height):
        self.kind = self._rand_elem(self.kinds)
        self.num_cols = 2 if self.kind == "open" else 1
        self.width = (self.room_size - 1) * self.num_cols + 1
        # minigrid prints every rejected sample ("Sampling rejected: ..."); held-out rules reject many
        with contextlib.redirect_stdout(io.StringIO()):
            super()._gen_grid(self.width, height)

    def gen_mission(self):
        if self.kind == "open":
            self._gen_open()
        else:
            self.place_agent()
            count = self.num_objects or _OBJECTS[self.kind]
            objects = self.add_distractors(num_distractors=count, all_unique=False)
            self.check_objs_reachable()
            self.instrs = self._instruction(objects)
        self._check_held_out()

    def _instruction(self, objects):
        first = self._rand_elem(objects)
        if self.kind == "goto":
            return GoToInstr(ObjDesc(first.type, first.color))
        if self.kind == "pickup":
            return PickupInstr(ObjDesc(first.type, first.color))
        second = self._rand_elem(objects)
        same = (first.type, first.color) == (second.type, second.color)
        # a description matching one object only cannot name both ends of a put-next or a sequence;
        # picking up "a red ball, then a red ball" would succeed at the first pickup
        while same and (self.kind == "pickup-then-pickup" or len(ObjDesc(first.type, first.color)
                                                                  .find_matching_objs(self)[0]) < 2):
            second = self._rand_elem(objects)
            same = (first.type, first.color) == (second.type, second.color)
        if self.kind == "putnext":
            return PutNextInstr(ObjDesc(first.type, first.color), ObjDesc(second.type, second.color))
        step_a = PickupInstr(ObjDesc(first.type, first.color))
        if self.kind == "pickup-then-goto":
            step_b = GoToInstr(ObjDesc(second.type, second.color))
        else:
            step_b = PickupInstr(ObjDesc(second.type, second.color))
        if self._rand_elem(self.seq_orders) == "before":
            return BeforeInstr(step_a, step_b)
        return AfterInstr(step_b, step_a)

    def _gen_open(self):
        if self.held_out == "exclude":
            colors = [c for c in COLOR_NAMES if (c, "door") not in HELD_OUT_PAIRS]
        elif self.held_out == "only":
            colors = [c for c in COLOR_NAMES if (c, "door") in HELD_OUT_PAIRS]
        else:
            colors = list(COLOR_NAMES)
        color = self._rand_elem(colors)
        locked = self._rand_int(0, 2)
        start = 1 - locked
        door, _ = self.add_door(0, 0, door_idx=0, color=color, locked=True)
        self.locked_room = self.get_room(locked, 0)
        self.add_object(start, 0, "key", color)
        self.add_distractors(start, 0, num_distractors=self.num_objects or _OBJECTS["open"], all_unique=False)
        self.place_agent(start, 0)
        self.check_objs_reachable()
        named = color if self.held_out == "only" or self._rand_bool() else None
        self.instrs = OpenInstr(ObjDesc("door", named))

    def _check_held_out(self):
        if not self.allows(self.instrs.surface(self)):
            raise RejectSampling(f"the instruction names {'a' if self.held_out == 'exclude' else 'no'} held-out pair")

    def allows(self, mission: str) -> bool:
        """Whether this level may give ``mission``: under ``held_out="exclude"`` it names no held-out
        pair, under ``"only"`` only held-out pairs (and at least one)."""
        held = [pair in HELD_OUT_PAIRS for pair in color_noun_pairs(mission)]
        if self.held_out == "exclude":
            return not any(held)
        if self.held_out == "only":
            return bool(held) and all(held)
        return True


def achievable_instructions(level) -> dict[str, ActionInstr]:
    """Every go-to, pick-up, open and put-next instruction about the objects of ``level`` (a
    minigrid BabyAI level, just reset) by its mission text, as the level words it ("the red ball",
    "a red ball" where several match), each ready to verify the episode from here; only those the
    level may give (:meth:`LocalLevel.allows`: MixedTrainLocal never names a held-out pair).

    Hindsight relabelling rests on it: an episode that accomplished one of these (minigrid's own
    verifier says so) is a success of the episode that had it as its mission.
    """
    kinds = sorted({(cell.type, cell.color) for cell in level.grid.grid if cell is not None and cell.type in OBJ_TYPES})
    instructions: list[ActionInstr] = []
    for kind, color in kinds:
        instructions.append(GoToInstr(ObjDesc(kind, color)))
        instructions.append(OpenInstr(ObjDesc(kind, color)) if kind == "door" else PickupInstr(ObjDesc(kind, color)))
    for moved in kinds:
        instructions += [PutNextInstr(ObjDesc(*moved), ObjDesc(*fixed)) for fixed in kinds
                         if moved[0] != "door" and fixed != moved]
    allows = getattr(level, "allows", lambda mission: True)
    found = {}
    for instruction in instructions:
        instruction.reset_verifier(level)
        mission = instruction.surface(level)
        if allows(mission):
            found[mission] = instruction
    return found


class PickupLocal(LevelGen):
    """GLAM's PickupLocal: minigrid's level generator restricted to "pick up {color} {type}" in one
    room with 8 objects; the agent is placed last, with nothing right in front of it."""

    def __init__(self, room_size: int = 8, **kwargs):
        super().__init__(room_size=room_size, num_rows=1, num_cols=1, num_dists=8, locked_room_prob=0,
                         locations=False, unblocking=False, implicit_unlock=False, action_kinds=("pickup",),
                         instr_kinds=("action",), **kwargs)

    def rand_obj(self, types=("key", "ball", "box"), colors=COLOR_NAMES, max_tries=100):
        # GLAM's version of the generator could force a color into every description
        for _ in range(max_tries):
            description = ObjDesc(self._rand_elem(types), self._rand_elem(colors))
            if description.find_matching_objs(self)[0]:
                return description
        raise RecursionError("failed to find suitable object")


# GLAM's levels that minigrid does not have, as LocalLevel options
LOCAL_LEVELS = {
    "OpenLocal": {"kinds": ("open",)},
    "PickUpThenGoToLocal": {"kinds": ("pickup-then-goto",), "seq_orders": ("before",), "held_out": "exclude"},
    "MixedTrainLocal": {"kinds": MIXED_KINDS, "held_out": "exclude"},
    "MixedTestLocal": {"kinds": MIXED_KINDS, "held_out": "only"},
    "PickUpSeqPickUpLocal": {"kinds": ("pickup-then-pickup",), "held_out": "exclude"},
}
