"""The world of a household task: the mutable state of a scene, what the agent perceives of it,
and the executor that carries actions out.

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
"""

from __future__ import annotations

from groundrl.envs.household.scene import Action, Scene


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
