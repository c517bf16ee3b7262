"""The action scorer against the naive reference, its invariances, its errors and its grad path."""

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from groundrl.errors import InvalidArgumentError
from groundrl.llm import add_lora, load_llm, score, score_details, score_naive

PROMPTS = [
    "Possible action of the agent: turn left, turn right, go forward \n Goal of the agent: go to the red ball"
    " \n Observation 0: You see a wall 2 steps forward, \n Action 0: ",
    "You are in the kitchen. You notice a pancake and a microwave. Your next step is to",
    "Instruction: open the blue door. You decide to",
]
CANDIDATES = [
    ["turn left", "turn right", "go forward"],
    ["walk to the pancake", "open the microwave", "grab the pancake", "walk to the living room", "x"],
    ["open the blue door"],
]


def assert_all_close(actual, expected, atol, rtol=0.0):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        torch.testing.assert_close(a.float().cpu(), e.float().cpu(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
@pytest.mark.parametrize("normalization", ["sum", "token", "word"])
@pytest.mark.parametrize("separator", [" ", ""])
def test_matches_the_naive_reference(model, normalization, separator, request):
    llm = request.getfixturevalue(model.replace("-", "_"))
    fast = score(llm, PROMPTS, CANDIDATES, normalization=normalization, separator=separator)
    naive = score_naive(llm, PROMPTS, CANDIDATES, normalization=normalization, separator=separator)
    assert_all_close(fast, naive, atol=1e-4)


def test_scores_differ_between_candidates(tiny_llama):
    """Guards the equality tests against a degenerate model that scores everything alike."""
    scores = score(tiny_llama, PROMPTS, CANDIDATES)
    assert scores[1].std() > 0.1


def test_tokens_straddling_the_boundary_belong_to_the_action(tiny_llama):
    tokenizer = tiny_llama.tokenizer
    prompt, action = "Action 0: ", "go forward"
    in_context = tokenizer(prompt + action)["input_ids"]
    alone = tokenizer(action)["input_ids"]
    prompt_only = tokenizer(prompt)["input_ids"]
    # With an empty separator the prompt's trailing space merges into the action's first token.
    assert in_context[: len(prompt_only)] != prompt_only
    details = score_details(tiny_llama, [prompt], [[action]], separator="")
    # the action's tokens are those after the prompt's tokens, the merged one included
    assert int(details.num_tokens[0][0]) == len(in_context) - len(prompt_only) + 1
    assert int(details.num_tokens[0][0]) != len(alone)
    assert_all_close(details.scores, score_naive(tiny_llama, [prompt], [[action]], separator=""), atol=1e-4)


def test_normalizations_are_exact(tiny_llama):
    details = score_details(tiny_llama, PROMPTS, CANDIDATES, normalization="sum")
    token = score(tiny_llama, PROMPTS, CANDIDATES, normalization="token")
    word = score(tiny_llama, PROMPTS, CANDIDATES, normalization="word")
    for i, cands in enumerate(CANDIDATES):
        words = torch.tensor([len(c.split()) for c in cands])
        assert torch.equal(details.num_words[i], words)
        assert torch.equal(details.scores[i], details.log_likelihoods[i])
        torch.testing.assert_close(token[i], details.log_likelihoods[i] / details.num_tokens[i])
        torch.testing.assert_close(word[i], details.log_likelihoods[i] / words)


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
def test_invariant_to_batch_composition_order_and_splitting(model, request):
    llm = request.getfixturevalue(model.replace("-", "_"))
    together = score(llm, PROMPTS, CANDIDATES)
    alone = [score(llm, [p], [c])[0] for p, c in zip(PROMPTS, CANDIDATES)]
    assert_all_close(together, alone, atol=1e-5)
    reversed_ = score(llm, PROMPTS[::-1], CANDIDATES[::-1])[::-1]
    assert_all_close(together, reversed_, atol=1e-5)
    split = score(llm, PROMPTS, CANDIDATES, max_batch_tokens=1)  # one prompt per forward
    assert_all_close(together, split, atol=1e-5)
    extra = score(llm, PROMPTS + ["An unrelated, much longer prompt " * 5], CANDIDATES + [["a", "b c"]])
    assert_all_close(together, extra[:3], atol=1e-5)


def test_padding_side_of_the_tokenizer_does_not_matter(tiny_llama):
    before = score(tiny_llama, PROMPTS, CANDIDATES)
    side = tiny_llama.tokenizer.padding_side
    try:
        tiny_llama.tokenizer.padding_side = "left" if side == "right" else "right"
        after = score(tiny_llama, PROMPTS, CANDIDATES)
    finally:
        tiny_llama.tokenizer.padding_side = side
    assert_all_close(before, after, atol=1e-5)


def test_shared_prefix_across_prompts_is_exact(tiny_llama):
    """Prompts that share a long header (the action list, the goal) reuse one cache for it."""
    header = "Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle \n Goal: "
    prompts = [header + goal for goal in ("go to the red ball", "go to the red key", "open the door", "go")]
    candidates = [["turn left", "go forward"], ["pick up", "drop", "toggle"], ["toggle"], ["go forward", "drop"]]
    calls = []
    hook = tiny_llama.model.register_forward_pre_hook(lambda _, args, kwargs: calls.append(kwargs["input_ids"].shape),
                                                      with_kwargs=True)
    try:
        fast = score(tiny_llama, prompts, candidates)
    finally:
        hook.remove()
    header_tokens = len(tiny_llama.tokenizer(header.rstrip())["input_ids"])
    assert calls[0][0] == 1 and calls[0][1] >= header_tokens - 1  # the header, once, batch size 1
    assert calls[1][0] == len(prompts)
    assert_all_close(fast, score_naive(tiny_llama, prompts, candidates), atol=1e-4)


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
def test_variable_numbers_of_candidates(model, request):
    llm = request.getfixturevalue(model.replace("-", "_"))
    from groundrl.envs.instruction import ACTIONS

    candidates = [list(ACTIONS[:1]), list(ACTIONS[:7]), list(ACTIONS[:60])]
    prompts = ["You see a key.", "You see a door and a ball.", "So many things to do here, choose"]
    fast = score(llm, prompts, candidates)
    assert [len(s) for s in fast] == [1, 7, 60]
    assert_all_close(fast, score_naive(llm, prompts, candidates), atol=1e-4)


def test_identical_requests_are_computed_once_and_agree(tiny_llama):
    scores = score(tiny_llama, [PROMPTS[0]] * 3 + [PROMPTS[1]], [CANDIDATES[0]] * 3 + [CANDIDATES[1]])
    assert torch.equal(scores[0], scores[1]) and torch.equal(scores[0], scores[2])
    assert_all_close(scores[3:], score(tiny_llama, [PROMPTS[1]], [CANDIDATES[1]]), atol=1e-5)


@pytest.mark.parametrize(
    "prompts, candidates, message",
    [
        (["a", "b"], [["x"], []], "prompt 1 has no candidate"),
        (["a", ""], [["x"], ["y"]], "prompt 1 is empty"),
        (["a", "b"], [["x"], ["y", " "]], "candidate 1 of prompt 1 is empty"),
        (["a"], [["x"], ["y"]], "1 prompts but 2 candidate lists"),
        ([], [], "no prompts"),
        ("a prompt", [["x"]], "list of strings"),
        (["a"], ["xyz"], "prompt 0 has no candidate"),
    ],
)
def test_bad_requests_raise_value_errors_naming_the_index(tiny_llama, prompts, candidates, message):
    with pytest.raises(ValueError, match=message):
        score(tiny_llama, prompts, candidates)


def test_unknown_options_are_rejected(tiny_llama):
    with pytest.raises(InvalidArgumentError, match="normalization"):
        score(tiny_llama, ["a"], [["b"]], normalization="mean")
    with pytest.raises(InvalidArgumentError, match="truncation"):
        score(tiny_llama, ["a"], [["b"]], truncation="right")


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
def test_long_prompts_raise_or_are_truncated_from_the_left(model, request):
    llm = request.getfixturevalue(model.replace("-", "_"))
    words = " ".join(f"w{i}" for i in range(40))
    prompt = "Start " + words + " and now you"
    with pytest.raises(ValueError, match="prompt 1 .*truncation='left'"):
        score(llm, ["short", prompt], [["go"], ["go", "stop"]], max_length=24)
    truncated = score(llm, ["short", prompt], [["go"], ["go", "stop"]], max_length=24, truncation="left")
    assert all(torch.isfinite(s).all() for s in truncated)
    # Left truncation keeps the end of the prompt: the same as scoring a prompt that starts later,
    # as long as both keep the same last tokens.
    untruncated = score(llm, [prompt], [["go", "stop"]])
    assert not torch.allclose(truncated[1], untruncated[0])


def test_left_truncation_keeps_exactly_the_last_tokens(tiny_llama):
    tokenizer = tiny_llama.tokenizer
    prompt = " ".join(["red ball"] * 30) + " and then you"
    ids = tokenizer(prompt + " go")["input_ids"]
    max_length = 20
    kept_text = tokenizer.decode(ids[len(ids) - max_length : -1])
    truncated = score(tiny_llama, [prompt], [["go"]], max_length=max_length, truncation="left")
    reference = score_naive(tiny_llama, [kept_text], [["go"]])
    assert tokenizer(kept_text + " go")["input_ids"] == ids[len(ids) - max_length :]
    assert_all_close(truncated, reference, atol=1e-4)


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
def test_grad_path_gives_the_same_numbers_and_gradients(model, request):
    llm = request.getfixturevalue(model.replace("-", "_"))
    plain = score(llm, PROMPTS, CANDIDATES, normalization="word")
    with_grad = score(llm, PROMPTS, CANDIDATES, normalization="word", grad=True)
    assert all(s.requires_grad for s in with_grad)
    assert_all_close([s.detach() for s in with_grad], plain, atol=1e-5)
    loss = -sum(torch.log_softmax(s, -1)[0] for s in with_grad)
    llm.model.zero_grad()
    loss.backward()
    grads = [p.grad for p in llm.model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)
    llm.model.zero_grad()


def test_no_graph_without_grad(tiny_llama):
    assert not any(s.requires_grad for s in score(tiny_llama, PROMPTS, CANDIDATES))


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
def test_prompt_hidden_state_is_the_last_context_tokens(model, request):
    llm = request.getfixturevalue(model.replace("-", "_"))
    details = score_details(llm, PROMPTS, CANDIDATES, return_hidden=True)
    hidden_size = llm.model.config.hidden_size if model == "tiny-llama" else llm.model.config.d_model
    assert details.prompt_hidden.shape == (len(PROMPTS), hidden_size)
    with torch.no_grad():
        for i, prompt in enumerate(PROMPTS):
            if llm.kind == "causal":
                ids = llm.tokenizer(prompt, return_tensors="pt")["input_ids"]
                expected = llm.model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, -1]
            else:
                enc = llm.tokenizer(prompt, return_tensors="pt")
                start = torch.tensor([[llm.model.config.decoder_start_token_id]])
                out = llm.model(**enc, decoder_input_ids=start, output_hidden_states=True)
                expected = out.decoder_hidden_states[-1][0, 0]
            torch.testing.assert_close(details.prompt_hidden[i], expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
def test_with_active_lora_adapters(model):
    llm = add_lora(load_llm(model), target_modules=("q_proj", "v_proj") if model == "tiny-llama" else ("q", "v"))
    with torch.no_grad():  # peft starts LoRA at zero; make the adapters change the model
        for name, parameter in llm.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    fast = score(llm, PROMPTS, CANDIDATES)
    assert_all_close(fast, score_naive(llm, PROMPTS, CANDIDATES), atol=1e-4)
    shared_header = [PROMPTS[0] + goal for goal in (" go", " turn", " pick up the key and")]
    assert_all_close(score(llm, shared_header, CANDIDATES), score_naive(llm, shared_header, CANDIDATES), atol=1e-4)
    with llm.model.disable_adapter():
        base = score(llm, PROMPTS, CANDIDATES)
    assert_all_close(base, score(load_llm(model), PROMPTS, CANDIDATES), atol=1e-5)
    assert not torch.allclose(base[1], fast[1])
    with_grad = score(llm, PROMPTS, CANDIDATES, grad=True)
    sum(s.sum() for s in with_grad).backward()
    lora_grads = [p.grad for n, p in llm.model.named_parameters() if "lora_" in n]
    assert lora_grads and all(g is not None for g in lora_grads)


def test_bfloat16_is_close_to_float32():
    fp32 = score(load_llm("tiny-llama"), PROMPTS, CANDIDATES)
    bf16 = score(load_llm("tiny-llama", dtype="bfloat16"), PROMPTS, CANDIDATES)
    assert all(s.dtype == torch.float32 for s in bf16)
    assert_all_close(bf16, fp32, atol=0.5)


def test_attention_without_custom_masks_is_refused():
    llm = load_llm("tiny-llama")
    llm.model.config._attn_implementation = "flash_attention_2"  # as if loaded that way on a GPU
    with pytest.raises(InvalidArgumentError, match="set_attn_implementation"):
        score(llm, PROMPTS, CANDIDATES)


def test_eager_attention_matches_sdpa(tiny_llama):
    eager = load_llm("tiny-llama")
    eager.model.set_attn_implementation("eager")
    assert eager.model.config._attn_implementation == "eager"
    assert_all_close(score(eager, PROMPTS, CANDIDATES), score(tiny_llama, PROMPTS, CANDIDATES), atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("separator", [" ", ""])
def test_default_model_matches_the_naive_reference(default_llm, separator):
    prompts = PROMPTS[:2]
    candidates = CANDIDATES[:2]
    for normalization in ("sum", "word"):
        fast = score(default_llm, prompts, candidates, normalization=normalization, separator=separator)
        naive = score_naive(default_llm, prompts, candidates, normalization=normalization, separator=separator)
        assert_all_close(fast, naive, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("model", ["tiny-llama", "tiny-t5"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_on_cuda(model, dtype):
    llm = load_llm(model, device="cuda", dtype=dtype)
    fast = score(llm, PROMPTS, CANDIDATES)
    assert all(s.device.type == "cuda" for s in fast)
    tolerance = 1e-4 if dtype == "float32" else 0.5
    assert_all_close(fast, score_naive(llm, PROMPTS, CANDIDATES), atol=tolerance)


WORDS = ["go", "to", "the", "red", "ball", "key", "open", "door", "Action", "0:", "you", "see", "a", "wall", ",",
         "pick", "up", "blue", "toggle", "4", "steps", "left", "right", ".", "\n"]
SEPARATORS = st.sampled_from([" ", "", ": "])


def requests(max_prompts: int):
    """Lists of (prompt words, candidates' words)."""
    prompt = st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)
    candidates = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=1, max_size=6)
    return st.lists(st.tuples(prompt, candidates), min_size=1, max_size=max_prompts)


# derandomize: the same examples on every run, so that CI is reproducible (raise max_examples
# locally to search further).
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=requests(max_prompts=5),
    shared_header=st.booleans(),
    separator=SEPARATORS,
    model=st.sampled_from(["tiny-llama", "tiny-t5"]),
)
def test_random_requests_match_the_naive_reference(data, shared_header, separator, model, request):
    """Random prompts (optionally all behind one header), candidates and separators: the packed,
    prefix-cached scorer agrees with the one-pair-at-a-time reference."""
    check_random_request(request.getfixturevalue(model.replace("-", "_")), data, shared_header, separator)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=requests(max_prompts=4),
    shared_header=st.booleans(),
    separator=SEPARATORS,
)
def test_random_requests_on_the_default_model(data, shared_header, separator, default_llm):
    """As above on the real model. Word salads get scores of -20 to -60 nats, where float32 over
    30 layers varies by up to about 1e-4 with the batch shape alone (the naive reference run with
    1 or 16 pairs per batch differs by 3e-5), hence a relative term on top of 1e-4."""
    check_random_request(default_llm, data, shared_header, separator, rtol=1e-5)


def check_random_request(llm, data, shared_header, separator, rtol=0.0):
    header = "Possible actions: go to, pick up, open. Goal: " if shared_header else ""
    prompts = [header + " ".join(words) for words, _ in data]
    candidates = [[" ".join(c) for c in cands] for _, cands in data]
    candidates = [[c for c in cands if c.strip()] or ["go"] for cands in candidates]
    fast = score(llm, prompts, candidates, separator=separator)
    assert_all_close(fast, score_naive(llm, prompts, candidates, separator=separator), atol=1e-4, rtol=rtol)


def test_add_lora_says_nothing_about_peft_internals():
    """peft reads a property transformers deprecated; that FutureWarning is not the user's to act on."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        add_lora(load_llm("tiny-llama"))
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
