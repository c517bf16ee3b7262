"""TextWorld (Côté et al. 2018; ``pip install 'groundrl[textworld]'``): Microsoft's generated text
games, registered as ``groundrl/TextWorld-Simple-v0`` (its ``tw-simple`` challenge: a house of a
few rooms, a key, a door, an object to put somewhere).

``reset(seed=s)`` plays the game the generator makes from seed ``s`` (any seed of 0 or more: see
:func:`generator_seeds`) with the env options
(``rewards``: dense, balanced or sparse; ``goal``: detailed, brief or none; ``test``: the
challenge's held-out games): the same seed and options give the same game and observations. A
game is generated and compiled the first time it is asked for (a few seconds) and kept in
``games_dir`` for the next time. The prompt is the objective, the room, the inventory and the
last command with its answer; the valid actions are TextWorld's admissible commands. Rewards are
the changes of the game's score divided by its maximum (an episode that wins has earned 1 in
all); an episode terminates when the game is won (``info["success"]``) or lost, and is truncated
after ``max_steps`` commands.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

from groundrl.envs.external import ExternalTextEnv, require
from groundrl.errors import InvalidArgumentError

REWARDS = ("dense", "balanced", "sparse")
GOALS = ("detailed", "brief", "none")


def default_games_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "groundrl" / "textworld"


def generator_seeds(seed: int) -> int | dict[str, int]:
    """What TextWorld's game generator is seeded with for ``reset(seed=seed)``, any seed of 0 or more.

    TextWorld seeds numpy's legacy generator with the seed, which takes only seeds below 2**32, and
    draws from it the four seeds of a game (map, objects, quest, grammar). A larger seed draws them
    from the same generator seeded with the seed's 32-bit words instead: deterministic, and the
    games of the seeds below 2**32 (those in the caches and records) stay what they were.

    >>> generator_seeds(7)
    7
    >>> generator_seeds(2**63 - 1) == generator_seeds(2**63 - 1) != generator_seeds(2**63 - 2)
    True
    """
    if seed < 2**32:
        return seed
    import numpy as np

    words = [(seed >> shift) & 0xFFFFFFFF for shift in range(0, seed.bit_length(), 32)]
    rng = np.random.RandomState(words)
    return {key: int(rng.randint(65635)) for key in ("map", "objects", "quest", "grammar")}  # as TextWorld draws them


class TextWorldEnv(ExternalTextEnv):
    """TextWorld's ``tw-simple`` games, one per seed.

    Args:
        rewards, goal, test: the challenge's settings (``tw-make tw-simple --rewards ... --goal ...``).
        max_steps: commands before the episode is truncated.
        games_dir: where the generated games are kept (default ``~/.cache/groundrl/textworld``).

    ``info``: ``valid_actions``, ``success``, ``score`` (0-1). ``gold_actions``: the generator's
    walkthrough of the episode's game.
    """

    backend_kind = "textworld"
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, rewards: str = "dense", goal: str = "detailed", test: bool = False, max_steps: int = 50,
                 games_dir: str | None = None, render_mode: str | None = None):
        if rewards not in REWARDS:
            raise InvalidArgumentError(f"rewards must be one of {', '.join(REWARDS)}, not {rewards!r}")
        if goal not in GOALS:
            raise InvalidArgumentError(f"goal must be one of {', '.join(GOALS)}, not {goal!r}")
        if not isinstance(test, bool):
            raise InvalidArgumentError(f"test must be true or false, not {test!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be a positive integer, not {max_steps!r}")
        self._options = {"rewards": rewards, "goal": goal, "test": test, "max_steps": max_steps,
                         "games_dir": games_dir, "render_mode": render_mode}
        self.settings = {"rewards": rewards, "goal": goal, "test": test}
        self.max_steps = max_steps
        self.games_dir = Path(games_dir) if games_dir else default_games_dir()
        self._set_render_mode(render_mode)
        self._text, self._state = "", None
        require("textworld", "textworld", "textworld")  # one line now, rather than at the first reset

    def _new_backend(self):
        textworld = require("textworld", "textworld", "textworld")
        infos = textworld.EnvInfos(admissible_commands=True, description=True, inventory=True, objective=True,
                                   won=True, lost=True, score=True, max_score=True, policy_commands=True)
        return {"module": textworld, "infos": infos, "env": None, "path": None}

    def _game_seed(self, seed: int | None) -> int:
        return int(self.np_random.integers(2**31 - 1)) if seed is None else int(seed)

    def game_file(self, seed: int) -> Path:
        """The compiled game of ``seed`` (generated and compiled into ``games_dir`` when missing)."""
        key = hashlib.sha256(json.dumps(self.settings, sort_keys=True).encode()).hexdigest()[:10]
        # a file name holds some 250 characters: a seed of more digits than 2**64's is named by a digest
        name = f"seed{seed}" if seed < 2**64 else \
            "seed-" + hashlib.sha256(seed.to_bytes((seed.bit_length() + 7) // 8, "little")).hexdigest()[:24]
        path = self.games_dir / f"tw-simple-{key}" / f"{name}.z8"
        if not path.is_file():
            textworld = require("textworld", "textworld", "textworld")
            from textworld.challenges import CHALLENGES

            options = textworld.GameOptions()
            options.seeds = generator_seeds(seed)
            options.path = str(path)
            options.file_ext = ".z8"
            options.force_recompile = True
            challenge = CHALLENGES["tw-simple"]
            make = challenge.make if hasattr(challenge, "make") else challenge[1]
            game = make(dict(self.settings), options)
            created = not path.parent.exists()
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                textworld.generator.compile_game(game, options)
            except BaseException:  # no half-written game for the next reset to load (nor an empty folder)
                for part in path.parent.glob(f"{path.stem}.*"):
                    part.unlink()
                if created and not any(path.parent.iterdir()):
                    path.parent.rmdir()
                raise
        return path

    def _start(self, game_seed: int):
        backend = self._backend
        path = self.game_file(game_seed)
        if backend["path"] != path:
            if backend["env"] is not None:
                backend["env"].close()
            backend["env"], backend["path"] = backend["module"].start(str(path), request_infos=backend["infos"]), path
        with warnings.catch_warnings():  # jericho does not know TextWorld's games; TextWorld keeps the score itself
            warnings.filterwarnings("ignore", message=".*is not fully supported")
            self._state = backend["env"].reset()
        self._steps, self._score = 0, self._state["score"] or 0
        self.gold_actions = list(self._state["policy_commands"] or [])
        return self._observe(None)

    def _observe(self, command: str | None):
        state = self._state
        parts = [state["objective"].strip(), state["description"].strip(), state["inventory"].strip()]
        if command is not None:
            # the interpreter's status line and prompt follow the answer: "\n\n>   -= Bedroom =-1/2"
            parts += [f"> {command}", state.feedback.split("\n>")[0].strip()]
        self._text = "\n".join(parts)
        maximum = state["max_score"] or 1
        return self._text, {"valid_actions": self._valid_actions(), "success": bool(state["won"]),
                            "score": (state["score"] or 0) / maximum}

    def _valid_actions(self) -> list[str]:
        return sorted(set(self._state["admissible_commands"] or []))

    def _play(self, action: str):
        self._state, _, done = self._backend["env"].step(action)
        self._steps += 1
        score = self._state["score"] or 0
        reward = (score - self._score) / (self._state["max_score"] or 1)
        self._score = score
        text, info = self._observe(action)
        terminated = bool(self._state["won"] or self._state["lost"])
        truncated = not terminated and self._steps >= self.max_steps
        return text, float(reward), terminated, truncated, info

    def render(self):
        return self._text if self.render_mode == "ansi" else None
