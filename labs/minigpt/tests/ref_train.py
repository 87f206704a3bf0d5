"""The grader's own data pipeline and training step (never copied to the workspace).

- `CharTokenizer`, `split_train_val`, `get_batch`: the handout's dataset (README.md,
  sections 1.1 and 2). The training part swaps them into the learner's train.py, so
  a dataset bug costs the dataset part only.
- `adamw_groups`, `train_step`, `replay`: the handout's optimisation (section 5). The
  training part replays the learner's run with them, on the batches the learner's
  loop drew, and compares the parameters step by step.
- `train_reference`: a whole run, for the generation part's readable-text check.

Grader-side only: the learner process never sees this file (lab.yaml `learner_side`).
The models here are stand_in.GPT, the model the learner's loop trains and the
learner's generate runs on (the learner side swaps it in), so a replay compares like
with like; ref_model.GPT, the handout's GPT, is what the model part compares with.
"""

from __future__ import annotations

import math

import torch

import stand_in


class CharTokenizer:
    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def split_train_val(data: torch.Tensor, val_fraction: float = 0.1):
    n = int(len(data) * (1 - val_fraction))
    return data[:n], data[n:]


def get_batch(data, block_size, batch_size, generator=None, device="cpu"):
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator).tolist()
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x.long().to(device), y.long().to(device)


def get_lr(it: int, lr: float, min_lr: float, warmup: int, decay_iters: int) -> float:
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (decay_iters - warmup))) * (lr - min_lr)


def decays(name: str, tensor: torch.Tensor) -> bool:
    """The handout's rule (README.md, section 5.2): tensors with >= 2 dims decay."""
    return tensor.dim() >= 2


def adamw_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    named = list(model.named_parameters())  # the tied matrix appears once
    return [{"params": [p for n, p in named if decays(n, p)], "weight_decay": weight_decay},
            {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}]


def make_model(vocab_size: int, cfg: dict, state: dict | None = None) -> stand_in.GPT:
    model = stand_in.GPT(stand_in.GPTConfig(
        vocab_size=vocab_size, block_size=cfg["block_size"], n_layer=cfg["n_layer"], n_head=cfg["n_head"],
        n_embd=cfg["n_embd"], dropout=cfg.get("dropout", 0.0), bias=cfg.get("bias", True)))
    if state is not None:
        model.load_state_dict(state)
    return model


def make_optimizer(model, cfg: dict) -> torch.optim.AdamW:
    return torch.optim.AdamW(adamw_groups(model, cfg["weight_decay"]), lr=cfg["learning_rate"],
                             betas=(cfg["beta1"], cfg["beta2"]))


def train_step(model, optimizer, x, y, it: int, cfg: dict) -> float:
    """One step of README.md section 5.5 (items 2-4)."""
    lr = get_lr(it, cfg["learning_rate"], cfg["min_lr"], cfg["warmup_iters"], cfg["lr_decay_iters"])
    for group in optimizer.param_groups:
        group["lr"] = lr
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg["grad_clip"] > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    optimizer.step()
    return float(loss.detach())


def replay(initial: dict, vocab_size: int, cfg: dict, xs: torch.Tensor, ys: torch.Tensor, first_iter: int,
           keep: set[int]) -> tuple[dict[int, dict], list[float]]:
    """Train the grader's model from `initial` on the given batches (xs[k], ys[k] for
    iteration first_iter + k). Returns the parameters after each step in `keep`
    (by number of steps done) and the loss of every step.

    Dropout draws from the global RNG, so the caller seeds it the way the run did."""
    model = make_model(vocab_size, cfg, initial).train()
    optimizer = make_optimizer(model, cfg)
    kept, losses = {}, []
    for k in range(len(xs)):
        losses.append(train_step(model, optimizer, xs[k], ys[k], first_iter + k, cfg))
        if k + 1 in keep:
            kept[k + 1] = {n: t.detach().clone() for n, t in model.state_dict().items()}
    return kept, losses


def single_step(params: dict, moments: dict, vocab_size: int, cfg: dict, x, y, it: int) -> dict:
    """Step `it` alone, from the learner's parameters and Adam moments before it."""
    model = make_model(vocab_size, cfg, params).train()
    optimizer = make_optimizer(model, cfg)
    for name, p in model.named_parameters():
        if name in moments:
            optimizer.state[p] = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in moments[name].items()}
    train_step(model, optimizer, x, y, it, cfg)
    return {n: t.detach().clone() for n, t in model.state_dict().items()}


@torch.no_grad()
def val_loss(state: dict, vocab_size: int, cfg: dict, val_ids: torch.Tensor, windows: int,
             gen: torch.Generator) -> float:
    """Mean next-token loss of the stand-in model with weights `state` on random windows of `val_ids`."""
    model = make_model(vocab_size, dict(cfg, dropout=0.0), state).eval()
    return float(model(*get_batch(val_ids, cfg["block_size"], windows, generator=gen))[1])


def train_reference(text: str, cfg: dict, seed: int, steps: int) -> tuple[stand_in.GPT, CharTokenizer]:
    """A whole, plain run: char tokenizer, the 90% train split, `steps` steps."""
    tok = CharTokenizer(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train_data, _ = split_train_val(data, 0.1)
    torch.manual_seed(seed)
    model = make_model(tok.vocab_size, cfg).train()
    optimizer = make_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(seed)
    for it in range(steps):
        x, y = get_batch(train_data, cfg["block_size"], cfg["batch_size"], generator=gen)
        train_step(model, optimizer, x, y, it, cfg)
    return model.eval(), tok
