"""Self-imitation (Oh et al., ICML 2018): learn again from the run's best episodes.

Exploration pays for rare successes, and an on-policy update all but throws them away: a decision
an epsilon mixture took weighs ``pi_old / mu`` in the clipped loss, a fiftieth of an on-policy one.
Self-imitation keeps the best finished episodes of the run and, after each update, takes a few
steps of ``-log pi(a | s) * max(G - V(s), 0)`` on their decisions under the *current* policy: the
loss needs no importance weight, so it is exact whatever policy found the episode, and only a
decision whose return beat what the critic expects moves the policy.

An episode is kept as what rebuilds it, plain data independent of the weights: the seed its
environment was reset with and the actions taken (groundrl's environments are deterministic given
both, as the collector's restore relies on). Its decisions (the prompt the agent read, the valid
actions, the action, the return from there) are rebuilt by replaying a fresh environment, once.

Hindsight (``sil.hindsight``): an environment that reports the missions a step accomplished
(``info["achieved_missions"]``, BabyAI-Text's) turns a finished episode that reached another goal
than its own into a success of that goal: the episode up to there, kept with the mission it is
replayed with (``reset(options={"mission": m})``), checked by the environment's own verifier.

Decisions are drawn by priority, as Oh et al. draw theirs: a decision's priority is its clipped
advantage ``max(G - V(s), 0)``, assessed when its episode is kept and again whenever it is drawn. A
success among 64 kept episodes is some 60 decisions of 6,000: drawn uniformly, 64 draws an update
reach its serving decision once in 100 updates; by priority the draws go where the return beat the
critic until the critic, or the policy, has caught up. (Oh et al.'s replay gives a new decision the
highest priority instead, so that it is drawn once; with a hundred new decisions an update that
starved the few that count: a kept success's serving decision went undrawn for 25 updates.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from groundrl.train.collector import episode_success
from groundrl.train.exploration import observation_key


@dataclass
class KeptEpisode:
    """A finished episode in the memory, as plain data."""

    seed: int
    actions: list[int]
    episode_return: float  # the environment's, unscaled: what ranks the episodes
    update: int  # the update it ended in (between equal returns, the most recent stays)
    samples: int = 0  # decisions drawn from it so far
    # each decision's clipped advantage when last drawn, or when the episode was kept (empty: not yet assessed)
    priorities: list[float] = field(default_factory=list)
    mission: str | None = None  # the goal it is a success of, where not its own (hindsight); replayed with it


@dataclass
class ImitatedDecision:
    """One decision of a kept episode, rebuilt: what the agent read and did, and what followed."""

    input: Any
    valid_actions: list[str]
    action: int
    return_to_go: float  # discounted (semi-MDP where the environment reports macro-steps), x reward_scale
    episode_return: float  # the whole episode's, x reward_scale (the critic-free methods' advantage)
    episode: int = field(default=-1)  # its episode's place in the memory
    step: int = field(default=-1)  # its place in its episode
    reward: float = 0.0  # the environment's, unscaled
    macro_steps: float = 1.0  # the primitive steps it took
    reached: int = 0  # the observation it reached (its key in the novelty counts)


class EpisodeMemory:
    """The best ``capacity`` finished episodes of the run by return (ties: the most recent)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.episodes: list[KeptEpisode] = []

    def __len__(self) -> int:
        return len(self.episodes)

    def offer(self, episodes: Sequence[KeptEpisode]) -> list[KeptEpisode]:
        """Keep the best of the memory and ``episodes``; the ones of ``episodes`` that were kept.

        >>> memory = EpisodeMemory(2)
        >>> kept = memory.offer([KeptEpisode(1, [0], 1.0, 1), KeptEpisode(2, [1], 0.0, 1), KeptEpisode(3, [2], 0.5, 1)])
        >>> [e.seed for e in memory.episodes], [e.seed for e in kept]
        ([1, 3], [1, 3])
        >>> [e.seed for e in memory.offer([KeptEpisode(4, [0], 1.0, 2)])], [e.seed for e in memory.episodes]
        ([4], [4, 1])
        """
        ranked = sorted([*self.episodes, *episodes], key=lambda e: (e.episode_return, e.update), reverse=True)
        self.episodes = ranked[:self.capacity]
        kept = {id(e) for e in self.episodes}
        return [e for e in episodes if id(e) in kept]

    def state_dict(self) -> dict:
        return {"episodes": [asdict(e) for e in self.episodes]}

    def load_state_dict(self, state: dict) -> None:
        self.episodes = [KeptEpisode(**e) for e in state["episodes"]][:self.capacity]


def replay(env: gym.Env, episode: KeptEpisode, observe: Callable[[Any, dict], Any], gamma: float,
           reward_scale: float) -> list[ImitatedDecision] | None:
    """The decisions of ``episode``, rebuilt by resetting ``env`` with its seed and playing its
    actions; None when the replay does not give the episode's return (an environment that is not
    deterministic given both), or fails."""
    try:
        obs, info = _reset(env, episode.seed, episode.mission)
        steps = []
        for action in episode.actions:
            valid = [str(a) for a in info["valid_actions"]]
            decision_input = observe(obs, info)
            obs, reward, _, _, info = env.step(action)
            steps.append((decision_input, valid, action, float(reward), float(info.get("macro_steps", 1)),
                          observation_key(info.get("observation", obs))))
    except Exception:  # noqa: BLE001 - an episode that cannot be replayed is not imitated
        return None
    if abs(sum(s[3] for s in steps) - episode.episode_return) > 1e-6 * max(1.0, abs(episode.episode_return)):
        return None
    decisions, to_go = [], 0.0
    for step, (decision_input, valid, action, reward, macro_steps, reached) in reversed(list(enumerate(steps))):
        to_go = reward * reward_scale + gamma ** macro_steps * to_go
        decisions.append(ImitatedDecision(decision_input, valid, action, to_go, episode.episode_return * reward_scale,
                                          step=step, reward=reward, macro_steps=macro_steps, reached=reached))
    return decisions[::-1]


def _reset(env: gym.Env, seed: int, mission: str | None) -> tuple[Any, dict]:
    return env.reset(seed=seed, options={"mission": mission}) if mission is not None else env.reset(seed=seed)


def relabelled(env: gym.Env, seed: int, actions: Sequence[int], own: str | None, achieved: dict[str, int],
               count: int, update: int) -> list[KeptEpisode]:
    """Hindsight (Andrychowicz et al. 2017; SAC-GLAM): up to ``count`` successes made of a finished
    episode (``seed``, ``actions``) that accomplished missions other than its ``own`` (``achieved``:
    each one's first decision), the last accomplished first: the episode up to that decision, with
    that mission. Each is kept only where the environment's own check, replaying it with the mission
    (``reset(options={"mission": m})``), ends it there with a success; its return is that replay's."""
    found = []
    for mission, last in sorted(achieved.items(), key=lambda item: (-item[1], item[0])):
        if len(found) == count:
            break
        if mission == own:
            continue
        taken, total, ended = list(actions[:last + 1]), 0.0, None
        try:
            _reset(env, seed, mission)
            for step, action in enumerate(taken):
                _, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                if terminated or truncated:
                    ended = (step, terminated, reward, info)
                    break
        except Exception:  # noqa: BLE001 - an episode that cannot be replayed is not relabelled
            continue
        if ended is not None and ended[0] == last and ended[1] and episode_success(ended[3], True, float(ended[2])):
            found.append(KeptEpisode(seed, taken, total, update, mission=mission))
    return found


PRIORITY_FLOOR = 1e-6  # added to every priority (Oh et al.'s): a decision whose return fell short stays drawable


class SelfImitation:
    """The memory of kept episodes and what is rebuilt from it: their decisions (by replaying
    ``make_env()``, made when first needed), and the critic-free methods' baseline.

    Args:
        capacity: the episodes kept.
        make_env: a fresh environment of the run's (with its prompt options).
        observe: what the agent reads of an observation (``agent.observe``).
        gamma: the discount of the returns to go (per primitive step, as the collector's).
        reward_scale: the rewards' scale in learning.
    """

    def __init__(self, capacity: int, make_env: Callable[[], gym.Env], observe: Callable[[Any, dict], Any],
                 gamma: float, reward_scale: float):
        self.memory = EpisodeMemory(capacity)
        self.make_env, self.observe, self.gamma, self.reward_scale = make_env, observe, gamma, reward_scale
        self.env: gym.Env | None = None
        self.replays: dict[tuple, list[ImitatedDecision] | None] = {}  # a kept episode's decisions, rebuilt once
        self.baseline = 0.0  # the critic-free advantage's: the last offered episodes' mean return, x reward_scale

    def keep(self, episodes: Sequence[KeptEpisode], relabelled: Sequence[KeptEpisode] = ()) -> None:
        """Offer finished episodes, and those made of them in hindsight (the same, in the same order,
        on every process), to the memory; the critic-free baseline is the finished episodes' mean."""
        if episodes:
            self.baseline = float(np.mean([e.episode_return for e in episodes])) * self.reward_scale
        self.memory.offer([*episodes, *relabelled])

    def relabel(self, seed: int, actions: Sequence[int], own: str | None, achieved: dict[str, int], count: int,
                update: int) -> list[KeptEpisode]:
        """:func:`relabelled`, replayed in this memory's environment."""
        if self.env is None:
            self.env = self.make_env()
        return relabelled(self.env, seed, actions, own, achieved, count, update)

    def decisions(self) -> list[ImitatedDecision]:
        """Every decision of the kept episodes, rebuilt (once per episode; ``ImitatedDecision.episode``
        its episode's place in the memory); an episode whose replay does not give its return leaves
        the memory."""
        if self.env is None:
            self.env = self.make_env()
        decisions, replayable = [], []
        for episode in self.memory.episodes:
            key = (episode.seed, tuple(episode.actions), episode.mission)
            if key not in self.replays:
                self.replays[key] = replay(self.env, episode, self.observe, self.gamma, self.reward_scale)
            if self.replays[key] is None:
                continue
            for decision in self.replays[key]:
                decision.episode = len(replayable)
                decisions.append(decision)
            replayable.append(episode)
        self.memory.episodes = replayable
        kept = {(e.seed, tuple(e.actions), e.mission) for e in replayable}
        self.replays = {key: value for key, value in self.replays.items() if key in kept}
        return decisions

    def returns(self, decisions: Sequence[ImitatedDecision],
                bonus: Callable[[int], float] | None = None) -> list[float]:
        """Each decision's discounted return from there (x ``reward_scale``): the environment's
        rewards, and with ``bonus`` (what reaching an observation, by its key, pays now) the novelty
        bonuses too, as a critic that learns them expects them (``decisions`` as :meth:`decisions`
        gives them: each episode's in order)."""
        if bonus is None:
            return [d.return_to_go for d in decisions]
        returns, to_go = [0.0] * len(decisions), 0.0
        for i in reversed(range(len(decisions))):
            decision = decisions[i]
            if i + 1 == len(decisions) or decisions[i + 1].episode != decision.episode:
                to_go = 0.0
            to_go = (decision.reward + bonus(decision.reached)) * self.reward_scale \
                + self.gamma ** decision.macro_steps * to_go
            returns[i] = to_go
        return returns

    def unassessed(self, decisions: Sequence[ImitatedDecision]) -> list[int]:
        """The places in ``decisions`` of those whose episode has no priorities yet (new in the memory)."""
        new = {i for i, e in enumerate(self.memory.episodes) if len(e.priorities) != len(e.actions)}
        return [i for i, d in enumerate(decisions) if d.episode in new]

    def assessed(self, decisions: Sequence[ImitatedDecision], advantages: Sequence[float]) -> None:
        """Give every decision of new episodes (all of each) its first priority, its clipped advantage."""
        for decision, advantage in zip(decisions, advantages):
            episode = self.memory.episodes[decision.episode]
            if len(episode.priorities) != len(episode.actions):
                episode.priorities = [0.0] * len(episode.actions)
            episode.priorities[decision.step] = float(advantage)

    def draw_weights(self, decisions: Sequence[ImitatedDecision], exponent: float) -> np.ndarray:
        """Each decision's chance of being drawn: its priority (its clipped advantage when last drawn or
        assessed) to the power ``exponent``, normalized; uniform at 0. A tiny floor keeps every
        decision drawable."""
        priorities = np.array([self.memory.episodes[d.episode].priorities[d.step] for d in decisions],
                              dtype=np.float64)
        weights = (priorities + PRIORITY_FLOOR) ** exponent
        return weights / weights.sum()

    def drawn(self, decisions: Sequence[ImitatedDecision], advantages: Sequence[float]) -> None:
        """Record the clipped advantages of drawn decisions as their priorities (and count the draws)."""
        for decision, advantage in zip(decisions, advantages):
            episode = self.memory.episodes[decision.episode]
            episode.priorities[decision.step] = float(advantage)
            episode.samples += 1

    def statistics(self) -> dict[str, float]:
        """What an update logs of the memory: its episodes (and how many of them hindsight made), their
        mean return (unscaled) and how many decisions were drawn from each, on average."""
        kept = self.memory.episodes
        return {"sil_episodes": float(len(kept)), "sil_relabelled": float(sum(e.mission is not None for e in kept)),
                "sil_return": float(np.mean([e.episode_return for e in kept])) if kept else float("nan"),
                "sil_episode_samples": float(np.mean([e.samples for e in kept])) if kept else 0.0}

    def state_dict(self) -> dict:
        return {**self.memory.state_dict(), "baseline": self.baseline}

    def load_state_dict(self, state: dict) -> None:
        self.memory.load_state_dict(state)
        self.baseline = state["baseline"]

