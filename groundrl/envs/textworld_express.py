"""TextWorldExpress (Jansen and Côté 2023; ``pip install 'groundrl[textworld]'``, Java 17): fast
re-implementations of text-game benchmarks, registered as ``groundrl/TWX-<game>-v0``.

A reset plays one of the package's games of the chosen split (``split``: its train, dev and test
seeds are disjoint, 1,000 games each): ``reset(seed=s)`` plays the split's ``s``-th game (modulo
1,000), so a seed reproduces the same game and observations. The prompt is the task, the room,
the inventory and the last action with its answer; the valid actions are the game's own list
(sorted). An episode terminates when the task is done (``info["success"]``) or failed, and is
truncated after ``max_steps`` actions.

>>> import groundrl
>>> env = groundrl.make_env("groundrl/TWX-CoinCollector-v0", params={"numLocations": 1})  # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                                                          # doctest: +SKIP
>>> env.step("take coin")[1:3]                                                             # doctest: +SKIP
(1.0, True)
"""

from __future__ import annotations

from groundrl.envs.external import ExternalTextEnv, require
from groundrl.errors import InvalidArgumentError

GAMES = {
    "CookingWorld": ("cookingworld", "cook a meal from a recipe (TextWorld's cooking games)"),
    "CoinCollector": ("coin", "find the coin in a house and take it"),
    "TWC": ("twc", "TextWorld Commonsense: put objects away where they belong"),
    "MapReader": ("mapreader", "read a map, fetch the coin from a named room, bring it back"),
    "Arithmetic": ("arithmetic", "solve a math problem, take the item with that many units"),
    "Sorting": ("sorting", "put objects in a box ordered by quantity"),
    "SimonSays": ("simonsays", "do exactly what Simon says"),
    "PeckingOrder": ("peckingorder", "follow the instructions of a book in their order"),
}
"""groundrl's name of each game: (the package's name, a description)."""

SPLITS = ("train", "dev", "test")
GAMES_PER_SPLIT = 1000


class TextWorldExpressEnv(ExternalTextEnv):
    """One TextWorldExpress game.

    Args:
        game: a key of :data:`GAMES`.
        params: the game's generation settings (``{"numLocations": 3, "includeDoors": 0}``; the
            package's defaults otherwise), checked by the package at construction.
        split: ``"train"``, ``"dev"`` or ``"test"``: which of the package's games a reset plays.
        max_steps: actions before the episode is truncated.

    ``info``: ``valid_actions``, ``success``, ``score`` (the game's, 0-1). ``gold_actions``: a
    solution of the episode's game, the package's gold path (not a function of the seed alone: the
    package searches for it at random, so it is not in ``info``).
    """

    backend_kind = "textworld-express"
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, game: str = "CoinCollector", params: dict | None = None, split: str = "train",
                 max_steps: int = 100, render_mode: str | None = None):
        if game not in GAMES:
            raise InvalidArgumentError(f"game must be one of {', '.join(GAMES)}, not {game!r}")
        if split not in SPLITS:
            raise InvalidArgumentError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be a positive integer, not {max_steps!r}")
        params = dict(params or {})
        for key, value in params.items():
            if not isinstance(value, (int, bool)):
                raise InvalidArgumentError(f"params: {key} must be an integer, not {value!r}")
        self._options = {"game": game, "params": params, "split": split, "max_steps": max_steps,
                         "render_mode": render_mode}
        self.game, self.params, self.split, self.max_steps = game, params, split, max_steps
        self._set_render_mode(render_mode)
        self._text = ""
        self._info: dict = {}
        self._backend = self._acquire()
        try:  # the package checks the settings when it generates a game: now, not at the first reset
            self._start(0)
        except InvalidArgumentError:
            self.close()
            raise

    def _new_backend(self):
        module = require("textworld_express", "textworld-express", "textworld", java=True)
        return module.TextWorldExpressEnv(envStepLimit=10**9)  # groundrl truncates at max_steps itself

    def _game_seed(self, seed: int | None) -> int:
        index = int(self.np_random.integers(GAMES_PER_SPLIT)) if seed is None else seed % GAMES_PER_SPLIT
        return index  # the position in the split's list of game seeds

    def _start(self, game_seed: int):
        backend = self._backend
        settings = ",".join(f"{key}={int(value)}" for key, value in self.params.items())
        try:  # the package's own message names the bad setting and its range
            backend.load(gameName=GAMES[self.game][0], gameParams=settings)
            seeds = {"train": backend.getValidSeedsTrain, "dev": backend.getValidSeedsDev,
                     "test": backend.getValidSeedsTest}[self.split]()
            _, info = backend.reset(seed=seeds[game_seed % len(seeds)], gameFold=self.split, generateGoldPath=True)
        except ValueError as error:
            raise InvalidArgumentError(f"{self.game} params {self.params}: {' '.join(str(error).split())}") from None
        self._steps = 0
        self.gold_actions = list(backend.getGoldActionSequence())
        return self._observe(info, None)

    def _observe(self, info: dict, action: str | None):
        self._info = info
        parts = [info["taskDescription"].strip(), info["look"].strip(), info["inventory"].strip()]
        if action is not None:
            parts += [f"> {action}", info["observation"].strip()]
        self._text = "\n".join(parts)
        return self._text, self._public_info()

    def _public_info(self, **extra) -> dict:
        return {"valid_actions": self._valid_actions(), "success": bool(self._info.get("tasksuccess")),
                "score": float(self._info.get("score") or 0.0), **extra}

    def _valid_actions(self) -> list[str]:
        return sorted(set(self._info["validActions"]))

    def _play(self, action: str):
        _, reward, _, info = self._backend.step(action)
        self._steps += 1
        text, public = self._observe(info, action)
        terminated = bool(info.get("tasksuccess") or info.get("taskfailure"))
        truncated = not terminated and self._steps >= self.max_steps
        return text, float(reward), terminated, truncated, public

    def render(self):
        return self._text if self.render_mode == "ansi" else None
