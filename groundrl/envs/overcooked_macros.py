"""The macro-actions of text Overcooked: how a macro that walks to its object (every macro but
"chop") picks the cook's next primitive move, and when it is complete.

The cook navigates by A* on its remembered map (``known``: what it believes is on each cell) to
where it believes the macro's object is (``memory``); the rules of when a macro stops follow
TWOSOME's ``gym-macro-overcooked``. These functions only read the kitchen; the environment
(:class:`~groundrl.envs.overcooked.OvercookedEnv`) runs the moves, and counts the chops of "chop".
"""

from __future__ import annotations

import heapq
from typing import Protocol

from groundrl.envs.overcooked_kitchen import DOWN, LEFT, MOVES, RIGHT, STAY, UP, Cell, Food, Plate, Station, in_view


class Cook(Protocol):
    """What the macros read of the kitchen (an :class:`~groundrl.envs.overcooked.OvercookedEnv` is one)."""

    agent: Cell
    holding: Food | Plate | None
    foods: dict[str, Food]
    plate: Plate
    knives: list[Station]
    delivery: Station
    memory: dict[int, Cell]  # id(item) -> where the cook last saw it
    known: list[list[str]]  # the cook's map: what it believes is on each cell


def distance(a: Cell, b: Cell) -> int:
    """Manhattan distance: 1 for neighbouring cells."""
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


class _Frontier:
    """An A* node. It orders nodes by f alone and calls equal f 'smaller' either way, as the
    original's priority queue does: that choice decides between equally short paths, and so
    where the cook walks."""

    __slots__ = ("f", "g", "cell", "first_move")

    def __init__(self, f: int, g: int, cell: Cell, first_move: int | None):
        self.f, self.g, self.cell, self.first_move = f, g, cell, first_move

    def __lt__(self, other: _Frontier) -> bool:
        return self.f <= other.f


def first_move(known: list[list[str]], start: Cell, target: Cell) -> int:
    """The first move of a shortest path from ``start`` to next to ``target`` over the floor of the
    map ``known`` (A*; STAY when there is none)."""
    frontier = [_Frontier(distance(start, target), 0, start, None)]
    visited = {start}
    while frontier:
        node = heapq.heappop(frontier)
        for move in (RIGHT, LEFT, DOWN, UP):
            dx, dy = MOVES[move]
            cell = (node.cell[0] + dx, node.cell[1] + dy)
            if cell in visited:
                continue
            first = move if node.first_move is None else node.first_move
            if known[cell[0]][cell[1]] in ("floor", "agent"):
                heapq.heappush(frontier, _Frontier(node.g + 1 + distance(cell, target), node.g + 1, cell, first))
                visited.add(cell)
            if cell == target:
                return first
    return STAY


def remembered(cook: Cook, macro: str) -> Cell:
    """Where the cook believes the macro's object is."""
    kind = macro.split()[-1] if macro.startswith("get") else None
    if kind == "plate":
        return cook.memory[id(cook.plate)]
    if kind:
        return cook.memory[id(cook.foods[kind])]
    if macro == "deliver":
        return cook.memory[id(cook.delivery)]
    return cook.memory[id(cook.knives[int(macro[-1]) - 1])]


def actual(cook: Cook, macro: str) -> Cell:
    """Where the object of a "get" macro is."""
    kind = macro.split()[-1]
    return cook.plate.pos if kind == "plate" else cook.foods[kind].pos


def next_move(cook: Cook, macro: str) -> tuple[int, bool]:
    """The next primitive move of a macro that walks to its object, and whether the macro completes
    with it."""
    target = remembered(cook, macro)
    gets_food = macro.startswith("get") and macro != "get plate"
    if gets_food and in_view(cook.agent, target) and cook.plate.pos == target:
        return STAY, True  # the food is (or is believed to be) in the bowl
    if cook.known[target[0]][target[1]] == "agent" and in_view(cook.agent, target):
        return STAY, True  # it is in the cook's hands
    move = first_move(cook.known, cook.agent, target)
    done = move == STAY
    if distance(cook.agent, target) == 1:
        done = True
        if macro == "get plate" and isinstance(cook.holding, Food):
            if cook.holding.chopped:
                done = False  # put the food in the bowl, then take the bowl
            else:
                move = STAY
        if macro.startswith("go to knife") and cook.holding is None:
            move = STAY
        if gets_food and any(k.pos == target and isinstance(k.holding, Food) and not k.holding.chopped
                             for k in cook.knives):
            move = STAY  # stop next to the board rather than chop through it
        if macro.startswith("get") and target != actual(cook, macro):
            move = STAY  # it is not where the cook remembered
    return move, done


def completed_after_move(cook: Cook, macro: str) -> bool:
    """Whether the macro is complete once its move has run."""
    if macro.startswith("go to knife") and cook.holding is None:
        if distance(cook.agent, remembered(cook, macro)) == 1:
            return True
    elif macro.startswith("get") and macro != "get plate":
        target = remembered(cook, macro)
        if distance(cook.agent, target) == 1 and any(k.pos == target for k in cook.knives):
            food = cook.foods[macro.split()[-1]]
            if food.pos == target and not food.chopped:
                return True
    elif macro == "deliver" and cook.holding is None:
        if distance(cook.agent, remembered(cook, macro)) == 1:
            return True
    return macro.startswith("get") and remembered(cook, macro) != actual(cook, macro)
