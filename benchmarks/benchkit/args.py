"""Argument checks the scripts share: each refuses a bad value with its parser's one-line usage error."""

from __future__ import annotations

import argparse


def listed(parser: argparse.ArgumentParser, flag: str, given: str, known) -> list[str]:
    """The comma-separated names of ``given``, at least one, each one of ``known`` (else the parser's error)."""
    names = [name.strip() for name in given.split(",") if name.strip()]
    if not names:
        parser.error(f"{flag}: name at least one, of: {', '.join(known)}")
    for name in names:
        if name not in known:
            parser.error(f"{flag}: no {name!r}; choose from {', '.join(known)}")
    return names


def at_least_one(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Refuse a count (``args.NAME``: episodes, repeats, prompts) below 1: a rate per episode or a
    median of repeats needs one, and a table of nothing says nothing."""
    for name in names:
        value = getattr(args, name)
        if value < 1:
            parser.error(f"--{name.replace('_', '-')} must be 1 or more, not {value}")


def add_deadline(parser: argparse.ArgumentParser, piece: str = "a seed's training and evaluations") -> None:
    """``--hours H``, the campaigns' deadline (:class:`benchkit.pace.Deadline`); checked by :func:`deadline`."""
    parser.add_argument("--hours", type=float, default=None,
                        help=f"a deadline this many hours from now: a piece ({piece}) whose estimate on this CPU "
                             "ends after it is refused, with the command that runs it")


def deadline(parser: argparse.ArgumentParser, hours: float | None) -> float | None:
    """``--hours`` as given, refused unless a positive number of hours (or not given)."""
    if hours is not None and not hours > 0:
        parser.error(f"--hours must be a positive number of hours, not {hours:g}")
    return hours
