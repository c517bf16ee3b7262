"""Text Overcooked: fidelity to TWOSOME's original code, the contract, invariants, rendering."""

import gzip
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import groundrl  # noqa: F401  (registers the environments)
from groundrl.envs.overcooked import TASKS, Food, OvercookedEnv, Plate

DATA = Path(__file__).resolve().parents[1] / "data"
IDS = {"TomatoSalad": "groundrl/TomatoSalad-v0", "TomatoLettuceSalad": "groundrl/TomatoLettuceSalad-v0"}


@pytest.mark.parametrize("task, macros, primitive_steps", [("TomatoSalad", 6, 28), ("TomatoLettuceSalad", 10, 46)])
def test_optimal_traces_reproduce_prompts_labels_rewards_and_steps(task, macros, primitive_steps,
                                                                    overcooked_optimal_traces):
    trace = overcooked_optimal_traces[0 if task == "TomatoSalad" else 1]
    env = gym.make(IDS[task])
    obs, info = env.reset()
    total = 0
    for step in trace[:-1]:
        assert obs == step["prompt"] and info["valid_actions"] == step["labels"]
        assert info["valid_actions"][step["action"]] == step["label"]
        obs, reward, terminated, truncated, info = env.step(step["action"])
        assert round(reward, 4) == step["reward"] and info["macro_steps"] == step["macro_steps"]
        assert terminated == step["done"] and not truncated
        assert list(info["features"]) == step["obs_after"]
        total += info["macro_steps"]
    assert (obs, info["valid_actions"]) == (trace[-1]["prompt"], trace[-1]["labels"])
    assert (len(trace) - 1, total) == (macros, primitive_steps)
    assert info["success"] is True


def _recorded():
    with gzip.open(DATA / "overcooked_trajectories.json.gz", "rt") as f:
        return json.load(f)


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("policy", ["uniform", "mixed"])
def test_replays_trajectories_recorded_from_the_original_code(task, policy):
    episodes = _recorded()[task][policy]
    env = gym.make(IDS[task])
    for number, episode in enumerate(episodes):
        obs, info = env.reset()
        for t, step in enumerate(episode["steps"]):
            where = f"episode {number} step {t}"
            assert list(info["features"]) == step["obs"], where
            assert obs == step["prompt"], where
            assert info["valid_actions"] == step["actions"], where
            obs, reward, terminated, truncated, info = env.step(step["action"])
            assert reward == pytest.approx(step["reward"], abs=1e-12), where
            assert info["macro_steps"] == step["macro_steps"], where
            assert (terminated or truncated) == step["done"], where
        assert list(info["features"]) == episode["final_obs"]
        assert info["success"] == episode["success"]


@pytest.mark.parametrize("task, features", [("TomatoSalad", 18), ("TomatoLettuceSalad", 26)])
def test_every_label_is_offered_and_the_features_have_the_original_length(task, features):
    _, info = gym.make(IDS[task]).reset(seed=1)
    assert len(info["valid_actions"]) == len(TASKS[task].macros) and len(info["features"]) == features
    assert info["macro_steps"] == 0


def _state(env: OvercookedEnv):
    items = [(f.kind, f.pos, f.chops) for f in env.foods.values()]
    return (items, env.plate.pos, [f.kind for f in env.plate.contents], env.agent, env.holding and env.holding.kind,
            [k.holding and k.holding.kind for k in env.knives], [row[:] for row in env.cells], dict(env.memory),
            env.steps, env._chop_count)


@pytest.mark.parametrize("bad, message", [
    ("juggle the tomato", "not valid now"),
    ("chop the tomato", "not valid now"),  # a label, but not the current one
    (8, "out of range"),
    (-1, "out of range"),
    (2.0, "not float"),
    (None, "not NoneType"),
    (False, "not bool"),
])
def test_invalid_actions_raise_and_change_nothing(bad, message):
    env = gym.make("groundrl/TomatoSalad-v0").unwrapped
    env.reset()
    env.step("pick up the tomato")
    before = (_state(env), env.valid_actions)
    with pytest.raises(ValueError, match=message):
        env.step(bad)
    assert (_state(env), env.valid_actions) == before


def _locations(env: OvercookedEnv):
    """Where every movable item is: exactly one of held, in the bowl, on a board, served, on a counter."""
    where = {}
    for item in [*env.foods.values(), env.plate]:
        places = []
        if env.holding is item:
            places.append("held")
        if isinstance(item, Food) and item in env.plate.contents:
            places.append("bowl")
        if any(k.holding is item for k in env.knives):
            places.append("board")
        if env.delivery.holding is item:
            places.append("served")
        x, y = item.pos
        if not places and env.layout.rows[x][y] not in "KD." and env.cells[x][y] == item.kind:
            places.append("counter")
        where[item.kind] = places
    return where


@settings(max_examples=60, deadline=None, derandomize=True)
@given(task=st.sampled_from(list(TASKS)), actions=st.lists(st.integers(0, 7), min_size=1, max_size=120),
       shaping=st.sampled_from(["original", "once"]))
def test_random_play_keeps_the_kitchen_consistent(task, actions, shaping):
    env = OvercookedEnv(task, shaping=shaping)
    env.reset()
    floor = {(x, y) for x, row in enumerate(env.layout.rows) for y, c in enumerate(row) if c in ".A"}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action % len(env.layout.macros))
        assert 1 <= info["macro_steps"]
        where = _locations(env)
        assert all(len(places) == 1 for places in where.values()), where  # nothing lost or duplicated
        for x, row in enumerate(env.cells):  # and the grid shows nothing that is not there
            for y, content in enumerate(row):
                if content in ("tomato", "lettuce", "onion", "plate"):
                    assert env._item_at((x, y), content) is not None, (content, (x, y))
        assert len(env.plate.contents) <= 3 and len({id(f) for f in env.plate.contents}) == len(env.plate.contents)
        assert all(f.chopped for f in env.plate.contents)
        for f in env.plate.contents:
            assert f.pos == env.plate.pos
        if env.holding is not None:
            assert env.holding.pos == env.agent
        assert env.agent in floor  # never on a counter
        assert sum(row.count("agent") for row in env.cells) == 1 and env.cells[env.agent[0]][env.agent[1]] == "agent"
        if terminated or truncated:
            assert terminated == info["success"] == env.delivered
            break


def test_truncated_after_200_primitive_steps_with_the_running_macro_finished():
    env = gym.make("groundrl/TomatoLettuceSalad-v0")
    env.reset()
    steps, truncated, count = 0, False, 0
    while not truncated:
        _, _, terminated, truncated, info = env.step(count % 2 * 2)  # get tomato / get onion, back and forth
        assert not terminated
        steps += info["macro_steps"]
        count += 1
    assert steps >= 200 and steps - info["macro_steps"] < 200
    assert info["success"] is False


def test_serving_something_wrong_resets_the_items_and_costs_0_1():
    env = gym.make("groundrl/TomatoSalad-v0")
    env.reset()
    env.step("pick up the tomato")
    _, reward, terminated, _, info = env.step("serve the dish")
    assert not terminated and -0.1 - 0.02 < reward < -0.1
    core = env.unwrapped
    assert core.holding is None and core.foods["tomato"].pos == (0, 5) and core.cells[0][5] == "tomato"


@pytest.mark.parametrize("shaping, second_chop_reward", [("original", 0.2), ("once", 0.0)])
def test_the_chop_reward_loophole_is_an_option(shaping, second_chop_reward):
    env = gym.make("groundrl/TomatoSalad-v0", shaping=shaping)
    env.reset()
    chop_rewards = []
    for _ in range(2):
        env.step("pick up the tomato")
        env.step("put the tomato on the cutting board")
        _, reward, *_ = env.step("chop the tomato")
        chop_rewards.append(reward)
        env.step("pick up the tomato")
        env.step("serve the dish")  # bare food: wrong, the tomato goes back unchopped
    step_costs = sum(0.001 * 0.99**i for i in range(3))
    assert chop_rewards[0] == pytest.approx(0.2 * 0.99**2 - step_costs)
    assert chop_rewards[1] == pytest.approx(second_chop_reward * 0.99**2 - step_costs)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError,
                       match="unknown Overcooked task 'Soup'; choose one of TomatoSalad, TomatoLettuceSalad"):
        OvercookedEnv("Soup")
    with pytest.raises(ValueError, match="shaping must be 'original' or 'once'"):
        OvercookedEnv(shaping="never")
    with pytest.raises(ValueError, match="render_mode 'human' is not supported"):
        OvercookedEnv(render_mode="human")


def test_render_ansi_and_rgb_array():
    env = gym.make("groundrl/TomatoLettuceSalad-v0", render_mode="ansi")
    env.reset()
    text = env.render()
    assert text.splitlines()[:3] == ["XXXXXtX", "K...A.l", "K.....o"] and "holding nothing" in text
    env.step("pick up the tomato")
    env.step("put the tomato on the first cutting board")
    text = env.render()
    assert text.splitlines()[1].startswith("tA") and "board 1 (1, 0): the tomato (0/3 chops)" in text

    env = gym.make("groundrl/TomatoSalad-v0", render_mode="rgb_array")
    env.reset()
    start = env.render()
    assert start.shape == (7 * 80 + 36, 7 * 80, 3) and start.dtype == np.uint8
    env.step("pick up the tomato")
    moved = env.render()
    assert (moved != start).any()
    tomato_cell = start[0:80, 400:480]  # row 0, column 5: the tomato on its counter, red
    assert (tomato_cell[..., 0] > 180).any() and not (moved[0:80, 400:480, 0] > 200).any()
    assert gym.make("groundrl/TomatoSalad-v0").unwrapped.render() is None


def test_the_docs_show_each_start_state():
    for name in ("tomato_salad", "tomato_lettuce_salad"):
        assert (Path(__file__).resolve().parents[2] / "docs" / f"{name}_start.png").stat().st_size > 1000


def test_plate_holds_what_was_put_in_it():
    plate = Plate((6, 5), (6, 5))
    tomato = Food("tomato", (0, 5), (0, 5), chops=3)
    plate.add(tomato)
    plate.move((2, 2))
    assert tomato.pos == (2, 2) and tomato.chopped
