"""Benchmark model loading: the first load of the default model (GGUF -> safetensors conversion)
and the later ones from the cache, in the same process and in a new one.

    python benchmarks/loading.py            # uses a fresh temporary cache, so the first load converts
    groundrl bench loading
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    rows = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GROUNDRL_CACHE"] = cache
        start = time.perf_counter()
        from groundrl.llm import load_llm

        rows.append(("import groundrl", time.perf_counter() - start))
        for label in ("first load (converts the GGUF file)", "second load, same process (cache)"):
            start = time.perf_counter()
            load_llm()
            rows.append((label, time.perf_counter() - start))
        code = "import time; t = time.perf_counter(); from groundrl.llm import load_llm; load_llm(); print(time.perf_counter() - t)"
        output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        rows.append(("new process: import + load (cache)", float(output.strip().splitlines()[-1])))

    table = Table(title="Loading SmolLM2-135M-Instruct (fp32, CPU)")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for label, seconds in rows:
        table.add_row(label, f"{seconds:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
