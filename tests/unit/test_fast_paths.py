"""The fast paths compute what the slow ones do: each distinct input once (same values, same
gradients), the frozen model's outputs kept across the run, a rollout's scores reused."""

from __future__ import annotations

import pytest
import torch

from groundrl.agents.config import LLMAgentConfig
from groundrl.agents.llm_agent import AgentInput, LLMAgent
from groundrl.llm import load_llm
from groundrl.llm.cache import LRU, memoized
from groundrl.llm.scoring import prompt_hidden_states
from groundrl.train.buffer import RolloutBuffer, accumulate_gradients

PROMPTS = ["You are in the kitchen. The fridge is closed.", "You are in the living room.",
           "You are in the kitchen. The fridge is open.", "You hold the salmon. The stove is off."]
ACTIONS = [["open the fridge", "walk to the living room"], ["walk to the kitchen", "turn on the tv", "sit"],
           ["take the salmon", "close the fridge"], ["walk to the stove", "put the salmon in the microwave"]]
# decisions with repeats, as a small world's rollout has them
ORDER = [0, 1, 0, 2, 0, 1, 3, 3, 2, 0]


def agent_of(**settings) -> LLMAgent:
    torch.manual_seed(0)
    agent = LLMAgent(load_llm("tiny-llama", device="cpu"), LLMAgentConfig(**settings))
    with torch.no_grad():  # LoRA's B starts at zero: make the adapters count, so their gradients differ
        for name, p in agent.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return agent


def decision_loss(agent: LLMAgent, positions: list[int]) -> torch.Tensor:
    """A loss of the shape PPO's has: per decision (a position in ORDER) a weighted log-probability
    of an action, and its value."""
    decisions = [ORDER[i] for i in positions]
    out = agent([PROMPTS[k] for k in decisions], [ACTIONS[k] for k in decisions])
    terms = [(i + 1) * 0.1 * (out.logits[n].log_softmax(-1)[i % len(ACTIONS[k])] + out.values[n])
             for n, (i, k) in enumerate(zip(positions, decisions))]
    return torch.stack(terms).sum()


def gradients(agent: LLMAgent) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in agent.named_parameters() if p.grad is not None}


def assert_same_gradients(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], relative: float = 1e-5) -> None:
    """Equal up to float32 rounding: the largest difference of a tensor within ``relative`` of its
    largest entry (sums taken in another order differ by a few ulps)."""
    assert a.keys() == b.keys() and a
    for name in a:
        difference = float((a[name] - b[name]).abs().max())
        assert difference <= relative * max(float(b[name].abs().max()), 1e-3), (name, difference)


@pytest.mark.parametrize("settings", [dict(critic="shared"), dict(actor="full", critic="shared", lora_r=8)],
                         ids=["lora", "full"])
def test_equal_decisions_computed_once_give_the_gradients_of_each_computed_alone(settings):
    """One forward over decisions with repeats (each distinct one computed once, the result shared)
    gives the values and gradients of one forward per decision."""
    agent = agent_of(**settings)
    decision_loss(agent, list(range(len(ORDER)))).backward()
    once = gradients(agent)
    agent.zero_grad(set_to_none=True)

    # the duplicated computation: each decision alone, with a weight of its own position
    for position in range(len(ORDER)):
        decision_loss(agent, [position]).backward()
    assert_same_gradients(once, gradients(agent))


def test_micro_batches_gather_equal_decisions_and_keep_the_minibatch_gradient():
    agent = agent_of(critic="shared")
    buffer = RolloutBuffer(inputs=[PROMPTS[k] for k in ORDER], valid_actions=[ACTIONS[k] for k in ORDER])
    indices = torch.tensor([3, 0, 7, 1, 2, 9, 4, 6, 5, 8])
    grouped = buffer.micro_batches(indices, 2)
    # two distinct inputs per micro-batch, all of their decisions with them, each decision once
    assert sorted(torch.cat(grouped).tolist()) == list(range(len(ORDER)))
    for micro in grouped:
        assert len({ORDER[i] for i in micro.tolist()}) <= 2
    assert len(grouped) == 2  # 4 distinct inputs
    assert [len(m) for m in buffer.micro_batches(indices, 2, group=False)] == [2] * 5

    def loss_of(micro):
        return decision_loss(agent, micro.tolist()) / len(micro)

    results = []
    for micros in (grouped, buffer.micro_batches(indices, 1, group=False)):
        agent.zero_grad(set_to_none=True)
        accumulate_gradients(micros, loss_of)
        results.append(gradients(agent))
    assert_same_gradients(*results)


def test_cached_critic_features_equal_recomputed_ones():
    agent = agent_of(critic="frozen")
    prompts = [PROMPTS[k] for k in ORDER]
    features = agent.critic_features(prompts)
    assert len(agent.critic_cache) == len(PROMPTS)
    with torch.no_grad(), agent.model.disable_adapter():  # the base model, from scratch, in one batch
        recomputed = prompt_hidden_states(agent.llm, prompts)
    torch.testing.assert_close(features, recomputed, rtol=1e-5, atol=1e-5)
    # the second time from the cache, exactly; the adapters (which the critic does not read) play no part
    torch.testing.assert_close(agent.critic_features(prompts[::-1]), features.flip(0), rtol=0, atol=0)
    uncached = agent_of(critic="frozen", cache_size=0)
    assert uncached.critic_cache is None
    torch.testing.assert_close(uncached.critic_features(prompts), features, rtol=1e-5, atol=1e-5)


def test_reference_logits_are_the_policy_without_adapters_and_kept():
    agent = agent_of(critic="frozen")
    inputs, valid = [PROMPTS[k] for k in ORDER], [ACTIONS[k] for k in ORDER]
    reference = agent.reference_logits(inputs, valid)
    assert len(agent.reference_cache) == len(PROMPTS)
    with torch.no_grad(), agent.model.disable_adapter():
        expected = agent(inputs, valid, values=False).logits
    with torch.no_grad():
        adapted = agent(inputs, valid, values=False).logits
    for ref, want, trained in zip(reference, expected, adapted):
        torch.testing.assert_close(ref, want, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(ref, trained, atol=1e-4)  # the adapters do change the policy
    assert agent_of(actor="full", critic="shared").reference_logits(inputs, valid) is None


def test_a_rollout_scores_each_input_once_while_the_weights_stay_fixed(monkeypatch):
    agent = agent_of(critic="frozen")
    scored: list[int] = []
    original = agent._scores

    def counting(inputs, valid_actions, hidden):
        scored.append(len(inputs))
        return original(inputs, valid_actions, hidden)

    monkeypatch.setattr(agent, "_scores", counting)
    steps = [ORDER[:3], ORDER[3:6], ORDER[6:]]
    with torch.no_grad():
        plain = [agent([PROMPTS[k] for k in s], [ACTIONS[k] for k in s]).logits for s in steps]
        scored.clear()
        with memoized(agent):
            reused = [agent([PROMPTS[k] for k in s], [ACTIONS[k] for k in s]).logits for s in steps]
        # step 1: inputs 0 and 1; step 2: 2 (0 and 1 seen); step 3: 3 (2 and 0 seen)
        assert scored == [2, 1, 1]
        assert not agent.memo.active
    for a, b in zip(plain, reused):
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    # with gradients on, nothing is reused (the graph must be built)
    scored.clear()
    with memoized(agent):
        agent([PROMPTS[0]], [ACTIONS[0]]).logits[0].sum().backward()
    assert scored == [1]


def test_lru_keeps_the_most_recent():
    cache = LRU(3)
    for key in "abcd":
        cache[key] = key.upper()
    assert list(cache) == ["b", "c", "d"]
    cache["b"]
    cache["e"] = "E"
    assert list(cache) == ["d", "b", "e"]


# -- a frozen lower trunk -----------------------------------------------------------------------

@pytest.mark.parametrize("actor, critic", [("lora", "frozen"), ("lora", "shared"), ("full", "shared"),
                                           ("full", "frozen")])
def test_a_trunk_gives_the_scores_values_and_features_of_a_full_forward(actor, critic):
    """Scores (and the shared critic's hidden state, and the frozen critic's features) computed over
    the kept lower layers equal one forward through the whole model; only the top layers train."""
    whole, top = (agent_of(actor=actor, critic=critic, train_layers=k) for k in ("all", "1"))
    if actor == "lora":  # adapters in the top layer alone: those of the layer below must do nothing
        assert not any("layers.0." in n for n, p in top.named_parameters() if p.requires_grad)
        with torch.no_grad():
            for name, p in whole.named_parameters():
                if "layers.0." in name and "lora_B" in name:
                    p.zero_()
    top.load_state_dict(whole.state_dict(), strict=False)  # the same adapters and heads
    if actor == "full":
        trained = {n for n, p in top.named_parameters() if p.requires_grad and not n.startswith("value_head")}
        assert trained and all("layers.1." in n or n.endswith("norm.weight") and "layers" not in n for n in trained)
    inputs, valid = [PROMPTS[k] for k in ORDER], [ACTIONS[k] for k in ORDER]
    with torch.no_grad():
        full_forward, over_trunk = whole(inputs, valid), top(inputs, valid)
    for a, b in zip(full_forward.logits, over_trunk.logits):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    if actor == "full":  # no LoRA initialization apart: the heads are equal, so are the values
        torch.testing.assert_close(full_forward.values, over_trunk.values, rtol=1e-5, atol=1e-5)
    if critic == "frozen":
        torch.testing.assert_close(whole.critic_features(inputs), top.critic_features(inputs), rtol=1e-5, atol=1e-5)
    # each distinct row went through the lower layers once, and the prompts' contexts are kept with them
    assert len(top.trunk.cache) >= len(PROMPTS) and top.trunk.cache.size > 0


def test_a_trunk_gives_the_gradients_of_a_full_forward_for_the_top_layer():
    whole, top = agent_of(actor="full", critic="shared"), agent_of(actor="full", critic="shared", train_layers="1")
    top.load_state_dict(whole.state_dict())
    for agent in (whole, top):
        decision_loss(agent, list(range(len(ORDER)))).backward()
    assert_same_gradients({n: g for n, g in gradients(whole).items() if "layers.0." not in n and "embed" not in n},
                          gradients(top))


@pytest.mark.parametrize("actor", ["lora", "full"])
def test_a_critic_of_its_own_reads_the_trunk_through_its_layers_and_its_gradient_reaches_only_them(actor):
    """``critic=own``: a copy of the layers above the trunk, so that at first it reads what the
    frozen critic reads; the value loss trains that copy and the value head, nothing of the
    policy; the policy's training leaves the values alone."""
    agent = agent_of(actor=actor, critic="own", train_layers="1", critic_layers=1)
    inputs, valid = [PROMPTS[k] for k in ORDER], [ACTIONS[k] for k in ORDER]
    torch.testing.assert_close(agent(inputs, valid).values,
                               agent.value_head(agent.critic_features(inputs)).squeeze(-1), rtol=1e-5, atol=1e-6)
    assert {n.split(".")[0] for n, p in agent.named_parameters() if p.requires_grad} >= {"critic_layers", "value_head"}
    own = {id(p) for p in agent.critic_parameters()}
    assert own == {id(p) for p in [*agent.critic_layers.parameters(), *agent.value_head.parameters()]}
    assert not own & {id(p) for p in agent.actor_parameters()}

    policy_before = [x.detach().clone() for x in agent(inputs, valid).logits]
    model_before = {n: p.detach().clone() for n, p in agent.model.named_parameters()}
    values_before = agent(inputs, valid).values.detach().clone()
    optimizer = torch.optim.Adam(agent.critic_parameters(), lr=1e-2)
    loss = ((agent(inputs, valid, policy=False).values - 1.0) ** 2).mean()
    loss.backward()
    assert all(p.grad is None for p in agent.actor_parameters())  # the policy never sees the value's gradient
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.critic_layers.parameters())
    optimizer.step()
    with torch.no_grad():
        after = agent(inputs, valid)
        assert all(torch.equal(a, b) for a, b in zip(policy_before, after.logits))  # bit-equal
        assert all(torch.equal(p, model_before[n]) for n, p in agent.model.named_parameters())
        assert not torch.allclose(after.values, values_before)  # the critic learned
        for p in agent.actor_parameters():  # and the policy's training leaves the values alone
            p.add_(torch.randn_like(p) * 0.1)
        assert torch.equal(agent(inputs, valid).values, after.values)


def test_a_critic_of_its_own_needs_a_trunk_under_it():
    from groundrl.errors import InvalidArgumentError

    for settings, message in (({"critic": "own"}, "set agent.llm.train_layers=K too"),
                              ({"critic": "own", "train_layers": "1", "critic_layers": 2}, "at most 1"),
                              ({"critic": "own", "train_layers": "1", "critic_layers": 0}, "at least 1")):
        with pytest.raises(InvalidArgumentError, match=message):
            LLMAgentConfig(**settings)
    with pytest.raises(InvalidArgumentError, match="all train: make agent.llm.train_layers at most 1"):
        agent_of(critic="own", train_layers="2", critic_layers=1)


def test_a_trunk_under_an_action_head_gives_the_logits_values_and_gradients_of_a_full_forward():
    """GLAM's NPAE trained as the example is: an action head (and shared critic) on a randomly
    initialized model whose top layer alone trains; the lower states come from the trunk."""
    def head_agent(train_layers):
        torch.manual_seed(0)
        config = LLMAgentConfig(policy="head", actor="full", critic="shared", weights="random",
                                train_layers=train_layers)
        return LLMAgent(load_llm("tiny-llama", device="cpu"), config, num_actions=5)

    whole, top = head_agent("all"), head_agent("1")
    top.load_state_dict(whole.state_dict())
    trained = {n for n, p in top.named_parameters() if p.requires_grad}
    assert any(n.startswith("action_head") for n in trained)
    assert not any("layers.0." in n or "embed" in n for n in trained)
    inputs = [AgentInput(PROMPTS[k], tuple(range(k % 3, k % 3 + len(ACTIONS[k])))) for k in ORDER]
    valid = [ACTIONS[k] for k in ORDER]
    outputs = []
    for agent in (whole, top):
        out = agent(inputs, valid)
        torch.stack([logits.log_softmax(-1)[0] for logits in out.logits]).add(out.values).sum().backward()
        outputs.append(out)
    for a, b in zip(outputs[0].logits, outputs[1].logits):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outputs[0].values, outputs[1].values, rtol=1e-5, atol=1e-5)
    assert_same_gradients({n: g for n, g in gradients(whole).items() if n in trained}, gradients(top))
    assert len(top.trunk.cache) == len(PROMPTS)


def test_the_trunk_cache_is_bounded_in_bytes():
    agent = agent_of(critic="frozen", train_layers="1", trunk_cache_mib=1)
    agent.trunk.cache.capacity = 20_000  # bytes: a few rows of the tiny model
    with torch.no_grad():
        agent([PROMPTS[k] for k in ORDER], [ACTIONS[k] for k in ORDER])
    assert 0 < agent.trunk.cache.size <= 20_000
    assert agent.trunk.cache.size == sum(x.numel() * x.element_size() for x in agent.trunk.cache.values())


# -- mixed precision ------------------------------------------------------------------------------

def test_bf16_mixed_keeps_float32_trained_weights_and_optimizer_state(tmp_path, tiny_config):
    from groundrl.train import Trainer

    config = tiny_config("rollout.total_decisions=8", "precision=bf16-mixed")
    trainer = Trainer(config, tmp_path)
    assert trainer.agent.precision == "bf16-mixed"
    trainer.train()
    trained = [p for p in trainer.agent.parameters() if p.requires_grad]
    assert trained and all(p.dtype == torch.float32 for p in trained)
    for optimizer in trainer.algorithm.optimizers.values():
        assert all(v.dtype == torch.float32 for state in optimizer.state.values() for k, v in state.items()
                   if torch.is_tensor(v) and k != "step")
    # what never trains was cast once: the linear layers' frozen weights; norms and embeddings keep float32
    frozen = {name: p.dtype for name, p in trainer.agent.named_parameters() if not p.requires_grad}
    assert {d for n, d in frozen.items() if "proj.base_layer" in n or n.endswith("proj.weight")} == {torch.bfloat16}
    assert {d for n, d in frozen.items() if "norm" in n or "embed" in n} == {torch.float32}


@pytest.mark.parametrize("settings", [{}, {"train_layers": 1}, {"actor": "full", "train_layers": 1},
                                      {"critic": "shared"}])
def test_bf16_mixed_frozen_weights_cast_once_give_the_numbers_of_a_cast_at_every_pass(settings):
    """The weights that never train are cast to bf16 at construction; autocast used to cast them at
    every pass: the same bf16 values, so bit-equal scores, values and gradients, and close to fp32's."""
    import copy

    from groundrl.llm.precision import cast_frozen_weights

    every_pass = agent_of(**settings)  # float32 weights, cast by autocast at each pass
    every_pass.precision = "bf16-mixed"
    cast_once = copy.deepcopy(every_pass)
    assert cast_frozen_weights(cast_once.model) > 0
    if cast_once.frozen_base is not None:  # the critic's copy of the initial model (full fine-tuning)
        assert cast_frozen_weights(cast_once.frozen_base) > 0
    inputs, valid = [PROMPTS[k] for k in ORDER], [ACTIONS[k] for k in ORDER]
    for agent in (every_pass, cast_once):
        loss = decision_loss(agent, list(range(len(ORDER))))
        loss.backward()
    with torch.no_grad():
        a, b = every_pass(inputs, valid), cast_once(inputs, valid)
    assert all(torch.equal(x, y) for x, y in zip(a.logits, b.logits)) and torch.equal(a.values, b.values)
    assert_same_gradients(gradients(every_pass), gradients(cast_once), relative=0.0)
    every_pass.precision = "fp32"
    with torch.no_grad():
        exact = every_pass(inputs, valid)
    drift = max(float((x - y).abs().max()) for x, y in zip(b.logits, exact.logits))
    assert 0 < drift < 0.1  # bf16 rounding, not another computation


def test_an_agent_built_in_bf16_mixed_casts_what_never_trains():
    torch.manual_seed(0)
    agent = LLMAgent(load_llm("tiny-llama", device="cpu"), LLMAgentConfig(train_layers=1), precision="bf16-mixed")
    dtypes = {p.dtype for p in agent.parameters() if not p.requires_grad and p.dim() == 2}
    assert torch.bfloat16 in dtypes  # the frozen trunk's and the adapters' bases
    assert all(p.dtype == torch.float32 for p in agent.parameters() if p.requires_grad)
    fp32 = LLMAgent(load_llm("tiny-llama", device="cpu"), LLMAgentConfig(train_layers=1), precision="fp32")
    assert all(p.dtype == torch.float32 for p in fp32.parameters())


@pytest.mark.parametrize("capability, flags, native", [
    ("AVX512", {"avx512f", "avx512_bf16"}, True),   # e.g. AMD Zen 4
    ("AVX512", {"avx512f", "amx_bf16"}, True),      # Intel Sapphire Rapids
    ("AVX512", {"avx512f"}, False),                 # AVX-512 without bf16: emulated
    ("AVX2", {"avx2", "avx512_bf16"}, False),       # torch would not use the bf16 kernels
    ("DEFAULT", set(), False),
])
def test_auto_precision_is_bf16_mixed_exactly_where_the_cpu_multiplies_bf16(monkeypatch, capability, flags, native):
    from groundrl.llm import precision

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: frozenset(flags))
    assert precision.native_bf16("cpu") is native
    assert precision.resolve_precision("auto", "cpu") == ("bf16-mixed" if native else "fp32")
    assert precision.resolve_precision("fp32", "cpu") == "fp32"
    assert precision.resolve_precision("bf16-mixed", "cpu") == "bf16-mixed"  # asked for: emulated if need be
    assert precision.resolve_precision("auto", "cpu", torch.bfloat16) == "fp32"  # 16-bit weights: their own


def test_the_defaults_train_and_log_as_with_every_item_off(tmp_path, tiny_config):
    """The same run (of a small world: prompts repeat) with the defaults and with deduplication and the
    caches off: the same rollouts,
    the same updates, the same logged statistics (means over decisions, whatever the micro-batches)."""
    from groundrl.train import Trainer

    settings = ["env=groundrl/FoodPreparation-v0", "rollout.num_envs=4", "rollout.num_steps=8", "ppo.minibatch_size=16",
                "ppo.value_minibatch_size=16", "rollout.total_decisions=96", "ppo.update_epochs=2"]
    runs = [Trainer(tiny_config(*settings, *extra), tmp_path / str(k)).train()
            for k, extra in enumerate([[], ["ppo.deduplicate=false", "agent.llm.cache_size=0"]])]
    for fast, slow in zip(*runs):
        for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "kl_reference", "value_mean",
                    "explained_variance", "episode_return"):
            assert (key in fast) == (key in slow)
            if key in fast:
                    assert fast[key] == pytest.approx(slow[key], rel=1e-4, abs=1e-6, nan_ok=True), (fast["update"], key)
