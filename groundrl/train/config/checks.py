"""Checks of a run's settings against the world: what they name exists, and their totals split over
the processes (the schema checks the values themselves)."""

from __future__ import annotations

import importlib.util

from groundrl.envs import make_env
from groundrl.errors import InvalidArgumentError
from groundrl.llm.loading import resolve_device, resolve_dtype
from groundrl.train.config.schema import TrainConfig
from groundrl.train.loggers import wandb_login_problem


def check_runnable(config: TrainConfig) -> None:
    """What the settings name exists: the environment (with its options) and the device and
    dtype, and W&B's login where it logs online (checked before a run folder is made or a model loads).

    Raises:
        GroundrlError: one line saying which and how to fix it.
    """
    try:
        make_env(config.env, **config.env_options).close()
    except TypeError as error:  # an option of the wrong kind
        raise InvalidArgumentError(
            f"env_kwargs: {config.env} takes {str(error).split(' was raised from')[0]}") from None
    except InvalidArgumentError as error:  # an option it does not take, or a bad value
        raise InvalidArgumentError(f"env_kwargs: {error}") from None
    if config.sil.hindsight:
        try:
            make_env(config.env, **config.collector_env_options).close()
        except (TypeError, InvalidArgumentError):
            raise InvalidArgumentError(f"sil.hindsight={config.sil.hindsight}: {config.env} does not report the "
                                       "missions a step accomplished (BabyAI-Text does): set sil.hindsight=0") from None
    resolve_dtype(config.dtype, resolve_device(config.device))
    if "wandb" in config.logging.backends:
        if importlib.util.find_spec("wandb") is None:
            raise InvalidArgumentError("logging.backends has wandb, which is not installed: pip install "
                                       "'groundrl[wandb]' (or drop wandb from logging.backends)")
        problem = wandb_login_problem(config.logging.wandb_mode)  # no login: said before a run folder exists
        if problem:
            raise InvalidArgumentError(problem)


def check_split(config: TrainConfig, processes: int) -> None:
    """The totals of ``config`` that are shared out over the processes must be multiples of their
    number (environments, minibatch sizes).

    Raises:
        InvalidArgumentError: one of them is not.
    """
    for name, value in {"rollout.num_envs": config.rollout.num_envs, **config.batch_sizes}.items():
        if value % processes:
            raise InvalidArgumentError(f"{name}={value} does not split over {processes} processes: make it a "
                                       f"multiple of {processes} (it is the total over the processes)")
    groups = config.rollout.num_envs // config.rollout.group_size
    if config.group_method and groups % processes:
        raise InvalidArgumentError(f"the {groups} groups of rollout.group_size={config.rollout.group_size} do not "
                                   f"split over {processes} processes (a group plays in one): make "
                                   f"rollout.num_envs / rollout.group_size a multiple of {processes}")
