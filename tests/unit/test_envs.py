import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils import env_checker

import groundrl
from groundrl.envs import (
    ClosedEnvironmentError,
    ResetNeededError,
    TextSpace,
    check_info,
    list_envs,
    make_env,
    resolve_action,
)
from groundrl.errors import InvalidArgumentError, UnknownEnvironmentError

# ScienceWorld's 30 tasks run in one simulator (a reset loads its task: ~1-3 s; a copy starts a
# simulator process of its own, ~10 s), and its four contract tests take 8 to 200 s a task (the
# mendelian-genetics tasks are the slowest): one task in the quick run, a fixed sample of three (few
# objects; many objects and long action lists; a measuring task) in the whole suite, and every task
# in the campaign that benchmarks/scienceworld_tasks.py runs (`pytest --every-scienceworld-task`).
SCIENCEWORLD_QUICK = ("groundrl/ScienceWorld-find-living-thing-v0",)
SCIENCEWORLD_SAMPLE = ("groundrl/ScienceWorld-boil-v0",
                       "groundrl/ScienceWorld-measure-melting-point-known-substance-v0")


def pytest_generate_tests(metafunc):
    """``env_id`` takes every registered id but the ScienceWorld tasks outside the sample (all of them
    with ``--every-scienceworld-task``); the sample beyond the quick run's task is slow."""
    if "env_id" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("parametrize"):
        return
    every = metafunc.config.getoption("every_scienceworld_task")
    ids = []
    for env_id in list_envs():
        if not env_id.startswith("groundrl/ScienceWorld-") or env_id in SCIENCEWORLD_QUICK:
            ids.append(env_id)
        elif every or env_id in SCIENCEWORLD_SAMPLE:
            ids.append(pytest.param(env_id, marks=pytest.mark.slow))
    metafunc.parametrize("env_id", ids)


def test_registered_on_import():
    assert "groundrl/FollowInstruction-v0" in list_envs()
    assert "groundrl/FollowInstruction-v0" in gym.registry


def test_unknown_env_is_one_clear_error():
    with pytest.raises(UnknownEnvironmentError, match=r"^unknown environment 'groundrl/Nope-v0'; `groundrl envs` "
                                                      r"lists the \d+ available$"):
        make_env("groundrl/Nope-v0")
    with pytest.raises(UnknownEnvironmentError, match="did you mean groundrl/TomatoSalad-v0"):
        make_env("groundrl/TomatoSalat-v0")
    assert isinstance(UnknownEnvironmentError("x"), groundrl.GroundrlError)


def test_resolve_action():
    actions = ["turn left", "go forward"]
    assert resolve_action("go forward", actions) == 1
    assert resolve_action(0, actions) == 0
    for bad, message in [(2, "out of range"), (-1, "out of range"), ("fly", "not valid now"), (1.0, "not float"),
                         (True, "not bool"), (None, "not NoneType")]:
        with pytest.raises(ValueError, match=message):
            resolve_action(bad, actions)


def test_an_invalid_action_is_echoed_shortened():
    # an action comes from a model or a user: megabytes of it must not end up in the message
    huge = ("fly away " * 1_200_000)[:10_000_000]
    with pytest.raises(ValueError) as error:
        resolve_action(huge, ["turn left", "x" * 1000, *(f"go to room {i}" for i in range(50))])
    message = str(error.value)
    assert message.startswith("action 'fly away fly away") and "... (10000000 characters) is not valid now" in message
    assert "'" + "x" * 80 + "'... (1000 characters)" in message and "go to room 7'" in message
    assert "go to room 8'" not in message and message.endswith(", ... (52 in all)") and len(message) < 1000
    with pytest.raises(ValueError, match=r"^action 'fly' is not valid now; valid actions: 'turn left', 'go'$"):
        resolve_action("fly", ["turn left", "go"])


def test_text_space_holds_any_string():
    space = TextSpace(max_length=10)
    assert space.contains("à droite") and not space.contains("x" * 11) and not space.contains(3)


def test_every_environment_follows_the_contract(env_id):
    # gymnasium's full check_env steps with random strings from the action space, which our
    # contract rejects; its reset checks apply as they are.
    env = gym.make(env_id)
    env_checker.check_reset_return_type(env.unwrapped)
    env_checker.check_reset_seed_determinism(env.unwrapped)
    env_checker.check_reset_options(env.unwrapped)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs and env.observation_space.contains(obs)
    check_info(info)
    actions = info["valid_actions"]
    assert actions and all(isinstance(a, str) and a for a in actions) and len(set(actions)) == len(actions)
    for bad in ("not an action at all", len(actions), -1, 0.0, None, True):
        with pytest.raises(ValueError):
            env.step(bad)
    fresh, by_index = gym.make(env_id), gym.make(env_id)
    fresh.reset(seed=0)
    by_index.reset(seed=0)
    results = [env.step(actions[-1]), fresh.step(actions[-1]), by_index.step(len(actions) - 1)]
    for result in results[1:]:  # the bad inputs changed nothing; a string and its index are the same action
        assert result[0] == results[0][0] and result[1:4] == results[0][1:4]
        assert result[4]["valid_actions"] == results[0][4]["valid_actions"]
    check_info(results[0][4])


def test_every_info_of_an_episode_fits_step_info(env_id):
    """What train, eval and the agents read of an info has the type StepInfo declares, in every info
    of an episode (the last one's success included), with the prompt make_env adds (its keys too)."""
    env = make_env(env_id, **_episode_limit(env_id))
    rng = np.random.default_rng(0)
    info = env.reset(seed=0)[1]
    check_info(info)
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(int(rng.integers(len(info["valid_actions"]))))
        check_info(info)
    env.close()


@pytest.mark.parametrize("info, wrong", [
    ({}, "info has no 'valid_actions' (its keys: none)"),
    ({"valid_actions": ("go",)}, "info['valid_actions'] should be list[str], not tuple"),
    ({"valid_actions": ["go", 3]}, "info['valid_actions'] should be list[str], not list"),
    ({"valid_actions": ["go"], "action_ids": [0.0]}, "info['action_ids'] should be list[int], not list"),
    ({"valid_actions": ["go"], "success": 1}, "info['success'] should be bool, not int 1"),
    ({"valid_actions": ["go"], "success": np.bool_(True)}, "info['success'] should be bool, not numpy.bool"),
    ({"valid_actions": ["go"], "macro_steps": True}, "info['macro_steps'] should be int, not bool"),
    ({"valid_actions": ["go"], "features": [0, 1]}, "info['features'] should be numpy.ndarray, not list"),
    ({"valid_actions": ["go"], "mission": None}, "info['mission'] should be str, not NoneType"),
])
def test_an_info_that_does_not_fit_step_info_is_refused(info, wrong):
    with pytest.raises(TypeError, match=re.escape(wrong)):
        check_info(info)
    check_info({"valid_actions": ["go"], "action_ids": [np.int64(3)], "macro_steps": np.int32(2), "score": None})


def test_reset_is_deterministic_and_follows_the_contract():
    env = make_env("groundrl/FollowInstruction-v0")
    first = env.reset(seed=3)
    again = env.reset(seed=3)
    assert first[0] == again[0] and first[1]["valid_actions"] == again[1]["valid_actions"]
    assert (first[1]["features"] == again[1]["features"]).all()
    obs, info = first
    assert isinstance(obs, str) and 4 <= len(info["valid_actions"]) <= 8
    assert env.reset(seed=4)[0] != first[0]


def _target(obs: str) -> str:
    return obs.splitlines()[0].removeprefix("Instruction: ").removesuffix(".")


def test_following_the_instruction_succeeds_by_string_and_by_index():
    env = make_env("groundrl/FollowInstruction-Long-v0")
    obs, info = env.reset(seed=0)
    total = 0.0
    for step in range(5):
        target = _target(obs)
        action = target if step % 2 else info["valid_actions"].index(target)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert terminated == (step == 4) and not truncated
    assert total == 5.0 and info["success"] is True


def test_a_wrong_action_ends_the_episode_unsuccessfully():
    env = make_env("groundrl/FollowInstruction-Long-v0")
    obs, info = env.reset(seed=1)
    wrong = next(a for a in info["valid_actions"] if a != _target(obs))
    obs, reward, terminated, truncated, info = env.step(wrong)
    assert (reward, terminated, info["success"]) == (0.0, True, False)


def test_invalid_action_raises_and_leaves_the_state_unchanged():
    env = make_env("groundrl/FollowInstruction-Long-v0", render_mode="ansi")
    obs, info = env.reset(seed=2)
    before = env.render()
    for bad in ["fly away", 99, 2.5]:
        with pytest.raises(ValueError):
            env.step(bad)
        assert env.render() == before
    obs2, reward, *_ = env.step(_target(obs))
    assert reward == 1.0


@pytest.mark.filterwarnings("ignore:.*render_mode")
def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_actions"):
        make_env("groundrl/FollowInstruction-v0", num_actions=(1, 3))
    with pytest.raises(ValueError, match="render_mode"):
        make_env("groundrl/FollowInstruction-v0", render_mode="rgb_array")


@pytest.mark.filterwarnings("ignore:.*is not in the possible render_modes")
@pytest.mark.parametrize("env_id, kwargs", [
    ("groundrl/FoodPreparation-v0", {"task": "Cooking"}),
    ("groundrl/FoodPreparation-v0", {"max_steps": 0}),
    ("groundrl/TomatoSalad-v0", {"shaping": "sometimes"}),
    ("groundrl/TomatoSalad-v0", {"render_mode": "text"}),
    ("groundrl/FollowInstruction-v0", {"episode_length": 0}),
])
def test_bad_environment_options_are_one_line_groundrl_errors(env_id, kwargs):
    # a GroundrlError, so that the command line prints it as one line (and still a ValueError)
    with pytest.raises(groundrl.GroundrlError) as error:
        gym.make(env_id, **kwargs)
    assert isinstance(error.value, ValueError) and "\n" not in str(error.value)


def test_environments_pickle_mid_episode(env_id):
    """Training checkpoints keep environments mid-episode: a copy continues exactly."""
    import pickle

    env = groundrl.make_env(env_id)
    env.reset(seed=3)
    ended = any(env.step(0)[2:4])
    copy = pickle.loads(pickle.dumps(env))
    for action in (1, 0, 1):
        if ended:  # the copy knows too
            with pytest.raises(ResetNeededError):
                copy.step(action)
            break
        original, copied = env.step(action), copy.step(action)
        assert original[:4] == copied[:4]
        ended = original[2] or original[3]
        if (not getattr(env.unwrapped, "exact_replay", True)
                and original[4]["valid_actions"] != copied[4]["valid_actions"]):
            break  # ScienceWorld: the same state, its objects named otherwise (see ScienceWorldEnv.exact_replay)


def _episode_limit(env_id: str) -> dict:
    # BabyAI's episodes run 64 to 128 steps, ScienceWorld's 100 steps of a slow simulator: gymnasium's
    # TimeLimit ends them sooner, which also checks that an end the environment itself does not see is
    # refused too.
    return {"max_episode_steps": 10} if env_id.startswith(("groundrl/BabyAI-", "groundrl/ScienceWorld-")) else {}


def test_step_outside_an_episode_is_refused_and_changes_nothing(env_id):
    env = make_env(env_id, render_mode="ansi", **_episode_limit(env_id))
    for stepped in (env, env.unwrapped):  # make_env's outermost guard, and the environment's own
        with pytest.raises(ResetNeededError, match=r"call reset\(\) before step\(\)"):
            stepped.step(0)
    first, _ = env.reset(seed=5)
    assert first == make_env(env_id, render_mode="ansi").reset(seed=5)[0]

    rng = np.random.default_rng(0)
    info = env.reset(seed=0)[1]
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(int(rng.integers(len(info["valid_actions"]))))
    ended = "terminated" if terminated else "truncated"
    picture = env.render()
    # the environment refuses too when it ended the episode itself (not a wrapper's time limit)
    refusing = [env] if _episode_limit(env_id) else [env, env.unwrapped]
    for stepped in refusing:
        for action in (0, info["valid_actions"][0], "not an action"):
            with pytest.raises(ResetNeededError, match=rf"the episode has ended \({ended}\); call reset\(\)") as error:
                stepped.step(action)
            assert isinstance(error.value, (groundrl.GroundrlError, gym.error.ResetNeeded))
            assert "\n" not in str(error.value)
    assert env.render() == picture

    obs, info = env.reset(seed=1)
    assert len(env.step(len(info["valid_actions"]) - 1)) == 5


def test_step_and_reset_after_close_are_refused_in_one_line(env_id):
    env = make_env(env_id)
    obs, info = env.reset(seed=0)
    env.close()
    for stepped in (env, env.unwrapped):  # make_env's outermost guard, and the environment's own
        for method, argument in (("step", 0), ("step", info["valid_actions"][0]), ("reset", None)):
            with pytest.raises(ClosedEnvironmentError, match=r"^the environment is closed; make a new one$") as error:
                stepped.step(argument) if method == "step" else stepped.reset(seed=0)
            assert isinstance(error.value, (groundrl.GroundrlError, gym.error.ClosedEnvironmentError))
    never_reset = make_env(env_id)
    never_reset.close()
    with pytest.raises(ClosedEnvironmentError):
        never_reset.step(0)


def test_the_largest_seed_plays(env_id):
    # `groundrl eval --seed` takes seeds up to 2**63 - 1 (episode k: seed + k)
    env = make_env(env_id)
    for seed in (2**32, 2**63 - 1):
        obs, info = env.reset(seed=seed)
        assert obs and info["valid_actions"]
        assert env.reset(seed=seed)[0] == obs  # deterministic
        assert len(env.step(0)) == 5
    env.close()


def test_textworld_plays_any_seed_and_keeps_the_games_of_the_seeds_below_2_32(tmp_path):
    from groundrl.envs.textworld_games import generator_seeds

    assert generator_seeds(2**32 - 1) == 2**32 - 1  # TextWorld's own seed: the cached games stay valid
    env = make_env("groundrl/TextWorld-Simple-v0", games_dir=str(tmp_path))
    huge = 10**5000  # more digits than a file name holds
    first = env.reset(seed=huge)[0]
    assert env.reset(seed=huge)[0] == first and env.reset(seed=huge + 1)[0] != first
    assert all(len(p.name) < 40 for p in tmp_path.rglob("*"))
    env.close()


def test_a_textworld_game_that_fails_to_compile_leaves_nothing(tmp_path, monkeypatch):
    import textworld.generator

    def fail(game, options):
        Path(options.path).with_suffix(".ni").write_text("half")  # what a compiler stopped midway leaves
        raise RuntimeError("inform7 crashed")

    monkeypatch.setattr(textworld.generator, "compile_game", fail)
    env = make_env("groundrl/TextWorld-Simple-v0", games_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="inform7 crashed"):
        env.reset(seed=3)
    assert not list(tmp_path.iterdir())


def test_a_time_limit_ends_the_episode_for_every_wrapper():
    env = make_env("groundrl/FoodPreparation-v0", max_episode_steps=2, render_mode="ansi")
    env.reset(seed=0)
    assert env.step(0)[3] is False and env.step(0)[3] is True
    picture = env.render()
    with pytest.raises(ResetNeededError, match="truncated"):
        env.step(0)
    assert env.render() == picture
    env.reset(seed=0)
    assert env.step(0)[3] is False


def test_environments_pickled_before_episodes_were_tracked_are_mid_episode():
    import pickle

    env = make_env("groundrl/TomatoSalad-v0").unwrapped
    env.reset(seed=0)
    del env._ended  # what a checkpoint written before this check holds
    assert len(pickle.loads(pickle.dumps(env)).step(0)) == 5


def _same_step(one: tuple, other: tuple, names: bool = True) -> bool:
    """Equal observations, rewards, ends and info (arrays compared by value); with names=False the
    valid actions' wording may differ (ScienceWorld names an object anew at each load)."""
    (*head, info), (*other_head, other_info) = one, other
    return head == other_head and info.keys() == other_info.keys() and all(
        np.array_equal(value, other_info[key]) if isinstance(value, np.ndarray) else value == other_info[key]
        for key, value in info.items() if names or key != "valid_actions")


def test_replaying_the_actions_from_the_seed_reproduces_the_episode(env_id):
    """How a trainer restores an environment mid-episode without pickle: a new one, reset with the
    episode's seed, then the actions taken; the one that played other episodes first must agree."""
    played = make_env(env_id)
    rng = np.random.default_rng(1)
    info = played.reset(seed=99)[1]
    for _ in range(3):  # another episode first, so that nothing carries over a reset unnoticed
        _, _, terminated, truncated, info = played.step(int(rng.integers(len(info["valid_actions"]))))
        if terminated or truncated:
            break
    replayed = make_env(env_id)
    for seed in (0, 8):
        steps, indices = [played.reset(seed=seed)], []
        while len(indices) < 6 and not (len(steps) > 1 and (steps[-1][2] or steps[-1][3])):
            indices.append(int(rng.integers(len(steps[-1][-1]["valid_actions"]))))
            steps.append(played.step(indices[-1]))
        exact = getattr(replayed.unwrapped, "exact_replay", True)
        again = [replayed.reset(seed=seed)]
        for index, step in zip(indices + [None], steps):
            if not exact and step[-1]["valid_actions"] != again[-1][-1]["valid_actions"]:
                break  # ScienceWorld: the same state, its objects named otherwise (see ScienceWorldEnv.exact_replay)
            if index is not None:
                again.append(replayed.step(index))
        assert all(_same_step(one, other, names=exact) for one, other in zip(steps, again))
        if len(again) < len(steps) or (not exact and steps[-1][-1]["valid_actions"] != again[-1][-1]["valid_actions"]):
            continue
        if len(steps) > 1 and (steps[-1][2] or steps[-1][3]):
            continue
        following = int(rng.integers(len(steps[-1][-1]["valid_actions"])))
        assert _same_step(played.step(following), replayed.step(following))


def test_the_actions_prompt_lists_the_valid_actions_before_the_environments_own():
    env = make_env("groundrl/FoodPreparation-v0", prompt="actions")
    own = make_env("groundrl/FoodPreparation-v0")
    for step in range(3):
        if step == 0:
            (prompt, info), (raw, own_info) = env.reset(seed=5), own.reset(seed=5)
        else:
            prompt, *_, info = env.step(0)
            raw, *_, own_info = own.step(0)
        assert prompt == "Possible actions: " + ", ".join(info["valid_actions"]) + ".\n" + raw
        assert info["observation"] == raw and info["valid_actions"] == own_info["valid_actions"]
    # GLAM's template lists the actions already: nothing is added to it
    glam, _ = make_env("groundrl/BabyAI-GoToLocal-v0", prompt="actions").reset(seed=3)
    assert glam == make_env("groundrl/BabyAI-GoToLocal-v0").reset(seed=3)[0]
    with pytest.raises(InvalidArgumentError, match="prompt must be 'auto', 'glam', 'actions' or None"):
        make_env("groundrl/FoodPreparation-v0", prompt="menu")
