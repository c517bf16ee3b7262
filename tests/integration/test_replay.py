"""The episode replay page: built from evaluation and training trajectories, checked in a real
headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from groundrl.agents import RandomAgent
from groundrl.cli import main
from groundrl.errors import GroundrlError
from groundrl.eval import evaluate
from groundrl.eval.replay import _PAGE, Episode, episode_frames, load_episodes, replay_page, write_replay
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
    for text in ("{not json", "[1, 2]"):
        (folder / "env.json").write_text(text)
        with pytest.raises(GroundrlError, match=r"env.json is corrupt \(not a JSON object\): restore it, or delete it"):
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
