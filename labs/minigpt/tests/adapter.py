"""The one door from the grader to the learner's workspace.

Every call of learner code sits in a `@learner_side` function: under the
sandbox it runs in the learner process and only plain data (numbers, strings,
lists, dicts, tensors) comes back; the tests compare in the grader process.
Guards run in here too: written-out attention may not call
F.scaled_dot_product_attention, and the learner must not modify its inputs.

Where a part must not depend on another part's code, the function swaps in the
grader's stand-ins (stand_in.py): training runs the learner's loop on the stand-in
model, tokenizer, split and batches; generation runs the learner's `generate` on the
stand-in model. Under the sandbox the learner process sees this file, stand_in.py and
train_watch.py only (lab.yaml `learner_side`): never the reference model (ref_model.py),
the reference training (ref_train.py) or an expected value. The few functions here not
marked @learner_side run in the grader process.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import forbid_torch_ops, inputs_unchanged, learner_module

learner_side = kit.learner_side


@contextlib.contextmanager
def written_out():
    """The written-out paths (everything the parts grade) may not use the fused kernel."""
    with forbid_torch_ops("sdpa"):
        yield


# ----------------------------------------------------------------------------- tokenizers

@learner_side
def char_tokenizer(text: str, sample: str) -> dict:
    """vocab_size, chars, encode(sample) and decode(encode(sample)) of CharTokenizer(text)."""
    tok = learner_module("tokenizer").CharTokenizer(text)
    ids = [int(i) for i in tok.encode(sample)]
    return {"vocab_size": int(tok.vocab_size), "chars": list(tok.chars), "ids": ids, "decoded": tok.decode(ids)}


@learner_side
def char_encode(text: str, sample: str) -> list[int]:
    """CharTokenizer(text).encode(sample) (a character outside the vocabulary must raise ValueError)."""
    return [int(i) for i in learner_module("tokenizer").CharTokenizer(text).encode(sample)]


@learner_side
def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    return [int(i) for i in learner_module("tokenizer").merge_pair(list(ids), tuple(pair), new_id)]


@learner_side
def train_bpe(text: str, vocab_size: int, special_tokens=()):
    """The learner's trained BPETokenizer (a learner proxy under the sandbox)."""
    return learner_module("tokenizer").BPETokenizer().train(text, vocab_size, list(special_tokens))


@learner_side
def bpe_facts(tok) -> dict:
    return {"merges": [tuple(int(i) for i in m) for m in tok.merges], "vocab_size": int(tok.vocab_size),
            "special_tokens": {str(k): int(v) for k, v in getattr(tok, "special_tokens", {}).items()}}


@learner_side
def merges(tok) -> list[tuple[int, int]]:
    return [tuple(int(i) for i in m) for m in tok.merges]


@learner_side
def encode(tok, text: str) -> list[int]:
    return [int(i) for i in tok.encode(text)]


@learner_side
def decode(tok, ids: list[int]) -> str:
    return tok.decode(list(ids))


@learner_side
def roundtrip(tok, text: str) -> str:
    return tok.decode(tok.encode(text))


# ----------------------------------------------------------------------------- data

@learner_side
def split_train_val(data: torch.Tensor, val_fraction: float):
    with inputs_unchanged(data, what="data"):
        train, val = learner_module("data").split_train_val(data, val_fraction)
    return train.clone(), val.clone()


@learner_side
def get_batch(data: torch.Tensor, block_size: int, batch_size: int, generator_state: torch.Tensor):
    """get_batch with a generator in the given state; also returns the generator's state after."""
    gen = torch.Generator()
    gen.set_state(generator_state)
    with inputs_unchanged(data, what="data"):
        x, y = learner_module("data").get_batch(data, block_size, batch_size, generator=gen, device="cpu")
    return x, y, gen.get_state()


# ----------------------------------------------------------------------------- model

def _config(mod, **kw):
    """The learner's GPTConfig; `fused` and `bias` only when the learner's config has them
    (and only if asked for something other than the starter's defaults)."""
    names = {f.name for f in dataclasses.fields(mod.GPTConfig)}
    if kw.get("fused") and "fused" not in names:
        raise AssertionError("GPTConfig has no `fused` field: keep the starter's GPTConfig (README.md, section 4.2)")
    if kw.get("bias", True) is False and "bias" not in names:
        raise AssertionError("GPTConfig has no `bias` field: keep the starter's GPTConfig (README.md, section 4.3)")
    return mod.GPTConfig(**{k: v for k, v in kw.items() if k in names})


@contextlib.contextmanager
def _none_bias_hint(bias: bool, what: str):
    """With bias=False a LayerNorm's self.bias is None: code that still adds it raises a
    TypeError deep in the learner's forward. Say what that means, in the test's words."""
    try:
        yield
    except TypeError as exc:
        if bias or "NoneType" not in str(exc):
            raise
        raise AssertionError(f"{what} with bias=False raised TypeError: {exc}; expected it to run with no shift: "
                             f"self.bias is None there, add it only when it is not None "
                             f"(README.md, sections 3.1, 4.3)") from None


def _load(module: torch.nn.Module, state: dict[str, torch.Tensor], built: str = "") -> torch.nn.Module:
    missing, unexpected = module.load_state_dict(state, strict=False)
    if missing or unexpected:
        hint = ""
        if any(n.endswith("bias") for n in [*missing, *unexpected]):
            hint = " (bias=True: every Linear but lm_head and every LayerNorm has a bias; bias=False: none has; README.md, section 4.3)"
        raise AssertionError(
            f"parameter names of {built or type(module).__name__} differ from README.md 'Parameter names': "
            f"missing {sorted(missing)}, unexpected {sorted(unexpected)}{hint}")
    return module


@learner_side
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The learner's written-out LayerNorm; bias None: LayerNorm(C, bias=False), weight only."""
    LayerNorm = learner_module("model").LayerNorm
    if bias is None:
        ln = _load(LayerNorm(x.shape[-1], bias=False), {"weight": weight}, "LayerNorm(C, bias=False)")
    else:
        ln = _load(LayerNorm(x.shape[-1]), {"weight": weight, "bias": bias})
    with _none_bias_hint(bias is not None, "LayerNorm(C)"), written_out(), inputs_unchanged(x), \
            torch.no_grad():
        return ln.eval()(x)


@learner_side
def attention(x: torch.Tensor, state: dict, n_head: int, block_size: int | None = None, dropout: float = 0.0,
              train_seed: int | None = None, mask_buffer: torch.Tensor | None = None) -> torch.Tensor:
    """CausalSelfAttention on x; in train mode (dropout) after torch.manual_seed(train_seed).
    mask_buffer: put in place of the module's self.causal_mask after it is built (a
    (block_size, block_size) bool tensor): forward must read the mask from there."""
    mod = learner_module("model")
    B, T, C = x.shape
    cfg = _config(mod, n_embd=C, n_head=n_head, block_size=block_size or max(T, 1), dropout=dropout, fused=False)
    attn = _load(mod.CausalSelfAttention(cfg), state)
    if mask_buffer is not None:
        attn.causal_mask = mask_buffer
    attn.train(train_seed is not None)
    if train_seed is not None:
        torch.manual_seed(train_seed)
    with written_out(), inputs_unchanged(x), torch.no_grad():
        return attn(x)


@learner_side
def block(x: torch.Tensor, state: dict, n_head: int, dropout: float = 0.0, train_seed: int | None = None,
          bias: bool = True):
    mod = learner_module("model")
    B, T, C = x.shape
    blk = _load(mod.Block(_config(mod, n_embd=C, n_head=n_head, block_size=max(T, 1), dropout=dropout, fused=False,
                                  bias=bias)), state, f"Block(bias={bias})")
    blk.train(train_seed is not None)
    if train_seed is not None:
        torch.manual_seed(train_seed)
    with _none_bias_hint(bias, "Block.forward"), written_out(), inputs_unchanged(x), torch.no_grad():
        return blk(x)


@learner_side
def parameter_facts(**cfg) -> dict:
    """Names, shapes and the count of a fresh learner GPT; whether lm_head IS wte."""
    model = learner_module("model").GPT(_config(learner_module("model"), **cfg))
    return {"names": sorted(model.state_dict().keys()),
            "count": sum(p.numel() for p in model.parameters()),
            "tensors": len(list(model.parameters())),
            "tied": model.lm_head.weight is model.transformer.wte.weight}


@learner_side
def forward(state: dict, cfg: dict, idx: torch.Tensor, targets: torch.Tensor | None = None,
            train_seed: int | None = None, fused: bool = False):
    """(logits, loss) of the learner's GPT with the given weights; loss None without targets.
    Train mode (dropout on) after torch.manual_seed(train_seed) when train_seed is given."""
    mod = learner_module("model")
    model = _load(mod.GPT(_config(mod, fused=fused, **cfg)), state, f"GPT(bias={cfg.get('bias', True)})")
    model.train(train_seed is not None)
    if train_seed is not None:
        torch.manual_seed(train_seed)
    guard = contextlib.nullcontext() if fused else written_out()
    with _none_bias_hint(cfg.get("bias", True), "GPT.forward"), guard, inputs_unchanged(idx, what="idx"), \
            torch.no_grad():
        logits, loss = model(idx, targets) if targets is not None else model(idx)
    return logits, loss


# ----------------------------------------------------------------------------- generation

@learner_side
def generate(state: dict, cfg: dict, idx: torch.Tensor, max_new_tokens: int, seed: int,
             temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """The learner's GPT.generate running on the GRADER's stand-in model (stand_in.GPT) with the
    given weights: the generation part grades sampling, not model.py (the model part does that)."""
    import stand_in

    learner_gpt = learner_module("model").GPT
    hybrid = type("GPT", (stand_in.GPT, learner_gpt), {"forward": stand_in.GPT.forward})
    model = hybrid(stand_in.GPTConfig(**cfg))
    model.load_state_dict(state)
    model.eval()
    torch.manual_seed(seed)
    with written_out(), inputs_unchanged(idx, what="idx"):
        return model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k)


# ----------------------------------------------------------------------------- training

@learner_side
def get_lr(it: int, **cfg) -> float:
    mod = learner_module("train")
    return float(mod.get_lr(it, mod.TrainConfig(**cfg)))


@learner_side
def optimizer_groups(model_cfg: dict, **cfg) -> dict:
    """The learner's configure_optimizer on the grader's stand-in model (the handout's parameter
    names and shapes): which parameter is in which group, with which weight decay, lr and betas."""
    import stand_in

    mod = learner_module("train")
    model = stand_in.GPT(stand_in.GPTConfig(**model_cfg))
    opt = mod.configure_optimizer(model, mod.TrainConfig(**cfg))
    names = {id(p): n for n, p in model.named_parameters()}
    groups = [{"names": [names.get(id(p), "?") for p in g["params"]], "weight_decay": float(g["weight_decay"]),
               "lr": float(g["lr"]), "betas": [float(b) for b in g["betas"]]} for g in opt.param_groups]
    return {"groups": groups, "class": f"{type(opt).__module__}.{type(opt).__qualname__}",
            "is_adamw": isinstance(opt, torch.optim.AdamW)}


@learner_side
def estimate_loss(state: dict, model_cfg: dict, splits: dict, rng_seed: int, **cfg) -> dict:
    """The learner's estimate_loss on the grader's stand-in model (with dropout, in train mode when
    called, as the loop leaves it). Returns its result and what it did to the model and RNGs."""
    import stand_in
    import train_watch

    mod = learner_module("train")
    watch = train_watch.TrainWatch()
    model = stand_in.GPT(stand_in.GPTConfig(**model_cfg))
    model.load_state_dict(state)
    model.train()
    model.on_forward = lambda m, idx, targets: watch.eval_forwards.append(
        {"training": bool(m.training), "grad": torch.is_grad_enabled(), "batch": idx.detach().clone()})
    torch.manual_seed(rng_seed)
    before = torch.get_rng_state()
    saved = mod.get_batch
    mod.get_batch = stand_in.get_batch  # the grader's batches: the dataset part grades get_batch
    try:
        out = mod.estimate_loss(model, splits, mod.TrainConfig(**cfg))
    finally:
        mod.get_batch = saved
    return {"losses": {str(k): float(v) for k, v in dict(out).items()},
            "forwards": watch.eval_forwards, "training_after": bool(model.training),
            "global_rng_untouched": bool(torch.equal(before, torch.get_rng_state()))}


def watch_training(cfg: dict, keep_steps=(), crash_at_step: int | None = None, single_steps=(),
                   stop_at_step: int | None = None, crash_in_save: int | None = None) -> dict:
    """Run the learner's train(TrainConfig(**cfg)) on the grader's stand-ins; see train_watch.
    stop_at_step: Ctrl-C (the stop request) arrives once that many steps ran.

    Runs in the grader process: it works out the answers the stand-in tokenizer and split
    look up (the corpus's vocabulary, the 90% split) with the grader's references, and sends
    them with the call; the learner process never imports those references."""
    from pathlib import Path

    import ref_train
    import stand_in

    text = Path(cfg["corpus"]).read_text(encoding="utf-8")
    tokens = len(text)
    given = {"vocab": {stand_in.text_key(text): list(ref_train.CharTokenizer(text).chars)},
             "splits": [((tokens, 0.1), len(ref_train.split_train_val(torch.arange(tokens), 0.1)[0]))]}
    return _watch_training(cfg, given, keep_steps, crash_at_step, single_steps, stop_at_step, crash_in_save)


@learner_side
def _watch_training(cfg: dict, given: dict, keep_steps, crash_at_step, single_steps, stop_at_step,
                    crash_in_save=None) -> dict:
    import train_watch

    return train_watch.run(learner_module("train"), learner_module("data"), cfg, given, keep_steps, crash_at_step,
                           single_steps, stop_at_step, crash_in_save)


@learner_side
def read_checkpoint(path: str) -> dict | None:
    import train_watch

    return train_watch.read_checkpoint(path)
