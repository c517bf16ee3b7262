"""The ``groundrl`` command (and ``python -m groundrl``): the command line of :mod:`groundrl.cli`,
imported behind a guard, so that a Ctrl-C during its seconds of imports (torch, transformers) is
one line too."""

import sys


def main() -> None:
    try:
        from groundrl.cli import main as command_line  # start-up time: the guard must be up before torch loads
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    command_line()


if __name__ == "__main__":
    main()
