"""The documentation: the site builds with ``mkdocs build --strict`` (a broken link, anchor or API
reference fails), and its programs run as written ("How it fits together": an environment, an
agent and an algorithm of one's own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_documentation_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ,
                                                                        "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    catalog = (site / "catalog" / "index.html").read_text()
    assert "groundrl/FoodPreparation-v0" in catalog and "walk to the pancake" in catalog  # made from the envs
    api = (site / "api" / "train" / "index.html").read_text()
    assert "groundrl.train.export.export" in api and "load_weights" in api  # from the docstrings
    assert "How it fits together" in (site / "extending" / "index.html").read_text()


def test_every_page_is_in_the_navigation():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text().split("hooks:")[0])["nav"]

    def pages(items):
        for item in items:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(nav))
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert listed == written


def test_the_readme_links_to_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links


def test_how_it_fits_together_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), flags=re.S)
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/extending.md", "exec"), namespace)  # noqa: S102 - our own docs
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "1.0" and 0.0 < float(printed[1]) < 0.8
    assert len(eval(printed[2])) == 2  # noqa: S307 - two updates' policy losses
    assert (tmp_path / "runs" / "reinforce-next-number" / "metrics.jsonl").is_file()
