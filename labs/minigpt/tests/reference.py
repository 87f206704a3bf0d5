"""The grader's own reference implementation (never copied to the workspace).

Written independently of the lab's solution: the model is a pure function of
a state dict built from torch's own kernels (F.layer_norm,
F.scaled_dot_product_attention, F.gelu), and BPE is the plain "recount every
pair after every merge" algorithm. The learner's code is compared with these.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import torch
from torch.nn import functional as F

LN_EPS = 1e-5
PRETOKENIZE = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?_+| ?[^\s\w]+|\s+(?!\S)|\s+")


# ----------------------------------------------------------------------------- tokenizers

def char_vocab(text: str) -> list[str]:
    return sorted(set(text))


def _merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def bpe_train(text: str, vocab_size: int, special_tokens=()) -> list[tuple[int, int]]:
    """Merges in order: most frequent pair within chunks; ties -> smallest (a, b)."""
    counts = Counter(PRETOKENIZE.findall(text))
    words = {w: list(w.encode("utf-8")) for w in counts}
    merges = []
    for step in range(vocab_size - 256 - len(special_tokens)):
        pairs: Counter = Counter()
        for w, ids in words.items():
            for p in zip(ids, ids[1:]):
                pairs[p] += counts[w]
        if not pairs:
            break
        top = max(pairs.values())
        best = min(p for p, c in pairs.items() if c == top)
        merges.append(best)
        words = {w: _merge(ids, best, 256 + step) for w, ids in words.items()}
    return merges



def bpe_train_fast(text: str, vocab_size: int, special_tokens=()) -> list[tuple[int, int]]:
    """The same merges, updating pair counts incrementally: the speed yardstick for the
    time budget (measured in the same run, so a slow or busy machine moves both)."""
    counts = Counter(PRETOKENIZE.findall(text))
    words = [list(w.encode("utf-8")) for w in counts]
    weights = list(counts.values())
    pairs: Counter = Counter()
    holders: dict = {}
    for w, ids in enumerate(words):
        for p in zip(ids, ids[1:]):
            pairs[p] += weights[w]
            holders.setdefault(p, set()).add(w)
    merges = []
    for step in range(vocab_size - 256 - len(special_tokens)):
        if not pairs:
            break
        top = max(pairs.values())
        best = min(p for p, c in pairs.items() if c == top)
        for w in holders.pop(best, ()):
            ids = words[w]
            for p in zip(ids, ids[1:]):
                pairs[p] -= weights[w]
                if not pairs[p]:
                    del pairs[p]
            ids = words[w] = _merge(ids, best, 256 + step)
            for p in zip(ids, ids[1:]):
                pairs[p] += weights[w]
                holders.setdefault(p, set()).add(w)
        merges.append(best)
    return merges

def bpe_encode(text: str, merges: list[tuple[int, int]], specials: dict[str, int]) -> list[int]:
    ranks = {p: r for r, p in enumerate(merges)}
    out: list[int] = []
    pieces = [text]
    if specials:
        pattern = "(" + "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")"
        pieces = re.split(pattern, text)
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append(specials[piece])
            continue
        for chunk in PRETOKENIZE.findall(piece):
            ids = list(chunk.encode("utf-8"))
            while len(ids) > 1:
                ranked = [(ranks[p], p) for p in zip(ids, ids[1:]) if p in ranks]
                if not ranked:
                    break
                rank, pair = min(ranked)
                ids = _merge(ids, pair, 256 + rank)
            out.extend(ids)
    return out


# ----------------------------------------------------------------------------- model weights

def expected_keys(n_layer: int, bias: bool = True) -> set[str]:
    keys = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "lm_head.weight"}
    if bias:
        keys.add("transformer.ln_f.bias")
    for i in range(n_layer):
        keys |= {f"transformer.h.{i}.{k}" for k in block_keys(bias)}
    return keys


def block_keys(bias: bool = True) -> list[str]:
    keys = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
            "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
            "mlp.c_proj.weight", "mlp.c_proj.bias"]
    return keys if bias else [k for k in keys if not k.endswith(".bias")]


def param_count(vocab_size: int, block_size: int, n_layer: int, n_embd: int, bias: bool = True) -> int:
    """Tied embeddings: V*C + T*C + L*(12C^2 + 13C) + 2C with biases (attention 4C^2 + 4C, MLP
    8C^2 + 5C, LayerNorms 4C), V*C + T*C + L*(12C^2 + 2C) + C without (the LayerNorms' gains only)."""
    c = n_embd
    if bias:
        return vocab_size * c + block_size * c + n_layer * (12 * c * c + 13 * c) + 2 * c
    return vocab_size * c + block_size * c + n_layer * (12 * c * c + 2 * c) + c


def without_biases(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same weights with every bias left out: a GPTConfig(bias=False) state dict."""
    return {k: v for k, v in state.items() if not k.endswith(".bias")}


def random_attention_weights(n_embd: int, gen: torch.Generator, scale: float = 1.0) -> dict[str, torch.Tensor]:
    c = n_embd
    # std ~ scale/sqrt(C) keeps activations O(1) but makes the scores peaked enough that a
    # missing 1/sqrt(hs) or a wrong softmax axis shows far above the tolerance.
    return {
        "c_attn.weight": torch.randn(3 * c, c, generator=gen) * (scale / math.sqrt(c)),
        "c_attn.bias": torch.randn(3 * c, generator=gen) * 0.1,
        "c_proj.weight": torch.randn(c, c, generator=gen) / math.sqrt(c),
        "c_proj.bias": torch.randn(c, generator=gen) * 0.1,
    }


def random_block_weights(n_embd: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    c = n_embd
    sd = {f"attn.{k}": v for k, v in random_attention_weights(c, gen, scale=2.0).items()}
    sd.update({
        "ln_1.weight": 1 + 0.2 * torch.randn(c, generator=gen), "ln_1.bias": 0.1 * torch.randn(c, generator=gen),
        "ln_2.weight": 1 + 0.2 * torch.randn(c, generator=gen), "ln_2.bias": 0.1 * torch.randn(c, generator=gen),
        "mlp.c_fc.weight": torch.randn(4 * c, c, generator=gen) / math.sqrt(c),
        "mlp.c_fc.bias": 0.1 * torch.randn(4 * c, generator=gen),
        "mlp.c_proj.weight": torch.randn(c, 4 * c, generator=gen) / math.sqrt(4 * c),
        "mlp.c_proj.bias": 0.1 * torch.randn(c, generator=gen),
    })
    return sd


def random_gpt_weights(vocab_size: int, block_size: int, n_layer: int, n_embd: int, gen: torch.Generator):
    c = n_embd
    # wte doubles as the LM head (tied), so its scale sets the logits' scale.
    sd = {"transformer.wte.weight": 0.1 * torch.randn(vocab_size, c, generator=gen),
          "transformer.wpe.weight": 0.1 * torch.randn(block_size, c, generator=gen)}
    for i in range(n_layer):
        sd.update({f"transformer.h.{i}.{k}": v for k, v in random_block_weights(c, gen).items()})
    sd["transformer.ln_f.weight"] = 1 + 0.2 * torch.randn(c, generator=gen)
    sd["transformer.ln_f.bias"] = 0.1 * torch.randn(c, generator=gen)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


# ----------------------------------------------------------------------------- model forward
# The tests call these in float64 (see `f64`): the reference is then (nearly) exact, and the
# tolerance only has to absorb the learner's own float32 rounding.

def f64(state: dict) -> dict:
    return {k: v.double() for k, v in state.items()}


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=LN_EPS)


def attention(x: torch.Tensor, sd: dict, n_head: int, prefix: str = "", mask: torch.Tensor | None = None) -> torch.Tensor:
    """mask: a (T, T) bool mask, True where query t may see key s (default: causal)."""
    B, T, C = x.shape
    qkv = F.linear(x, sd[prefix + "c_attn.weight"], sd.get(prefix + "c_attn.bias"))
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in qkv.split(C, dim=2))
    if mask is None:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    y = y.transpose(1, 2).reshape(B, T, C)
    return F.linear(y, sd[prefix + "c_proj.weight"], sd.get(prefix + "c_proj.bias"))


def block(x: torch.Tensor, sd: dict, n_head: int, prefix: str = "") -> torch.Tensor:
    p = prefix
    # sd.get: a bias-free state dict (GPTConfig(bias=False)) has no ".bias" keys; None = no bias.
    x = x + attention(layer_norm(x, sd[p + "ln_1.weight"], sd.get(p + "ln_1.bias")), sd, n_head, p + "attn.")
    h = layer_norm(x, sd[p + "ln_2.weight"], sd.get(p + "ln_2.bias"))
    h = F.linear(F.gelu(F.linear(h, sd[p + "mlp.c_fc.weight"], sd.get(p + "mlp.c_fc.bias"))),
                 sd[p + "mlp.c_proj.weight"], sd.get(p + "mlp.c_proj.bias"))
    return x + h


def gpt(idx: torch.Tensor, sd: dict, n_layer: int, n_head: int, targets: torch.Tensor | None = None):
    T = idx.shape[1]
    x = F.embedding(idx, sd["transformer.wte.weight"]) + sd["transformer.wpe.weight"][:T]
    for i in range(n_layer):
        x = block(x, sd, n_head, f"transformer.h.{i}.")
    x = layer_norm(x, sd["transformer.ln_f.weight"], sd.get("transformer.ln_f.bias"))
    logits = F.linear(x, sd["lm_head.weight"])
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return logits, loss


@torch.no_grad()
def val_loss(sd: dict, n_layer: int, n_head: int, val_ids: torch.Tensor, block_size: int,
             windows: int, gen: torch.Generator) -> float:
    """Mean next-token loss of weights `sd` on random windows of the validation ids."""
    starts = torch.randint(len(val_ids) - block_size, (windows,), generator=gen)
    x = torch.stack([val_ids[s : s + block_size] for s in starts.tolist()])
    y = torch.stack([val_ids[s + 1 : s + 1 + block_size] for s in starts.tolist()])
    _, loss = gpt(x, {k: v.float() for k, v in sd.items()}, n_layer, n_head, y)
    return float(loss)


def get_lr(it: int, lr: float, min_lr: float, warmup: int, decay_iters: int) -> float:
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (decay_iters - warmup))) * (lr - min_lr)


def seconds_per_train_step(vocab_size: int, n_layer: int, n_head: int, n_embd: int, block_size: int,
                           batch_size: int, steps: int, gen: torch.Generator) -> float:
    """Time `steps` AdamW steps of the reference model (after one untimed step): the
    machine's speed right now, for a time limit that means the same on a busy machine."""
    import time

    state = random_gpt_weights(vocab_size, block_size, n_layer, n_embd, gen)
    params = {id(t): t.requires_grad_() for t in state.values()}  # the tied matrix once
    optimizer = torch.optim.AdamW(list(params.values()), lr=1e-3)
    idx = torch.randint(vocab_size, (batch_size, block_size + 1), generator=gen)
    elapsed = 0.0
    for step in range(steps + 1):
        start = time.perf_counter()
        _, loss = gpt(idx[:, :-1], state, n_layer, n_head, idx[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        optimizer.step()
        if step:
            elapsed += time.perf_counter() - start
    return elapsed / steps
