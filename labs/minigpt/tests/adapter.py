"""The one door from the grader to the learner's workspace.

Every call into learner code goes through here, wrapped in the guards the lab
needs: attention may not call F.scaled_dot_product_attention, and the learner
must not modify the tensors the grader hands over.
"""

from __future__ import annotations

import contextlib
import time

import torch

from roadmap_cli.grading_kit import forbid_torch_ops, inputs_unchanged, learner_module


def _mod(name: str):
    return learner_module(name)


@contextlib.contextmanager
def guarded():
    with forbid_torch_ops("sdpa"):
        yield


# ----------------------------------------------------------------------------- tokenizers

def char_tokenizer(text: str):
    with guarded():
        return _mod("tokenizer").CharTokenizer(text)


def train_bpe(text: str, vocab_size: int, special_tokens=()):
    with guarded():
        return _mod("tokenizer").BPETokenizer().train(text, vocab_size, list(special_tokens))


def merges(tok) -> list[tuple[int, int]]:
    return [tuple(int(i) for i in m) for m in tok.merges]


def encode(tok, text: str) -> list[int]:
    return [int(i) for i in tok.encode(text)]


def decode(tok, ids: list[int]) -> str:
    return tok.decode(ids)


# ----------------------------------------------------------------------------- data

def split_train_val(data: torch.Tensor, val_fraction: float):
    with inputs_unchanged(data, what="data"):
        return _mod("data").split_train_val(data, val_fraction)


def get_batch(data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator):
    with inputs_unchanged(data, what="data"):
        return _mod("data").get_batch(data, block_size, batch_size, generator=generator, device="cpu")


# ----------------------------------------------------------------------------- model

def config(**kw):
    return _mod("model").GPTConfig(**kw)


def _load(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    missing, unexpected = module.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise AssertionError(
            f"parameter names differ from README.md 'Parameter names': missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}")
    return module.eval()


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    ln = _load(_mod("model").LayerNorm(x.shape[-1]), {"weight": weight, "bias": bias})
    with guarded(), inputs_unchanged(x), torch.no_grad():
        return ln(x)


def attention(x: torch.Tensor, state: dict, n_head: int) -> torch.Tensor:
    B, T, C = x.shape
    attn = _load(_mod("model").CausalSelfAttention(config(n_embd=C, n_head=n_head, block_size=max(T, 1))), state)
    with guarded(), inputs_unchanged(x), torch.no_grad():
        return attn(x)


def block(x: torch.Tensor, state: dict, n_head: int) -> torch.Tensor:
    B, T, C = x.shape
    blk = _load(_mod("model").Block(config(n_embd=C, n_head=n_head, block_size=max(T, 1))), state)
    with guarded(), inputs_unchanged(x), torch.no_grad():
        return blk(x)


def gpt_model(state: dict, **cfg) -> torch.nn.Module:
    with guarded():
        model = _mod("model").GPT(config(**cfg))
    return _load(model, state)


def new_gpt(**cfg) -> torch.nn.Module:
    with guarded():
        return _mod("model").GPT(config(**cfg))


def forward(model, idx: torch.Tensor, targets: torch.Tensor | None = None):
    with guarded(), inputs_unchanged(idx, what="idx"), torch.no_grad():
        return model(idx, targets) if targets is not None else model(idx)


def generate(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None):
    with guarded(), inputs_unchanged(idx, what="idx"):
        return model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k)


# ----------------------------------------------------------------------------- training

def get_lr(it: int, **cfg) -> float:
    mod = _mod("train")
    return float(mod.get_lr(it, mod.TrainConfig(**cfg)))


class ClipSpy:
    """Counts calls to torch.nn.utils.clip_grad_norm_ (and the max_norm used) during training."""

    def __init__(self):
        self.calls = 0
        self.max_norms: set[float] = set()

    @contextlib.contextmanager
    def watching(self):
        original = torch.nn.utils.clip_grad_norm_

        def spy(parameters, max_norm, *args, **kwargs):
            self.calls += 1
            self.max_norms.add(float(max_norm))
            return original(parameters, max_norm, *args, **kwargs)

        torch.nn.utils.clip_grad_norm_ = spy
        try:
            yield self
        finally:
            torch.nn.utils.clip_grad_norm_ = original


def train(**cfg):
    """Run the learner's train(TrainConfig(**cfg)); returns (result, seconds, clip spy)."""
    mod = _mod("train")
    spy = ClipSpy()
    with guarded(), spy.watching():
        start = time.perf_counter()
        result = mod.train(mod.TrainConfig(**cfg))
        seconds = time.perf_counter() - start
    return result, seconds, spy


def load_sampler_model(ckpt_path):
    with guarded():
        return _mod("sample").load_model(ckpt_path, "cpu")
