"""benchmarks/benchkit: which evaluation of a campaign stands for which."""

import json
from pathlib import Path

from benchkit import campaign, records


def fake_eval(folder: Path, name: str, episodes: int | None, results: bool = True, agent: str = "") -> Path:
    run = folder / f"{name}-eval-BabyAI-GoToLocal-v0"
    run.mkdir(parents=True)
    about = f"about:\n  agent: {agent}\n" if agent else ""
    (run / "config.yaml").write_text(f"suite: null\nepisodes: {episodes}\n{about}")
    if results:
        (run / "results.json").write_text(json.dumps([{"test": "GoToLocal", "episodes": episodes,
                                                       "success_rate": 0.5}]))
    return run


def test_an_evaluation_stands_for_one_of_as_many_episodes_or_fewer(tmp_path, monkeypatch):
    """A table of 1,000 evaluation episodes is not made from a run that played 100: those are played
    beside it, and the tables read the larger."""
    folder = tmp_path / "eval"
    fake_eval(folder, "20260101-000000", 100)
    calls = []

    def groundrl(*arguments):
        calls.append(arguments)
        if "--resume" not in arguments:
            fake_eval(folder, "20260102-000000", int(arguments[arguments.index("--episodes") + 1]))
        return True

    monkeypatch.setattr(campaign, "groundrl", groundrl)
    assert campaign.evaluate("RUN", folder, "--episodes", "50")[0]["episodes"] == 100 and calls == []
    assert campaign.evaluate("RUN", folder, "--episodes", "1000")[0]["episodes"] == 1000
    assert calls == [("eval", "RUN", "--episodes", "1000", "--runs-dir", str(folder))]
    assert records.suite_rows(folder)["GoToLocal"]["episodes"] == 1000
    assert campaign.evaluate("RUN", folder, "--episodes", "100")[0]["episodes"] == 1000 and len(calls) == 1
    # an unfinished evaluation of the count asked for continues where it stopped
    unfinished = fake_eval(folder, "20251231-000000", 2000, results=False)  # the oldest: stopped last session
    assert campaign.evaluate("RUN", folder, "--episodes", "2000") is None  # (this fake resumes nothing)
    assert calls[-1] == ("eval", "--resume", str(unfinished))
    assert records.suite_rows(folder)["GoToLocal"]["episodes"] == 1000


def test_an_evaluation_stands_only_for_the_checkpoint_it_played(tmp_path, monkeypatch):
    """A run stopped early is evaluated at its last checkpoint (--partial); trained on to its budget,
    it is evaluated again, and the tables read the later evaluation, whatever the episodes."""
    run, folder = tmp_path / "train" / "20260101-000000-train-X", tmp_path / "eval"
    (run / "checkpoints" / "update-000125").mkdir(parents=True)
    for checkpoint in (run / "checkpoints").iterdir():
        (checkpoint / "meta.json").write_text("{}")
    fake_eval(folder, "20260101-000000", 1000, agent=str(run / "checkpoints" / "update-000125"))
    calls = []

    def groundrl(*arguments):
        calls.append(arguments)
        fake_eval(folder, "20260102-000000", 100, agent=str(run / "checkpoints" / "update-000195"))
        return True

    monkeypatch.setattr(campaign, "groundrl", groundrl)
    assert campaign.evaluate(run, folder, "--episodes", "100")[0]["episodes"] == 1000 and calls == []
    (run / "checkpoints" / "update-000195").mkdir()
    (run / "checkpoints" / "update-000195" / "meta.json").write_text("{}")
    assert records.latest_update(run) == 195
    assert campaign.evaluate(run, folder, "--episodes", "100")[0]["episodes"] == 100 and len(calls) == 1
    assert records.suite_rows(folder)["GoToLocal"]["episodes"] == 100  # the later checkpoint's, not the most episodes
    assert [records.evaluated_update(done) for done in records.run_folders(folder, "eval")] == [125, 195]
    assert records.evaluated_update(fake_eval(folder, "20260103-000000", 100, agent="exported/agent")) == -1
