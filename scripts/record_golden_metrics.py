"""Record ``tests/data/golden_metrics.json``: the figures ``tests/learning/test_golden.py`` compares
today's trainer against, made by running that test's own settings (its ``RUNS``: a short seeded run of
every preset on a tiny model, fp32, CPU; its ``EVALUATIONS``: sampled evaluations' episodes).

The kept file was recorded from commit d786871, before the restructure of issue 18, and has held
since. Record it again only when a change of what training computes is intended, and say so in the
commit: the test exists to catch the changes that are not.

    python scripts/record_golden_metrics.py             # writes tests/data/golden_metrics.json
    python scripts/record_golden_metrics.py --out F     # writes F instead (to compare)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_TEST = ROOT / "tests" / "learning" / "test_golden.py"


def golden_test():
    """tests/learning/test_golden.py as a module: its run list and how it plays them."""
    spec = importlib.util.spec_from_file_location("test_golden", GOLDEN_TEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "golden_metrics.json")
    args = parser.parse_args(argv)
    test = golden_test()
    golden = {}
    with tempfile.TemporaryDirectory() as scratch:
        for preset in test.RUNS:
            history = test.train(preset, Path(scratch) / preset)
            golden[preset] = [{k: v for k, v in m.items() if k not in test.TIMING} for m in history]
            print(preset, json.dumps(golden[preset][-1]), file=sys.stderr)
        golden["evaluation"] = {name: test.evaluation_episodes(name, Path(scratch) / name) for name in test.EVALUATIONS}
    args.out.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
