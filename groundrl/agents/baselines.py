"""Agents that need no training: uniformly random, BabyAI's planner bot, and the gold paths of
TextWorld, TextWorldExpress and ScienceWorld.

All are :class:`~groundrl.agents.protocols.Policy` agents; the bot and the gold paths read the
environments themselves (``envs``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import gymnasium as gym
import torch

from groundrl.agents.protocols import Generators, choose
from groundrl.envs.babyai_text import BabyAITextEnv
from groundrl.errors import InvalidArgumentError


class RandomAgent:
    """Uniform over the valid actions (the floor every learned agent must beat).

    >>> RandomAgent().act(["obs"], [["a", "b"]], generator=torch.Generator().manual_seed(0))[0]
    [1]
    """

    def act(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]], *,
            infos: Sequence[dict] | None = None, envs: Sequence[gym.Env] | None = None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        probs = [torch.full((len(actions),), 1 / len(actions)) for actions in valid_actions]
        return choose(probs, False, generator), probs  # uniform even when asked for the greedy action


class BabyAIBotAgent:
    """minigrid's BabyAI planner bot, playing any BabyAI-Text environment from its true state.

    It solves every level of GLAM's suite (the demonstrations of behavioural cloning, and the upper
    bound of the baselines). A new bot plans each episode; it fails clearly if the environment's
    action set lacks an action it needs (e.g. "pick up" with the 3-action set).

    >>> import groundrl
    >>> env = groundrl.make_env("groundrl/BabyAI-GoToLocal-v0")
    >>> obs, info = env.reset(seed=17)
    >>> bot, done = BabyAIBotAgent(), False
    >>> while not done:
    ...     (action,), _ = bot.act([obs], [info["valid_actions"]], envs=[env])
    ...     obs, reward, terminated, truncated, info = env.step(action)
    ...     done = terminated or truncated
    >>> info["success"]
    True
    """

    def cannot_play(self, env: gym.Env) -> str:
        """Why this agent cannot play ``env`` ('' when it can)."""
        return "" if isinstance(env.unwrapped, BabyAITextEnv) else "the BabyAI bot plays BabyAI-Text only"

    def __init__(self):
        # per text environment: (the instruction object of its episode, the bot planning it)
        self._bots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def act(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]], *,
            infos: Sequence[dict] | None = None, envs: Sequence[gym.Env] | None = None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        from minigrid.utils.baby_ai_bot import BabyAIBot  # start-up time: the bot is rarely played

        if envs is None or len(envs) != len(observations):
            raise InvalidArgumentError("the BabyAI bot plans on the environments' state: pass envs=")
        choices, probs = [], []
        for env, actions in zip(envs, valid_actions):
            text_env = env.unwrapped
            if not isinstance(text_env, BabyAITextEnv):
                raise InvalidArgumentError("the BabyAI bot plays BabyAI-Text environments only, "
                                           f"not {env.spec.id if env.spec else env}")
            level = text_env.minigrid
            instructions, bot = self._bots.get(text_env, (None, None))
            if instructions is not level.instrs:  # a new episode
                bot = BabyAIBot(level)
                self._bots[text_env] = (level.instrs, bot)
            planned = int(bot.replan())
            index = text_env.action_index(planned)
            if index is None:
                raise InvalidArgumentError(f"the BabyAI bot needs minigrid action '{level.actions(planned).name}', "
                                           f"which the action set {text_env.actions} lacks")
            choices.append(index)
            probs.append(torch.nn.functional.one_hot(torch.tensor(index), len(actions)).float())
        return choices, probs


def gold_stand_in(wanted: str, actions: Sequence[str], same_command=None) -> int | None:
    """The index of the valid action that does what a gold path's ``wanted`` does (None: none).

    In order: the action itself; the one the game says is the same command, its objects named
    otherwise (``same_command(wanted)``, ScienceWorld's ``ScienceWorldEnv.same_command``); of the
    valid actions of the same verb ("open" is not "close", however alike they read) whose every word
    is one of ``wanted``'s or a template's link ("into", "on", ...), the one that shares the most
    words with it in order, if one past the verb's (on a tie: the fewest other words, then the object
    ``wanted`` names first: "focus on thermometer in inventory" is not "focus on inventory").

    ScienceWorld's paths name an object by its whole description and place ("flower pot 4
    containing peach tree and soil in inventory", "adult giant tortoise in outside"), its valid
    actions by one name of it ("flower pot", "adult adult giant tortoise"). A word ``wanted`` lacks
    names another object ("pick up substance in metal pot" is not "pick up metal pot").

    >>> gold_stand_in("move flower pot 4 containing a tree in inventory to purple box",
    ...               ["move flower pot to inventory", "move flower pot to purple box", "move tree to purple box"])
    1
    >>> gold_stand_in("open door to kitchen", ["close door to kitchen", "go to kitchen"]) is None
    True
    >>> gold_stand_in("pick up seed jar", ["pick up sewer", "look around"]) is None
    True
    >>> gold_stand_in("focus on thermometer in inventory", ["focus on inventory", "focus on thermometer"])
    1
    >>> gold_stand_in("pick up metal pot", ["pick up substance in metal pot"]) is None
    True
    >>> gold_stand_in("pour cup containing red paint in art studio in jug", ["pour cup containing red paint into jug"])
    0
    """
    if wanted in actions:
        return list(actions).index(wanted)
    same = same_command(wanted) if same_command is not None else None
    if same in actions:
        return list(actions).index(same)
    words = wanted.split()
    best, best_key = None, None
    for i, action in enumerate(actions):
        candidate = action.split()
        if candidate[0] != words[0] or not set(candidate) <= set(words) | _LINKS:
            continue
        verb = 0  # the words of the verb both begin with ("pick up", "focus on", "move"), two at most
        while verb < min(len(words), len(candidate), 2) and words[verb] == candidate[verb]:
            verb += 1
        shared = _words_in_order(words, candidate)
        first = words.index(candidate[verb], verb) if verb < len(candidate) and candidate[verb] in words[verb:] \
            else len(words)  # where the candidate's object begins in ``wanted``
        key = (shared, -len(candidate), -first)
        if shared > verb and (best_key is None or key > best_key):
            best, best_key = i, key
    return best


_LINKS = frozenset({"in", "into", "on", "to", "from", "with", "and"})
"""The words a command's template puts between its objects, which the paths' parser reads in other
forms ("pour A in B" is the valid "pour A into B")."""


def _words_in_order(a: Sequence[str], b: Sequence[str]) -> int:
    """The length of the longest common subsequence of two word lists."""
    previous = [0] * (len(b) + 1)
    for word in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


class GoldPathAgent:
    """Plays the solution the game's package gives (``env.unwrapped.gold_actions``: TextWorld's
    walkthrough, TextWorldExpress's and ScienceWorld's gold paths): an upper bound for the agents.

    Each step it takes the next action of the path. The path is written in the game parser's words,
    which are not always a valid action's: then it takes the stand-in :func:`gold_stand_in` finds,
    or else lets that step of the path go (ScienceWorld's paths open doors that its "easy" setting
    has opened already): it plays the game's ``gold_no_op`` instead where it has one (ScienceWorld's
    ``wait1``: a plant grows or an egg hatches at the step the path expects) and the episode's steps
    left (``steps_left``) hold the rest of the path after it, else skips the step (a long path then
    still ends inside ``max_steps``). Past the path's end, the no-op, else the first valid action.

    >>> import groundrl
    >>> env = groundrl.make_env("groundrl/TWX-CoinCollector-v0", params={"numLocations": 2})  # doctest: +SKIP
    >>> obs, info = env.reset(seed=0)                                                      # doctest: +SKIP
    >>> gold, done = GoldPathAgent(), False                                                # doctest: +SKIP
    >>> while not done:                                                                    # doctest: +SKIP
    ...     (action,), _ = gold.act([obs], [info["valid_actions"]], envs=[env])
    ...     obs, reward, terminated, truncated, info = env.step(action)
    ...     done = terminated or truncated
    >>> info["success"]                                                                    # doctest: +SKIP
    True
    """

    def __init__(self):
        # per environment: (the path of its episode, how far along it the agent is)
        self._progress: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def cannot_play(self, env: gym.Env) -> str:
        """Why this agent cannot play ``env`` ('' when it can)."""
        return "" if hasattr(env.unwrapped, "gold_actions") else \
            "the gold paths are TextWorld's, TextWorldExpress's and ScienceWorld's only"

    def act(self, observations: Sequence[str], valid_actions: Sequence[Sequence[str]], *,
            infos: Sequence[dict] | None = None, envs: Sequence[gym.Env] | None = None, greedy: bool = False,
            generator: Generators = None) -> tuple[list[int], list[torch.Tensor]]:
        if envs is None or len(envs) != len(observations):
            raise InvalidArgumentError("the gold-path agent reads the environments' solutions: pass envs=")
        choices, probs = [], []
        for env, actions in zip(envs, valid_actions):
            game = env.unwrapped
            if self.cannot_play(env):
                raise InvalidArgumentError(self.cannot_play(env))
            path, done = self._progress.get(game, (None, 0))
            if path is not game.gold_actions:  # a new episode: a new path
                path, done = game.gold_actions, 0
            no_op, steps_left = getattr(game, "gold_no_op", None), getattr(game, "steps_left", None)
            index = None
            while index is None and done < len(path):
                wanted = path[done]
                done += 1
                index = gold_stand_in(wanted, actions, getattr(game, "same_command", None))
                # waiting keeps the path's pace where the episode has the steps to spare; else skipping saves one
                if index is None and no_op in actions and (steps_left is None or steps_left - 1 >= len(path) - done):
                    index = list(actions).index(no_op)
            self._progress[game] = (path, done)
            if index is None:  # past the path's end: let time pass rather than act (a ScienceWorld focus can lose)
                index = list(actions).index(no_op) if no_op in actions else 0
            choices.append(index)
            probs.append(torch.nn.functional.one_hot(torch.tensor(index), len(actions)).float())
        return choices, probs
