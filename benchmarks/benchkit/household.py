"""Exhaustive analysis of a household task (:mod:`groundrl.envs.household`): every reachable state,
and the exact probability that a policy reaches the goal within an episode.

The benchmarks (``prior``, ``random_policy``, ``train_food_preparation``) and the tests use it; the
environments do not (it is the truth a sampled evaluation estimates, not part of playing).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from groundrl.envs.household import HouseholdTask, World
from groundrl.errors import InvalidArgumentError


class _Transition(NamedTuple):
    action_id: int
    executed: bool
    after: World
    done: bool


def _search(task: HouseholdTask, key: Callable[[World], Any]) -> dict[Any, tuple[World, list[_Transition]]]:
    """Breadth-first from the start over the states that ``key`` tells apart: for each (in
    discovery order), the first world found for it and its transitions under the valid actions.
    States reached only through the goal are not expanded."""
    start = World(task.scene)
    first_world = {key(start): start}
    queue = deque([key(start)])
    graph = {}
    while queue:
        state = queue.popleft()
        world = first_world[state]
        _, ids = task.read(world, task.features_of(world))
        transitions = []
        for action_id in ids:
            after = world.copy()
            executed = after.execute(task.parsed_actions[action_id])
            done = bool(task.goal(task.features_of(after)))
            transitions.append(_Transition(action_id, executed, after, done))
            if not done and key(after) not in first_world:
                first_world[key(after)] = after
                queue.append(key(after))
        graph[state] = (world, transitions)
    return graph


def agent_policy(agent, prompt: str | None):
    """``policy(prompts, valid_actions)`` for :func:`success_probability`: a groundrl agent's action
    probabilities, reading each state as its run did (``prompt`` ``"auto"``: the task's own text;
    ``"actions"``: the valid actions listed first). Other prompts depend on the steps taken, not on the
    state alone: refused (GroundrlError)."""
    import torch

    from groundrl.envs import actions_prompt
    from groundrl.errors import GroundrlError

    if prompt not in ("auto", "actions"):
        raise GroundrlError(f"prompt={prompt}: the exact success is computed for the task's own prompt (auto) or "
                            "with the actions listed (actions)")
    read = actions_prompt if prompt == "actions" else (lambda text, actions: text)

    def policy(prompts, actions):
        with torch.no_grad():
            return [p.tolist() for p in agent.act([read(p, a) for p, a in zip(prompts, actions)], actions)[1]]
    return policy


def task_states(task: HouseholdTask) -> list[tuple[str, list[int]]]:
    """Every reachable world state's text before the task's words are substituted, and its valid action
    ids, breadth-first from the start (the goal's states not expanded)."""
    return [task.read(world, task.features_of(world)) for world, _ in _search(task, World.snapshot).values()]


def explore(task: HouseholdTask, distinguish: str = "observation") -> list[dict[str, Any]]:
    """Every reachable state, breadth-first from the start, with its transitions.

    With ``distinguish="observation"`` (TWOSOME's tables), states are told apart by what the agent
    observes (the features) and whether it sits, and each is represented by the first world found
    that looks like it; with ``"world"``, every distinct world state counts (what the agent does
    not see included). Every valid action is tried from each state. Returns one record per state,
    in discovery order: ``features``, ``sitting``, ``prompt``, ``valid_actions``, and
    ``transitions`` (``action_id``, ``action``, ``executed``, ``reward``, ``next``: the features
    and sitting of the next state, ``terminated``). States reached only through the goal are not
    expanded.
    """
    if distinguish not in ("observation", "world"):
        raise InvalidArgumentError(f"distinguish must be 'observation' or 'world', not {distinguish!r}")

    def seen_as(world: World) -> tuple[tuple[int, ...], bool]:
        features = task.features_of(world)
        return tuple(features[n] for n in task.features), world.seat is not None

    records = []
    for world, transitions in _search(task, seen_as if distinguish == "observation" else World.snapshot).values():
        features, sitting = seen_as(world)
        prompt, ids = task.read(world, dict(zip(task.features, features)))
        records.append({
            "features": features, "sitting": sitting, "prompt": task.substitute(prompt),
            "valid_actions": [task.substitute(task.actions[i]) for i in ids],
            "transitions": [
                {"action_id": t.action_id, "action": task.substitute(task.actions[t.action_id]), "executed": t.executed,
                 "reward": float(t.done), "next": seen_as(t.after), "terminated": t.done}
                for t in transitions
            ],
        })
    return records


def random_success_probability(task: HouseholdTask, max_steps: int = 50) -> float:
    """The exact probability that a uniformly random choice among the valid actions reaches the
    goal within ``max_steps`` steps (dynamic programming over every reachable world state)."""
    return success_probability(task, max_steps)


def success_probability(task: HouseholdTask, max_steps: int = 50, policy=None) -> float:
    """The exact probability that a policy reaches the goal within ``max_steps`` steps, by dynamic
    programming over every reachable world state (cheap: the tasks have tens of states).

    ``policy(prompts, valid_actions)`` returns, per state, the probabilities of its valid actions
    (e.g. ``lambda p, a: [x.tolist() for x in LLMPolicy(llm).act(p, a)[1]]``); uniform by
    default. This is the truth a sampled evaluation estimates.
    """
    graph = _search(task, World.snapshot)
    states = list(graph)
    menus = []
    for state in states:
        world, _ = graph[state]
        prompt, ids = task.read(world, task.features_of(world))
        menus.append((task.substitute(prompt), ids))
    if policy is None:
        probabilities = [[1 / len(ids)] * len(ids) for _, ids in menus]
    else:
        probabilities = policy([p for p, _ in menus],
                               [[task.substitute(task.actions[i]) for i in ids] for _, ids in menus])
    edges = {}
    for state, (_, ids), probs in zip(states, menus, probabilities):
        by_action = dict(zip(ids, probs))
        edges[state] = [(float(by_action[t.action_id]), t.after.snapshot(), t.done) for t in graph[state][1]]
    success = dict.fromkeys(edges, 0.0)  # within 0 steps
    for _ in range(max_steps):
        success = {state: sum(p * (1.0 if done else success[to]) for p, to, done in out)
                   for state, out in edges.items()}
    return success[World(task.scene).snapshot()]
