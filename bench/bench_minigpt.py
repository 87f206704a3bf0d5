"""Training speed of the minigpt lab's reference vs a plain fused-op PyTorch GPT.

    python bench/bench_minigpt.py                          # 3 rounds of 150 steps per mode
    python bench/bench_minigpt.py --steps 100 --rounds 2   # a quicker look
    python bench/bench_minigpt.py --threads 2              # nanoGPT's CPU setting (2 threads)

Config: nanoGPT's shakespeare_char "on a macbook" settings (4 layers, 4 heads, 128-dim,
context 64, batch 12, lr 1e-3, no dropout) on the lab's 200 KB corpus (offline).

Modes, run in alternation (round 1 ours, plain, ..., round 2 ours, plain, ...) so that all
see the same machine load; each is a fresh run of `steps` steps from the same seed:
- ours:          the reference train() (solution view), fused path (the default), no bar;
- ours+bar:      the same with the rich progress bar drawn (to a forced terminal on /dev/null);
- ours-written:  GPTConfig.fused=False: the written-out LayerNorm and attention (the handout's table);
- plain:         nanoGPT's model written here from fused ops (F.layer_norm, F.scaled_dot_product_attention,
                 no biases, as nanoGPT's train.py) and the same loop (AdamW with the same groups,
                 warm-up + cosine, clipping), on the same batches.

Prints tokens/s per mode (median over rounds), the ratios ours/plain (issue 13: >= 1.0) and
ours/ours+bar (<= 1.02), and the train and validation losses each mode reached.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

LAB = Path(__file__).resolve().parents[1] / "labs" / "minigpt"
CORPUS = LAB / "data" / "shakespeare_small.txt"


def reference_workspace(folder: Path) -> Path:
    """The solution view of the lab's single source, as a learner's finished workspace."""
    from roadmap_cli.labs import starter_build

    for path in (LAB / "solution").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        (folder / path.name).write_text(starter_build.solution_text(text, path.name), encoding="utf-8")
    sys.path.insert(0, str(folder))
    return folder


def plain_gpt(vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int):
    """nanoGPT's GPT (model.py) reduced to what this config uses: fused ops, no biases."""
    import torch
    import torch.nn as nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd, bias=False)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
            self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
            self.ln_2 = nn.LayerNorm(n_embd, bias=False)
            self.fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
            self.proj = nn.Linear(4 * n_embd, n_embd, bias=False)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2)
                       for t in self.c_attn(self.ln_1(x)).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(n_embd, bias=False)
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx, targets=None):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    return GPT()


def run_plain(train_mod, data_mod, cfg, text: str) -> dict:
    """The same loop as the reference's, written plainly around plain_gpt (no bar, no checkpoints)."""
    import torch

    tok = train_mod.CharTokenizer(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train_data, val_data = data_mod.split_train_val(data, 0.1)
    torch.set_num_threads(cfg.threads) if cfg.threads > 0 else None
    torch.manual_seed(cfg.seed)
    model = plain_gpt(tok.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd)
    optimizer = train_mod.configure_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    start = time.perf_counter()
    loss = None
    for it in range(cfg.max_iters):
        for group in optimizer.param_groups:
            group["lr"] = train_mod.get_lr(it, cfg)
        x, y = data_mod.get_batch(train_data, cfg.block_size, cfg.batch_size, generator=gen)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        loss.item()  # as the reference's history does: one sync per step
    seconds = time.perf_counter() - start
    losses = train_mod.estimate_loss(model, {"train": train_data, "val": val_data}, cfg)
    return {"tokens_per_s": cfg.max_iters * cfg.batch_size * cfg.block_size / seconds, **losses}


def run_ours(train_mod, cfg, bar: bool) -> dict:
    import dataclasses

    cfg = dataclasses.replace(cfg, progress=bar)
    result = train_mod.train(cfg)
    final = result.val_history[-1]
    return {"tokens_per_s": result.tokens_per_s, "train": final["train"], "val": final["val"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS), help="a UTF-8 text (default: the lab's 200 KB excerpt)")
    parser.add_argument("--steps", type=int, default=150, help="training steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (the median is reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for every mode (nanoGPT: 2)")
    parser.add_argument("--modes", default="ours,ours+bar,ours-written,plain")
    args = parser.parse_args(argv)

    import torch
    from rich.console import Console

    text = Path(args.corpus).read_text(encoding="utf-8")
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-minigpt-") as tmp:
        reference_workspace(Path(tmp))
        import data as data_mod
        import train as train_mod

        # The bar draws for real (ANSI codes, redraws) into /dev/null, as it would on a terminal.
        devnull = open(os.devnull, "w")
        train_mod._Progress.console = Console(file=devnull, force_terminal=True, width=100)
        base = train_mod.TrainConfig(corpus=args.corpus, out_dir=str(Path(tmp) / "out"), max_iters=args.steps,
                                     lr_decay_iters=args.steps, warmup_iters=min(100, args.steps // 10),
                                     eval_interval=args.steps + 1, eval_iters=20, threads=args.threads)
        print(f"config: {base.n_layer} layers, {base.n_head} heads, {base.n_embd}-dim, context {base.block_size}, "
              f"batch {base.batch_size}, {args.steps} steps per run, {args.rounds} rounds, torch threads "
              f"{args.threads}, corpus {Path(args.corpus).name} ({len(text):,} characters)")
        results: dict[str, list[dict]] = {m: [] for m in modes}
        for r in range(args.rounds):
            for mode in modes:
                if mode == "plain":
                    out = run_plain(train_mod, data_mod, base, text)
                elif mode == "ours-written":
                    import dataclasses

                    out = run_ours(train_mod, dataclasses.replace(base, fused=False), bar=False)
                else:
                    out = run_ours(train_mod, base, bar=mode == "ours+bar")
                results[mode].append(out)
                print(f"  round {r + 1} {mode:13s} {out['tokens_per_s']:9,.0f} tokens/s  train {out['train']:.4f}  "
                      f"val {out['val']:.4f}", flush=True)
        devnull.close()
    med = {m: statistics.median(o["tokens_per_s"] for o in results[m]) for m in modes}
    print(f"\n{'mode':14s} {'tokens/s':>10s} {'train loss':>11s} {'val loss':>9s}  (medians over {args.rounds} rounds)")
    for m in modes:
        print(f"{m:14s} {med[m]:10,.0f} {statistics.median(o['train'] for o in results[m]):11.4f} "
              f"{statistics.median(o['val'] for o in results[m]):9.4f}")
    if "ours" in med and "plain" in med:
        print(f"ours / plain fused GPT: {med['ours'] / med['plain']:.3f}x tokens/s (target >= 1.0)")
    if "ours" in med and "ours+bar" in med:
        print(f"no bar / with bar: {med['ours'] / med['ours+bar']:.3f} (target <= 1.02)")
    if "ours" in med and "ours-written" in med:
        print(f"fused / written-out: {med['ours'] / med['ours-written']:.3f}x tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
