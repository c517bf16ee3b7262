"""See what an agent did: episodes from a ``trajectories.jsonl`` as a self-contained HTML page.

The page steps through an episode (buttons, a slider, the arrow keys): the prompt the agent read,
every valid action with its probability as a bar, the action taken, the reward, and, for
environments that draw themselves (BabyAI-Text, Overcooked), the frame. It opens offline from the
file system: data, frames and script are inside it. The frames also go into an animated GIF.

Frames are not stored with the trajectories: each step record carries the seed its episode was
reset with, and ``env.json`` beside the file names the environment, so an episode is played again
from that seed with the recorded actions, drawing each state (and checking that the observations
are the recorded ones).

    groundrl replay runs/20261201-eval-FollowInstruction/trajectories.jsonl --episode 3
    groundrl replay RUN                     # an evaluation or training run folder
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from groundrl.envs import make_env
from groundrl.envs.base import ResetNeededError
from groundrl.errors import GroundrlError
from groundrl.files import read_json
from groundrl.runs import check_output, finite_number, is_whole_number, iter_jsonl, write_whole

ENV_FILE = "env.json"
STEP_KEYS = ("episode", "step", "observation", "valid_actions", "probs", "action", "reward")  # of a recorded step


@dataclass
class Episode:
    """One recorded episode: its steps (observation, valid actions, probabilities, action, reward),
    and what is needed to play it again (environment, options, reset seed) when known."""

    name: str
    number: int
    steps: list[dict]
    env_id: str | None = None
    env_kwargs: dict = field(default_factory=dict)

    @property
    def seed(self) -> int | None:
        return self.steps[0].get("seed") if self.steps else None

    @property
    def total_reward(self) -> float:
        return float(sum(step["reward"] for step in self.steps))


def trajectory_files(path: str | Path) -> list[Path]:
    """The ``trajectories.jsonl`` a path names: the file, a run folder's, or those of a suite's tests."""
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / "trajectories.jsonl").is_file():
        return [path / "trajectories.jsonl"]
    found = sorted(path.glob("*/trajectories.jsonl")) if path.is_dir() else []
    if not found:
        raise GroundrlError(f"{path} holds no trajectories.jsonl: give one, or a run folder of `groundrl eval` or "
                            "`groundrl train`")
    return found


def load_episodes(path: str | Path) -> list[Episode]:
    """Every complete episode recorded under ``path`` (see :func:`trajectory_files`); to show one,
    :func:`load_episode` keeps less in memory.

    Raises:
        GroundrlError: nothing recorded, or a step or an ``env.json`` that groundrl did not write.
    """
    episodes = []
    for file in trajectory_files(path):
        about = _environment_of(file.parent / ENV_FILE)
        by_number: dict[int, list[dict]] = {}
        for step in _steps(file):
            by_number.setdefault(step["episode"], []).append(step)
        episodes += [_episode(file, about, number, steps) for number, steps in sorted(by_number.items())]
    if not episodes:
        raise GroundrlError(f"no episodes recorded under {path}")
    return episodes


def load_episode(path: str | Path, number: int | None = None) -> Episode:
    """The episode numbered ``number`` recorded under ``path`` (from the first file that holds it),
    or, without a number, the first recorded (``load_episodes(path)[0]``). The files are read a step
    at a time and only that episode's steps are kept: a recording of any size fits in memory.

    Raises:
        GroundrlError: no such episode (the numbers recorded are named), or what
            :func:`load_episodes` raises for.
    """
    others: set[int] = set()  # the numbers recorded, for the message when ``number`` is not
    for file in trajectory_files(path):
        about = _environment_of(file.parent / ENV_FILE)
        chosen, steps = number, []
        for step in _steps(file):
            if number is None and (chosen is None or step["episode"] < chosen):  # the first so far
                chosen, steps = step["episode"], []
            if step["episode"] == chosen:
                steps.append(step)
            elif number is not None:
                others.add(step["episode"])
        if steps:
            return _episode(file, about, chosen, steps)
    if number is None or not others:
        raise GroundrlError(f"no episodes recorded under {path}")
    numbers = sorted(others)
    shown = ", ".join(map(str, numbers[:10])) + (", ..." if len(numbers) > 10 else "")
    raise GroundrlError(f"no episode {number} under {path}; recorded: {shown}")


def _episode(file: Path, about: dict, number: int, steps: list[dict]) -> Episode:
    steps.sort(key=lambda s: s["step"])
    return Episode(name=file.parent.name, number=number, steps=steps, env_id=about.get("env_id"),
                   env_kwargs=about.get("env_kwargs", {}))


def _steps(file: Path) -> Iterator[dict]:
    """The steps of a ``trajectories.jsonl``, one at a time, each checked: a step that lacks a field,
    or holds one of the wrong type, is one line naming it."""
    fix = "give a trajectories.jsonl that `groundrl eval` or `groundrl train` wrote"
    for step in iter_jsonl(file):
        missing = [key for key in STEP_KEYS if key not in step]
        if missing:
            raise GroundrlError(f"{file} holds a step without {', '.join(missing)}: {fix}")
        wrong = _wrong_field(step)
        if wrong:
            numbered = is_whole_number(step["episode"]) and is_whole_number(step["step"])
            where = f" (episode {step['episode']}, step {step['step']})" if numbered else ""
            raise GroundrlError(f"{file} holds a step whose {wrong}{where}: {fix}")
        yield step


def _wrong_field(step: dict) -> str | None:
    """What is wrong with a recorded step's fields, for the page and for playing it again (none: ``None``)."""
    actions, probs, seed = step["valid_actions"], step["probs"], step.get("seed")
    if not (is_whole_number(step["episode"]) and is_whole_number(step["step"])):
        return "episode or step is not a whole number"
    if not isinstance(step["observation"], str):
        return "observation is not text"
    if not (isinstance(actions, list) and all(isinstance(action, str) for action in actions)):
        return "valid_actions is not a list of texts"
    if probs is not None and not (isinstance(probs, list) and len(probs) == len(actions)
                                  and all(not math.isnan(finite_number(p)) for p in probs)):
        return "probs is not a number per valid action"
    if not (is_whole_number(step["action"]) and 0 <= step["action"] < len(actions)):
        return "action is not the index of one of its valid_actions"
    if math.isnan(finite_number(step["reward"])):
        return "reward is not a number"
    if seed is not None and not (is_whole_number(seed) and seed >= 0):
        return "seed is not a whole number, 0 or more"
    return None


def _environment_of(file: Path) -> dict:
    """What ``env.json`` says of the environment (none: the page goes without frames)."""
    if not file.is_file():
        return {}
    fix = "restore it, or delete it to replay without frames"
    about = read_json(file, fix)
    if not isinstance(about, dict):
        raise GroundrlError(f"{file} is corrupt (not a JSON object): {fix}")
    if not isinstance(about.get("env_id", ""), str) or not isinstance(about.get("env_kwargs", {}), dict):
        raise GroundrlError(f"{file} is corrupt (its env_id is not text, or its env_kwargs not an object): {fix}")
    return about


def episode_frames(episode: Episode) -> list[np.ndarray] | None:
    """The pictures of the episode's states (one before each step, and the last), played again from
    its seed; ``None`` when the environment does not draw, or the episode cannot be played again."""
    if episode.env_id is None or episode.seed is None:
        return None
    try:
        with warnings.catch_warnings():  # gymnasium warns before the environment itself refuses
            warnings.simplefilter("ignore")
            env = make_env(episode.env_id, render_mode="rgb_array", **episode.env_kwargs)
    except (GroundrlError, TypeError):  # an environment without pictures
        return None
    try:
        observation, _ = env.reset(seed=episode.seed)
        frames = [env.render()]
        for step in episode.steps:
            if str(observation) != step["observation"]:
                return None  # another version of the environment: the pictures would lie
            observation, *_ = env.step(step["action"])
            frames.append(env.render())
    except ResetNeededError:  # the recording goes on after the episode ended: not this environment's
        return None
    finally:
        env.close()
    return [np.asarray(frame, dtype=np.uint8) for frame in frames]


def write_gif(frames: list[np.ndarray], path: str | Path, seconds_per_frame: float = 0.5) -> Path:
    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(path, format="GIF", save_all=True, append_images=images[1:],
                   duration=int(seconds_per_frame * 1000), loop=0)
    return Path(path)


def replay_page(episode: Episode, frames: list[np.ndarray] | None = None) -> str:
    """The HTML page of one episode (self-contained)."""
    data = {
        "title": f"{episode.env_id or episode.name}: episode {episode.number}",
        "seed": episode.seed,
        "steps": [{"observation": s["observation"], "actions": s["valid_actions"], "probs": s["probs"],
                   "action": s["action"], "reward": s["reward"]} for s in episode.steps],
        "frames": [_png_data_uri(frame) for frame in frames] if frames else [],
    }
    values = {"TITLE": html.escape(data["title"]), "DATA": _script_json(data)}
    # one pass: a title that reads "__DATA__" stays a title
    return re.sub(r"__(TITLE|DATA)__", lambda match: values[match.group(1)], _PAGE)


# Inside a <script> element the HTML parser ends the element at "</script", and after "<!--" a
# "<script" sends it looking for a second "</script>": an observation could end the data early or
# swallow the page's code. JSON with no "<" can do neither; ">" and "&" go too, so no text of an
# episode is ever markup, and U+2028/U+2029, which older JavaScript refuses in a string. Each
# character only occurs inside JSON strings, where its \u escape reads back the same.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                              "\u2029": "\\u2029"})


def _script_json(value) -> str:
    """``value`` as JSON that can sit inside an HTML ``<script>`` element whatever its strings hold."""
    return json.dumps(value).translate(_SCRIPT_SAFE)


def write_replay(path: str | Path, out: str | Path | None = None, episode: int | None = None,
                 gif: bool = True) -> dict[str, Path]:
    """Write the replay page (and, with frames, a GIF beside it: ``out`` with the suffix ``.gif``)
    of an episode recorded under ``path``: the episode numbered ``episode``, or the first. Only
    that episode is kept in memory (:func:`load_episode`). ``out`` (default:
    ``replay-episode-K.html`` beside the trajectories) is the file written; one that cannot be
    (a folder, a link to nothing, a place under a file, read-only) is one line before the episode
    is played again, and each file is written beside and renamed whole, so no part of one is left.
    Returns the files written: ``{"html": ..., "gif": ...}``."""
    chosen = load_episode(path, episode)
    name = f"replay-episode-{chosen.number}"
    page = check_output(Path(out) if out else trajectory_files(path)[0].parent / f"{name}.html", "HTML",
                        f"{name}.html")
    if gif and page.suffix == ".gif":
        raise GroundrlError(f"{page} would be both the page and its GIF: give an .html file")
    frames = episode_frames(chosen)
    animation = check_output(page.with_suffix(".gif"), "GIF", f"{name}.gif") if gif and frames else None
    text = replay_page(chosen, frames)  # written in UTF-8, as its <meta charset> says
    written = {"html": write_whole(page, lambda temporary: temporary.write_text(text, encoding="utf-8"))}
    if animation is not None:
        written["gif"] = write_whole(animation, lambda temporary: write_gif(frames, temporary))
    return written


def _png_data_uri(frame: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 70em; }
 header { display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
 button { font-size: 1em; padding: 0.2em 0.8em; }
 #main { display: flex; gap: 1.5em; margin-top: 1em; align-items: flex-start; }
 #frame { image-rendering: pixelated; max-width: 24em; border: 1px solid #ccc; }
 pre { white-space: pre-wrap; background: #f6f6f6; padding: 0.8em; max-height: 22em; overflow: auto; }
 table { border-collapse: collapse; width: 100%; }
 td { padding: 0.15em 0.4em; vertical-align: middle; }
 td.bar { width: 40%; } .bar div { background: #4a78c2; height: 0.9em; }
 tr.chosen { font-weight: bold; background: #fff3c4; } tr.chosen .bar div { background: #d08a00; }
</style></head>
<body>
<h2 id="title"></h2>
<header>
 <button id="first">|&lt;</button><button id="prev">&lt; prev</button>
 <input id="slider" type="range" min="0" value="0">
 <button id="next">next &gt;</button><button id="last">&gt;|</button>
 <span id="position"></span> <span id="reward"></span> <span id="total"></span>
</header>
<div id="main">
 <img id="frame" alt="the state before the action">
 <div style="flex: 1">
  <h3>Prompt</h3><pre id="observation"></pre>
  <h3>Valid actions</h3><table id="actions"></table>
 </div>
</div>
<script id="data" type="application/json">__DATA__</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const steps = data.steps;
let current = 0;
const $ = (id) => document.getElementById(id);
$("title").textContent = data.title + (data.seed === null ? "" : " (seed " + data.seed + ")");
$("slider").max = steps.length - 1;
if (!data.frames.length) { $("frame").style.display = "none"; }
const total = steps.reduce((sum, s) => sum + s.reward, 0);
$("total").textContent = "episode return " + total.toFixed(3);
function show(index) {
  current = Math.max(0, Math.min(steps.length - 1, index));
  const step = steps[current];
  $("slider").value = current;
  $("position").textContent = "step " + (current + 1) + " / " + steps.length;
  $("reward").textContent = "reward " + Number(step.reward.toPrecision(3));
  $("observation").textContent = step.observation;
  if (data.frames.length) { $("frame").src = data.frames[current]; }
  const table = $("actions");
  table.replaceChildren();
  step.actions.forEach((action, i) => {
    const row = table.insertRow();
    row.className = i === step.action ? "chosen" : "";
    row.dataset.action = action;
    row.dataset.prob = step.probs[i];
    row.insertCell().textContent = (i === step.action ? "\\u25B6 " : "") + action;
    const bar = row.insertCell(); bar.className = "bar";
    const fill = document.createElement("div"); fill.style.width = (100 * step.probs[i]).toFixed(1) + "%";
    bar.appendChild(fill);
    row.insertCell().textContent = step.probs[i].toFixed(3);
  });
}
$("first").onclick = () => show(0);
$("prev").onclick = () => show(current - 1);
$("next").onclick = () => show(current + 1);
$("last").onclick = () => show(steps.length - 1);
$("slider").oninput = (event) => show(Number(event.target.value));
document.addEventListener("keydown", (event) => {
  if (event.key === "ArrowRight") show(current + 1);
  if (event.key === "ArrowLeft") show(current - 1);
});
show(0);
</script>
</body></html>
"""


__all__ = ["Episode", "episode_frames", "load_episode", "load_episodes", "replay_page", "trajectory_files",
           "write_gif", "write_replay"]
