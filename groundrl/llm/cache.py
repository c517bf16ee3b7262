"""Remembering what a model computed for a text, so that it is computed once.

Small text worlds repeat themselves: a Food Preparation rollout of 128 decisions holds about 16
distinct prompts. What a *frozen* model computes for a prompt (the critic's features, the reference
policy's scores) never changes, so it is kept for the whole run, in a bounded :class:`LRU`; what
the *trained* model computes is kept only while its weights stay fixed (one rollout, one
evaluation: :func:`memoized`).

What is kept across updates is computed for its own text alone (a batch of one), so that its
numbers do not depend on which other texts happened to share its batch: a run resumed from a
checkpoint, whose caches start empty, computes exactly the numbers the uninterrupted run had kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from typing import TypeVar

Value = TypeVar("Value")


def decision_key(x) -> Hashable | None:
    """What identifies a decision's input for the caches and for grouping equal decisions: a prompt
    (or a tuple of plain values, such as a prompt and action ids); None for anything else (arrays
    of numbers), which is never grouped.

    >>> decision_key("You see a key."), decision_key(("a prompt", (3, 7))), decision_key([1, 2])
    ('You see a key.', ('a prompt', (3, 7)), None)
    """
    if isinstance(x, str):
        return x
    if isinstance(x, tuple) and all(isinstance(v, (str, int, tuple)) for v in x):
        return x
    return None


class LRU(MutableMapping):
    """A mapping of at most ``capacity`` entries; storing one more drops the least recently used.

    >>> cache = LRU(2); cache["a"] = 1; cache["b"] = 2; _ = cache["a"]; cache["c"] = 3
    >>> sorted(cache)
    ['a', 'c']
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: OrderedDict = OrderedDict()

    def __getitem__(self, key):
        value = self._entries[key]
        self._entries.move_to_end(key)
        return value

    def __setitem__(self, key, value) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __delitem__(self, key) -> None:
        del self._entries[key]

    def __iter__(self) -> Iterator:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def values(self):  # without touching the order (a lookup would move each entry to the end)
        return self._entries.values()

    def items(self):
        return self._entries.items()


def cached(cache: MutableMapping | None, keys: Sequence[Hashable],
           compute: Callable[[list], list[Value]]) -> list[Value]:
    """The value of each key: from ``cache`` where it is there, else from ``compute(missing keys)``
    (each distinct key once), which is then stored. Without a cache, ``compute(keys)`` as is.

    >>> calls = []
    >>> square = lambda keys: calls.append(keys) or [k * k for k in keys]
    >>> cache = {}
    >>> cached(cache, [3, 4, 3], square), cached(cache, [4, 5], square), calls
    ([9, 16, 9], [16, 25], [[3, 4], [5]])
    """
    if cache is None:
        return compute(list(keys))
    found = {}
    for key in keys:
        if key not in found and key in cache:
            found[key] = cache[key]
    missing = list(dict.fromkeys(k for k in keys if k not in found))
    if missing:
        for key, value in zip(missing, compute(missing)):
            found[key] = value
            cache[key] = value
    return [found[key] for key in keys]


class Memo:
    """What a model computed while its weights stay fixed (see :func:`memoized`); off by default."""

    def __init__(self):
        self.entries: dict | None = None

    @property
    def active(self) -> bool:
        return self.entries is not None


@contextmanager
def memoized(agent) -> Iterator[None]:
    """Within it, ``agent`` (when it has a :class:`Memo` named ``memo``) computes its outputs for
    a decision's input once and reuses them: the caller promises not to change the weights
    inside. Agents without one are unaffected.

    >>> class Agent: memo = Memo()
    >>> agent = Agent()
    >>> with memoized(agent): agent.memo.active
    True
    >>> agent.memo.active
    False
    """
    memo = getattr(agent, "memo", None)
    if not isinstance(memo, Memo) or memo.active:
        yield
        return
    memo.entries = {}
    try:
        yield
    finally:
        memo.entries = None
