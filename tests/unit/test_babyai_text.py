"""BabyAI-Text: GLAM's sentences on hand-built grids, levels, held-out pairs, prompts, the bot."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.grid import Grid
from minigrid.core.mission import MissionSpace
from minigrid.core.world_object import Ball, Box, Door, Key, Wall
from minigrid.minigrid_env import MiniGridEnv

import groundrl
from groundrl.agents import BabyAIBotAgent, LLMPolicy, RandomAgent
from groundrl.envs import GlamPrompt, RewriteWords, glam_prompt, make_env
from groundrl.envs.babyai_levels import HELD_OUT_PAIRS, LocalLevel, color_noun_pairs
from groundrl.envs.babyai_text import (
    ACTION_SETS,
    GENERALIZATION_TESTS,
    INVENTED_WORDS,
    BabyAITextEnv,
    describe,
    translate_mission,
)
from groundrl.errors import GroundrlError, InvalidArgumentError
from groundrl.eval import evaluate

BABYAI_IDS = [env_id for env_id in groundrl.list_envs() if env_id.startswith("groundrl/BabyAI-")]
UP, RIGHT = 3, 0  # minigrid's agent directions


class Scene(MiniGridEnv):
    """A walled room with things where we put them, and the agent placed by hand."""

    def __init__(self, things=(), agent=(3, 5), direction=UP, size=7):
        self.things, self.start = things, (agent, direction)
        super().__init__(mission_space=MissionSpace(mission_func=lambda: "look"), width=size, height=size,
                         max_steps=10, see_through_walls=False)

    def _gen_grid(self, width, height):
        self.grid = Grid(width, height)
        self.grid.wall_rect(0, 0, width, height)
        for (x, y), thing in self.things:
            self.grid.set(x, y, thing)
        self.agent_pos, self.agent_dir = self.start
        self.mission = "look"


def sentences(things=(), agent=(3, 5), direction=UP, carrying=None, language="english", size=7):
    env = Scene(things, agent, direction, size)
    env.reset(seed=0)
    env.carrying = carrying  # minigrid shows it in the agent's own cell, which is never described
    carried = (carrying.color, carrying.type) if carrying else None
    return describe(env.gen_obs()["image"], carried, language)


def test_walls_in_each_direction_with_distances_and_singular_step():
    assert sentences() == ["You see a wall 5 steps forward", "You see a wall 3 steps left",
                           "You see a wall 3 steps right"]
    assert sentences(agent=(1, 1), size=5) == ["You see a wall 1 step forward", "You see a wall 1 step left",
                                               "You see a wall 3 steps right"]
    # 5 right: out of view
    assert sentences(agent=(1, 1)) == ["You see a wall 1 step forward", "You see a wall 1 step left"]
    # facing right from (1, 3): forward is +x, left is -y
    assert sentences(agent=(1, 3), direction=RIGHT, things=[((3, 2), Ball("red"))]) == [
        "You see a wall 5 steps forward", "You see a wall 3 steps left", "You see a wall 3 steps right",
        "You see a red ball 1 step left and 2 steps forward"]


def test_objects_in_every_relative_position_left_to_right_then_far_to_near():
    things = [((3, 3), Ball("red")), ((1, 5), Key("blue")), ((5, 5), Box("green")), ((2, 4), Ball("yellow")),
              ((4, 2), Key("purple")), ((2, 1), Box("grey"))]
    # an object on the line forward, left or right hides the wall behind it from the wall sentences
    assert sentences(things) == [
        "You see a blue key 2 steps left",
        "You see a grey box 1 step left and 4 steps forward",
        "You see a yellow ball 1 step left and 1 step forward",
        "You see a red ball 2 steps forward",
        "You see a purple key 1 step right and 3 steps forward",
        "You see a green box 2 steps right",
    ]


def _wall_with_door(door):
    return [((x, 3), Wall()) for x in (1, 2, 4, 5)] + [((3, 3), door), ((3, 1), Ball("green")), ((1, 1), Key("red"))]


def test_doors_in_each_state_and_occlusion_by_walls_and_closed_doors():
    closed = sentences(_wall_with_door(Door("red", is_open=False)))
    assert closed == ["You see a wall 3 steps left", "You see a wall 3 steps right",
                      "You see a closed red door 2 steps forward"]
    locked = sentences(_wall_with_door(Door("red", is_locked=True)))
    assert locked[-1] == "You see a locked red door 2 steps forward" and len(locked) == 3
    opened = sentences(_wall_with_door(Door("red", is_open=True)))
    # GLAM's article is "a" for every door state ("You see a open red door")
    assert "You see a open red door 2 steps forward" in opened
    assert "You see a green ball 4 steps forward" in opened  # seen through the open door, listed before it (farther)
    assert (opened.index("You see a green ball 4 steps forward")
            < opened.index("You see a open red door 2 steps forward"))
    assert not any("wall 5 steps forward" in s for s in opened)  # the door is the first thing forward


def test_carried_object_comes_first():
    assert sentences(agent=(1, 1), carrying=Key("blue"))[0] == "You carry a blue key"
    assert sentences(agent=(1, 1), carrying=Key("blue"), language="french")[0] == "Tu portes une clef bleue"


def test_french_sentences():
    things = [((3, 3), Ball("red")), ((2, 4), Key("blue"))]
    assert sentences(things, language="french") == [
        "Tu vois un mur à 3 pas à gauche", "Tu vois un mur à 3 pas à droite",
        "Tu vois une clef bleue 1 pas à gauche et 1 pas devant", "Tu vois une balle rouge 2 pas devant"]
    locked = sentences(_wall_with_door(Door("grey", is_locked=True)), language="french")
    assert locked[-1] == "Tu vois une porte grise fermée à clef 2 pas devant"
    assert translate_mission("put the red key next to a box") == "mettre la clef rouge à côté de une boîte"
    with pytest.raises(InvalidArgumentError, match="French"):
        translate_mission("dance")


def test_matches_the_prompt_glams_code_tests_with():
    """GLAM's training script checks its model on hand-written prompts of GoToLocal; ours, from
    minigrid's GoToLocal with seed 0, are the same scene word for word (GLAM's test prompts
    predate its final wording: "A green key" there is "You see a green key" in training)."""
    env = make_env("groundrl/BabyAI-GoToLocal-v0")
    env.reset(seed=0)
    env.step("go forward")
    prompt, *_ = env.step("turn right")
    glam = (" \n Goal of the agent: go to the green ball \n Observation 0: A wall 2 steps left, A purple key 1 step "
            "left and 2 steps forward, A yellow key 1 step left and 1 step forward, A green ball 3 steps forward, A "
            "grey ball 1 step right and 5 steps forward, A green key 1 step right and 2 steps forward, A grey ball 1 "
            "step right and 1 step forward, A green key 2 steps right and 4 steps forward, A red box 2 steps right "
            "and 2 steps forward, \n Action 0: go forward \n Observation 1: A purple key 1 step left and 1 step "
            "forward, A yellow key 1 step left, A green ball 2 steps forward, A grey ball 1 step right and 4 steps "
            "forward, A green key 1 step right and 1 step forward, A grey ball 1 step right, A green key 2 steps "
            "right and 3 steps forward, A red box 2 steps right and 1 step forward, \n Action 1: turn right \n "
            "Observation 2: A wall 2 steps right, A green key 3 steps left and 2 steps forward, A green ball 2 steps "
            "left, A red box 1 step left and 2 steps forward, A green key 1 step left and 1 step forward, A grey ball "
            "1 step forward, \n Action 2: ")
    head = "Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle"
    assert prompt == head + glam.replace("A ", "You see a ").replace(": You see a", ": You see a")


@pytest.mark.parametrize("env_id", BABYAI_IDS)
def test_same_seed_same_episode(env_id):
    first, second = gym.make(env_id), gym.make(env_id)
    for seed in (0, 7):
        (obs_a, info_a), (obs_b, info_b) = first.reset(seed=seed), second.reset(seed=seed)
        assert (obs_a, info_a["mission"]) == (obs_b, info_b["mission"])
        np.testing.assert_array_equal(info_a["image"], info_b["image"])
        for action in (2, 0, 2, 2, 1, 3):
            step_a, step_b = first.step(action), second.step(action)
            assert step_a[:4] == step_b[:4]
            if step_a[2] or step_a[3]:
                break
    observations = {first.reset(seed=seed)[0] for seed in range(20)}
    assert len(observations) > 15


def test_task_kind_drawn_per_episode_from_the_seed():
    level = LocalLevel()
    kinds = []
    for seed in range(60):
        level.reset(seed=seed)
        kinds.append(level.kind)
    assert set(kinds) == {"goto", "pickup", "open", "putnext", "pickup-then-goto"}
    again = []
    for seed in range(60):
        level.reset(seed=seed)
        again.append(level.kind)
    assert again == kinds


def test_level_layouts_and_time_limits():
    expected_steps = {"GoToLocal": 64, "PickupLocal": 64, "PutNextLocal": 128, "OpenLocal": 128,
                      "PickUpThenGoToLocal": 128, "PickUpSeqPickUpLocal": 128}
    for level, steps in expected_steps.items():
        env = BabyAITextEnv(level)
        env.reset(seed=1)
        assert env.minigrid.max_steps == steps, level
    env = BabyAITextEnv("OpenLocal")
    for seed in range(20):
        _, info = env.reset(seed=seed)
        grid = env.minigrid.grid
        doors = [c for c in grid.grid if c is not None and c.type == "door"]
        assert (grid.width, grid.height) == (15, 8) and len(doors) == 1 and doors[0].is_locked
        keys = [c for c in grid.grid if c is not None and c.type == "key" and c.color == doors[0].color]
        agent_room = env.minigrid.room_from_pos(*env.minigrid.agent_pos)
        assert any(agent_room.pos_inside(*k.cur_pos) for k in keys)
        assert info["mission"] in ("open the door", f"open the {doors[0].color} door")


def test_mixed_train_never_names_a_held_out_pair_and_mixed_test_names_only_those():
    train, test = LocalLevel(held_out="exclude"), LocalLevel(held_out="only")
    for seed in range(500):
        train.reset(seed=seed)
        assert not set(color_noun_pairs(train.mission)) & HELD_OUT_PAIRS, train.mission
        if train.kind == "open":
            assert train.locked_room is not None
        test.reset(seed=seed)
        pairs = color_noun_pairs(test.mission)
        assert pairs and set(pairs) <= HELD_OUT_PAIRS, test.mission
    doors = {c.color for level in (train, test) for c in level.grid.grid if c is not None and c.type == "door"}
    assert doors <= {"yellow", "green", "blue", "purple", "red", "grey"}


def test_doors_of_held_out_colors_only_at_test_time():
    for held_out, allowed in (("exclude", {"yellow", "green", "blue", "purple"}), ("only", {"red", "grey"})):
        level = LocalLevel(kinds=("open",), held_out=held_out)
        colors = set()
        for seed in range(100):
            level.reset(seed=seed)
            colors |= {c.color for c in level.grid.grid if c is not None and c.type == "door"}
        assert colors == allowed


def test_rejected_samples_are_not_printed(capfd):
    env = gym.make("groundrl/BabyAI-MixedTestLocal-v0")
    for seed in range(30):
        env.reset(seed=seed)
    assert capfd.readouterr().out == ""


def test_action_sets():
    env = BabyAITextEnv("GoToLocal", actions="move")
    _, info = env.reset(seed=0)
    assert info["valid_actions"] == ["turn left", "turn right", "go forward"]
    with pytest.raises(ValueError, match="not valid"):
        env.step("pick up")

    env = BabyAITextEnv("GoToLocal", actions="extended")
    obs, info = env.reset(seed=0)
    assert len(info["valid_actions"]) == 9
    for no_op in ("sleep", "do nothing", "think"):  # minigrid's "done": nothing changes
        after, reward, terminated, _, _ = env.step(no_op)
        assert (after, reward, terminated) == (obs, 0.0, False)

    synonyms = BabyAITextEnv("GoToLocal", actions="synonyms")
    plain = BabyAITextEnv("GoToLocal")
    synonyms.reset(seed=3), plain.reset(seed=3)
    for synonym, name in zip(ACTION_SETS["synonyms"], ACTION_SETS["default"]):
        assert synonyms.step(synonym)[0] == plain.step(name)[0]

    custom = BabyAITextEnv("GoToLocal", actions=["left", "right", "ahead"])
    assert custom.reset(seed=0)[1]["valid_actions"] == ["left", "right", "ahead"]
    for bad in ("nope", [], ["a", "a"]):
        with pytest.raises(InvalidArgumentError):
            BabyAITextEnv("GoToLocal", actions=bad)
    with pytest.raises(InvalidArgumentError, match="unknown BabyAI level"):
        BabyAITextEnv("GoToMars")
    with pytest.raises(InvalidArgumentError, match="language"):
        BabyAITextEnv("GoToLocal", language="klingon")


def test_any_minigrid_babyai_level_works():
    env = BabyAITextEnv("BabyAI-UnlockLocal-v0")
    obs, info = env.reset(seed=0)
    assert info["mission"] == "open the door" and obs.startswith("You see")


def test_french_environment():
    env = gym.make("groundrl/BabyAI-GoToLocalFrench-v0")
    obs, info = env.reset(seed=0)
    assert info["mission"] == "aller à la balle verte"
    assert info["valid_actions"] == list(ACTION_SETS["french"])
    assert obs.startswith("Tu vois un mur à 2 pas à gauche, Tu vois une clef violette 1 pas à gauche et 2 pas devant")
    prompt, _ = make_env("groundrl/BabyAI-GoToLocalFrench-v0").reset(seed=0)
    assert prompt.startswith("Actions possibles pour l'agent: tourner à gauche, tourner à droite, aller tout droit")
    assert " \n But de l'agent: aller à la balle verte \n Observation 0: Tu vois" in prompt


def test_render_modes():
    env = gym.make("groundrl/BabyAI-OpenLocal-v0", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape[2] == 3 and frame.shape[1] > frame.shape[0]  # two rooms side by side
    env = gym.make("groundrl/BabyAI-GoToLocal-v0", render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert text.startswith("go to the green ball\n") and "WG" in text


def test_glam_prompt_template_and_window():
    assert glam_prompt(["a", "b"], "win", ["o0"], []) == (
        "Possible action of the agent: a, b \n Goal of the agent: win \n Observation 0: o0, \n Action 0: ")
    assert glam_prompt(["a"], None, [""], []) == "Possible action of the agent: a \n Observation 0: \n Action 0: "
    with pytest.raises(ValueError):
        glam_prompt(["a"], "win", ["o0", "o1"], [])

    env = make_env("groundrl/BabyAI-GoToLocal-v0")
    prompt, info = env.reset(seed=5)
    observations = [info["observation"]]
    taken = []
    for action in ["turn left", "turn left", "go forward", "turn right"]:
        prompt, _, terminated, truncated, info = env.step(action)
        taken.append(action)
        observations.append(info["observation"])
        assert not (terminated or truncated)
    # the last 3 observations and the 2 actions between them, renumbered from 0
    assert prompt == glam_prompt(ACTION_SETS["default"], "go to a grey key", observations[-3:], taken[-2:])
    assert prompt.count("Observation") == 3 and prompt.endswith("\n Action 2: ")
    prompt, info = env.reset(seed=5)  # cleared at the end of an episode
    assert prompt.count("Observation") == 1

    env = make_env("groundrl/BabyAI-GoToLocal-v0", window=1)
    env.reset(seed=5)
    prompt, *_ = env.step("turn left")
    assert prompt.count("Observation") == 1 and "Action 0: \n" not in prompt and prompt.endswith("Action 0: ")
    with pytest.raises(InvalidArgumentError, match="window"):
        make_env("groundrl/BabyAI-GoToLocal-v0", window=0)


def test_glam_prompt_on_any_text_environment():
    env = make_env("groundrl/FollowInstruction-v0", prompt="glam")
    prompt, info = env.reset(seed=0)
    assert prompt.startswith("Possible action of the agent: ") and "Goal of the agent" not in prompt
    assert "Observation 0: Instruction: go to the purple ball." in prompt
    raw, _ = make_env("groundrl/BabyAI-GoToLocal-v0", prompt=None).reset(seed=0)
    assert raw.startswith("You see")
    with pytest.raises(InvalidArgumentError, match="prompt"):
        make_env("groundrl/BabyAI-GoToLocal-v0", prompt="fancy")


def test_rewrite_words_replaces_whole_words_in_prompt_and_mission_only():
    env = RewriteWords(GlamPrompt(BabyAITextEnv("GoToLocal")), {"red": "faze", "Goal of the agent": "You have to"})
    assert env.rewrite("a red ball, a reduced box") == "a faze ball, a reduced box"
    prompt, info = env.reset(seed=0)
    assert " \n You have to: go to" in prompt and info["valid_actions"] == list(ACTION_SETS["default"])
    with pytest.raises(InvalidArgumentError):
        RewriteWords(BabyAITextEnv("GoToLocal"), {})


@pytest.mark.parametrize("name", sorted(GENERALIZATION_TESTS))
def test_generalization_tests_change_what_they_say(name):
    test = GENERALIZATION_TESTS[name]
    env = make_env(test.env_id, **test.make_env_kwargs())
    prompts, missions = [], []
    for seed in range(10):
        prompt, info = env.reset(seed=seed)
        prompts.append(prompt)
        missions.append(info["mission"])
    text = " ".join(prompts)
    words = set(text.replace(",", " ").split())
    if name == "new-nouns":
        assert {"chair", "table", "car"} & words and not {"key", "ball", "box"} & words
    elif name == "invented-words":
        assert not set(INVENTED_WORDS) & words and {"dax", "xolo", "afze"} & words
    elif name == "synonym-actions":
        assert info["valid_actions"] == list(ACTION_SETS["synonyms"]) and "rotate left, rotate right" in text
    elif name == "french":
        assert all(m.startswith("aller à") for m in missions) and "Tu vois" in text
    elif name == "new-composition":
        assert all(m.count("pick up") == 2 for m in missions)
    elif name == "new-objects":
        assert all(set(color_noun_pairs(m)) <= HELD_OUT_PAIRS for m in missions)
    else:
        assert name == "new-seeds" and test.env_id.endswith("MixedTrainLocal-v0")


@pytest.mark.parametrize("env_id", BABYAI_IDS)
def test_bot_solves_every_level(env_id):
    env, bot = make_env(env_id), BabyAIBotAgent()
    successes = 0
    for episode in range(200):
        obs, info = env.reset(seed=10_000 + episode)
        done = False
        while not done:
            (action,), _ = bot.act([obs], [info["valid_actions"]], envs=[env])
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes += info["success"]
    assert successes >= 198


def test_bot_says_what_it_cannot_do():
    env = make_env("groundrl/BabyAI-PickupLocal-v0", actions="move")
    obs, info = env.reset(seed=0)
    with pytest.raises(InvalidArgumentError, match="pickup"):
        for _ in range(64):
            (action,), _ = BabyAIBotAgent().act([obs], [info["valid_actions"]], envs=[env])
            obs, *_, info = env.step(action)
    other = make_env("groundrl/FollowInstruction-v0")
    obs, info = other.reset(seed=0)
    with pytest.raises(GroundrlError, match="BabyAI-Text environments only"):
        BabyAIBotAgent().act([obs], [info["valid_actions"]], envs=[other])
    with pytest.raises(GroundrlError, match="envs="):
        BabyAIBotAgent().act([obs], [info["valid_actions"]])


def test_evaluate_random_bot_and_llm_on_babyai():
    bot = evaluate(BabyAIBotAgent(), "groundrl/BabyAI-PutNextLocal-v0", episodes=8, num_envs=3, progress=False)
    assert bot.success_rate == 1.0
    random = evaluate(RandomAgent(), "groundrl/BabyAI-PutNextLocal-v0", episodes=8, num_envs=3, progress=False)
    assert random.success_rate < 1.0 and random.mean_length > bot.mean_length
    llm = evaluate(LLMPolicy(groundrl.load_llm("tiny-llama")), "groundrl/BabyAI-GoToLocal-v0", episodes=2,
                   num_envs=2, progress=False)
    assert llm.episodes == 2


# -- hindsight: the missions an episode accomplished, and the episode replayed with one of them ----

def played(env, seed: int, moves: int = 60, pick=np.random.default_rng) -> tuple[list[int], list[dict]]:
    """A random episode of ``env`` from ``seed``: its actions and each step's info."""
    rng, actions, infos = pick(seed), [], []
    env.reset(seed=seed)
    for _ in range(moves):
        actions.append(int(rng.integers(len(env.actions))))
        _, _, terminated, truncated, info = env.step(actions[-1])
        infos.append(info)
        if terminated or truncated:
            break
    return actions, infos


@pytest.mark.parametrize("level", ["GoToLocal", "PutNextLocal", "PickupLocal", "OpenLocal", "MixedTrainLocal"])
def test_a_mission_an_episode_accomplished_is_the_success_of_that_episode_replayed_with_it(level):
    env, replay = BabyAITextEnv(level, hindsight=True), BabyAITextEnv(level)
    relabelled = 0
    for seed in range(12):
        actions, infos = played(env, seed)
        first = {}  # mission -> the first step that accomplished it
        for step, info in enumerate(infos):
            for mission in info["achieved_missions"]:
                first.setdefault(mission, step)
        for mission, step in first.items():
            original_obs = [env.reset(seed=seed)[0]] + [env.step(a)[0] for a in actions[:step + 1]]
            obs, info = replay.reset(seed=seed, options={"mission": mission})
            observations = [obs]
            assert info["mission"] == mission
            for t, action in enumerate(actions[:step + 1]):
                obs, reward, terminated, _, info = replay.step(action)
                observations.append(obs)
                # the environment's own check: the relabelled episode succeeds where it was accomplished
                assert terminated == (t == step) and (reward > 0) == (t == step)
            assert info["success"] and observations == original_obs  # the same states, another mission
            relabelled += 1
    assert relabelled > 0


def test_a_mission_never_accomplished_never_succeeds_on_replay():
    env = BabyAITextEnv("GoToLocal", hindsight=True)
    actions, infos = played(env, 4)
    achieved = {m for info in infos for m in info["achieved_missions"]}
    never = [m for m in env._instructions() if m not in achieved][:10]
    assert never
    for mission in never:
        env.reset(seed=4, options={"mission": mission})
        for action in actions:
            _, reward, terminated, truncated, _ = env.step(action)
            assert reward == 0 and not terminated
            if truncated:
                break


def test_mixed_train_local_never_relabels_into_a_held_out_pair():
    env = BabyAITextEnv("MixedTrainLocal", hindsight=True)
    missions = {m for seed in range(20) for info in played(env, seed, 80)[1] for m in info["achieved_missions"]}
    assert missions and not any(pair in HELD_OUT_PAIRS for m in missions for pair in color_noun_pairs(m))


def test_hindsight_in_french_and_off_by_default():
    env = BabyAITextEnv("GoToLocal", language="french", hindsight=True)
    missions = [(seed, m) for seed in range(6) for info in played(env, seed)[1] for m in info["achieved_missions"]]
    assert missions and all(m.startswith(("aller à ", "attraper ")) for _, m in missions)
    seed, mission = missions[0]
    obs, info = env.reset(seed=seed, options={"mission": mission})
    assert info["mission"] == mission
    plain = BabyAITextEnv("GoToLocal")
    plain.reset(seed=0)
    assert "achieved_missions" not in plain.step(0)[4]


def test_a_mission_about_no_object_of_the_episode_is_a_one_line_error():
    env = make_env("groundrl/BabyAI-GoToLocal-v0")  # through GLAM's prompt, as agents see it
    with pytest.raises(InvalidArgumentError, match="mission 'go to the pink ball' is about no object of this episode"):
        env.reset(seed=0, options={"mission": "go to the pink ball"})
    with pytest.raises(InvalidArgumentError, match=r"unknown reset options \['goal'\]"):
        env.reset(seed=0, options={"goal": "x"})
    obs, info = env.reset(seed=0, options={"mission": "go to the green ball"})
    assert "Goal of the agent: go to the green ball" in obs
