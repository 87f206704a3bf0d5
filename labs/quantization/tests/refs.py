"""The grader's references: every formula of README.md, written independently of
the learner's file, plus the secret-seeded input makers and the shipped data."""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import torch

from roadmap_cli import grading_kit as kit

import tiny_gpt

DATA = Path(__file__).resolve().parent.parent / "data"
GROUP_SIZE = 32
N_GRID = 20
CALIB_SEQS, HELDOUT_SEQS, T = 8, 16, 64


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(f"quantization-{name}"))


def gen(r: random.Random) -> torch.Generator:
    return torch.Generator().manual_seed(r.getrandbits(62))


def where(section: str) -> str:
    return f"(README.md, section \"{section}\")"


def worst(got: torch.Tensor, want: torch.Tensor) -> str:
    """Where two tensors differ most: index, got, expected (for failure messages)."""
    diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
    i = int(diff.reshape(-1).argmax())
    idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), got.shape)) if got.dim() else ()
    return f"at {idx}: got {got.reshape(-1)[i].item()!r}, expected {want.reshape(-1)[i].item()!r}"


# ---------------------------------------------------------------- data

@lru_cache(maxsize=1)
def checkpoint() -> dict:
    return torch.load(DATA / "tiny_gpt.pt", weights_only=True)


def model() -> tiny_gpt.TinyGPT:
    return tiny_gpt.load_tiny_gpt(checkpoint())


@lru_cache(maxsize=1)
def calib_idx() -> torch.Tensor:
    """(8, 64) int64: the calibration text cut into 8 windows of 64 characters."""
    ids = tiny_gpt.encode((DATA / "calib.txt").read_text(encoding="utf-8"), checkpoint()["chars"])
    return ids[:CALIB_SEQS * T].reshape(CALIB_SEQS, T).clone()


def heldout(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """16 windows of 65 characters of the held-out text at secret-seeded offsets -> (inputs, targets)."""
    ids = tiny_gpt.encode((DATA / "heldout.txt").read_text(encoding="utf-8"), checkpoint()["chars"])
    r = rng(name)
    starts = [r.randrange(len(ids) - T - 1) for _ in range(HELDOUT_SEQS)]
    x = torch.stack([ids[s:s + T + 1] for s in starts])
    return x[:, :-1].clone(), x[:, 1:].clone()


# ---------------------------------------------------------------- Part 1

def quant_weight(w):
    scale = w.abs().amax(dim=1) / 127
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def quant_act(x):
    scale = x.abs().amax(dim=-1, keepdim=True) / 127
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.round(x / scale).clamp(-127, 127).to(torch.int8), scale


def int8_gemm(qx, qw):
    return (qx.to(torch.int64) @ qw.to(torch.int64).t()).to(torch.int32)


def w8a8_linear(x, qw, sw, bias=None):
    qx, sx = quant_act(x.reshape(-1, x.shape[-1]))
    y = (int8_gemm(qx, qw).to(torch.float32) * sx) * sw[None, :]
    if bias is not None:
        y = y + bias
    return y.reshape(*x.shape[:-1], qw.shape[0])


# ---------------------------------------------------------------- Part 2

def smooth_scales(act_amax, weights, alpha):
    w_amax = torch.cat([w.abs() for w in weights]).amax(dim=0)
    s = act_amax.pow(alpha) / w_amax.pow(1 - alpha)
    return torch.where((act_amax == 0) | (w_amax == 0), torch.ones_like(s), s)


def collect_inputs(m, idx):
    seen, hs = {}, []
    for i, block in enumerate(m.blocks):
        for sub in tiny_gpt.QUANTIZED_LINEARS:
            hs.append(block.get_submodule(sub).register_forward_hook(
                lambda mod, a, o, n=f"blocks.{i}.{sub}": seen.__setitem__(n, a[0].reshape(-1, a[0].shape[-1]).clone())))
    with torch.no_grad():
        m(idx)
    for h in hs:
        h.remove()
    return seen


PAIRS = (("ln_1", "attn.c_attn"), ("ln_2", "mlp.c_fc"))


def _fold(block, ln_name, lin_name, s):
    ln, lin = block.get_submodule(ln_name), block.get_submodule(lin_name)
    with torch.no_grad():
        ln.weight.div_(s)
        ln.bias.div_(s)
        lin.weight.mul_(s[None, :])


def smooth_model(m, idx, alpha):
    ins = collect_inputs(m, idx)
    for i, block in enumerate(m.blocks):
        for ln_name, lin_name in PAIRS:
            lin = block.get_submodule(lin_name)
            _fold(block, ln_name, lin_name,
                  smooth_scales(ins[f"blocks.{i}.{lin_name}"].abs().amax(0), [lin.weight.detach()], alpha))
    return m


# ---------------------------------------------------------------- Part 3

def quant_int4(w, g):
    o, n = w.shape
    x = w.reshape(o, n // g, g)
    lo, hi = x.amin(-1).clamp(max=0), x.amax(-1).clamp(min=0)
    scale = (hi - lo) / 15
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    zero = torch.round(-lo / scale)
    q = (torch.round(x / scale[..., None]) + zero[..., None]).clamp(0, 15)
    return q.reshape(o, n).to(torch.uint8), scale, zero.to(torch.uint8)


def dequant_int4(q, scale, zero, g):
    o, n = q.shape
    x = q.reshape(o, n // g, g).to(torch.float32)
    return ((x - zero[..., None].to(torch.float32)) * scale[..., None]).reshape(o, n)


def pack_int4(q):
    """Bit by bit, the slow obvious way: word k |= q[8k + i] << 4i, then reinterpret as int32."""
    o, n = q.shape
    words = torch.zeros(o, n // 8, dtype=torch.int64)
    for i in range(8):
        words |= q[:, i::8].to(torch.int64) << (4 * i)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack_int4(p):
    u = p.to(torch.int64) & 0xFFFFFFFF
    return torch.stack([(u >> (4 * i)) & 0xF for i in range(8)], dim=-1).reshape(p.shape[0], -1).to(torch.uint8)


def fake_int4(w, g):
    return dequant_int4(*quant_int4(w, g), g)


class RefW4A16(torch.nn.Module):
    def __init__(self, lin, g):
        super().__init__()
        self.w = fake_int4(lin.weight.detach(), g)
        self.b = None if lin.bias is None else lin.bias.detach().clone()

    def forward(self, x):
        y = x @ self.w.t()
        return y if self.b is None else y + self.b


class RefW8A8(torch.nn.Module):
    def __init__(self, lin):
        super().__init__()
        self.q, self.s = quant_weight(lin.weight.detach())
        self.b = None if lin.bias is None else lin.bias.detach().clone()

    def forward(self, x):
        return w8a8_linear(x, self.q, self.s, self.b)


def replace(m, make):
    for block in m.blocks:
        for sub in tiny_gpt.QUANTIZED_LINEARS:
            owner, attr = sub.split(".")
            setattr(getattr(block, owner), attr, make(getattr(getattr(block, owner), attr)))
    return m


# ---------------------------------------------------------------- Part 4

def awq_losses(x, w, g, n_grid):
    """-> list of (alpha, s, loss) for alpha = i / n_grid, i = 0 .. n_grid, in float64 sums."""
    x_mean = x.abs().mean(0)
    ref = x @ w.t()
    out = []
    for i in range(n_grid + 1):
        a = i / n_grid
        s = x_mean.pow(a).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()
        wq = fake_int4(w * s[None, :], g) / s[None, :]
        out.append((a, s, float(((x @ wq.t() - ref).to(torch.float64) ** 2).mean())))
    return out


def awq_best(x, w, g, n_grid):
    cands = awq_losses(x, w, g, n_grid)
    best = min(range(len(cands)), key=lambda i: (cands[i][2], i))
    return cands[best], cands


def awq_model(m, idx, g, n_grid):
    ins = collect_inputs(m, idx)
    for i, block in enumerate(m.blocks):
        for ln_name, lin_name in PAIRS:
            (_, s, _), _ = awq_best(ins[f"blocks.{i}.{lin_name}"], block.get_submodule(lin_name).weight.detach(), g, n_grid)
            _fold(block, ln_name, lin_name, s)
    return replace(m, lambda lin: RefW4A16(lin, g))


# ---------------------------------------------------------------- Part 5

def quantized(method, *, alpha=0.5, group_size=GROUP_SIZE, n_grid=N_GRID):
    m = model()
    if method == "w8a8":
        return replace(m, RefW8A8)
    if method == "smoothquant-w8a8":
        return replace(smooth_model(m, calib_idx(), alpha), RefW8A8)
    if method == "w4a16":
        return replace(m, lambda lin: RefW4A16(lin, group_size))
    if method == "awq-w4a16":
        return awq_model(m, calib_idx(), group_size, n_grid)
    raise AssertionError(method)


def perplexity(logits, targets):
    logp = torch.log_softmax(logits.to(torch.float64), -1)
    return float(torch.exp(-logp.gather(-1, targets[..., None]).mean()))
