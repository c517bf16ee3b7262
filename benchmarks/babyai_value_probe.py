"""How much of BabyAI-Text's returns a critic could explain, and how much the run's does.

Can a critic tell a good BabyAI-Text state from a bad one? On the states of a level: how much of
the returns' variance the state explains at all (the ceiling of any critic's explained variance),
and how much a value head on the frozen model's features explains, beside a table of the value by
where the goal is in the agent's view.

Why: the GLAM example's critic (an MLP on the frozen model's last hidden state) explained no
variance over whole GoToLocal runs (docs/results.md). That is the returns (under a near-random
policy, reaching the goal is luck, and the state says little about the return), the features (the
frozen model does not encode where the goal is), or the critic's training (too few epochs, too
small a rate). The probe tells them apart:

- the states: ``--episodes`` episodes from seeds 3,000,000 on, played by a behaviour policy (each
  step the BabyAI bot's with probability ``--bot-share`` while the agent carries nothing, else
  uniform: 0 is how a run starts);
- each state's return G (discounted at the run's gamma) and its value V, the mean return of
  ``--rollouts`` continuations of the same policy from a copy of the state;
- the ceiling: Var(V) / Var(G), the share of the returns' variance the state explains (Var(V)
  less the rollouts' own noise);
- three critics fitted to G on two thirds of the episodes and scored on the rest (held-out
  explained variance, 1 - Var(G - prediction) / Var(G), and R^2 against V): the run's value head
  (a fresh copy, Adam at the run's ``ppo.value_lr``, minibatches of ``ppo.value_minibatch_size``,
  as many epochs as the held-out loss keeps falling: more than a run gives it) and a ridge
  regression, both on the features the run's critic reads, and a ridge regression on where the
  nearest goal object is in the agent's 7x7 view (one cell of 49, or out of view: the best reader
  of the current observation); with ``--own-layers K``, a critic of its own (``agent.llm.critic=own``:
  a trainable copy of the K layers above the trunk, and the value head), trained the same way, so
  that what it reads of the prompt learns too; and the run's value head and a ridge regression on
  the same features with the episode's time beside them (``agent.llm.critic_time``: the share of the
  time limit used and the steps left, which no prompt says).

    python benchmarks/babyai_value_probe.py                             # the GLAM example's critic, uniform play
    python benchmarks/babyai_value_probe.py --bot-share 0.5             # a policy that reaches the goal half the time
    python benchmarks/babyai_value_probe.py --bot-share 0.5 --own-layers 2,4  # and critics of their own (critic=own)
    python benchmarks/babyai_value_probe.py --bot-share 0.5 --features /tmp/f.npz  # the features kept for the next run
    python benchmarks/babyai_value_probe.py --episodes 3 --rollouts 2 model=tiny-llama agent.llm.train_layers=1  # check it
    groundrl bench babyai_value_probe
"""  # noqa: E501 (shell command lines)

from __future__ import annotations

import argparse
import contextlib
import copy
import sys
import time
from pathlib import Path

import numpy as np

GROUP = "probes"
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "glam" / "goto_local.yaml"
SEED = 3_000_000  # apart from training seeds (from the run's seed) and evaluation seeds (from 1,000,000)
VIEW = 7  # minigrid's agent view: 7 cells ahead (the agent's own row included) and 3 either side
STEP_BUCKET = 4  # steps taken so far, in buckets of this many (the prompt does not show them)


def behaviour(text_env, bot_share: float, rng: np.random.Generator) -> int:
    """The behaviour policy's action (an index into the valid actions) in the env's current state:
    the bot's with probability ``bot_share`` while the agent carries nothing (carrying, the bot's
    search for a place to drop can run forever), else uniform."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    if bot_share > 0 and rng.random() < bot_share and text_env.minigrid.carrying is None:
        action = text_env.action_index(int(BabyAIBot(text_env.minigrid).replan()))
        if action is not None:
            return action
    return int(rng.integers(len(text_env.action_vocabulary)))


def goal_cell(minigrid) -> int:
    """Where the nearest object the mission names is in the agent's view: ``forward * 7 + right + 3``
    (``forward`` 0-6 cells ahead, ``right`` -3..3), or 49 when it is out of view."""
    _, positions = minigrid.instrs.desc.find_matching_objs(minigrid)
    agent, ahead, right = np.asarray(minigrid.agent_pos), np.asarray(minigrid.dir_vec), np.asarray(minigrid.right_vec)
    best = VIEW * VIEW
    nearest = None
    for position in positions:
        offset = np.asarray(position) - agent
        distance = int(np.abs(offset).sum())
        f, r = int(offset @ ahead), int(offset @ right)
        if 0 <= f < VIEW and abs(r) <= VIEW // 2 and (nearest is None or distance < nearest):
            best, nearest = f * VIEW + r + VIEW // 2, distance
    return best


def continuation_returns(text_env, bot_share: float, gamma: float, rollouts: int,
                         rng: np.random.Generator) -> np.ndarray:
    """The discounted returns of ``rollouts`` plays of the behaviour policy from the env's current
    state, each on a copy of it (minigrid's dynamics are deterministic: the policy is the noise)."""
    returns = np.zeros(rollouts)
    for k in range(rollouts):
        env = copy.copy(text_env)
        env.minigrid = copy.deepcopy(text_env.minigrid)
        discount, done = 1.0, False
        while not done:
            action = behaviour(env, bot_share, rng)
            _, reward, terminated, truncated, _ = env.minigrid.step(env.minigrid_action(action))
            returns[k] += discount * reward
            discount *= gamma
            done = terminated or truncated
    return returns


def collect(env, episodes: int, bot_share: float, gamma: float, rollouts: int, every: int = 1, seed: int = SEED):
    """Every ``every``-th state of each episode (from its first): the episode it is in, its step,
    the observation and info the agent reads, the goal's view cell, the return G that followed and
    the continuations' returns."""
    rng = np.random.default_rng(seed)
    states = []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        text_env = env.unwrapped
        rewards, kept = [], []
        done = False
        while not done:
            if len(rewards) % every == 0:
                kept.append({"episode": episode, "step": len(rewards), "obs": obs, "info": info,
                             "cell": goal_cell(text_env.minigrid),
                             "continuations": continuation_returns(text_env, bot_share, gamma, rollouts, rng)})
            obs, reward, terminated, truncated, info = env.step(behaviour(text_env, bot_share, rng))
            rewards.append(reward)
            done = terminated or truncated
        returns, g = [0.0] * len(rewards), 0.0
        for t in reversed(range(len(rewards))):
            g = rewards[t] + gamma * g
            returns[t] = g
        for state in kept:
            state["return"] = returns[state["step"]]
        states += kept
    return states


def explained_variance(target: np.ndarray, prediction: np.ndarray) -> float:
    """The trainer's :func:`groundrl.train.losses.explained_variance`, of numpy arrays."""
    import torch

    from groundrl.train.losses import explained_variance as of_tensors

    return of_tensors(torch.as_tensor(prediction), torch.as_tensor(target))


def r_squared(target: np.ndarray, prediction: np.ndarray) -> float:
    return float(1 - np.mean((target - prediction) ** 2) / np.var(target)) if np.var(target) > 0 else float("nan")


def ridge(x_train, y_train, x_test, penalties=(1e-3, 1e-2, 1e-1, 1, 10, 100, 1000)) -> np.ndarray:
    """A ridge regression's predictions on ``x_test``, its penalty picked on the last quarter of the
    training rows (they come in episode order, so that quarter is whole episodes apart)."""
    mean, scale = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_test = (x_train - mean) / scale, (x_test - mean) / scale
    split = max(1, int(len(x_train) * 0.75))

    def fit(x, y, penalty):
        y_mean = y.mean()
        w = np.linalg.solve(x.T @ x + penalty * np.eye(x.shape[1]), x.T @ (y - y_mean))
        return lambda z: z @ w + y_mean

    losses = {p: np.mean((fit(x_train[:split], y_train[:split], p)(x_train[split:]) - y_train[split:]) ** 2)
              for p in penalties}
    return fit(x_train, y_train, min(losses, key=losses.get))(x_test)


def train_while_held_out_falls(modules, train_epoch, held_out_loss, patience: int, max_epochs: int) -> int:
    """Epochs of ``train_epoch()`` for as long as ``held_out_loss()`` keeps falling (``patience``
    epochs without a new low end it); ``modules`` are left at their best epoch's weights (their
    initial ones if none did better), and that epoch is returned (0: none)."""
    best, best_epoch, best_state = float("inf"), 0, [copy.deepcopy(m.state_dict()) for m in modules]
    for epoch in range(1, max_epochs + 1):
        train_epoch()
        held_out = held_out_loss()
        if held_out < best:
            best, best_epoch, best_state = held_out, epoch, [copy.deepcopy(m.state_dict()) for m in modules]
        elif epoch - best_epoch >= patience:
            break
    for module, state in zip(modules, best_state):
        module.load_state_dict(state)
    return best_epoch


def fit_head(head, x_train, y_train, x_test, lr: float, batch: int, patience: int = 10, max_epochs: int = 300,
             seed: int = 0) -> tuple[np.ndarray, int]:
    """Train a copy of the critic's value head on (features, returns) as the trainer's value phase
    would (Adam, mean squared error, minibatches), for as long as the loss on the last quarter of
    the training rows falls; its predictions on ``x_test`` at its best epoch, and that epoch."""
    import torch

    torch.manual_seed(seed)
    head = copy.deepcopy(head).float()
    split = max(1, int(len(x_train) * 0.75))
    xt, yt = torch.as_tensor(x_train[:split]).float(), torch.as_tensor(y_train[:split]).float()
    xv, yv = torch.as_tensor(x_train[split:]).float(), torch.as_tensor(y_train[split:]).float()
    optimizer = torch.optim.Adam(head.parameters(), lr=lr, eps=1e-5)

    def epoch():
        for rows in torch.randperm(len(xt)).split(batch):
            loss = ((head(xt[rows]).squeeze(-1) - yt[rows]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def held_out() -> float:
        with torch.no_grad():
            return float(((head(xv).squeeze(-1) - yv) ** 2).mean())

    best_epoch = train_while_held_out_falls([head], epoch, held_out, patience, max_epochs)
    with torch.no_grad():
        return head(torch.as_tensor(x_test).float()).squeeze(-1).numpy(), best_epoch


def fit_own_critic(agent, prompts: list[str], y_train: np.ndarray, train: np.ndarray, lr: float, batch: int,
                   patience: int = 3, max_epochs: int = 30, seed: int = 0) -> tuple[np.ndarray, int]:
    """Train a critic of its own (``agent.llm.critic=own``: its layers above the trunk and its value
    head) on the returns ``y_train`` of the prompts where ``train`` holds, as :func:`fit_head` trains
    a value head (the last quarter of them tells when to stop); its predictions on the other prompts
    at its best epoch, and that epoch. The critic is trained from its initial weights and put back
    there after."""
    import torch

    torch.manual_seed(seed)
    modules = (agent.critic_layers, agent.value_head)
    initial = [copy.deepcopy(m.state_dict()) for m in modules]
    fitted, held = [p for p, t in zip(prompts, train) if t], [p for p, t in zip(prompts, train) if not t]
    split = max(1, int(len(fitted) * 0.75))
    y = torch.as_tensor(y_train).float()
    optimizer = torch.optim.Adam(agent.critic_parameters(), lr=lr, eps=1e-5)

    def predict(chosen: list[str]) -> torch.Tensor:
        with torch.no_grad():
            return torch.cat([agent.own_values(chosen[i:i + batch]) for i in range(0, len(chosen), batch)])

    def epoch():
        for rows in torch.randperm(split).split(batch):
            loss = ((agent.own_values([fitted[i] for i in rows]) - y[rows]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    best_epoch = train_while_held_out_falls(
        modules, epoch, lambda: float(((predict(fitted[split:]) - y[split:]) ** 2).mean()), patience, max_epochs)
    prediction = predict(held).numpy()
    for module, state in zip(modules, initial):
        module.load_state_dict(state)
    return prediction, best_epoch


def critic_features(agent, states, batch: int = 8) -> np.ndarray:
    """What the agent's frozen-base critic reads of each state."""
    from tqdm import tqdm

    features = []
    for start in tqdm(range(0, len(states), batch), desc="the critic's features", unit="batch", leave=False):
        chunk = states[start:start + batch]
        prompts = agent.prompts([agent.observe(s["obs"], s["info"]) for s in chunk])
        features.append(agent.critic_features(prompts).float().cpu().numpy())
    return np.concatenate(features)


def kept_features(agent, states, path: str | None, model: str | None) -> np.ndarray:
    """:func:`critic_features`, kept in ``path`` (``.npz``) and read back from there when it holds
    those of the same prompts and model (the slow part of a probe: a critic's head is fitted in
    seconds on features a pass of the model took a quarter of an hour to give). A file that is not
    theirs is refused, not overwritten."""
    import hashlib
    import zipfile

    from groundrl.errors import InvalidArgumentError

    prompts = agent.prompts([agent.observe(s["obs"], s["info"]) for s in states])
    fingerprint = hashlib.sha256("\x00".join([str(model), *prompts]).encode()).hexdigest()
    if path and Path(path).exists():
        try:
            kept = np.load(path)
            kept_fingerprint = str(kept["fingerprint"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            raise InvalidArgumentError(f"{path} is not a file of features this probe kept: give --features a new "
                                       "file, or remove this one") from None
        if kept_fingerprint == fingerprint:
            return kept["features"]
        print(f"{path} holds the features of other states or another model: computing them again")
    features = critic_features(agent, states)
    if path:
        np.savez(path, features=features, fingerprint=fingerprint)
    return features


def pooled_features(agent, states) -> dict[str, np.ndarray]:
    """Other readings of the same forward pass of the base model (LoRA off), each a feature set for
    a critic: the last token's or the mean of all tokens' hidden state, after the last layer or the
    middle one (where a small model keeps more of what it read)."""
    import torch
    from tqdm import tqdm

    from groundrl.llm.precision import autocast

    model, tokenizer = agent.llm.model, agent.llm.tokenizer
    base_off = model.disable_adapter() if hasattr(model, "disable_adapter") else contextlib.nullcontext()
    readings: dict[str, list] = {}
    with torch.no_grad(), base_off, autocast(agent.precision, agent.device):
        for state in tqdm(states, desc="pooled features", unit="state", leave=False):
            prompt = agent.prompts([agent.observe(state["obs"], state["info"])])[0]
            ids = torch.tensor([tokenizer(prompt)["input_ids"]], device=agent.device)
            hidden = model(input_ids=ids, output_hidden_states=True, logits_to_keep=1).hidden_states
            for layer, name in ((len(hidden) - 1, "last layer"), (len(hidden) // 2, f"layer {len(hidden) // 2}")):
                states_of_layer = hidden[layer][0].float()
                readings.setdefault(f"last token, {name}", []).append(states_of_layer[-1].cpu().numpy())
                readings.setdefault(f"mean of the tokens, {name}", []).append(states_of_layer.mean(0).cpu().numpy())
    return {name: np.stack(rows) for name, rows in readings.items()}


def probe(args) -> dict:
    """Every figure of the table, for one behaviour policy."""
    import torch

    import groundrl
    from groundrl.agents.factory import build_agent
    from groundrl.agents.llm_agent import AgentInput, TimeAwareHead, time_features
    from groundrl.train.config import load_config_file

    config = load_config_file(args.config, args.overrides)
    if config.agent.kind.value != "llm" or config.agent.llm.critic.value != "frozen":
        raise SystemExit(f"error: {args.config} trains no frozen-base critic (agent.llm.critic=frozen): "
                         "this probe fits that critic's value head on its features")
    gamma = config.ppo.gamma

    def make():
        return groundrl.make_env(config.env, **config.env_options)

    env = make()
    if not hasattr(env.unwrapped, "minigrid"):
        raise SystemExit(f"error: {config.env} is not a BabyAI-Text level (e.g. env=groundrl/BabyAI-GoToLocal-v0)")
    start = time.perf_counter()
    states = collect(env, args.episodes, args.bot_share, gamma, args.rollouts, args.every)
    max_steps = env.unwrapped.minigrid.max_steps  # set by a level's reset
    env.close()
    collect_seconds = time.perf_counter() - start
    g = np.array([s["return"] for s in states])
    continuations = np.stack([s["continuations"] for s in states])
    v = continuations.mean(1)
    noise = continuations.var(1, ddof=1).mean() / args.rollouts if args.rollouts > 1 else 0.0
    ceiling = max(0.0, float(np.var(v) - noise)) / float(np.var(g)) if np.var(g) > 0 else float("nan")

    test = np.array([s["episode"] >= args.episodes * 2 // 3 for s in states])
    if test.all() or not test.any():
        raise SystemExit("error: too few episodes to hold a third out: use --episodes 3 or more")
    cell = np.eye(VIEW * VIEW + 1)[[s["cell"] for s in states]]
    buckets = -(-max_steps // STEP_BUCKET)
    step = np.eye(buckets)[[s["step"] // STEP_BUCKET for s in states]]

    start = time.perf_counter()
    torch.manual_seed(config.seed)  # the value head's initial weights: the same on every run of the probe
    agent = build_agent(config.agent, make(), model=config.model, dtype=config.dtype, device=args.device,
                        seed=config.seed, precision=config.precision)
    features = kept_features(agent, states, args.features, config.model)
    pooled = pooled_features(agent, states) if args.pooling else {}
    feature_seconds = time.perf_counter() - start

    # the time-aware critic's reading: the same features and the episode's time (agent.llm.critic_time)
    timed = np.concatenate([features, time_features([AgentInput("", time=(s["info"]["elapsed_steps"],
                                                                          s["info"]["max_episode_steps"]))
                                                     for s in states]).numpy()], 1)
    timed_head = TimeAwareHead(copy.deepcopy(agent.value_head))  # the run's head, as critic_time builds it

    def head(target, x=features, value_head=agent.value_head):
        return fit_head(value_head, x[~test], target[~test], x[test], config.ppo.value_lr,
                        config.ppo.value_minibatch_size)

    def linear(x):
        return lambda target: (ridge(x[~test], target[~test], x[test]), None)

    own_critics = {}
    for layers in args.own_layers:
        own = build_agent(load_config_file(args.config, [*args.overrides, "agent.llm.critic=own",
                                                         f"agent.llm.critic_layers={layers}"]).agent,
                          make(), model=config.model, dtype=config.dtype, device=args.device, seed=config.seed,
                          precision=config.precision)
        own.trunk = agent.trunk  # the same pretrained layers below: the states the features pass kept serve it
        prompts = own.prompts([own.observe(s["obs"], s["info"]) for s in states])

        def fit_own(target, own=own, prompts=prompts):
            return fit_own_critic(own, prompts, target[~test], ~test, config.ppo.value_lr,
                                  config.ppo.value_minibatch_size)

        own_critics[f"a critic of its own: {layers} layer(s) above the trunk and the value head, trained"] = fit_own

    critics = {
        "the run's value head on the critic's features": head,
        **own_critics,
        "the value head on the critic's features and the time (critic_time)":
            lambda target: head(target, timed, timed_head),
        "ridge on the critic's features": linear(features),
        "ridge on the critic's features and the time": linear(timed),
        **{f"ridge on the {name}": linear(x) for name, x in pooled.items()},
        "ridge on the goal's view cell": linear(cell),
        f"ridge on the step (buckets of {STEP_BUCKET})": linear(step),
        "ridge on the goal's view cell and the step": linear(np.concatenate([cell, step], 1)),
    }
    rows = {}
    for name, fit in critics.items():
        start = time.perf_counter()
        on_g, epochs_g = fit(g)
        on_v, epochs_v = fit(v)
        rows[name] = {"explained_variance": explained_variance(g[test], on_g), "r2_value": r_squared(v[test], on_v),
                      "epochs": None if epochs_g is None else (epochs_g, epochs_v),
                      "seconds": time.perf_counter() - start}
    rows["the state's value V itself"] = {"explained_variance": explained_variance(g[test], v[test]),
                                          "r2_value": 1.0, "epochs": None, "seconds": 0.0}
    return {"states": len(states), "test_states": int(test.sum()), "test_successes": int(
                len({s["episode"] for s, t in zip(states, test) if t and s["return"] > 0})),
            "success": float(np.mean([s["return"] > 0 for s in states if s["step"] == 0])),
            "mean_return": float(g.mean()), "return_variance": float(np.var(g)), "ceiling": ceiling,
            "features": features.shape[1], "rows": rows, "gamma": gamma,
            "collect_seconds": collect_seconds, "feature_seconds": feature_seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="settings over the config's, as groundrl train takes them "
                        "(model=tiny-llama, agent.llm.train_layers=4)")
    parser.add_argument("--config", default=str(EXAMPLE), help="the training settings whose critic is probed "
                        "(default: examples/glam/goto_local.yaml)")
    parser.add_argument("--episodes", type=int, default=120, help="episodes the states come from (a third held out)")
    parser.add_argument("--every", type=int, default=4, help="keep every n-th state of an episode (its neighbours "
                        "are nearly the same state)")
    parser.add_argument("--bot-share", type=float, default=0.0,
                        help="probability a step of the behaviour policy is the bot's (else uniform)")
    parser.add_argument("--rollouts", type=int, default=16, help="continuations from each state to estimate its value")
    parser.add_argument("--pooling", action="store_true", help="also fit ridge regressions on other readings of the "
                        "base model: the mean of the prompt's tokens, and the middle layer (one more forward "
                        "pass a state)")
    parser.add_argument("--own-layers", default="", metavar="K[,K...]",
                        help="also train a critic of its own (agent.llm.critic=own) with K layers above the trunk, "
                             "for each K given (its layers and value head learn from the returns: slower)")
    parser.add_argument("--features", metavar="FILE.npz", help="keep the critic's features in this file and "
                        "read them back on the next run with the same states and model (they are the slow part)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        args.own_layers = [int(k) for k in args.own_layers.split(",") if k.strip()]
    except ValueError:
        parser.error(f"--own-layers takes whole numbers separated by commas (2,4), not {args.own_layers!r}")
    if args.features and Path(args.features).suffix != ".npz":
        parser.error(f"--features names a .npz file (numpy would add the suffix to {args.features!r} and never "
                     "read it back)")
    if not 0 <= args.bot_share <= 1 or args.episodes < 3 or args.rollouts < 1 or args.every < 1 \
            or any(k < 1 for k in args.own_layers):
        parser.error("--bot-share is a probability, --episodes at least 3 (a third is held out), --rollouts, "
                     "--every and --own-layers at least 1")

    from rich.console import Console
    from rich.table import Table

    from groundrl.errors import GroundrlError

    try:
        result = probe(args)
    except GroundrlError as error:  # a missing config, a bad setting, an unknown model or environment: one line
        print(f"error: {error}", file=sys.stderr)
        return 2
    table = Table(title=f"Critics of {args.config} on {result['states']} states (every {args.every}th of "
                        f"{args.episodes} episodes; the last third, {result['test_states']} states of which "
                        f"{result['test_successes']} successful episodes, held out); behaviour: the bot "
                        f"{args.bot_share} of the steps, else uniform (success {result['success']:.2f}); gamma "
                        f"{result['gamma']}; return: mean {result['mean_return']:.3f}, variance "
                        f"{result['return_variance']:.4f}; Var(V)/Var(G) {result['ceiling']:.2f}")
    for column in ("critic", "fitted to G: held-out explained variance", "fitted to V: held-out R^2", "epochs (G, V)",
                   "fitting (s)"):
        table.add_column(column)
    for name, row in result["rows"].items():
        table.add_row(name, f"{row['explained_variance']:.3f}", f"{row['r2_value']:.3f}",
                      "" if row["epochs"] is None else "{}, {}".format(*row["epochs"]), f"{row['seconds']:.0f}")
    Console(width=200).print(table)
    print(f"states and continuations: {result['collect_seconds']:.0f} s; the critic's features "
          f"({result['features']} numbers a state): {result['feature_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
