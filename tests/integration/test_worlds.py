"""The adapters of TextWorldExpress, TextWorld and ScienceWorld (their contract over every id is in
tests/unit/test_envs.py): seeds and splits, success and rewards, the valid-action filter, bad options,
and one line for a missing extra."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from groundrl.envs import make_env
from groundrl.envs.external import ExternalTextEnv, MissingExtraError, ReplayMismatchWarning, require
from groundrl.errors import GroundrlError, InvalidArgumentError


def play(env, actions):
    """Step ``actions`` in order; the sum of rewards and the last step."""
    total, last = 0.0, None
    for action in actions:
        last = env.step(action)
        total += last[1]
    return total, last


@pytest.mark.parametrize("env_id, options", [
    ("groundrl/TWX-CoinCollector-v0", {"params": {"numLocations": 3}}),
    ("groundrl/TWX-MapReader-v0", {}),
    ("groundrl/TextWorld-Simple-v0", {}),
])
def test_the_gold_path_wins_with_a_return_of_1(env_id, options):
    env = make_env(env_id, **options)
    env.reset(seed=4)
    total, (_, _, terminated, truncated, info) = play(env, env.unwrapped.gold_actions)
    assert terminated and not truncated and info["success"] and info["score"] == pytest.approx(1.0)
    assert total == pytest.approx(1.0)


def test_twx_seeds_and_splits_choose_the_package_games():
    first, again = make_env("groundrl/TWX-CoinCollector-v0"), make_env("groundrl/TWX-CoinCollector-v0")
    assert first.reset(seed=7) == again.reset(seed=7)
    assert first.reset(seed=7 + 1000)[0] == again.reset(seed=7)[0]  # the split's 1,000 games, cyclically
    observations = {first.reset(seed=s)[0] for s in range(6)}
    assert len(observations) > 1
    test = make_env("groundrl/TWX-CoinCollector-v0", split="test")
    assert {test.reset(seed=s)[0] for s in range(6)} != observations


def test_twx_truncates_at_max_steps_and_keeps_the_task_in_every_prompt():
    env = make_env("groundrl/TWX-CoinCollector-v0", max_steps=3)
    obs, info = env.reset(seed=1)
    task = obs.splitlines()[0]
    assert task.startswith("Your task is to")
    for step in range(3):
        obs, _, terminated, truncated, info = env.step("look around")
        assert obs.splitlines()[0] == task and "> look around" in obs
        assert truncated == (step == 2) and not terminated


def test_scienceworld_filters_and_caps_the_valid_actions():
    env = make_env("groundrl/ScienceWorld-boil-v0", max_actions=40)
    obs, info = env.reset(seed=0)
    assert obs.startswith("Your task is to boil")
    _, _, _, _, info = env.step("teleport to kitchen")  # a crowded room: hundreds of valid actions
    actions = info["valid_actions"]
    assert len(actions) == 40 < info["valid_actions_total"]
    assert not any("agent" in a.split() or a == "reset task" for a in actions)
    assert not any(a.startswith(("move ", "pour ", "dunk ")) for a in actions)  # two objects: after the others
    everything = make_env("groundrl/ScienceWorld-boil-v0", max_actions=None)
    everything.reset(seed=0)
    all_actions = everything.step("teleport to kitchen")[4]["valid_actions"]
    assert len(all_actions) == info["valid_actions_total"] and set(actions) < set(all_actions)
    assert any(a.startswith("move ") for a in all_actions)


def test_scienceworld_rewards_are_score_changes_in_units_of_1():
    env = make_env("groundrl/ScienceWorld-find-animal-v0", max_actions=None)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("go to kitchen")  # the task's first milestone
    assert reward > 0 and info["score"] == pytest.approx(reward + 0.08) and not info["success"]


@pytest.mark.parametrize("env_id, options, message", [
    ("groundrl/TWX-CoinCollector-v0", {"params": {"numLocationz": 3}}, "Unrecognized property name (numLocationz)"),
    ("groundrl/TWX-CoinCollector-v0", {"params": {"numLocations": 99}}, "less than or equal to 11"),
    ("groundrl/TWX-CoinCollector-v0", {"split": "valid"}, "split must be one of train, dev, test"),
    ("groundrl/TWX-CoinCollector-v0", {"max_steps": 0}, "max_steps must be a positive integer"),
    ("groundrl/ScienceWorld-boil-v0", {"simplifications": "easy,fast"}, "'fast' is not one of easy"),
    ("groundrl/ScienceWorld-boil-v0", {"max_actions": 0}, "max_actions must be a positive integer or None"),
    ("groundrl/ScienceWorld-boil-v0", {"split": "other"}, "split must be one of train, dev, test"),
    ("groundrl/TextWorld-Simple-v0", {"rewards": "many"}, "rewards must be one of dense, balanced, sparse"),
    ("groundrl/TextWorld-Simple-v0", {"goal": "vague"}, "goal must be one of detailed, brief, none"),
])
def test_bad_options_get_one_line(env_id, options, message):
    with pytest.raises(InvalidArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        make_env(env_id, **options)
    assert "\n" not in str(error.value)


def test_a_missing_package_or_java_is_one_line_naming_the_extra(monkeypatch):
    with pytest.raises(MissingExtraError, match=r"^this environment needs the package textworld-express: "
                                                r"pip install 'groundrl\[textworld\]'$"):
        require("textworld_express_not_installed", "textworld-express", "textworld")
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(MissingExtraError, match="no `java` is on the PATH: install a Java 17 runtime"):
        require("scienceworld", "scienceworld", "scienceworld", java=True)
    assert issubclass(MissingExtraError, GroundrlError)


def test_closed_environments_lend_their_server_to_the_next():
    from groundrl.envs import external

    env = make_env("groundrl/TWX-CoinCollector-v0")
    server = env.unwrapped._backend
    env.close()
    assert server in external._IDLE["textworld-express"]
    assert make_env("groundrl/TWX-Sorting-v0").unwrapped._backend is server


def test_a_server_that_died_in_the_pool_is_not_lent_again(caplog):
    import ast
    import json

    from groundrl.envs import external

    env = make_env("groundrl/TWX-CoinCollector-v0")
    env.reset(seed=0)
    server = env.unwrapped._backend
    env.close()
    server._gateway.java_process.kill()
    server._gateway.java_process.wait()
    again = make_env("groundrl/TWX-CoinCollector-v0")
    obs, info = again.reset(seed=0)  # on a new server
    assert (again.unwrapped._backend is not server and "coin" in obs
            and server not in external._IDLE["textworld-express"])
    # let go quietly: py4j's own shutdown retries a dead server until a RecursionError, after which
    # Python 3.11.7 fails the next ast.parse (pytest's assertion rewriting, at the end of a run)
    del server
    import gc

    gc.collect()
    ast.parse(Path(json.__file__).read_text())
    assert not [r for r in caplog.records if r.name.startswith("py4j") and r.levelno >= logging.ERROR]


class _Game:
    """What the gold-path agent reads of an environment."""

    def __init__(self, gold):
        self.gold_actions = gold
        self.unwrapped = self


def test_the_gold_agent_follows_the_path_in_the_valid_actions_words():
    from groundrl.agents import GoldPathAgent

    game, agent = _Game(["open door to kitchen", "go to kitchen", "move egg blue jay egg in inventory to red box"]), \
        GoldPathAgent()
    valid = ["close door to kitchen", "go to kitchen", "move blue jay egg in inventory to red box", "wait"]
    picked = [valid[agent.act(["obs"], [valid], envs=[game])[0][0]] for _ in range(3)]
    # "open door" is not valid (open already) and "close door" is not its stand-in: skipped
    assert picked == ["go to kitchen", "move blue jay egg in inventory to red box", "close door to kitchen"]
    game.gold_actions = ["wait"]  # a new episode, a new path
    assert agent.act(["obs"], [valid], envs=[game])[0] == [3]
    # ScienceWorld's paths name an object by its whole description, its valid actions by its name
    game.gold_actions = ["move flower pot 4 containing peach tree and soil in inventory to purple box"]
    valid = ["move flower pot to inventory", "move peach pollen to purple box", "move flower pot to purple box"]
    assert agent.act(["obs"], [valid], envs=[game])[0] == [2]
    # a step that cannot be played: the game's no-op keeps the path's pace (ScienceWorld's clock runs)
    game.gold_actions, game.gold_no_op = ["open door to hallway", "go to hallway"], "wait1"
    valid = ["go to hallway", "wait1"]
    assert [valid[agent.act(["obs"], [valid], envs=[game])[0][0]] for _ in range(2)] == ["wait1", "go to hallway"]
    # ... unless the rest of the path would then not fit in the episode's steps left: skipped
    game.gold_actions, game.steps_left = ["open door to hallway", "go to hallway"], 1
    assert valid[agent.act(["obs"], [valid], envs=[game])[0][0]] == "go to hallway"
    # a stand-in names no object the path does not: the pot is not the substance in it
    game.gold_actions, game.steps_left = ["pick up metal pot", "wait1"], None
    assert agent.act(["obs"], [["pick up substance in metal pot", "wait1"]], envs=[game])[0] == [1]


def test_scienceworld_knows_an_action_by_any_name_of_its_objects():
    env = make_env("groundrl/ScienceWorld-find-plant-v0", split="test")
    _, info = env.reset(seed=0)
    game, backend = env.unwrapped, env.unwrapped._backend
    names = {int(k): v["referents"] for k, v in backend.get_all_object_ids_types_referents_LUTJSON().items()}
    entry = next(e for e in backend.get_valid_action_object_combinations_with_templates()
                 if e["action"].startswith("focus on ") and len(names[e["obj_ids"][0]]) > 1
                 and e["action"] in info["valid_actions"])
    other = next(n for n in names[entry["obj_ids"][0]] if f"focus on {n}" != entry["action"])
    assert game.same_command(f"focus on {other}") == entry["action"]
    assert game.same_command("focus on a unicorn") is None
    # and by the parser's other words for its verb ("take" is "pick up", "drop" is "put down")
    pick = next(a for a in info["valid_actions"] if a.startswith("pick up "))
    assert game.same_command("take " + pick.removeprefix("pick up ")) == pick
    assert game.gold_no_op in info["valid_actions"]  # wait1: the path's pace where a step cannot be played


def test_the_gold_agent_wins_the_test_games_and_names_what_it_cannot_play():
    from groundrl.agents import GoldPathAgent
    from groundrl.eval import evaluate
    from groundrl.eval.suites import get_suite

    result = evaluate(GoldPathAgent(), "groundrl/TWX-CoinCollector-v0", episodes=4, progress=False,
                      env_kwargs={"split": "test", "params": {"numLocations": 4}})
    assert result.success_rate == 1.0
    assert GoldPathAgent().cannot_play(make_env("groundrl/FoodPreparation-v0")).startswith("the gold paths are")
    textworld, scienceworld = get_suite("textworld"), get_suite("scienceworld")
    assert len(textworld.tests) == 9 and len(scienceworld.tests) == 30
    assert all(t.env_kwargs in ({"split": "test"}, {"test": True}) for t in textworld.tests + scienceworld.tests)


def test_the_worlds_benchmark_tables_its_records(tmp_path, capsys, load_benchmark):
    import json

    worlds = load_benchmark("worlds")
    counts = {"mean": 7.9, "median": 7, "p90": 11.0, "max": 13}
    record = {"env_id": "groundrl/TWX-CoinCollector-v0", "environment": {
        "valid_actions": counts, "valid_actions_total": counts, "steps_per_second": 97.2, "steps": 400},
        "agents": {"random": {"episodes": 100, "success_rate": 0.2, "ci_low": 0.13, "ci_high": 0.29}}}
    (tmp_path / "TWX-CoinCollector-v0.json").write_text(json.dumps(record))
    assert worlds.main(["--table-only", "--ids", "groundrl/TWX-CoinCollector-v0", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0.20 [0.13, 0.29]" in out and "7.9 / 7 / 13" in out and "97.2" in out
    assert worlds.main(["--table-only", "--markdown", "--ids", "groundrl/TWX-CoinCollector-v0", "--out",
                        str(tmp_path), "--agents", "random,gold"]) == 0
    assert ("| `TWX-CoinCollector-v0` | 100 | 0.20 [0.13, 0.29] | - | 7.9 / 7 / 13 |  | 97.2 |"
            in capsys.readouterr().out)
    assert "groundrl/TWX-" in " ".join(worlds.new_world_ids()) and len(worlds.new_world_ids()) == 39


def test_the_worlds_benchmark_resumes_inside_an_id(tmp_path, load_benchmark):
    """With --episodes-dir, a campaign stopped in the middle of an id keeps the episodes that ended."""
    import json

    worlds = load_benchmark("worlds")
    run = ["--ids", "groundrl/TWX-CoinCollector-v0", "--agents", "random", "--episodes", "3",
           "--out", str(tmp_path / "records"), "--episodes-dir", str(tmp_path / "episodes")]
    assert worlds.main(run) == 0
    kept = tmp_path / "episodes" / "TWX-CoinCollector-v0-random" / "episodes.jsonl"
    first = [json.loads(line) for line in kept.read_text().splitlines()]
    assert sorted(o["episode"] for o in first) == [0, 1, 2]
    # stopped after one episode had ended (its return marked, to tell it was kept, not played again)
    kept.write_text(json.dumps({**first[0], "return": 100.0}) + "\n")
    (tmp_path / "records" / "TWX-CoinCollector-v0.json").unlink()
    assert worlds.main(run) == 0
    record = json.loads((tmp_path / "records" / "TWX-CoinCollector-v0.json").read_text())["agents"]["random"]
    returns = sorted(o["return"] for o in first[1:]) + [100.0]
    assert record["episodes"] == 3 and abs(record["mean_return"] - sum(returns) / 3) < 1e-9


@pytest.mark.slow  # three short runs whose prompts are TextWorldExpress's rooms: minutes on two cores
def test_a_run_trains_on_textworld_express_and_resumes_exactly(tmp_path, tiny_config):
    """The trainer plays a game of another process like any other: its checkpoints restore the
    episodes under way by replaying them in new servers, and the resumed run matches."""
    import json

    from groundrl.train.trainer import Trainer, resume

    config = tiny_config("env=groundrl/TWX-CoinCollector-v0", "env_kwargs={params: {numLocations: 2}, max_steps: 6}",
                         "rollout.total_decisions=24", "checkpoint_every=1")
    straight = Trainer(config, tmp_path / "straight").train()
    Trainer(config, tmp_path / "split").train(updates=2)
    both = resume(tmp_path / "split").train()
    assert len(straight) == len(both) == 3
    for a, b in zip(straight, both):
        for key in ("episode_return", "policy_loss", "value_loss", "entropy"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["update"], key)
    steps = [json.loads(line) for line in (tmp_path / "straight" / "trajectories.jsonl").read_text().splitlines()]
    assert steps and "Your task is to search the environment and find the coin" in steps[0]["observation"]



class _Renaming:
    """A game backend whose one object gets another name at each load, as ScienceWorld names its
    objects of several names."""

    loads = 0

    def start(self):
        type(self).loads += 1
        self.name = ("seed", "apple seed", "organism")[type(self).loads % 3]


class _RenamingEnv(ExternalTextEnv):
    backend_kind = "renaming-test"

    def __init__(self):
        self._options = {}

    def _new_backend(self):
        return _Renaming()

    def _game_seed(self, seed):
        return seed or 0

    def _start(self, game_seed):
        self._backend.start()
        return "a pot", {"valid_actions": self._valid_actions()}

    def _valid_actions(self):
        return ["look around", f"pick up {self._backend.name}"]

    def _play(self, action):
        return "a pot", 0.0, False, False, {"valid_actions": self._valid_actions()}


def test_a_copy_whose_actions_are_named_otherwise_warns():
    import pickle

    env = _RenamingEnv()
    env.reset(seed=0)
    env.step(1)
    with pytest.warns(ReplayMismatchWarning, match=r"choose actions from the copy's info\['valid_actions'\]"):
        copy = pickle.loads(pickle.dumps(env))
    assert copy._actions == env._actions and copy._valid_actions() != env._valid_actions()


@pytest.mark.parametrize("preset", ["symbolic-ppo", "npae"])
def test_the_baselines_without_text_say_in_one_line_that_they_do_not_apply(preset, capsys, tmp_path):
    from groundrl.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--preset", preset, "env=groundrl/TWX-CoinCollector-v0", "model=tiny-llama",
              f"runs_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "declares no action_vocabulary" in err
    assert not (tmp_path / "runs").is_dir() or not any((tmp_path / "runs").iterdir())  # no run folder


def test_the_coin_collector_benchmark_tables_its_kept_records(tmp_path, capsys, load_benchmark):
    import json

    coin = load_benchmark("coin_collector")

    def result(folder, rate, length):
        done = folder / "20260101-000000-eval-TWX-CoinCollector-v0"
        done.mkdir(parents=True)
        (done / "results.json").write_text(json.dumps([{"test": "TWX-CoinCollector", "episodes": 100,
                                                        "success_rate": rate,
                                                        "ci_low": rate - 0.1, "ci_high": rate + 0.05,
                                                        "mean_return": rate, "mean_length": length}]))

    kept = tmp_path / "kept"
    result(kept / "random", 0.47, 10.9)
    result(kept / "zero-shot", 0.52, 10.1)
    run = kept / "ppo" / "seed1" / "train" / "20260101-000000-train-TWX-CoinCollector-v0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"update": u, "decisions": 128 * u, "wall_seconds": 300.0 * u,
                                                           "episodes": 100, "success_rate": r}) + "\n"
                                               for u, r in ((1, 0.4), (2, 0.97))))
    result(kept / "ppo" / "seed1" / "eval", 0.98, 4.2)
    assert coin.main(["--table-only", "--seeds", "1", "--out", str(tmp_path / "out"), "--keep", str(kept)]) == 0
    out = capsys.readouterr().out
    assert "0.47 [0.37, 0.52]" in out and "0.52 [0.42, 0.57]" in out and "0.98 [0.88, 1.03]" in out
    assert "256" in out and "600" in out and "4.2" in out  # reached 0.95 after update 2, its wall time
    assert coin.train_settings(1)[:4] == ["--env", "groundrl/TWX-CoinCollector-v0", "env_kwargs.params.numLocations=3",
                                          "env_kwargs.max_steps=15"]


def test_java_servers_start_with_a_capped_heap_unless_the_user_set_one(monkeypatch):
    import os

    from groundrl.envs.external import java_heap

    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    with java_heap("1g"):
        assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmx1g"
    assert "JAVA_TOOL_OPTIONS" not in os.environ
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dfile.encoding=UTF-8")
    with java_heap("1g"):
        assert os.environ["JAVA_TOOL_OPTIONS"] == "-Dfile.encoding=UTF-8 -Xmx1g"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx8g")
    with java_heap("1g"):
        assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmx8g"
    assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmx8g"
