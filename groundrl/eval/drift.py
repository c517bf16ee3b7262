"""How far training moved a language-model agent from the model it started as, measured offline.

TWOSOME claims that its LoRA fine-tuning keeps the model's general abilities. Without a model hub
or NLP benchmarks at hand, three measurements stand in for that claim:

- **language**: on :data:`PASSAGES`, general English text no environment shows, the KL divergence
  ``KL(trained || untrained)`` of the next-token distributions (nats per token), how often both
  predict the same most likely token, and each model's perplexity;
- **held-out decisions**: the KL between the trained and untrained *policies* (softmax over the
  valid actions) on states of text games the agent did not train on, reached by random play;
- **a held-out task**: sampled success on FollowInstruction (an observation names the action to
  take), trained vs untrained, over the same evaluation episodes and prompt.

The untrained model is loaded afresh from the run's ``model`` setting, so full fine-tuning and
LoRA are measured alike (with LoRA it equals the trained model with its adapters switched off).

    from groundrl.eval.drift import measure_drift
    drift = measure_drift("runs/RUN", episodes=200)
    drift.token_kl, drift.follow_instruction

or ``groundrl bench drift RUN [RUN ...]`` for a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from groundrl.agents import LLMPolicy
from groundrl.envs import make_env
from groundrl.errors import InvalidArgumentError
from groundrl.eval.evaluate import evaluate
from groundrl.llm import load_llm
from groundrl.llm.loading import LLM
from groundrl.train.checkpoint import find, load_agent

# Written for this purpose (not taken from any corpus): everyday facts, instructions, narrative,
# dialogue and a little science and arithmetic, the kinds of text a small instruction-tuned model
# was trained to continue.
PASSAGES: tuple[str, ...] = (
    "The river freezes every winter, and the children of the village skate on it from December until "
    "the ice starts to crack in March.",
    "To make a cup of tea, boil fresh water, pour it over the tea leaves, wait three to five minutes, "
    "then remove the leaves and add milk if you like.",
    "Water boils at one hundred degrees Celsius at sea level, but at the top of a high mountain it boils "
    "at a lower temperature because the air pressure is lower.",
    "She opened the letter slowly, read the first line twice, and then sat down at the kitchen table "
    "without saying a word.",
    "If you have twelve apples and give away five, you have seven apples left. Seven plus five is twelve.",
    "The library opens at nine in the morning on weekdays and at ten on Saturdays. It is closed on Sundays "
    "and public holidays.",
    "Plants take in carbon dioxide and release oxygen. They use the energy of sunlight to turn water and "
    "carbon dioxide into sugar.",
    "\"Could you tell me the way to the station?\" \"Of course. Go straight ahead, turn left at the bakery, "
    "and you will see it on your right.\"",
    "Before you leave the house, check that the windows are closed, turn off the lights and lock the front "
    "door behind you.",
    "The old bridge was built of stone more than three hundred years ago, and it still carries cars and "
    "bicycles across the river every day.",
    "A triangle has three sides and three angles. The angles of any triangle add up to one hundred and "
    "eighty degrees.",
    "Every morning the baker starts work at four o'clock, so that fresh bread is on the shelves when the "
    "shop opens at seven.",
    "The meeting has been moved to Thursday afternoon. Please bring the report and let me know if you "
    "cannot attend.",
    "Cats sleep for most of the day and are most active at dawn and dusk, when they like to hunt small "
    "animals and play.",
    "The capital of France is Paris, which lies on the river Seine. The Eiffel Tower was finished in 1889.",
    "He forgot his umbrella on the train, so he walked home in the rain and arrived soaked to the skin.",
    "To reset your password, click the link in the email we sent you and choose a new password of at "
    "least eight characters.",
    "The moon goes around the earth about once a month, and the same side of the moon always faces us.",
    "Wash the vegetables, cut them into small pieces, fry them in a little oil for five minutes and season "
    "them with salt and pepper.",
    "On the first day of school the teacher asked every student to say their name and one thing they had "
    "done during the summer.",
    "A healthy adult heart beats between sixty and one hundred times a minute when the body is at rest.",
    "The train to the airport leaves every fifteen minutes from platform two, and the journey takes about "
    "half an hour.",
    "When the storm had passed, the fishermen went back down to the harbour to see whether their boats had "
    "been damaged.",
    "Thank you for your order. Your package will be delivered within three working days, and you will "
    "receive an email when it ships.",
)
"""General English text for the language drift: 24 short passages."""

HELD_OUT_ENVS = ("groundrl/FollowInstruction-v0", "groundrl/BabyAI-GoToLocal-v0")
"""Text games whose states give the held-out decisions (the one the agent trained on is left out)."""

FOLLOW_INSTRUCTION = "groundrl/FollowInstruction-v0"


@dataclass
class Drift:
    """What :func:`measure_drift` found; KL divergences in nats, ``KL(trained || untrained)``."""

    token_kl: float  # mean over the passages' next-token positions
    top1_agreement: float  # share of those positions where both models' most likely token is the same
    perplexity_untrained: float  # of the passages
    perplexity_trained: float
    tokens: int
    action_kl: float | None  # mean over the held-out decisions (None: none collected)
    decisions: int
    held_out_envs: tuple[str, ...]
    # sampled success on FollowInstruction: {"untrained": EvalResult.to_dict(), "trained": ...} (None: not measured)
    follow_instruction: dict | None

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def language_drift(trained: LLM, untrained: LLM, texts: Sequence[str] = PASSAGES) -> dict:
    """Next-token KL, top-1 agreement and perplexities of two models of the same tokenizer on
    ``texts`` (teacher-forced; an encoder-decoder model reads each text's first half and predicts
    the second)."""
    kl_sum, agree, nll_trained, nll_untrained, count = 0.0, 0, 0.0, 0.0, 0
    for text in texts:
        log_p, targets = _next_token_log_probs(trained, text)
        log_q, _ = _next_token_log_probs(untrained, text)
        kl_sum += float((log_p.exp() * (log_p - log_q)).sum())
        agree += int((log_p.argmax(-1) == log_q.argmax(-1)).sum())
        positions = torch.arange(len(targets))
        nll_trained -= float(log_p[positions, targets].sum())
        nll_untrained -= float(log_q[positions, targets].sum())
        count += len(targets)
    if count == 0:
        raise InvalidArgumentError("the texts have no tokens to predict: give longer texts")
    return {"token_kl": kl_sum / count, "top1_agreement": agree / count, "tokens": count,
            "perplexity_trained": float(np.exp(nll_trained / count)),
            "perplexity_untrained": float(np.exp(nll_untrained / count))}


def _next_token_log_probs(llm: LLM, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(positions, vocabulary)`` log-probabilities of each next token of ``text``, and those tokens."""
    tokenizer, device = llm.tokenizer, llm.device
    if llm.kind == "causal":
        ids = tokenizer(text, return_tensors="pt")["input_ids"].to(device)
        logits = llm.model(input_ids=ids).logits[0, :-1]
        return logits.float().log_softmax(-1), ids[0, 1:]
    words = text.split()
    source, target = " ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2:])
    encoder_ids = tokenizer(source, return_tensors="pt")["input_ids"].to(device)
    labels = tokenizer(target, return_tensors="pt")["input_ids"].to(device)
    logits = llm.model(input_ids=encoder_ids, labels=labels).logits[0]
    return logits.float().log_softmax(-1), labels[0]


def held_out_decisions(env_ids: Sequence[str], per_env: int = 64, seed: int = 2_000_000,
                       env_kwargs: dict | None = None) -> list[tuple[str, list[str]]]:
    """``per_env`` states of each environment, as ``(observation, valid actions)``, reached by
    uniformly random play from reset seeds ``seed, seed + 1, ...`` (a stream of its own)."""
    rng = np.random.default_rng(seed)
    decisions = []
    for env_id in env_ids:
        env = make_env(env_id, **(env_kwargs or {}))
        try:
            episode, done = 0, True
            for _ in range(per_env):
                if done:
                    obs, info = env.reset(seed=seed + episode)
                    episode += 1
                actions = list(info["valid_actions"])
                decisions.append((str(obs), actions))
                obs, _, terminated, truncated, info = env.step(int(rng.integers(len(actions))))
                done = terminated or truncated
        finally:
            env.close()
    return decisions


@torch.no_grad()
def policy_kl(trained, untrained, decisions: Sequence[tuple[str, list[str]]], batch_size: int = 8) -> float:
    """Mean ``KL(pi_trained || pi_untrained)`` over ``decisions`` (observations as the environment
    gives them, and their valid actions)."""
    total = 0.0
    for start in range(0, len(decisions), batch_size):
        batch = decisions[start:start + batch_size]
        observations, actions = [o for o, _ in batch], [a for _, a in batch]
        infos = [{"valid_actions": a} for a in actions]
        p = trained.forward([trained.observe(o, i) for o, i in zip(observations, infos)], actions, values=False).logits
        q = untrained.forward([untrained.observe(o, i) for o, i in zip(observations, infos)], actions,
                              values=False).logits
        for lp, lq in zip(p, q):
            lp, lq = lp.float().log_softmax(-1), lq.float().log_softmax(-1)
            total += float((lp.exp() * (lp - lq)).sum())
    return total / len(decisions) if decisions else float("nan")


def measure_drift(run: str | Path, *, episodes: int = 200, decisions_per_env: int = 64,
                  held_out_envs: Sequence[str] = HELD_OUT_ENVS, texts: Sequence[str] = PASSAGES,
                  prompt: str | None = "auto", device: str = "auto", progress: bool = True) -> Drift:
    """The drift of a training run's agent (its latest checkpoint, or a checkpoint) from its
    untrained model: language, held-out decisions and FollowInstruction (``episodes`` sampled
    episodes each, 0 to skip; evaluation seeds from 1,000,000). The held-out games show ``prompt``
    (see :func:`groundrl.make_env`; default: each game's own, as a user of the model would write
    it, not the prompt option the run trained with).

    Raises:
        InvalidArgumentError: the run's agent is not a language model that scores actions.
    """
    agent, config, _ = load_agent(find(run), device=device)
    if config.agent.kind.value != "llm" or config.agent.llm.policy.value != "score":
        raise InvalidArgumentError(f"{run} trained a {config.agent.kind.value} agent: drift is measured for "
                                   "language-model agents that score actions")
    untrained = LLMPolicy(load_llm(config.model, dtype=config.dtype, device=str(agent.device)),
                          normalization=config.agent.llm.normalization.value, separator=config.agent.llm.separator,
                          precision=agent.precision)
    language = language_drift(agent.llm, untrained.llm, texts)
    env_kwargs = {"prompt": prompt, "window": config.prompt_window}
    envs = tuple(e for e in held_out_envs if e != config.env)
    decisions = held_out_decisions(envs, decisions_per_env, env_kwargs=env_kwargs)
    follow = None
    if episodes:
        follow = {name: evaluate(policy, FOLLOW_INSTRUCTION, episodes=episodes, seed=1_000_000,
                                 env_kwargs=env_kwargs, progress=progress).to_dict()
                  for name, policy in (("untrained", untrained), ("trained", agent))}
    return Drift(token_kl=language["token_kl"], top1_agreement=language["top1_agreement"],
                 perplexity_untrained=language["perplexity_untrained"],
                 perplexity_trained=language["perplexity_trained"], tokens=language["tokens"],
                 action_kl=policy_kl(agent, untrained, decisions) if decisions else None,
                 decisions=len(decisions), held_out_envs=envs, follow_instruction=follow)


__all__ = ["Drift", "HELD_OUT_ENVS", "PASSAGES", "held_out_decisions", "language_drift",
           "measure_drift", "policy_kl"]
