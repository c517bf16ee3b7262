"""VirtualHome tasks: fidelity to TWOSOME's original code, the contract, and the simulator."""

import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import groundrl  # noqa: F401  (registers the environments)
from groundrl.envs.household import HouseholdEnv, HouseholdTask, Scene, Thing, World, parse_action
from groundrl.envs.virtualhome import ENTERTAINMENT, FOOD_PREPARATION, TASKS, UNSEEN_WORDS

from benchkit.household import explore

DATA = Path(__file__).resolve().parents[1] / "data"
IDS = [f"groundrl/{name}-v0" for name in TASKS]


def _table(name):
    return json.loads((DATA / name).read_text())


def _as_table_rows(records):
    """Our exploration records in the reference tables' format."""
    def sitting(flag):
        return ["SITTING"] if flag else []

    return [
        {
            "obs": list(r["features"]), "char_states": sitting(r["sitting"]), "prompt": r["prompt"],
            "valid_actions": r["valid_actions"],
            "transitions": [
                {"action_id": t["action_id"], "action": t["action"], "exec_ok": t["executed"], "reward": t["reward"],
                 "next": [list(t["next"][0]), sitting(t["next"][1])]}
                for t in r["transitions"]
            ],
        }
        for r in records
    ]


@pytest.mark.parametrize("task, table", [
    (FOOD_PREPARATION, "vh_food_preparation_transitions.json"),  # shared/data, from TWOSOME's code
    (ENTERTAINMENT, "vh_entertainment_transitions.json"),  # from TWOSOME's code, policy_v2's obs2text
])
def test_every_reachable_state_matches_twosome(task, table):
    reference = _table(table)
    assert list(task.features) == reference["obs_keys"]
    if "action_template" in reference:
        assert list(task.actions) == reference["action_template"]
    ours = _as_table_rows(explore(task))
    assert [ours[0]["obs"], ours[0]["char_states"]] == reference["start"]
    assert len(ours) == len(reference["states"])
    for mine, theirs in zip(ours, reference["states"]):
        for key in ("obs", "char_states", "prompt", "valid_actions"):
            assert mine[key] == theirs[key], (key, theirs["obs"])
        for t_mine, t_theirs in zip(mine["transitions"], theirs["transitions"], strict=True):
            assert t_mine == t_theirs, theirs["obs"]


def test_entertainment_has_84_states_and_5_of_them_sitting():
    records = explore(ENTERTAINMENT)
    assert len(records) == 84
    assert sum(r["sitting"] for r in records) == 5
    assert len(explore(FOOD_PREPARATION)) == 16


def test_the_environment_walks_the_same_table():
    """The env (not only the simulator) gives the table's prompts, actions and features along
    every transition out of the start state and its successors."""
    reference = {tuple(s["obs"]): s for s in _table("vh_food_preparation_transitions.json")["states"]}
    env = gym.make("groundrl/FoodPreparation-v0")
    obs, info = env.reset()
    state = reference[tuple(info["features"])]
    assert (obs, info["valid_actions"]) == (state["prompt"], state["valid_actions"])
    for transition in state["transitions"]:
        env.reset()
        obs, reward, terminated, truncated, info = env.step(transition["action"])
        assert list(info["features"]) == transition["next"][0]
        assert info["executed"] == transition["exec_ok"] and reward == transition["reward"]
        assert obs == reference[tuple(info["features"])]["prompt"]


def _optimal_traces():
    traces, current = [], None
    for line in (DATA / "vh_optimal_traces.txt").read_text().splitlines():
        if line.startswith("OBS "):
            if current is None:
                current = []
                traces.append(current)
            current.append({"obs": json.loads(line[4:])})
        elif line.startswith("PROMPT: "):
            current[-1]["prompt"] = line[len("PROMPT: "):]
        elif line.strip().startswith("VALID: "):
            current[-1]["valid"] = eval(line.strip()[len("VALID: "):], {})  # a Python list literal
        elif line.strip().startswith("->"):
            match = re.match(r"->\s+(.+?) \| exec ok: (\w+) \| r ([\d.]+) \| done (\w+)", line.strip())
            current[-1].update(action=match[1], executed=match[2] == "True", reward=float(match[3]),
                               done=match[4] == "True")
            if current[-1]["done"]:
                current = None
    return traces


@pytest.mark.parametrize("env_id, length", [("groundrl/FoodPreparation-v0", 6), ("groundrl/Entertainment-v0", 11)])
def test_replays_the_shortest_solutions(env_id, length):
    traces = {len(t[0]["obs"]): t for t in _optimal_traces()}
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    trace = traces[len(info["features"])]
    assert len(trace) == length
    for step in trace:
        assert list(info["features"]) == step["obs"]
        assert obs == step["prompt"] and info["valid_actions"] == step["valid"]
        obs, reward, terminated, truncated, info = env.step(step["action"])
        assert (info["executed"], reward, terminated or truncated) == (step["executed"], step["reward"], step["done"])
    assert terminated and not truncated and info["success"]


@pytest.mark.parametrize("env_id", IDS)
def test_reset_is_the_same_whatever_the_seed(env_id):
    env = gym.make(env_id)
    obs, info = env.reset(seed=1)
    again, info_again = env.reset(seed=2)
    assert obs == again and info["valid_actions"] == info_again["valid_actions"]
    assert np.array_equal(info["features"], info_again["features"]) and info["features"].dtype == np.int8
    assert info["executed"] and "success" not in info


@pytest.mark.parametrize("env_id", ["groundrl/FoodPreparation-v0", "groundrl/Entertainment-v0"])
@pytest.mark.parametrize("bad, message", [
    ("fly to the moon", "not valid now"),
    ("grab the pancake", "not valid now"),  # a real action, but not valid at the start
    (99, "out of range"),
    (-1, "out of range"),
    (1.0, "not float"),
    (None, "not NoneType"),
    (True, "not bool"),
])
def test_invalid_actions_raise_and_change_nothing(env_id, bad, message):
    env = gym.make(env_id).unwrapped
    env.reset()
    env.step(env.valid_actions[-1])
    before = (env.world.snapshot(), env._steps, env.render_mode, env.valid_actions, env._prompt)
    with pytest.raises(ValueError, match=message):
        env.step(bad)
    assert (env.world.snapshot(), env._steps, env.render_mode, env.valid_actions, env._prompt) == before


def test_step_takes_an_index_into_valid_actions():
    env = gym.make("groundrl/FoodPreparation-v0")
    _, info = env.reset()
    by_index = env.step(info["valid_actions"].index("walk to the pancake"))
    env.reset()
    by_string = env.step("walk to the pancake")
    assert by_index[0] == by_string[0] and np.array_equal(by_index[4]["features"], by_string[4]["features"])


def test_a_failed_action_is_a_spent_no_op():
    env = gym.make("groundrl/FoodPreparation-v0")
    env.reset()
    obs, info = env.step("walk to the microwave")[::4]
    after = env.step("close the microwave")  # it is already closed
    assert after[0] == obs and np.array_equal(after[4]["features"], info["features"])
    assert after[1:4] == (0.0, False, False) and after[4]["executed"] is False


@pytest.mark.parametrize("env_id", ["groundrl/FoodPreparation-v0", "groundrl/Entertainment-v0"])
def test_truncated_after_50_steps(env_id):
    env = gym.make(env_id)
    env.reset()
    for step in range(1, 51):
        _, reward, terminated, truncated, info = env.step("walk to the bathroom" if step % 2 else "walk to the bedroom")
        assert reward == 0.0 and not terminated
        assert truncated == (step == 50)
    assert info["success"] is False


def test_sitting_too_early_is_a_dead_end():
    env = gym.make("groundrl/Entertainment-v0")
    env.reset()
    for action in ["walk to the living room", "walk to the TV", "turn on the TV", "walk to the sofa",
                   "sit on the sofa"]:
        obs, reward, terminated, truncated, info = env.step(action)
    assert info["executed"] and reward == 0.0 and not terminated
    assert "You are sitting on the sofa." in obs
    assert info["valid_actions"] == ["walk to the kitchen", "walk to the bathroom", "walk to the bedroom"]
    for action in info["valid_actions"]:
        assert env.step(action)[4]["executed"] is False


def test_turning_on_the_tv_needs_a_free_hand():
    env = gym.make("groundrl/Entertainment-v0")
    env.reset()
    for action in ["walk to the chips", "grab the chips", "walk to the milk", "grab the milk",
                   "walk to the living room", "walk to the TV"]:
        env.step(action)
    assert env.step("turn on the TV")[4]["executed"] is False


@pytest.mark.parametrize("name, words", UNSEEN_WORDS.items())
def test_unseen_variants_substitute_words_and_keep_the_dynamics(name, words):
    env = gym.make(f"groundrl/FoodPreparation-{name}-v0")
    obs, info = env.reset()
    food = words["pancake"]
    assert "pancake" not in obs and f"You notice {food} and" in obs
    assert f"walk to the {food}" in info["valid_actions"]
    if "heat up" in words:
        assert obs.endswith(f"In order to wash the {food} in the {words['microwave']}, your next step is to")
        assert "microwave" not in obs
    else:
        assert obs.endswith(f"In order to heat up the {food} in the microwave, your next step is to")
    base, variant = explore(FOOD_PREPARATION), explore(TASKS[f"FoodPreparation-{name}"])
    substitute = TASKS[f"FoodPreparation-{name}"].substitute
    assert len(base) == len(variant) == 16
    for b, v in zip(base, variant):
        assert (substitute(b["prompt"]) == v["prompt"]
                and [substitute(a) for a in b["valid_actions"]] == v["valid_actions"])
        assert ([(t["next"], t["reward"]) for t in b["transitions"]]
                == [(t["next"], t["reward"]) for t in v["transitions"]])
    for action in ["walk to the pancake", "grab the pancake", "walk to the microwave", "open the microwave",
                   "put the pancake in the microwave", "close the microwave"]:
        obs, reward, terminated, truncated, info = env.step(substitute(action))
    assert terminated and reward == 1.0


@pytest.mark.filterwarnings("ignore:.*render_mode='human'")
def test_render_tells_the_state_in_words():
    env = gym.make("groundrl/FoodPreparation-Laundry-v0", render_mode="ansi")
    env.reset()
    env.step("walk to the clothes")
    env.step("grab the clothes")
    text = env.render()
    assert text.startswith("FoodPreparation-Laundry · step 2/50\nagent: in the kitchen, holding the clothes")
    assert ("clothes: held by the agent" in text
            and "washing machine: in the kitchen, on the kitchen counter, closed, off" in text)
    assert "pancake" not in text
    assert gym.make("groundrl/FoodPreparation-v0").unwrapped.render() is None
    with pytest.raises(ValueError, match="render_mode 'human' is not supported"):
        gym.make("groundrl/FoodPreparation-v0", render_mode="human")


def test_unknown_task_is_a_clear_error():
    from groundrl.envs.virtualhome import VirtualHomeEnv

    with pytest.raises(ValueError, match="unknown VirtualHome task 'Cooking'; choose one of FoodPreparation, "):
        VirtualHomeEnv("Cooking")


@pytest.mark.parametrize("task, worlds, observations", [(FOOD_PREPARATION, 30, 18), (ENTERTAINMENT, 187, 97)])
def test_exhaustive_search_over_world_states(task, worlds, observations):
    """Every world state (hidden parts included: the microwave left open while the agent is
    away) reads as a well-formed prompt with distinct valid actions, and the goal stays reachable
    from every state except after sitting down too early."""
    records = explore(task, distinguish="world")
    assert len(records) == worlds
    assert len({(r["features"], r["sitting"]) for r in records}) == observations
    for r in records:
        assert r["prompt"].startswith("There are four rooms") and r["prompt"].endswith("your next step is to")
        assert r["valid_actions"] and len(set(r["valid_actions"])) == len(r["valid_actions"])
        assert sum(r["features"][:4]) == 1
    assert any(t["terminated"] for r in records for t in r["transitions"])
    dead_ends = [r for r in records if not any(t["executed"] for t in r["transitions"])]
    assert all(r["sitting"] for r in dead_ends) and (task is ENTERTAINMENT) == bool(dead_ends)


# -- the simulator on its own ---------------------------------------------------------------------

def _fridge_scene():
    return Scene(rooms=("kitchen", "hall"), start_room="kitchen", things=(
        Thing("fridge", "kitchen", openable=True),
        Thing("apple", "kitchen", inside="fridge", grabbable=True),
        Thing("lamp", "hall", switchable=True),
        Thing("chair", "hall", sittable=True, faces=("lamp",)),
    ))


def _do(world, scene, *texts):
    return [world.execute(parse_action(t, scene)) for t in texts]


def test_executor_rules():
    scene = _fridge_scene()
    world = World(scene)
    assert not world.observable("apple")  # inside the closed fridge
    assert _do(world, scene, "walk to the apple") == [False]
    assert _do(world, scene, "walk to the fridge", "open the fridge") == [True, True]
    assert world.observable("apple") and "apple" in world.close  # walking to a container: close to its contents
    assert _do(world, scene, "grab the apple", "grab the apple") == [True, False]
    assert world.hands == ["apple", None]
    assert _do(world, scene, "walk to the hall") == [True]
    assert world.close == {"apple"} and world.room("apple") == "hall"
    assert _do(world, scene, "walk to the chair", "sit on the chair", "walk to the lamp") == [True, True, False]
    assert world.facing == {"lamp"}
    assert _do(world, scene, "stand up from the chair", "walk to the lamp", "turn on the lamp") == [True, True, True]
    assert world.facing == set() and world.switched_on == {"lamp"}


def test_open_and_switch_need_a_free_hand_and_close_does_not():
    scene = Scene(rooms=("room",), start_room="room", things=(
        Thing("box", "room", openable=True, is_open=True), Thing("a", "room", grabbable=True),
        Thing("b", "room", grabbable=True), Thing("radio", "room", switchable=True),
    ))
    world = World(scene)
    _do(world, scene, "walk to the a", "grab the a", "walk to the b", "grab the b")
    assert world.hands == ["a", "b"]
    assert _do(world, scene, "walk to the box", "close the box", "open the box") == [True, True, False]
    assert _do(world, scene, "walk to the radio", "turn on the radio") == [True, False]


def test_put_in_needs_an_open_container_and_put_on_does_not():
    scene = _fridge_scene()
    world = World(scene)
    _do(world, scene, "walk to the fridge", "open the fridge", "grab the apple", "close the fridge")
    assert _do(world, scene, "put the apple in the fridge") == [False]
    assert _do(world, scene, "open the fridge", "put the apple in the fridge") == [True, True]
    assert world.container["apple"] == "fridge" and world.hands == [None, None]
    assert _do(world, scene, "grab the apple", "put the apple on the fridge") == [True, True]
    assert world.supports["apple"] == {"fridge"} and world.container["apple"] is None


def test_things_inside_a_carried_container_travel_with_it():
    scene = Scene(rooms=("kitchen", "hall"), start_room="kitchen", things=(
        Thing("bag", "kitchen", grabbable=True, openable=True, is_open=True),
        Thing("apple", "kitchen", inside="bag", grabbable=True),
    ))
    world = World(scene)
    assert _do(world, scene, "walk to the bag", "grab the bag", "walk to the hall") == [True, True, True]
    assert world.room("apple") == "hall" and world.observable("apple")
    assert _do(world, scene, "close the bag") == [True]
    assert not world.observable("apple") and world.room("apple") == "hall"


def test_bad_declarations_are_clear_errors():
    scene = _fridge_scene()
    with pytest.raises(ValueError, match="cannot read the action 'fly to the fridge'"):
        parse_action("fly to the fridge", scene)
    with pytest.raises(ValueError, match="cannot read the action 'walk to the moon'"):
        parse_action("walk to the moon", scene)
    with pytest.raises(ValueError, match="cannot read the feature 'see_moon'"):
        HouseholdTask("x", scene, ("walk to the hall",), ("see_moon",), goal=lambda f: False, goal_text="x")
    with pytest.raises(ValueError, match="repeated: fridge"):
        Scene(rooms=("kitchen",), start_room="kitchen", things=(Thing("fridge", "kitchen"), Thing("fridge", "kitchen")))
    with pytest.raises(ValueError, match="'apple' refers to 'bowl'"):
        Scene(rooms=("kitchen",), start_room="kitchen", things=(Thing("apple", "kitchen", on=("bowl",)),))
    with pytest.raises(ValueError, match="start_room 'attic'"):
        Scene(rooms=("kitchen",), start_room="attic", things=())
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        HouseholdEnv(FOOD_PREPARATION, max_steps=0)


def test_a_declared_task_gets_a_generic_description():
    task = HouseholdTask(
        "LampOn", _fridge_scene(), actions=("walk to the kitchen", "walk to the hall", "walk to the lamp",
                                            "turn on the lamp", "turn off the lamp"),
        features=("in_hall", "see_lamp", "close_to_lamp", "is_lamp_on"),
        goal=lambda f: f["is_lamp_on"], goal_text="light the hall",
    )
    env = HouseholdEnv(task, max_steps=5)
    obs, info = env.reset()
    assert obs == ("There are two rooms: the kitchen and hall. You are in the kitchen. You notice the fridge. "
                   "You are not holding anything. The fridge is closed. "
                   "In order to light the hall, your next step is to")
    assert info["valid_actions"] == ["walk to the hall"]
    obs, *_ , info = env.step("walk to the hall")
    assert "You notice the lamp and the chair." in obs and "The lamp is off." in obs
    assert info["valid_actions"] == ["walk to the kitchen", "walk to the lamp"]
    obs, *_, info = env.step("walk to the lamp")
    assert "The lamp is close to you." in obs and info["valid_actions"] == ["walk to the kitchen", "turn on the lamp"]
    _, reward, terminated, _, info = env.step("turn on the lamp")
    assert (reward, terminated, info["success"]) == (1.0, True, True)


def test_exact_random_success_probability():
    from benchkit.household import random_success_probability

    # the one 6-step solution, through states with 5, 5, 5, 7, 7 and 5 valid actions
    assert random_success_probability(FOOD_PREPARATION, max_steps=6) == pytest.approx(1 / (5 * 5 * 5 * 7 * 7 * 5))
    assert random_success_probability(FOOD_PREPARATION, max_steps=5) == 0.0
    assert random_success_probability(ENTERTAINMENT, max_steps=10) == 0.0
    assert random_success_probability(ENTERTAINMENT, max_steps=11) > 0.0

    exact = random_success_probability(FOOD_PREPARATION, max_steps=20)
    env = HouseholdEnv(FOOD_PREPARATION, max_steps=20)
    rng = np.random.default_rng(0)
    episodes, successes = 3000, 0
    for _ in range(episodes):
        _, info = env.reset()
        while True:
            _, _, terminated, truncated, info = env.step(int(rng.integers(len(info["valid_actions"]))))
            if terminated or truncated:
                successes += info["success"]
                break
    standard_error = (exact * (1 - exact) / episodes) ** 0.5
    assert abs(successes / episodes - exact) < 4 * standard_error


def test_the_generic_description_handles_one_room_and_dead_ends():
    scene = Scene(rooms=("studio",), start_room="studio", things=(Thing("chair", "studio", sittable=True),))
    task = HouseholdTask("Sit", scene, actions=("walk to the chair", "sit on the chair"), features=("is_sit_chair",),
                         goal=lambda f: False, goal_text="rest")
    env = HouseholdEnv(task, max_steps=3)
    obs, info = env.reset()
    assert obs.startswith("There is one room: the studio. You are in the studio. You notice the chair.")
    env.step("walk to the chair")
    _, _, _, _, info = env.step("sit on the chair")
    assert info["valid_actions"] == ["walk to the chair", "sit on the chair"]  # nothing works: all offered
    _, _, terminated, truncated, info = env.step("walk to the chair")
    assert not info["executed"] and truncated and not terminated
