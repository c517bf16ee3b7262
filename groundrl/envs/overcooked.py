"""Text Overcooked: TWOSOME's Tomato Salad and Tomato-Lettuce Salad, with macro-actions.

A single cook in a 7x7 kitchen (row x, column y; counters around, floor inside) makes a salad:
fetch the tomato (and the lettuce), put it on a cutting board, chop it three times, put it in the
bowl, serve the bowl at the delivery counter. The onion of Tomato-Lettuce Salad is a distractor.

Tomato Salad             Tomato-Lettuce Salad
    XXXXXTX                  XXXXXTX
    K...A.X                  K...A.L
    X.....X                  K.....O
    D.....X                  D.....X
    X.....X                  X.....X
    X.....X                  X.....X
    XXXXXPX                  XXXXXPX

(X counter, K cutting board, D delivery, T tomato, L lettuce, O onion, P the bowl, A the cook.)

The agent acts with macro-actions (5 in Tomato Salad, 8 in Tomato-Lettuce Salad, all always
offered, with labels that change with the state); each runs primitive moves (right, down, left,
up, stay) until it completes, navigating by A* on the cook's remembered map: the cook sees the
items within two cells (a 5x5 box) and remembers where it last saw the others. ``obs`` is
TWOSOME's prompt, built from what the cook sees when the macro ends. The dynamics, the macro
rules, the rewards and the prompts follow TWOSOME's ``gym-macro-overcooked`` (``Overcooked-LLMA``
v4 for Tomato Salad, v3 for Tomato-Lettuce Salad) and ``policy_pomdp.obs2text``; the tests replay
trajectories recorded from that code.

Rewards per primitive step: -0.001, +0.2 when a needed ingredient becomes chopped, +1 for the
right dish (the episode ends), -0.1 for a wrong dish, an empty bowl or bare food (everything goes
back to its start, unchopped). A macro's reward sums its primitive rewards discounted by 0.99 per
step; ``info["macro_steps"]`` is its number of primitive steps, for SMDP discounting. Episodes
are truncated once 200 primitive steps have run (the running macro finishes).

``shaping="original"`` pays the chop reward every time a needed ingredient becomes chopped, as
the original does (so chop, serve wrong, repeat pays); ``"once"`` pays it once per ingredient per
episode.

This module holds the game's rules and the environment; beside it are the kitchen's things, moves
and view (:mod:`~groundrl.envs.overcooked_kitchen`), how a macro walks the cook to its object
(:mod:`~groundrl.envs.overcooked_macros`), TWOSOME's prompts (:mod:`~groundrl.envs.overcooked_text`)
and the pictures (:mod:`~groundrl.envs.overcooked_render`).

>>> import gymnasium as gym, groundrl
>>> env = gym.make("groundrl/TomatoSalad-v0")
>>> obs, info = env.reset(seed=0)
>>> obs
"There is a fixed cutting board in the room. You notice a tomato on the table. Currently you don't have anything in hand. To serve the dish of a bowl only containing chopped tomato, you should first"
>>> info["valid_actions"]
['pick up the tomato', 'take the bowl', 'walk to the cutting board', 'serve nothing', 'chop nothing']
>>> obs, reward, terminated, truncated, info = env.step("pick up the tomato")
>>> info["macro_steps"], round(reward, 4)
(2, -0.002)
"""  # noqa: E501 (doctest output)

from __future__ import annotations

from typing import Any

import numpy as np

from groundrl.envs.base import StepInfo, TextEnv, resolve_action
from groundrl.envs.overcooked_kitchen import MOVES, STAY, Cell, Food, Layout, Plate, Station, in_view
from groundrl.envs.overcooked_macros import completed_after_move, next_move
from groundrl.envs.overcooked_render import draw, draw_text
from groundrl.envs.overcooked_text import tomato_lettuce_salad_text, tomato_salad_text
from groundrl.errors import InvalidArgumentError

DISHES = ("tomato salad", "lettuce salad", "onion salad", "lettuce-tomato salad", "onion-tomato salad",
          "lettuce-onion salad", "lettuce-onion-tomato salad")  # the one-hot task code of the features
FOOD_ORDER_IN_DISH_NAMES = ("lettuce", "onion", "tomato")

REWARDS = {"chopped": 0.2, "correct delivery": 1.0, "wrong delivery": -0.1, "step": -0.001}
MACRO_DISCOUNT = 0.99


TASKS = {
    "TomatoSalad": Layout(
        "TomatoSalad", "tomato salad",
        ("XXXXXTX", "K...A.X", "X.....X", "D.....X", "X.....X", "X.....X", "XXXXXPX"),
        ("get tomato", "get plate", "go to knife 1", "deliver", "chop"),
        ("tomato",),
    ),
    "TomatoLettuceSalad": Layout(
        "TomatoLettuceSalad", "lettuce-tomato salad",
        ("XXXXXTX", "K...A.L", "K.....O", "D.....X", "X.....X", "X.....X", "XXXXXPX"),
        ("get tomato", "get lettuce", "get onion", "get plate", "go to knife 1", "go to knife 2", "deliver", "chop"),
        ("tomato", "lettuce", "onion"),
    ),
}
_SYMBOLS = {"T": "tomato", "L": "lettuce", "O": "onion", "P": "plate"}


# -- the environment -------------------------------------------------------------------------------


class OvercookedEnv(TextEnv):
    """TWOSOME's text Overcooked. ``task`` is "TomatoSalad" or "TomatoLettuceSalad".

    ``info``: ``valid_actions`` (the macro-actions' labels, all of them), ``macro_steps`` (primitive
    steps the last macro took), ``features`` (the symbolic observation: each item's position and
    chop count where the cook sees it, zeros elsewhere, then the dish's one-hot code; int array),
    and ``success`` at the end of an episode.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, task: str = "TomatoSalad", shaping: str = "original", max_steps: int = 200,
                 render_mode: str | None = None):
        if task not in TASKS:
            raise InvalidArgumentError(f"unknown Overcooked task {task!r}; choose one of {', '.join(TASKS)}")
        if shaping not in ("original", "once"):
            raise InvalidArgumentError(f"shaping must be 'original' or 'once', not {shaping!r}")
        if max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be at least 1, not {max_steps}")
        self.layout = TASKS[task]
        self.shaping = shaping
        self.max_steps = max_steps
        self._set_render_mode(render_mode)
        self.size = len(self.layout.rows)
        self._build()

    # state

    def _build(self) -> None:
        """The start state: what is on each cell, the items, the cook, and the cook's memory."""
        self.cells: list[list[str]] = []
        self.foods: dict[str, Food] = {}
        self.knives: list[Station] = []
        self.plate: Plate | None = None
        for x, row in enumerate(self.layout.rows):
            self.cells.append([])
            for y, symbol in enumerate(row):
                cell = {"X": "counter", ".": "floor", "K": "knife", "D": "delivery", "A": "agent"}.get(symbol)
                kind = _SYMBOLS.get(symbol)
                if kind == "plate":
                    self.plate = Plate((x, y), (x, y))
                elif kind:
                    self.foods[kind] = Food(kind, (x, y), (x, y))
                if symbol == "K":
                    self.knives.append(Station("knife", (x, y)))
                elif symbol == "D":
                    self.delivery = Station("delivery", (x, y))
                elif symbol == "A":
                    self.agent: Cell = (x, y)
                self.cells[-1].append(cell or kind)
        self.holding: Food | Plate | None = None
        # the order of the symbolic observation, and of the memory
        self.items: list[Food | Plate | Station] = [*self.foods.values(), self.plate, *self.knives, self.delivery]
        self.memory: dict[int, Cell] = {id(item): item.pos for item in self.items}
        self.steps = 0
        self.delivered = False
        self.paid_chops: set[str] = set()
        self._chop_count = 0
        self._update_memory()
        self._see()

    def _see(self) -> None:
        """What the agent gets when a macro ends: the symbolic observation, and the prompt and
        labels read from it."""
        self._features = self._observe()
        self._prompt, self._labels = self._text()

    def _update_memory(self) -> None:
        """See what is in view; elsewhere keep the last sighting, unless the cook now looks at
        where it was and it is gone: then assume it went back to its start. Rebuild the map the
        cook navigates on from that."""
        known = [["counter" if x in (0, self.size - 1) or y in (0, self.size - 1) else "floor"
                  for y in range(self.size)] for x in range(self.size)]
        for item in self.items:
            if in_view(self.agent, item.pos):
                seen = item.pos
            else:
                seen = self.memory[id(item)]
                if in_view(self.agent, seen):
                    seen = item.start
            self.memory[id(item)] = seen
            known[seen[0]][seen[1]] = item.kind
        known[self.agent[0]][self.agent[1]] = "agent"
        self.known = known

    def _observe(self) -> np.ndarray:
        values = []
        for item in self.items:
            seen = in_view(self.agent, item.pos)
            values += list(item.pos) if seen else [0, 0]
            if isinstance(item, Food):
                values.append(item.chops if seen else 0)
        values += list(self.agent)
        values += [int(dish == self.layout.dish) for dish in DISHES]
        return np.array(values, dtype=np.int8)

    def _item_at(self, cell: Cell, kind: str) -> Any:
        if kind == "plate":
            return self.plate if self.plate.pos == cell else None
        if kind == "knife":
            return next((k for k in self.knives if k.pos == cell), None)
        food = self.foods.get(kind)
        return food if food is not None and food.pos == cell else None

    # one primitive step of the game

    def _primitive(self, move: int) -> float:
        reward = REWARDS["step"]
        if move != STAY:
            dx, dy = MOVES[move]
            target = (self.agent[0] + dx, self.agent[1] + dy)
            reward += self._bump(target, self.cells[target[0]][target[1]])
        self.steps += 1
        self._update_memory()
        return reward

    def _bump(self, target: Cell, there: str) -> float:
        """Move into ``target``: walk onto floor, or act on what is there."""
        held = self.holding
        if there == "floor":
            self.cells[self.agent[0]][self.agent[1]] = "floor"
            self._move_agent(target)
            self.cells[target[0]][target[1]] = "agent"
        elif held is None:
            if there in ("tomato", "lettuce", "onion", "plate"):
                item = self._item_at(target, there)
                if item is not None:
                    self._pick_up(item)
                    self.cells[target[0]][target[1]] = "counter"
            elif there == "knife":
                knife = self._item_at(target, "knife")
                if isinstance(knife.holding, Plate) or (isinstance(knife.holding, Food) and knife.holding.chopped):
                    self._pick_up(knife.holding)
                    knife.holding = None
                elif isinstance(knife.holding, Food):
                    return self._chop(knife.holding)
        elif there == "counter":
            self.cells[target[0]][target[1]] = held.kind
            self._put_down(target)
        elif there == "plate":
            if isinstance(held, Food) and held.chopped:
                plate = self._item_at(target, "plate")
                self._put_down(target)
                plate.add(held)
        elif there == "knife":
            knife = self._item_at(target, "knife")
            if knife.holding is None:
                self._put_down(target)
                knife.holding = held
            elif isinstance(knife.holding, Food) and isinstance(held, Plate):
                if knife.holding.chopped:
                    held.add(knife.holding)
                    knife.holding = None
            elif isinstance(knife.holding, Plate) and isinstance(held, Food) and held.chopped:
                plate, knife.holding = knife.holding, None
                self._pick_up(plate)
                plate.add(held)
        elif there == "delivery":
            return self._serve(target)
        elif there in ("tomato", "lettuce", "onion"):
            food = self._item_at(target, there)
            if food is not None and food.chopped and isinstance(held, Plate):
                held.add(food)
                self.cells[target[0]][target[1]] = "counter"
        return 0.0

    def _move_agent(self, cell: Cell) -> None:
        self.agent = cell
        if self.holding is not None:
            self.holding.move(cell)

    def _pick_up(self, item: Food | Plate) -> None:
        self.holding = item
        item.move(self.agent)

    def _put_down(self, cell: Cell) -> None:
        self.holding.move(cell)
        self.holding = None

    def _chop(self, food: Food) -> float:
        food.chops += 1
        if not food.chopped or food.kind not in self.layout.dish:
            return 0.0
        if self.shaping == "once" and food.kind in self.paid_chops:
            return 0.0
        self.paid_chops.add(food.kind)
        return REWARDS["chopped"]

    def _serve(self, target: Cell) -> float:
        held = self.holding
        self._put_down(target)
        if isinstance(held, Plate) and held.contents:
            kinds = {food.kind for food in held.contents}
            dish = "-".join(k for k in FOOD_ORDER_IN_DISH_NAMES if k in kinds) + " salad"
            if dish == self.layout.dish:
                self.delivery.holding = held
                self.delivered = True
                return REWARDS["correct delivery"]
        # a wrong dish, an empty bowl or bare food: everything goes back to its start, unchopped
        returned = [held] if isinstance(held, Food) else [held, *held.contents]
        if isinstance(held, Plate):
            held.contents = []
        for item in returned:
            item.move(item.start)
            if isinstance(item, Food):
                item.chops = 0
            self.cells[item.start[0]][item.start[1]] = item.kind
        return REWARDS["wrong delivery"]

    # macro-actions: those that walk to their object follow overcooked_macros; "chop" counts its chops here

    def _next_move(self, macro: str) -> tuple[int, bool]:
        """The macro's next primitive move, and whether the macro completes with it."""
        if macro == "chop":
            for move, (dx, dy) in MOVES.items():
                cell = (self.agent[0] + dx, self.agent[1] + dy)
                if self.cells[cell[0]][cell[1]] == "knife":
                    on_board = self._item_at(cell, "knife").holding
                    if isinstance(on_board, Food) and not on_board.chopped:
                        self._chop_count += 1
                        if self._chop_count >= 3:
                            self._chop_count = 0
                            return move, True
                        return move, False
            return STAY, True
        return next_move(self, macro)

    def _run_macro(self, macro: str) -> tuple[float, int]:
        reward, steps, discount = 0.0, 0, 1.0
        done = False
        while not done:
            move, done = self._next_move(macro)
            reward += discount * self._primitive(move)
            steps += 1
            discount *= MACRO_DISCOUNT
            if self.delivered:
                break
            done = done or completed_after_move(self, macro)
        return reward, steps

    # the prompt

    @property
    def action_vocabulary(self) -> tuple[str, ...]:
        """The macro-actions by their internal names (the labels the agent reads depend on the state)."""
        return tuple(self.layout.macros)

    @property
    def valid_actions(self) -> list[str]:
        return list(self._labels)

    def _text(self) -> tuple[str, list[str]]:
        if self.layout.name == "TomatoSalad":
            return tomato_salad_text(self._features)
        return tomato_lettuce_salad_text(self._features)

    # the gymnasium API

    def _info(self, **extra: Any) -> StepInfo:
        return {"valid_actions": self.valid_actions, "features": self._features.copy(), "elapsed_steps": self.steps,
                "max_episode_steps": self.max_steps, **extra}

    # The cook's memory is keyed by object identity, which pickling (checkpoints of a training run
    # keep environments mid-episode) does not preserve: it travels in the order of self.items.
    def __getstate__(self):
        state = dict(self.__dict__)
        if "memory" in state:
            state["memory"] = [self.memory[id(item)] for item in self.items]
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if isinstance(state.get("memory"), list):
            self.memory = {id(item): cell for item, cell in zip(self.items, state["memory"])}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, StepInfo]:
        super().reset(seed=seed)
        self._build()
        return self._prompt, self._info(macro_steps=0)

    def _step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        index = resolve_action(action, self.valid_actions)
        reward, macro_steps = self._run_macro(self.layout.macros[index])
        self._see()
        terminated = self.delivered
        truncated = not terminated and self.steps >= self.max_steps
        extra = {"success": terminated} if terminated or truncated else {}
        return self._prompt, reward, terminated, truncated, self._info(macro_steps=macro_steps, **extra)

    # rendering

    def render(self):
        if self.render_mode == "ansi":
            return draw_text(self)
        if self.render_mode == "rgb_array":
            return draw(self)
        return None
