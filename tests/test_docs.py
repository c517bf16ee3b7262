"""The README's programs run as written: "How it fits together" (an environment, an agent and an
algorithm of one's own)."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_how_it_fits_together_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", section("How it fits together"), flags=re.S)
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "1.0" and 0.0 < float(printed[1]) < 0.8
    assert len(eval(printed[2])) == 2  # noqa: S307 - two updates' policy losses
    assert (tmp_path / "runs" / "reinforce-next-number" / "metrics.jsonl").is_file()
