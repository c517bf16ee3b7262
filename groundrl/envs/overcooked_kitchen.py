"""The kitchen of text Overcooked: its layout and the things in it, shared by the environment
(:mod:`groundrl.envs.overcooked`, which moves them) and its picture
(:mod:`groundrl.envs.overcooked_render`, which only reads them)."""

from __future__ import annotations

from dataclasses import dataclass, field

Cell = tuple[int, int]  # (row x, column y)

RADIUS = 2  # the cook sees items within this many cells in x and in y


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
