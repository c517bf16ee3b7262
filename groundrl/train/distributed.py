"""Training over several processes and machines, launched by PyTorch's own ``torchrun``.

    torchrun --nproc_per_node=2 -m groundrl train ...        # or: groundrl train --nproc 2 ...

Every process (a *rank*) holds a replica of the agent, plays its own slice of the ``ppo.num_envs``
environments (distinct seeds), and computes the PPO losses of its own decisions;
:class:`~torch.nn.parallel.DistributedDataParallel` averages the gradients, so the replicas stay
identical. The settings keep their single-process meaning: ``ppo.num_envs`` and the minibatch sizes
are totals over the ranks, and the run is the same algorithm, faster. Statistics that steer the
update (advantage normalization, approx-KL early stopping) and the logged ones are reduced over the
ranks, so every rank takes the same decisions. Rank 0 writes the logs and the checkpoints; every
rank reads them when a run resumes.

The launcher's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``) says whether a process is one of several; without it groundrl
runs in one process as always.
"""

from __future__ import annotations

import datetime
import os
import re
import resource
from dataclasses import dataclass

import torch
import torch.distributed as dist

from groundrl.errors import GroundrlError, InvalidArgumentError
from groundrl.llm.loading import resolve_device


class DistributedError(GroundrlError):
    """A rank died, hung, or never joined: the others stop with this instead of waiting forever."""


@dataclass(frozen=True)
class World:
    """This process's place among the processes of a run (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the logs and the checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def shard(self, total: int) -> range:
        """This rank's part of ``total`` items (environments, say), by global index.

        >>> World(rank=1, size=2).shard(8)
        range(4, 8)
        """
        per_rank = total // self.size
        return range(self.rank * per_rank, (self.rank + 1) * per_rank)

    def device(self, requested: str) -> str:
        """One GPU per rank, by ``LOCAL_RANK``: ``auto`` and ``cuda`` become ``cuda:LOCAL_RANK``
        when GPUs are present (``cuda:N`` and ``cpu`` are kept as given)."""
        if self.distributed and requested in ("auto", "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return requested


def _world_from_environment() -> World:
    env = os.environ
    size = int(env.get("WORLD_SIZE", "1"))
    return World(rank=int(env.get("RANK", "0")), size=size, local_rank=int(env.get("LOCAL_RANK", "0")),
                 local_size=int(env.get("LOCAL_WORLD_SIZE", str(size))))


def current_world() -> World:
    """The world this process belongs to (set up by :func:`setup`; rank 0 of 1 before that)."""
    if dist.is_available() and dist.is_initialized():
        return _world_from_environment()
    return World()


def setup(timeout: float = 300.0, backend: str = "auto", device: str = "auto",
          cpu_threads: int | None = None) -> World:
    """Join the run's process group when launched by ``torchrun`` (a no-op otherwise, and when
    already joined). CPU ranks split this machine's cores evenly unless ``cpu_threads`` is given;
    GPU ranks take the GPU of their ``LOCAL_RANK``.

    Raises:
        DistributedError: the other ranks did not join within ``timeout`` seconds.
    """
    world = _world_from_environment()
    if not world.distributed or dist.is_initialized():
        return world
    resolved = resolve_device(world.device(device))
    on_gpu = resolved.type == "cuda"
    if on_gpu:
        torch.cuda.set_device(resolved)
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        torch.set_num_threads(cpu_threads or max(1, cores // world.local_size))
    if backend == "auto":
        backend = "nccl" if on_gpu else "gloo"
    if backend not in ("gloo", "nccl"):
        raise InvalidArgumentError(f"distributed.backend must be auto, gloo or nccl, not {backend!r}")
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    except (RuntimeError, dist.DistError) as error:
        where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
        raise DistributedError(f"rank {world.rank} of {world.size}: the other ranks did not join at {where} within "
                               f"{timeout:g} s ({_first_line(error)}); start every rank with the same rendezvous "
                               "arguments (torchrun --nnodes, --rdzv-endpoint)") from None
    return world


def shutdown() -> None:
    """Leave the process group (at the end of a run)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_communication_failure(error: BaseException) -> bool:
    """Whether ``error`` is another rank dying or hanging, seen from this one (a lost connection or a
    timed-out collective), rather than a failure of this rank's own."""
    if isinstance(error, dist.DistError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        marker in text for marker in ("gloo", "NCCL", "c10d", "Connection closed by peer", "Connection reset",
                                      "pair closure", "Broken pipe", "Timed out", "timed out", "timeout"))


def communication_error(error: BaseException, world: World, timeout: float, run_hint: str = "") -> DistributedError:
    """The one-line error a rank reports when it lost the others."""
    return DistributedError(f"rank {world.rank} of {world.size} lost the other processes: one died or did not answer "
                            f"within distributed.timeout={timeout:g} s ({_first_line(error)}){run_hint}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", text)  # the C++ source location says nothing to users
    return text.split(". This is typically")[0].rstrip(".")


# -- collectives (each one a no-op in a single process) -------------------------------------------


def sum_over_ranks(values: torch.Tensor) -> torch.Tensor:
    """The element-wise sum of ``values`` over the ranks (a float64 CPU tensor in, the same out)."""
    if not current_world().distributed:
        return values
    return _on_backend_device(values, lambda t: dist.all_reduce(t, op=dist.ReduceOp.SUM))


def max_over_ranks(value: float) -> float:
    if not current_world().distributed:
        return value
    return float(_on_backend_device(torch.tensor([value], dtype=torch.float64),
                                    lambda t: dist.all_reduce(t, op=dist.ReduceOp.MAX))[0])


def mean_over_ranks(values: dict[str, float]) -> dict[str, float]:
    """Each value averaged over the ranks (every rank passes the same keys)."""
    world = current_world()
    if not world.distributed or not values:
        return values
    keys = sorted(values)
    total = sum_over_ranks(torch.tensor([values[k] for k in keys], dtype=torch.float64))
    return {k: float(v) / world.size for k, v in zip(keys, total)}


def concat_over_ranks(tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """The ranks' tensors (same shape on every rank) concatenated along ``dim``, in rank order."""
    world = current_world()
    if not world.distributed:
        return tensor
    parts = gather_objects(tensor.cpu(), everywhere=True)
    return torch.cat(parts, dim=dim)


def gather_objects(obj, everywhere: bool = False) -> list | None:
    """Every rank's ``obj`` (picklable), in rank order: on every rank when ``everywhere``, else on
    rank 0 only (``None`` elsewhere)."""
    world = current_world()
    if not world.distributed:
        return [obj]
    if everywhere:
        gathered = [None] * world.size
        dist.all_gather_object(gathered, obj)
        return gathered
    gathered = [None] * world.size if world.is_main else None
    dist.gather_object(obj, gathered, dst=0)
    return gathered


def broadcast_object(obj):
    """Rank 0's ``obj`` on every rank."""
    if not current_world().distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if current_world().distributed:
        dist.barrier()


def _on_backend_device(tensor: torch.Tensor, collective) -> torch.Tensor:
    """Run ``collective`` on ``tensor`` where the backend wants it (NCCL reduces GPU tensors only)."""
    if dist.get_backend() == "nccl":
        moved = tensor.to(f"cuda:{torch.cuda.current_device()}")
        collective(moved)
        return moved.cpu()
    tensor = tensor.clone()
    collective(tensor)
    return tensor


__all__ = ["DistributedError", "World", "barrier", "broadcast_object", "communication_error", "concat_over_ranks",
           "current_world", "gather_objects", "is_communication_failure", "max_over_ranks", "mean_over_ranks",
           "setup", "shutdown", "sum_over_ranks"]


def data_parallel(module: torch.nn.Module, world: World, find_unused_parameters: bool) -> torch.nn.Module:
    """``module`` wrapped in DistributedDataParallel when several processes train (gradients
    averaged over them in the backward pass), else ``module`` itself."""
    if not world.distributed:
        return module
    from torch.nn.parallel import DistributedDataParallel

    device = next(module.parameters()).device
    return DistributedDataParallel(module, device_ids=[device] if device.type == "cuda" else None,
                                   broadcast_buffers=False, find_unused_parameters=find_unused_parameters)


def no_sync(model: torch.nn.Module):
    """DistributedDataParallel's ``no_sync`` (accumulate locally), or None in one process."""
    return getattr(model, "no_sync", None)


def peak_memory_gib(device: torch.device) -> float:
    """The most memory this process held so far (GPU: allocated by torch; CPU: resident)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
