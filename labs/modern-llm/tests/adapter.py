"""The only door from the grader to the learner's code (workspace modules
layers, kv_cache, moe, speculative). Each function runs in the learner's
process under the sandbox and returns plain data (tensors, numbers, lists)."""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

learner_side = kit.learner_side


def _m(name: str):
    return kit.learner_module(name)


# ---------------------------------------------------------------- part 1
@learner_side
def rmsnorm(x, weight, eps):
    layers = _m("layers")
    norm = layers.RMSNorm(x.shape[-1]) if eps is None else layers.RMSNorm(x.shape[-1], eps=eps)
    norm = norm.to(weight.dtype)
    norm.load_state_dict({"weight": weight})
    with kit.inputs_unchanged(x, what="x"):
        return norm(x).detach()


@learner_side
def swiglu(x, w1, w3, w2):
    layers = _m("layers")
    mlp = layers.SwiGLU(w1.shape[1], w1.shape[0]).to(x.dtype)
    mlp.load_state_dict({"w1.weight": w1, "w3.weight": w3, "w2.weight": w2}, strict=True)
    return mlp(x).detach()


# ---------------------------------------------------------------- part 2
@learner_side
def rope_tables(positions, head_dim, theta):
    import torch

    layers = _m("layers")
    pos = torch.tensor(positions, dtype=torch.long)
    if theta is None:
        cos, sin = layers.rope_cos_sin(pos, head_dim, dtype=torch.float64)
    else:
        cos, sin = layers.rope_cos_sin(pos, head_dim, theta=theta, dtype=torch.float64)
    return cos, sin


@learner_side
def rope_apply(x, positions, theta):
    import torch

    layers = _m("layers")
    cos, sin = layers.rope_cos_sin(torch.tensor(positions), x.shape[-1], theta=theta, dtype=x.dtype)
    with kit.inputs_unchanged(x, what="x"):
        return layers.apply_rope(x, cos, sin)


# ---------------------------------------------------------------- part 3
@learner_side
def gqa(q, k, v, causal, mask):
    layers = _m("layers")
    with kit.forbid_torch_ops("sdpa"), kit.inputs_unchanged(q, k, v, what="q/k/v"):
        if mask is None:
            return layers.gqa_attention(q, k, v, causal=causal)
        return layers.gqa_attention(q, k, v, causal=causal, mask=mask)


@learner_side
def gqa_refuses(q, k, v) -> str:
    try:
        _m("layers").gqa_attention(q, k, v)
    except ValueError:
        return "ValueError"
    except Exception as exc:  # noqa: BLE001 - report what was raised
        return type(exc).__name__
    return "nothing"


@learner_side
def kv_bytes(n_layers, n_kv_heads, head_dim, bytes_per_element) -> int:
    return int(_m("layers").kv_cache_bytes_per_token(n_layers, n_kv_heads, head_dim, bytes_per_element))


# ---------------------------------------------------------------- part 4
@learner_side
def left_pad(prompts):
    return tuple(t for t in _m("kv_cache").left_pad(prompts))


@learner_side
def generate(model, prompts, max_new_tokens) -> dict:
    """Runs the learner's generate with the GRADER's model; returns what it
    produced and the (T, S) of every forward the model saw."""
    model.calls.clear()
    with kit.forbid_torch_ops("sdpa"):
        out = _m("kv_cache").generate(model, prompts, max_new_tokens)
    return {"tokens": out["tokens"], "logits": [l.detach() for l in out["logits"]], "calls": list(model.calls)}


@learner_side
def cache_update(n_layers, batch, kvh, d, max_len, chunks) -> list:
    """Feed `chunks` [(layer, k, v), ...] to a fresh KVCache; return each returned (k_all, v_all)."""
    cache = _m("kv_cache").KVCache(n_layers, batch, kvh, d, max_len, dtype=chunks[0][1].dtype)
    return [tuple(t.clone() for t in cache.update(layer, k, v)) for layer, k, v in chunks]


# ---------------------------------------------------------------- part 5
@learner_side
def moe(x, router_weight, experts, top_k, normalize, capacity_factor) -> dict:
    out = _m("moe").moe_forward(x, router_weight, [tuple(e) for e in experts], top_k=top_k, normalize=normalize,
                                capacity_factor=capacity_factor)
    return {"y": out["y"].detach(), "kept": out["kept"], "aux_loss": float(out["aux_loss"])}


@learner_side
def route(logits, top_k, normalize):
    gates, experts = _m("moe").route(logits, top_k, normalize=normalize)
    return gates.detach(), experts


@learner_side
def capacity(n_tokens, n_experts, top_k, capacity_factor):
    got = _m("moe").expert_capacity(n_tokens, n_experts, top_k, capacity_factor)
    return None if got is None else int(got)


@learner_side
def balance_loss(logits, top_k) -> float:
    return float(_m("moe").load_balancing_loss(logits, top_k=top_k))


# ---------------------------------------------------------------- part 6
@learner_side
def speculative(target, draft, prefix, n_tokens, k, greedy, seed) -> dict:
    import torch

    target.calls = draft.calls = 0
    out = _m("speculative").speculative_generate(target, draft, list(prefix), n_tokens, k, greedy=greedy,
                                                  generator=torch.Generator().manual_seed(seed))
    return {**{key: out[key] for key in ("target_calls", "draft_calls", "proposed", "accepted")},
            "tokens": [int(t) for t in out["tokens"]], "seen_target_calls": target.calls,
            "seen_draft_calls": draft.calls}


@learner_side
def speculative_replays(target, draft, prefix, n_tokens, k, seed, global_seeds) -> list:
    """The same sampled run (a generator seeded with `seed`) replayed once per
    global torch seed: the tokens of each replay. Every draw must come from the
    given generator, so the replays agree whatever the global seed."""
    import torch

    runs = []
    for global_seed in global_seeds:
        torch.manual_seed(global_seed)
        out = _m("speculative").speculative_generate(target, draft, list(prefix), n_tokens, k, greedy=False,
                                                      generator=torch.Generator().manual_seed(seed))
        runs.append([int(t) for t in out["tokens"]])
    return runs


@learner_side
def first_token_counts(target, draft, k, trials, seed, vocab) -> dict:
    """Many independent one-token runs (prefix [0]): histogram of the first token,
    plus acceptance and tokens-per-target-call over 4-token runs."""
    import torch

    spec = _m("speculative")
    g = torch.Generator().manual_seed(seed)
    counts = [0] * vocab
    for _ in range(trials):
        counts[spec.speculative_generate(target, draft, [0], 1, k, generator=g)["tokens"][0]] += 1
    proposed = accepted = calls = tokens = 0
    for _ in range(trials // 200):  # long runs: cutting the last step to n_tokens barely biases tokens/forward
        out = spec.speculative_generate(target, draft, [0], 400, k, generator=g)
        proposed += out["proposed"]
        accepted += out["accepted"]
        calls += out["target_calls"]
        tokens += len(out["tokens"])
    return {"counts": counts, "proposed": proposed, "accepted": accepted, "target_calls": calls, "tokens": tokens}


@learner_side
def expected_tokens(acceptance, k) -> float:
    return float(_m("speculative").expected_tokens_per_target_call(acceptance, k))
