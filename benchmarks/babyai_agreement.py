"""How close each policy is to the BabyAI bot on one fixed set of BabyAI-Text states.

Per agent (the untrained model, training checkpoints, random): the mean probability it gives the bot's
action, how often its most likely action is the bot's (ties split), its entropy, and how much its
action depends on the state at all (the mutual information between the state and the action: 0 for a
policy that acts alike everywhere, however sharp), beside the success of its marginal played whatever
the state (``--marginal-episodes`` evaluation episodes: what the policy would score without reading
the observation). A probe of what an LLM agent has learned that costs a few minutes where an
evaluation of 1,000 episodes costs hours, and a measure of the model's prior on these prompts.

The states: ``--episodes`` episodes from seeds 3,000,000 on (apart from training and evaluation
seeds), played half by the bot and half at random (each step is the bot's with probability
``--bot-share``), so that the states cover what a learning agent visits; each state is labelled
with the action a bot planning from it afresh would take. The bot's action is one of the good
ones (turning left or right can be as good when the goal is behind), so agreement is a lower bound
on how often a policy acts well. Every agent reads the prompt its training used (``--prompt``,
``--window``; a trained run's own settings when given one).

    python benchmarks/babyai_agreement.py zero-shot random            # the prior of the default model
    python benchmarks/babyai_agreement.py runs/.../checkpoints/update-000016 runs/.../checkpoints/update-000032
    python benchmarks/babyai_agreement.py zero-shot --model tiny-llama --episodes 4   # check the script
    groundrl bench babyai_agreement zero-shot
"""

from __future__ import annotations

import argparse
import math
import sys
import time

GROUP = "probes"
SEED = 3_000_000  # apart from training seeds (from the run's seed) and evaluation seeds (from 1,000,000)


def collect_states(env_id: str, episodes: int, bot_share: float, prompt: str, window: int, seed: int = SEED):
    """Observations, infos and the bot's action index for every state of ``episodes`` episodes."""
    import numpy as np
    from minigrid.utils.baby_ai_bot import BabyAIBot

    import groundrl
    from groundrl.envs.babyai_text import BabyAITextEnv
    from groundrl.errors import InvalidArgumentError

    env = groundrl.make_env(env_id, prompt=prompt, window=window)
    if not isinstance(env.unwrapped, BabyAITextEnv):
        env.close()
        raise InvalidArgumentError(f"{env_id} is not a BabyAI-Text level: the bot labels BabyAI states only "
                                   "(e.g. --env groundrl/BabyAI-GoToLocal-v0)")
    rng = np.random.default_rng(seed)
    states = []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        done = False
        while not done:
            text_env = env.unwrapped
            expert = text_env.action_index(int(BabyAIBot(text_env.minigrid).replan()))
            states.append((obs, info, expert))
            actions = info["valid_actions"]
            action = expert if rng.random() < bot_share else int(rng.integers(len(actions)))
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
    env.close()
    return states


def marginal_play(env_id: str, marginal: dict[str, float], episodes: int, seed: int | None = None) -> float:
    """The success rate of a policy that draws every action from ``marginal``, whatever the state:
    what a policy that ignores the state gets on ``episodes`` episodes (evaluation seeds by default,
    the episodes `groundrl eval` plays)."""
    import numpy as np

    import groundrl
    from groundrl.runs import EVALUATION_SEED

    seed = EVALUATION_SEED if seed is None else seed
    env = groundrl.make_env(env_id)
    rng = np.random.default_rng(seed)
    names, weights = list(marginal), np.array(list(marginal.values()))
    weights = weights / weights.sum()
    successes = 0
    for episode in range(episodes):
        _, info = env.reset(seed=seed + episode)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(names[rng.choice(len(names), p=weights)])
            done = terminated or truncated
        successes += bool(info.get("success"))
    env.close()
    return successes / episodes


def agreement(agent, states, batch: int = 8) -> dict:
    """Mean P(bot action), the share of states where the most likely action is the bot's, the mean
    entropy (nats), the mutual information between state and action (nats), the mean P(bot action)
    per bot action, and the policy's mean probability of each action over all states (its marginal:
    where a prior puts its mass whatever the state)."""
    p_expert, top, entropy, per_action, marginal = [], [], [], {}, {}
    for start in range(0, len(states), batch):
        chunk = states[start:start + batch]
        _, probs = agent.act([o for o, _, _ in chunk], [i["valid_actions"] for _, i, _ in chunk],
                             infos=[i for _, i, _ in chunk], greedy=True)
        for (_, info, expert), p in zip(chunk, probs):
            p = p.float()
            p_expert.append(float(p[expert]))
            best = (p == p.max()).nonzero().flatten().tolist()
            top.append(1 / len(best) if expert in best else 0.0)  # ties split: uniform play agrees 1/6
            entropy.append(float(-(p.clamp_min(1e-12).log() * p).sum()))
            per_action.setdefault(info["valid_actions"][expert], []).append(float(p[expert]))
            for action, probability in zip(info["valid_actions"], p.tolist()):
                marginal[action] = marginal.get(action, 0.0) + probability / len(states)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    # I(S; A) = H(mean policy) - mean H(policy): what the state changes in the choice (nats)
    state_dependence = max(0.0, -sum(q * math.log(q) for q in marginal.values() if q > 0) - mean(entropy))  # >= 0
    return {"p_bot_action": mean(p_expert), "agreement": mean(top), "entropy": mean(entropy),
            "state_dependence": state_dependence,
            "per_action": {a: (mean(xs), len(xs)) for a, xs in sorted(per_action.items())},
            "marginal": dict(sorted(marginal.items()))}


def probe(args) -> list[tuple]:
    """(agent, number of states, result, seconds) for each agent of ``args.agents``."""
    from groundrl.eval.agents import evaluation_agent, trained_settings

    rows, state_sets = [], {}
    for spec in args.agents:
        prompt, window = args.prompt, args.window
        if spec not in ("zero-shot", "random"):
            config, _ = trained_settings(spec)
            prompt, window = config.prompt, config.prompt_window
        if (prompt, window) not in state_sets:
            state_sets[prompt, window] = collect_states(args.env, args.episodes, args.bot_share, prompt, window)
        states = state_sets[prompt, window]
        agent, _, _ = evaluation_agent(spec, model=args.model if spec == "zero-shot" else None,
                                       precision=args.precision)
        start = time.perf_counter()
        result = agreement(agent, states)
        result["marginal_play"] = marginal_play(args.env, result["marginal"], args.marginal_episodes)
        rows.append((spec, len(states), result, time.perf_counter() - start))
        print(f"{spec}: P(bot action) {result['p_bot_action']:.3f}, agreement {result['agreement']:.3f}, "
              f"entropy {result['entropy']:.3f}, I(state; action) {result['state_dependence']:.3f} over "
              f"{len(states)} states; its marginal, played whatever the state: success {result['marginal_play']:.2f}",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agents", nargs="+", help="zero-shot, random, or a training run folder or checkpoint")
    parser.add_argument("--env", default="groundrl/BabyAI-GoToLocal-v0")
    parser.add_argument("--episodes", type=int, default=20, help="episodes the states come from")
    parser.add_argument("--bot-share", type=float, default=0.5,
                        help="probability a step of those episodes is the bot's")
    parser.add_argument("--prompt", default="actions", help="the prompt option of the zero-shot and random agents "
                        "(a trained agent reads its own): auto, actions, glam")
    parser.add_argument("--window", type=int, default=3, help="past observations in the prompt (likewise)")
    parser.add_argument("--model", default=None, help="model of the zero-shot agent (default: the embedded model)")
    parser.add_argument("--marginal-episodes", type=int, default=1000,
                        help="evaluation episodes played drawing each action from the agent's marginal, whatever "
                        "the state (the success a policy that ignores the state would have)")
    parser.add_argument("--precision", default=None, help="fp32 or bf16-mixed (default: fp32, or the run's)")
    args = parser.parse_args(argv)
    if not 0 <= args.bot_share <= 1 or args.episodes < 1 or args.marginal_episodes < 1:
        parser.error("--bot-share is a probability, --episodes and --marginal-episodes at least 1")

    from rich.console import Console
    from rich.table import Table

    from groundrl.errors import GroundrlError

    try:
        rows = probe(args)
    except GroundrlError as error:  # an unknown agent, environment, model or precision: one line
        print(f"error: {error}", file=sys.stderr)
        return 2

    table = Table(title=f"{args.env}: the policy against the BabyAI bot ({args.episodes} episodes' states, "
                        f"bot share {args.bot_share}; uniform over 6 actions: 0.167 / entropy {math.log(6):.3f})")
    for column in ("agent", "states", "P(bot action)", "agreement", "entropy", "I(state; action)",
                   f"marginal play ({args.marginal_episodes} ep.)", "P(bot action) per bot action",
                   "mean P(action), all states", "seconds"):
        table.add_column(column)
    for spec, count, result, seconds in rows:
        per = ", ".join(f"{a} {p:.2f} ({n})" for a, (p, n) in result["per_action"].items())
        marginal = ", ".join(f"{a} {p:.2f}" for a, p in result["marginal"].items())
        table.add_row(spec, str(count), f"{result['p_bot_action']:.3f}", f"{result['agreement']:.3f}",
                      f"{result['entropy']:.3f}", f"{result['state_dependence']:.3f}",
                      f"{result['marginal_play']:.2f}", per, marginal, f"{seconds:.0f}")
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
