"""The episode replay page: built from evaluation and training trajectories, checked in a real
headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import html
import json
import shutil
import tracemalloc
from pathlib import Path

import pytest
from PIL import Image

from groundrl.agents import RandomAgent
from groundrl.cli import main
from groundrl.errors import GroundrlError
from groundrl.eval import evaluate
from groundrl.eval.replay import _PAGE, Episode, episode_frames, load_episode, load_episodes, replay_page, write_replay
from groundrl.runs import episode_markdown
from groundrl.train.trainer import Trainer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def evaluated(tmp_path: Path, env_id: str, episodes: int = 3) -> Path:
    folder = tmp_path / env_id.split("/")[-1]
    evaluate(RandomAgent(), env_id, episodes=episodes, num_envs=2, seed=500, run_dir=folder, progress=False)
    return folder


def test_an_evaluated_episode_plays_again_with_its_frames(tmp_path):
    folder = evaluated(tmp_path, "groundrl/BabyAI-GoToLocal-v0")
    episodes = load_episodes(folder / "trajectories.jsonl")
    assert sorted(e.number for e in episodes) == [0, 1, 2]
    episode = next(e for e in episodes if e.number == 1)
    assert episode.seed == 501 and episode.env_id == "groundrl/BabyAI-GoToLocal-v0"
    frames = episode_frames(episode)
    assert len(frames) == len(episode.steps) + 1 and frames[0].ndim == 3

    written = write_replay(folder, episode=1)
    with Image.open(written["gif"]) as gif:  # identical frames in a row are merged, their times added
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
    assert sum(durations) == 500 * len(frames)
    page = written["html"].read_text()
    assert page.count("data:image/png;base64,") == len(frames) and "</script>" in page

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder / "tensorboard"), size_guidance={"tensors": 0}).Reload()
    assert {f"eval/episode_{k}/text_summary" for k in range(3)} <= set(events.Tags()["tensors"])

    # an observation that is not what the environment shows: no pictures rather than wrong ones
    episode.steps[0]["observation"] = "something else"
    assert episode_frames(episode) is None


def test_environments_without_pictures_get_the_page_alone(tmp_path):
    folder = evaluated(tmp_path, "groundrl/FoodPreparation-v0", episodes=1)
    written = write_replay(folder)
    assert set(written) == {"html"} and "data:image/png" not in written["html"].read_text()


def test_a_training_run_records_sample_episodes_that_replay(tmp_path, tiny_config):
    config = tiny_config("env=groundrl/BabyAI-GoToLocal-v0", "rollout.num_steps=32", "rollout.total_decisions=256",
                         "ppo.minibatch_size=8", "ppo.value_minibatch_size=8", "trajectories_every=2",
                         "checkpoint_every=100")
    Trainer(config, tmp_path).train()
    episodes = load_episodes(tmp_path)
    assert episodes and [e.number for e in episodes] == list(range(len(episodes)))
    assert all(abs(sum(s["probs"]) - 1) < 1e-4 for e in episodes for s in e.steps)
    frames = episode_frames(episodes[0])  # the training episode is played again from its seed
    assert frames is not None and len(frames) == len(episodes[0].steps) + 1
    assert write_replay(tmp_path)["gif"].is_file()

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0}).Reload()
    assert "train/episode_0/text_summary" in events.Tags()["tensors"]
    assert "**" in episode_markdown(episodes[0].steps)  # the chosen action stands out


def test_bad_paths_and_episodes_are_one_line(tmp_path, capsys):
    with pytest.raises(GroundrlError, match="holds no trajectories.jsonl"):
        load_episodes(tmp_path)
    folder = evaluated(tmp_path, "groundrl/FollowInstruction-v0", episodes=2)
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(folder), "--episode", "7"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: no episode 7 under {folder}; recorded: 0, 1"


def test_corrupt_recordings_are_one_line(tmp_path, capsys):
    folder = evaluated(tmp_path, "groundrl/FollowInstruction-v0", episodes=1)
    for text, what in (("{not json", r"is not valid JSON at line 1"), ("[1, 2]", r"is corrupt \(not a JSON object\)")):
        (folder / "env.json").write_text(text)
        with pytest.raises(GroundrlError, match=rf"env.json {what}: restore it, or delete it"):
            load_episodes(folder)
    (folder / "env.json").unlink()
    assert load_episodes(folder)[0].env_id is None  # no environment known: a page without frames
    (folder / "trajectories.jsonl").write_text('{"episode": 0, "step": 0, "observation": "hi"}\n')
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(folder)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (f"error: {folder / 'trajectories.jsonl'} holds a step without valid_actions, "
                                       "probs, action, reward: give a trajectories.jsonl that `groundrl eval` or "
                                       "`groundrl train` wrote\n")


# Text that would change a page whose data sat raw in its <script>: "</script>" ends the element,
# "<!--<script>" makes the parser look for a second "</script>" and swallow the page's own code.
HOSTILE = "a <!--<script> b </script> c <!-- d --> e & f \u2028 g \u2029 h __DATA__ </SCRIPT "


def hostile_episode() -> Episode:
    steps = [{"step": k, "observation": f"step {k}: {HOSTILE}", "valid_actions": [f"go {HOSTILE}", "<!--", "-->"],
              "probs": [0.5, 0.25, 0.25], "action": k % 3, "reward": 0.5 * k} for k in range(2)]
    return Episode(name=f"run {HOSTILE}", number=4, steps=steps)


def embedded_data(page: str) -> str:
    """The text of the page's data element, up to the first "</script>" after it (where a browser ends it)."""
    opening = '<script id="data" type="application/json">'
    start = page.index(opening) + len(opening)
    return page[start:page.index("</script>", start)]


def test_no_observation_or_action_changes_the_page_structure():
    episode = hostile_episode()
    page = replay_page(episode)
    # the script elements are the template's two, and nothing in the data can open or close markup
    assert page.lower().count("<script") == _PAGE.lower().count("<script") == 2
    assert not set("<>&\u2028\u2029") & set(embedded_data(page))
    assert page.count("</script>") == 2 and page.endswith("</script>\n</body></html>\n")
    data = json.loads(embedded_data(page))  # and the data reads back as it was
    assert data["title"] == f"run {HOSTILE}: episode 4"
    assert data["steps"] == [{"observation": s["observation"], "actions": s["valid_actions"], "probs": s["probs"],
                              "action": s["action"], "reward": s["reward"]} for s in episode.steps]
    assert f"<title>{html.escape(data['title'])}</title>" in page


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (scripts/quickstart.sh test installs Debian's chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        yield chromium
        chromium.close()


def test_the_page_in_a_real_browser(browser, tmp_path):
    folder = evaluated(tmp_path, "groundrl/BabyAI-GoToLocal-v0", episodes=1)
    page_file = write_replay(folder)["html"]
    steps = [json.loads(line) for line in (folder / "trajectories.jsonl").read_text().splitlines()]

    page = browser.new_page()
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())
    assert page.text_content("#position") == f"step 1 / {len(steps)}"

    def shown() -> list[tuple[str, float, bool]]:
        return [(row.get_attribute("data-action"), float(row.get_attribute("data-prob")),
                 row.get_attribute("class") == "chosen") for row in page.query_selector_all("#actions tr")]

    for index in (0, 1, 2):
        step = steps[index]
        assert shown() == [(a, pytest.approx(p), i == step["action"]) for i, (a, p) in
                           enumerate(zip(step["valid_actions"], step["probs"]))]
        assert page.text_content("#observation") == step["observation"]
        assert page.get_attribute("#frame", "src").startswith("data:image/png;base64,")
        page.click("#next")
        assert page.text_content("#position") == f"step {index + 2} / {len(steps)}"
    page.keyboard.press("ArrowLeft")
    assert page.text_content("#position") == f"step 3 / {len(steps)}"
    page.click("#last")
    assert page.text_content("#position") == f"step {len(steps)} / {len(steps)}"
    assert errors == []


def test_hostile_text_shows_literally_in_a_real_browser(browser, tmp_path):
    episode = hostile_episode()
    page_file = tmp_path / "replay.html"
    page_file.write_text(replay_page(episode), encoding="utf-8")
    page = browser.new_page()
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())
    assert page.eval_on_selector_all("script", "elements => elements.length") == 2
    for step in episode.steps:
        assert page.text_content("#observation") == step["observation"]
        assert [row.get_attribute("data-action") for row in page.query_selector_all("#actions tr")] == \
            step["valid_actions"]
        page.click("#next")
    assert page.text_content("#title") == f"run {HOSTILE}: episode 4"
    assert errors == []


# -- recordings as the user's input: read a step at a time, checked, written whole -------------

def recorded(folder: Path, numbers=(0, 1, 2), steps: int = 3, padding: str = "") -> Path:
    """A trajectories.jsonl as `groundrl eval` writes it (no env.json: a page without frames), the
    steps of ``numbers`` in that order."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "trajectories.jsonl", "w") as file:
        for number in numbers:
            for k in range(steps):
                file.write(json.dumps({"episode": number, "step": k,
                                       "observation": f"episode {number} step {k}{padding}",
                                       "valid_actions": ["left", "right"], "probs": [0.25, 0.75], "action": 1,
                                       "reward": 0.5, "seed": number}) + "\n")
    return folder


def test_one_episode_is_kept_of_a_recording_read_a_step_at_a_time(tmp_path, capsys):
    folder = recorded(tmp_path / "run", numbers=(5, 3, 7))
    assert load_episode(folder).number == load_episodes(folder)[0].number == 3  # the first: the lowest number
    episode = load_episode(folder, 7)
    assert [s["observation"] for s in episode.steps] == [f"episode 7 step {k}" for k in range(3)]
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(folder), "--episode", "4"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"error: no episode 4 under {folder}; recorded: 3, 5, 7\n"

    # 17 MB of 1500 episodes: the page of one keeps that one (reading all took 50 MB here)
    big = recorded(tmp_path / "big", numbers=range(1500), steps=10, padding=" you see a wall." * 60)
    assert (big / "trajectories.jsonl").stat().st_size > 15 * 2**20
    tracemalloc.start()
    try:
        written = write_replay(big, episode=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "episode 1000 step 9" in written["html"].read_text() and peak < 4 * 2**20


@pytest.mark.parametrize("case", ["folder", "under a file", "dangling link", "read-only file", "read-only folder",
                                  "a .gif"])
def test_an_out_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path, capsys, case, unwritable):
    folder = recorded(tmp_path / "run")
    place = tmp_path / "place"
    place.mkdir()
    if case == "folder":
        (place / "pages").mkdir()
        out, message = place / "pages", (f"{place / 'pages'} is a folder: give the HTML file to write, e.g. "
                                         f"{place / 'pages' / 'replay-episode-0.html'}")
    elif case == "a .gif":
        out, message = place / "replay.gif", "would be both the page and its GIF"
    else:
        out, message = unwritable(place, case, "x.html")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(folder), "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert sorted(tmp_path.rglob("*")) == before


def test_a_page_is_written_whole_through_a_link_and_leaves_no_temporary(tmp_path, monkeypatch):
    folder = recorded(tmp_path / "run")
    (tmp_path / "page.html").write_text("old page")
    (tmp_path / "link.html").symlink_to(tmp_path / "page.html")
    assert write_replay(folder, tmp_path / "link.html") == {"html": tmp_path / "page.html"}
    assert (tmp_path / "link.html").is_symlink() and "episode 0 step 2" in (tmp_path / "page.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "page.html", "run"]

    def interrupted(self, text, **options):  # the page half written when the process is stopped
        Path(self).write_bytes(text.encode()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_replay(folder, tmp_path / "page.html")
    monkeypatch.undo()
    assert "episode 0 step 2" in (tmp_path / "page.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "page.html", "run"]


@pytest.mark.parametrize("field, value, message", [
    ("valid_actions", 5, "valid_actions is not a list of texts"),
    ("valid_actions", ["left", 2], "valid_actions is not a list of texts"),
    ("probs", "high", "probs is not a number per valid action"),
    ("probs", [1.0], "probs is not a number per valid action"),
    ("probs", [0.5, float("nan")], "probs is not a number per valid action"),
    ("action", 2, "action is not the index of one of its valid_actions"),
    ("action", -1, "action is not the index of one of its valid_actions"),
    ("action", "1", "action is not the index of one of its valid_actions"),
    ("reward", "1", "reward is not a number"),
    ("reward", 10**400, "reward is not a number"),
    ("observation", ["hi"], "observation is not text"),
    ("episode", "0", "episode or step is not a whole number"),
    ("step", 1.5, "episode or step is not a whole number"),
    ("seed", -3, "seed is not a whole number, 0 or more"),
], ids=lambda value: repr(value)[:20])
def test_a_step_with_a_field_of_the_wrong_type_is_one_line(tmp_path, capsys, field, value, message):
    folder = recorded(tmp_path / "run")
    lines = (folder / "trajectories.jsonl").read_text().splitlines()
    step = json.loads(lines[1])
    step[field] = value
    lines[1] = json.dumps(step)
    (folder / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(folder)])
    assert exit_info.value.code == 2
    where = "" if field in ("episode", "step") else " (episode 0, step 1)"
    assert capsys.readouterr().err == (f"error: {folder / 'trajectories.jsonl'} holds a step whose {message}{where}: "
                                       "give a trajectories.jsonl that `groundrl eval` or `groundrl train` wrote\n")
    assert not list(folder.glob("replay*"))


def test_a_step_nested_too_deep_is_a_damaged_line(tmp_path):
    folder = recorded(tmp_path / "run", numbers=(0,))
    with open(folder / "trajectories.jsonl", "a") as file:
        file.write('{"episode": 1, "observation": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.warns(UserWarning, match=r"skipped 1 damaged line\(s\) \(line 4\)"):
        assert [e.number for e in load_episodes(folder)] == [0]


@pytest.mark.parametrize("about", ['{"env_id": "groundrl/BabyAI-GoToLocal-v0", "env_kwargs": [1]}',
                                   '{"env_id": "groundrl/BabyAI-GoToLocal-v0", "env_kwargs": "window=3"}',
                                   '{"env_id": 5, "env_kwargs": {}}', "[" * 100_000])
def test_an_env_json_of_the_wrong_shape_is_one_line(tmp_path, capsys, about):
    folder = recorded(tmp_path / "run")
    (folder / "env.json").write_text(about)
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(folder)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    file = folder / "env.json"
    assert err.startswith((f"error: {file} is corrupt (", f"error: {file} nests deeper")) and err.count("\n") == 1
