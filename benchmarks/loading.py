"""Seconds to load the default model: the first load (GGUF conversion), then from the cache.

The first load of the default model (GGUF -> safetensors conversion) and the later ones from the
cache, in the same process and in a new one.

    python benchmarks/loading.py            # uses a fresh temporary cache, so the first load converts
    groundrl bench loading
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

GROUP = "speed"


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    rows = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GROUNDRL_CACHE"] = cache
        from groundrl.llm import load_llm

        for label in ("first load (converts the GGUF file)", "second load, same process (cache)"):
            start = time.perf_counter()
            load_llm()
            rows.append((label, time.perf_counter() - start))
        code = (
            "import time; t0 = time.perf_counter(); from groundrl.llm import load_llm; t1 = time.perf_counter(); "
            "load_llm(); t2 = time.perf_counter(); print(t1 - t0, t2 - t1)"
        )
        output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        import_seconds, load_seconds = map(float, output.strip().splitlines()[-1].split())
        rows.append(("new process: import groundrl", import_seconds))
        rows.append(("new process: load (cache)", load_seconds))

    table = Table(title="Loading SmolLM2-135M-Instruct (fp32, CPU)")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for label, seconds in rows:
        table.add_row(label, f"{seconds:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
