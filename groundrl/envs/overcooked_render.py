"""Draw an Overcooked state: as an RGB image (Pillow: the grid, the items, the cook, what the cook
holds, and the chop progress of food on the boards), or in text."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from groundrl.envs.overcooked_kitchen import RADIUS, Cell, Food, Layout, Plate, Station, describe_item

CELL = 80
BAR = 36
COLORS = {
    "floor": (236, 230, 216), "counter": (170, 128, 92), "knife": (150, 150, 156), "delivery": (104, 170, 108),
    "tomato": (214, 48, 39), "lettuce": (96, 176, 64), "onion": (176, 112, 196), "plate": (250, 250, 250),
    "agent": (52, 98, 196), "outline": (60, 50, 40), "text": (30, 30, 30), "done": (245, 200, 60),
}


class Kitchen(Protocol):
    """The state the picture shows (an :class:`~groundrl.envs.overcooked.OvercookedEnv` is one)."""

    size: int
    layout: Layout
    agent: Cell
    holding: Food | Plate | None
    foods: dict[str, Food]
    plate: Plate
    knives: list[Station]
    steps: int
    max_steps: int
    delivered: bool
    cells: list[list[str]]  # what each cell is (counter, floor, knife, delivery, agent, or an item's kind)


def draw(env: Kitchen) -> np.ndarray:
    size = env.size
    image = Image.new("RGB", (size * CELL, size * CELL + BAR), COLORS["floor"])
    canvas = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=14)
    for x, row in enumerate(env.layout.rows):
        for y, symbol in enumerate(row):
            box = (y * CELL, x * CELL, (y + 1) * CELL - 1, (x + 1) * CELL - 1)
            base = {"K": "knife", "D": "delivery", ".": "floor", "A": "floor"}.get(symbol, "counter")
            canvas.rectangle(box, fill=COLORS[base], outline=COLORS["outline"] if base != "floor" else None)
            if base == "knife":  # a board with a knife on it
                canvas.rectangle((box[0] + 10, box[1] + 14, box[2] - 10, box[3] - 14), fill=(222, 196, 150))
                canvas.line((box[0] + 16, box[3] - 20, box[2] - 30, box[1] + 20), fill=(90, 90, 90), width=4)
            elif base == "delivery":
                canvas.text((box[0] + 8, box[1] + 6), "serve", fill=COLORS["text"], font=font)

    carried = env.holding
    for food in env.foods.values():
        if food is carried or food in env.plate.contents or (carried is env.plate and food in carried.contents):
            continue
        _draw_food(canvas, food, _center(food.pos), 22)
        if any(knife.holding is food for knife in env.knives):
            _draw_chops(canvas, food, food.pos)
    if env.plate is not carried:
        _draw_plate(canvas, env.plate, _center(env.plate.pos), 28)

    # what the cook sees: the 5x5 box around it
    x, y = env.agent
    top, left = max(x - RADIUS, 0), max(y - RADIUS, 0)
    bottom, right = min(x + RADIUS, size - 1), min(y + RADIUS, size - 1)
    canvas.rectangle((left * CELL + 2, top * CELL + 2, (right + 1) * CELL - 3, (bottom + 1) * CELL - 3),
                     outline=COLORS["agent"], width=3)

    cx, cy = _center(env.agent)
    canvas.ellipse((cx - 26, cy - 26, cx + 26, cy + 26), fill=COLORS["agent"], outline=COLORS["outline"], width=2)
    canvas.ellipse((cx - 12, cy - 14, cx - 4, cy - 6), fill=(255, 255, 255))
    canvas.ellipse((cx + 4, cy - 14, cx + 12, cy - 6), fill=(255, 255, 255))
    if carried is not None:
        held_at = (cx + 20, cy + 20)
        if isinstance(carried, Food):
            _draw_food(canvas, carried, held_at, 14)
        else:
            _draw_plate(canvas, carried, held_at, 17)

    status = f"step {env.steps}/{env.max_steps}  -  holding {describe_item(carried)}"
    if env.delivered:
        status += "  -  served!"
    canvas.rectangle((0, size * CELL, size * CELL, size * CELL + BAR),
                     fill=COLORS["done"] if env.delivered else (250, 248, 242))
    canvas.text((10, size * CELL + 10), status, fill=COLORS["text"], font=font)
    return np.asarray(image, dtype=np.uint8)


def _center(cell: tuple[int, int]) -> tuple[int, int]:
    x, y = cell
    return y * CELL + CELL // 2, x * CELL + CELL // 2


def _draw_food(canvas: ImageDraw.ImageDraw, food: Food, center: tuple[int, int], radius: int) -> None:
    cx, cy = center
    color = COLORS[food.kind]
    if food.chopped:  # three pieces
        r = radius // 2
        for dx, dy in ((-r, -r // 2), (r, -r // 2), (0, r)):
            canvas.ellipse((cx + dx - r, cy + dy - r, cx + dx + r, cy + dy + r), fill=color, outline=COLORS["outline"])
    else:
        canvas.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=color, outline=COLORS["outline"],
                       width=2)
        letter = food.kind[0].upper()
        font = ImageFont.load_default(size=max(radius, 10))
        canvas.text((cx, cy), letter, fill=(255, 255, 255), font=font, anchor="mm")


def _draw_plate(canvas: ImageDraw.ImageDraw, plate: Plate, center: tuple[int, int], radius: int) -> None:
    cx, cy = center
    canvas.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=COLORS["plate"],
                   outline=COLORS["outline"], width=2)
    r = max(radius // 3, 4)
    offsets = ((-r, 0), (r, 0), (0, -r))
    for food, (dx, dy) in zip(plate.contents, offsets):
        color = COLORS[food.kind]
        canvas.ellipse((cx + dx - r, cy + dy - r, cx + dx + r, cy + dy + r), fill=color, outline=COLORS["outline"])


def _draw_chops(canvas: ImageDraw.ImageDraw, food: Food, cell: tuple[int, int]) -> None:
    """Three boxes under food on a board, one filled per chop."""
    cx, cy = _center(cell)
    for i in range(3):
        left = cx - 24 + i * 17
        canvas.rectangle((left, cy + 28, left + 13, cy + 36), outline=COLORS["outline"],
                         fill=(60, 60, 60) if i < food.chops else (255, 255, 255))


def draw_text(env: Kitchen) -> str:
    """The state in text (``render_mode="ansi"``): the grid, a legend, and what the cook, the bowl
    and the boards hold."""
    letters = {"counter": "X", "floor": ".", "knife": "K", "delivery": "D", "agent": "A"}
    grid = [[letters.get(cell, "X") for cell in row] for row in env.cells]
    for food in env.foods.values():
        if food.pos != env.agent and food not in env.plate.contents:
            grid[food.pos[0]][food.pos[1]] = food.kind[0].upper() if food.chopped else food.kind[0]
    if env.plate.pos != env.agent:
        grid[env.plate.pos[0]][env.plate.pos[1]] = "P"
    lines = ["".join(row) for row in grid]
    lines.append("(X counter, K board, D delivery, A cook, P bowl; t l o food, T L O chopped)")
    lines.append(f"step {env.steps}/{env.max_steps}, holding {describe_item(env.holding)}")
    where = "" if env.holding is env.plate else f" at {env.plate.pos}"
    lines.append(f"bowl: {describe_item(env.plate)}{where}")
    for knife_number, knife in enumerate(env.knives, 1):
        lines.append(f"board {knife_number} {knife.pos}: {describe_item(knife.holding)}")
    return "\n".join(lines)
