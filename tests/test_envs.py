import gymnasium as gym
import pytest
from gymnasium.utils import env_checker

import groundrl
from groundrl.envs import TextSpace, list_envs, make_env, resolve_action
from groundrl.errors import UnknownEnvironmentError


def test_registered_on_import():
    assert "groundrl/FollowInstruction-v0" in list_envs()
    assert "groundrl/FollowInstruction-v0" in gym.registry


def test_unknown_env_is_one_clear_error():
    with pytest.raises(UnknownEnvironmentError, match="unknown environment 'groundrl/Nope-v0'; available: "):
        make_env("groundrl/Nope-v0")
    assert isinstance(UnknownEnvironmentError("x"), groundrl.GroundrlError)


def test_resolve_action():
    actions = ["turn left", "go forward"]
    assert resolve_action("go forward", actions) == 1
    assert resolve_action(0, actions) == 0
    for bad, message in [(2, "out of range"), (-1, "out of range"), ("fly", "not valid now"), (1.0, "not float"),
                         (True, "not bool"), (None, "not NoneType")]:
        with pytest.raises(ValueError, match=message):
            resolve_action(bad, actions)


def test_text_space_holds_any_string():
    space = TextSpace(max_length=10)
    assert space.contains("à droite") and not space.contains("x" * 11) and not space.contains(3)


@pytest.mark.parametrize("env_id", list_envs())
def test_every_environment_follows_the_contract(env_id):
    # gymnasium's full check_env steps with random strings from the action space, which our
    # contract rejects; its reset checks apply as they are.
    env = gym.make(env_id)
    env_checker.check_reset_return_type(env.unwrapped)
    env_checker.check_reset_seed_determinism(env.unwrapped)
    env_checker.check_reset_options(env.unwrapped)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs and env.observation_space.contains(obs)
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


@pytest.mark.parametrize("env_id", groundrl.list_envs())
def test_environments_pickle_mid_episode(env_id):
    """Training checkpoints keep environments mid-episode: a copy continues exactly."""
    import pickle

    env = groundrl.make_env(env_id)
    env.reset(seed=3)
    env.step(0)
    copy = pickle.loads(pickle.dumps(env))
    for action in (1, 0, 1):
        original, copied = env.step(action), copy.step(action)
        assert original[:4] == copied[:4]
        if original[2] or original[3]:
            break
