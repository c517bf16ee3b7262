"""What the adapters of other text-game packages share (TextWorld, TextWorldExpress, ScienceWorld).

- The package is an optional extra: :func:`require` imports it or says, in one line, which extra
  to install (and, for the Java-based ones, that a Java runtime is needed).
- The game runs in another program (a Java server for TextWorldExpress and ScienceWorld), which
  cannot be pickled and is slow to start. :class:`ExternalTextEnv` keeps the game's seed and the
  actions taken since the reset: a pickled environment is rebuilt from its options and replays
  them (the games are deterministic given both), the way a trainer restores one without pickle.
  Backends are reused: an environment that is closed or collected gives its server back to a small
  pool, from which the next environment of its kind starts at once.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import shutil
import warnings
import weakref
from typing import Any

from groundrl.envs.base import StepInfo, TextEnv, resolve_action
from groundrl.errors import GroundrlError


class MissingExtraError(GroundrlError, ImportError):
    """An environment whose package (an optional extra of groundrl) is not installed."""


def require(module: str, package: str, extra: str, java: bool = False):
    """Import ``module`` (of the PyPI ``package``, in groundrl's ``extra``), or raise a one-line
    :class:`MissingExtraError` that says what to install."""
    if java and shutil.which("java") is None:
        raise MissingExtraError(f"{package} runs on Java, and no `java` is on the PATH: install a Java 17 runtime "
                                "(Debian/Ubuntu: apt install openjdk-17-jre-headless)")
    if java:  # py4j, their bridge to Java, reports each server's start and stop at INFO
        logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"this environment needs the package {package}: pip install 'groundrl[{extra}]'"
                                ) from None


@contextlib.contextmanager
def java_heap(size: str):
    """Cap the heap of the Java servers started inside at ``size`` (``"1g"``), through
    ``JAVA_TOOL_OPTIONS`` (the packages start theirs with no options of ours); a cap the user set
    there already wins. A JVM takes a quarter of the machine's memory by default, and a long-lived
    simulator grows toward it."""
    before = os.environ.get("JAVA_TOOL_OPTIONS")
    if before is None or "-Xmx" not in before:
        os.environ["JAVA_TOOL_OPTIONS"] = f"{before or ''} -Xmx{size}".strip()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = before


class ReplayMismatchWarning(UserWarning):
    """A restored environment (unpickled) whose valid actions are not named as the original's were."""


_IDLE: dict[str, list[Any]] = {}
_STARTED: weakref.WeakSet[Any] = weakref.WeakSet()


@atexit.register
def _shut_all() -> None:
    """Stop every server while the interpreter still runs: the packages' own ``__del__`` stop them
    at its teardown, when the logging they call is gone (a traceback per server on exit)."""
    for backend in list(_STARTED):
        _shut(backend)
        backend.close = lambda: None  # what the package's __del__ calls
    _IDLE.clear()


class ExternalTextEnv(TextEnv):
    """A :class:`TextEnv` whose game runs in a backend object (``_backend``).

    A subclass sets ``backend_kind`` (the pool's key), implements ``_new_backend()``, ``_start(game_seed)``
    (load and reset the game, return ``(obs, info)``) and ``_play(action_string)`` (one step of the game:
    ``(obs, reward, terminated, truncated, info)``), and keeps its constructor's options in ``self._options``
    (what a pickled copy is rebuilt from).
    """

    backend_kind = ""
    _backend: Any = None
    _steps = 0
    gold_actions: list[str] = []
    """A solution of the episode's game, where the package gives one (a bound for evaluation)."""
    gold_no_op: str | None = None
    """A valid action that only lets time pass, played for a step of ``gold_actions`` that cannot be
    played (None: such a step is skipped): a game whose clock runs (ScienceWorld's) keeps the path's pace."""
    pool_size = 4
    """Idle backends of this kind kept for the next environments (a TextWorldExpress server is a Java
    process of ~100-300 MB)."""
    exact_replay = True
    """Whether a copy that replays the actions reads exactly as the original (False: see the subclass)."""

    def _acquire(self) -> Any:
        idle = _IDLE.get(self.backend_kind, [])
        while idle:
            backend = idle.pop()
            if _answers(backend):
                return backend
            _shut(backend, answers=False)  # its server died while idle: lent, it would fail every call of the next game
        backend = self._new_backend()
        try:
            _STARTED.add(backend)
        except TypeError:  # not weakly referable (a plain dict): nothing to stop at exit
            pass
        return backend

    def _new_backend(self) -> Any:
        raise NotImplementedError

    @property
    def steps_left(self) -> int:
        """Actions before the episode is truncated (every subclass counts ``_steps`` up to ``max_steps``)."""
        return self.max_steps - self._steps

    def same_command(self, command: str) -> str | None:
        """The valid action that is the game's ``command`` with its objects named otherwise (None:
        none, or the game does not say): the gold-path agent's stand-in for a step of the path."""
        return None

    def _start(self, game_seed: int) -> tuple[str, StepInfo]:
        raise NotImplementedError

    def _play(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:
        raise NotImplementedError

    def _valid_actions(self) -> list[str]:
        raise NotImplementedError

    def _game_seed(self, seed: int | None) -> int:
        """The package's own seed of the game that ``reset(seed=seed)`` plays."""
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, StepInfo]:
        super().reset(seed=seed)
        if self._backend is None:
            self._backend = self._acquire()
        self._seed_played = self._game_seed(seed)
        self._actions: list[str] = []
        return self._start(self._seed_played)

    def _step(self, action) -> tuple[str, float, bool, bool, StepInfo]:
        valid = self._valid_actions()
        chosen = valid[resolve_action(action, valid)]
        result = self._play(chosen)
        self._actions.append(chosen)
        return result

    def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            idle = _IDLE.setdefault(self.backend_kind, [])
            if len(idle) < self.pool_size:
                idle.append(backend)
            else:
                _shut(backend)
        super().close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the pool may be gone already
            pass

    # -- pickling: the options, the game's seed and the actions; the copy replays them ----------

    def __getstate__(self) -> dict:
        seed_played = getattr(self, "_seed_played", None)
        return {"options": self._options, "seed_played": seed_played, "actions": list(getattr(self, "_actions", [])),
                "ended": self._ended, "valid_actions": list(self._valid_actions()) if seed_played is not None else None}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state["options"])
        if state["seed_played"] is not None:
            if self._backend is None:
                self._backend = self._acquire()
            self._seed_played, self._actions = state["seed_played"], []
            self._start(state["seed_played"])
            for action in state["actions"]:
                self._play(action)
                self._actions.append(action)
            saved = state.get("valid_actions")
            if saved is not None and saved != list(self._valid_actions()):
                warnings.warn(f"{type(self).__name__}: the copy reached the pickled state, but its simulator names "
                              "the valid actions otherwise (see exact_replay): choose actions from the copy's "
                              "info['valid_actions'], not by the original's indices", ReplayMismatchWarning,
                              stacklevel=2)
        self._ended = state["ended"]


def _answers(backend: Any) -> bool:
    """Whether a backend's Java server (if it has one: the py4j gateway of TextWorldExpress and
    ScienceWorld) still answers a call."""
    gateway = getattr(backend, "_gateway", None)
    if gateway is None:
        return True
    log = logging.getLogger("py4j")
    level = log.level
    log.setLevel(logging.CRITICAL)  # a dead server is what is asked, not an error to print
    try:
        gateway.jvm.java.lang.System.nanoTime()
    except Exception:  # noqa: BLE001 - py4j's errors for a closed connection or a dead process vary
        return False
    finally:
        log.setLevel(level)
    return True


def _shut(backend: Any, answers: bool | None = None) -> None:
    """Stop a backend's server; ``answers``: whether it still answers, when the caller has just asked."""
    gateway = getattr(backend, "_gateway", None)
    if gateway is not None and not (_answers(backend) if answers is None else answers):
        # py4j's shutdown retries a dead server until the stack overflows; the RecursionError it ends
        # in leaves Python 3.11.7's parser unable to parse (SystemError in the next ast.parse). Close
        # our side only: the objects' finalizers then send nothing either.
        client = gateway._gateway_client
        client.close()
        client.is_connected = False
        gateway.shutdown_callback_server()
        process = getattr(gateway, "java_process", None)
        if process is not None and process.poll() is None:
            process.kill()
        return
    for name in ("close", "shutdown"):
        if callable(getattr(backend, name, None)):
            try:
                getattr(backend, name)()
            except Exception:  # noqa: BLE001 - a server that is gone already
                pass
            return
