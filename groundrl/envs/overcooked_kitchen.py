"""The kitchen of text Overcooked: its layout, the things in it, the cook's moves and view, shared
by the environment (:mod:`groundrl.envs.overcooked`, which moves them), its macro-actions
(:mod:`groundrl.envs.overcooked_macros`) and its picture (:mod:`groundrl.envs.overcooked_render`),
which only read them."""

from __future__ import annotations

from dataclasses import dataclass, field

Cell = tuple[int, int]  # (row x, column y)

RADIUS = 2  # the cook sees items within this many cells in x and in y

RIGHT, DOWN, LEFT, UP, STAY = range(5)  # the cook's primitive moves
MOVES = {RIGHT: (0, 1), DOWN: (1, 0), LEFT: (0, -1), UP: (-1, 0)}


def in_view(cook: Cell, cell: Cell) -> bool:
    """Whether a cook standing on ``cook`` sees what is on ``cell``."""
    return abs(cell[0] - cook[0]) <= RADIUS and abs(cell[1] - cook[1]) <= RADIUS


@dataclass(frozen=True)
class Layout:
    name: str
    dish: str
    rows: tuple[str, ...]
    macros: tuple[str, ...]
    foods: tuple[str, ...]


@dataclass(eq=False)
class Food:
    kind: str
    start: Cell
    pos: Cell
    chops: int = 0

    @property
    def chopped(self) -> bool:
        return self.chops >= 3

    def move(self, cell: Cell) -> None:
        self.pos = cell


@dataclass(eq=False)
class Plate:
    start: Cell
    pos: Cell
    contents: list[Food] = field(default_factory=list)
    kind: str = "plate"

    def move(self, cell: Cell) -> None:
        self.pos = cell
        for food in self.contents:
            food.pos = cell

    def add(self, food: Food) -> None:
        self.contents.append(food)
        food.pos = self.pos


@dataclass(eq=False)
class Station:
    """A cutting board ("knife") or the delivery counter, and what lies on it."""

    kind: str
    pos: Cell
    holding: Food | Plate | None = None

    @property
    def start(self) -> Cell:
        return self.pos


def describe_item(item: Food | Plate | None) -> str:
    """What the cook holds (or a board holds), in the words of the text and the picture.

    >>> describe_item(Plate((6, 5), (6, 5), [Food("tomato", (0, 5), (6, 5), chops=3)]))
    'the bowl with the tomato (chopped)'
    """
    if item is None:
        return "nothing"
    if isinstance(item, Plate):
        return "the bowl" + (f" with {', '.join(describe_item(f) for f in item.contents)}" if item.contents
                             else " (empty)")
    return f"the {item.kind} ({'chopped' if item.chopped else f'{item.chops}/3 chops'})"
