"""Training speed of the minigpt lab's reference vs a plain fused-op PyTorch GPT.

    python bench/bench_minigpt.py                          # 3 rounds of 150 steps per mode
    python bench/bench_minigpt.py --steps 100 --rounds 2   # a quicker look
    python bench/bench_minigpt.py --threads 2              # nanoGPT's CPU setting (2 threads)
    python bench/bench_minigpt.py --modes "" --interleaved 40   # only the step-interleaved comparison

Config: nanoGPT's shakespeare_char "on a macbook" settings (4 layers, 4 heads, 128-dim,
context 64, batch 12, lr 1e-3, no dropout) on the lab's 200 KB corpus (offline).

Modes, run in alternation (round 1 ours, plain, ..., round 2 in reverse order, ...) so that
all see the same machine load and none is always first; each is a fresh run of `steps` steps from the same seed:
- ours:          the reference train() (solution view), its defaults: fused path, bias=False (as
                 nanoGPT's shakespeare_char config), no bar;
- ours+bar:      the same with the rich progress bar drawn (to a forced terminal on /dev/null);
- ours-written:  GPTConfig.fused=False: the written-out LayerNorm and attention (the handout's table);
- plain:         nanoGPT's model as bench/baseline_gpt.py writes it (F.layer_norm, F.scaled_dot_product_attention,
                 no biases, as nanoGPT's shakespeare_char config) and the same loop (warm-up + cosine,
                 clipping), on the same batches, with nanoGPT's optimizer: AdamW with the same groups, fused
                 only on CUDA (nanoGPT's configure_optimizers), so on a CPU the per-parameter for-loop AdamW;
- ours-bias, plain-bias (optional, --modes): both with biases in every Linear and LayerNorm
                 (TrainConfig.bias=True; nanoGPT's default GPTConfig): GPT-2's layout on both sides;
- plain-fusedopt (optional, --modes): the same with AdamW(fused=True), as the reference uses:
                 the model-only comparison.

Every mode is timed the same way, from outside: a global optimizer step hook records the
wall clock and this process's CPU time after each step, and tokens/s is taken over steps
2..N (the first step's warm-up, the evaluation at iteration 0 and the setup are left out;
the reference's per-step Python work and the progress bar are in). Wall tokens/s is what a
learner sees; CPU tokens/s (1 thread) is what this process did, far less disturbed by the
other processes of a loaded box (with --threads > 1 it undercounts the speed-up: use wall).

Prints tokens/s per mode (median over rounds, with the spread), the ratios ours/plain
(issue 13: >= 1.0, both bias-free), ours-bias/plain-bias and ours/ours+bar (<= 1.02), both
per round (each round's modes ran back to back) and as the median of those ratios, and the
train and validation losses each mode reached.
"""

from __future__ import annotations

import argparse
import dataclasses
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


def plain_gpt(vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int, bias: bool = False):
    """nanoGPT's model, as bench/baseline_gpt.py writes it: no biases as in shakespeare_char's
    config, or with them (`bias=True`, nanoGPT's own default and GPT-2's layout). Built right
    after the same torch.manual_seed as the reference's GPT, it starts from the same weights
    (same modules, same order of draws): the losses compare like for like."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import baseline_gpt

    return baseline_gpt.BaselineGPT(
        baseline_gpt.BaselineConfig(
            vocab_size=vocab_size,
            block_size=block_size,
            n_layer=n_layer,
            n_head=n_head,
            n_embd=n_embd,
            dropout=0.0,
            bias=bias,
        )
    )


class StepClock:
    """(wall, CPU) time after every optimizer step in this process, from a global hook."""

    def __init__(self):
        self.marks: list[tuple[float, float]] = []

    def __enter__(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.handle = register_optimizer_step_post_hook(
            lambda *_: self.marks.append((time.perf_counter(), time.process_time()))
        )
        return self

    def __exit__(self, *exc):
        self.handle.remove()

    def tokens_per_s(self, tokens_per_step: int) -> tuple[float, float]:
        """(wall, CPU) tokens/s over the steps after the first one."""
        (w0, c0), (w1, c1) = self.marks[0], self.marks[-1]
        n = len(self.marks) - 1
        return n * tokens_per_step / max(w1 - w0, 1e-9), n * tokens_per_step / max(c1 - c0, 1e-9)


def nanogpt_optimizer(model, cfg, fused: bool):
    """nanoGPT's configure_optimizers: decay the >= 2-dim tensors; fused only on CUDA there."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    extra = {"fused": True} if fused else {}
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), **extra)


def train_step(train_mod, data_mod, cfg, model, optimizer, train_data, gen, it: int) -> None:
    """One step of the reference loop's body, for the models the bench drives itself:
    lr, batch, forward, zero_grad, backward, clip, step, and loss.item() (as the
    reference's history does: one sync per step)."""
    import torch

    for group in optimizer.param_groups:
        group["lr"] = train_mod.get_lr(it, cfg)
    x, y = data_mod.get_batch(train_data, cfg.block_size, cfg.batch_size, generator=gen)
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    loss.item()


def run_plain(train_mod, data_mod, cfg, text: str, fused_adamw: bool = False, bias: bool = False) -> dict:
    """The same loop as the reference's, written plainly around plain_gpt (no bar, no checkpoints)."""
    import torch

    tok = train_mod.CharTokenizer(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train_data, val_data = data_mod.split_train_val(data, 0.1)
    torch.set_num_threads(cfg.threads) if cfg.threads > 0 else None
    torch.manual_seed(cfg.seed)
    model = plain_gpt(tok.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd, bias=bias)
    optimizer = nanogpt_optimizer(model, cfg, fused=fused_adamw)
    gen = torch.Generator().manual_seed(cfg.seed)
    clock = StepClock().__enter__()
    for it in range(cfg.max_iters):
        train_step(train_mod, data_mod, cfg, model, optimizer, train_data, gen, it)
    clock.__exit__()
    wall, cpu = clock.tokens_per_s(cfg.batch_size * cfg.block_size)
    losses = train_mod.estimate_loss(model, {"train": train_data, "val": val_data}, cfg)
    return {"wall": wall, "cpu": cpu, **losses}


def interleaved(train_mod, data_mod, model_mod, cfg, text: str, rounds: int, chunk: int) -> dict[str, list]:
    """Step-level alternation in one process: each variant keeps its own model, optimizer and
    batch stream, and they take turns doing `chunk` steps, `rounds` times. Load that comes and
    goes hits every variant alike, which whole-run alternation cannot promise on a busy box.
    The step is the reference loop's body (lr, batch, forward, zero_grad, backward, clip, step,
    loss.item()); per round: (wall s, CPU s) per step of each variant."""
    import torch

    tok = train_mod.CharTokenizer(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train_data, _ = data_mod.split_train_val(data, 0.1)
    torch.set_num_threads(cfg.threads) if cfg.threads > 0 else None

    def ours(fused: bool, bias: bool = False):
        torch.manual_seed(cfg.seed)
        model = model_mod.GPT(
            model_mod.GPTConfig(
                vocab_size=tok.vocab_size,
                block_size=cfg.block_size,
                n_layer=cfg.n_layer,
                n_head=cfg.n_head,
                n_embd=cfg.n_embd,
                dropout=cfg.dropout,
                fused=fused,
                bias=bias,
            )
        )
        return model, train_mod.configure_optimizer(model, cfg)

    def plain(fused_adamw: bool, bias: bool = False):
        torch.manual_seed(cfg.seed)
        model = plain_gpt(tok.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd, bias=bias)
        return model, nanogpt_optimizer(model, cfg, fused=fused_adamw)

    variants = {
        "ours": ours(True),
        "ours-written": ours(False),
        "plain": plain(False),
        "plain-fusedopt": plain(True),
        "ours-bias": ours(True, bias=True),
        "plain-bias": plain(False, bias=True),
    }
    state = {name: [m, o, torch.Generator().manual_seed(cfg.seed), 0] for name, (m, o) in variants.items()}

    def steps(name: str, n: int) -> None:
        model, optimizer, gen, it = state[name]
        for _ in range(n):
            train_step(train_mod, data_mod, cfg, model, optimizer, train_data, gen, it)
            it += 1
        state[name][3] = it

    for name in state:
        steps(name, 3)  # warm-up
    out: dict[str, list] = {name: [] for name in state}
    names = list(state)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            w0, c0 = time.perf_counter(), time.process_time()
            steps(name, chunk)
            out[name].append(((time.perf_counter() - w0) / chunk, (time.process_time() - c0) / chunk))
    return out


def report_interleaved(out: dict[str, list], rounds: int, chunk: int) -> None:
    print(
        f"\nstep-interleaved: {rounds} rounds of {chunk} steps per variant, turn by turn (ms per step, "
        f"median [min-max])"
    )
    for name, rows in out.items():
        wall, cpu = [w * 1e3 for w, _ in rows], [c * 1e3 for _, c in rows]
        print(
            f"  {name:15s} wall {statistics.median(wall):7.1f} [{min(wall):.1f}-{max(wall):.1f}]   "
            f"CPU {statistics.median(cpu):7.1f} [{min(cpu):.1f}-{max(cpu):.1f}]"
        )
    for a, b, label in (
        ("ours", "plain", "ours / plain fused GPT (nanoGPT's CPU optimizer), no biases"),
        ("ours", "plain-fusedopt", "ours / plain fused GPT with AdamW(fused=True)"),
        ("ours-bias", "plain-bias", "ours / plain, both with biases (GPT-2's layout)"),
        ("ours", "ours-bias", "ours without / with biases"),
        ("ours", "ours-written", "fused / written-out"),
    ):
        for k, key in ((0, "wall"), (1, "cpu")):
            per_round = sorted(y[k] / x[k] for x, y in zip(out[a], out[b]))  # speed ratio = time b / time a
            q1, q3 = per_round[len(per_round) // 4], per_round[(3 * len(per_round)) // 4]
            print(
                f"  {label} ({key:4s}): {statistics.median(per_round):.3f}x tokens/s "
                f"(median of {len(per_round)} per-round ratios; middle half {q1:.3f}-{q3:.3f})"
            )


def run_ours(train_mod, cfg, bar: bool) -> dict:
    cfg = dataclasses.replace(cfg, progress=bar)
    with StepClock() as clock:
        result = train_mod.train(cfg)
    wall, cpu = clock.tokens_per_s(cfg.batch_size * cfg.block_size)
    final = result.val_history[-1]
    return {"wall": wall, "cpu": cpu, "train": final["train"], "val": final["val"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS), help="a UTF-8 text (default: the lab's 200 KB excerpt)")
    parser.add_argument("--steps", type=int, default=150, help="training steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (the median is reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for every mode (nanoGPT: 2)")
    parser.add_argument(
        "--modes",
        default="ours,ours+bar,ours-written,plain",
        help="whole runs to alternate (also: plain-fusedopt, ours-bias, plain-bias); empty: none",
    )
    parser.add_argument(
        "--interleaved",
        type=int,
        default=20,
        metavar="ROUNDS",
        help="step-interleaved rounds of the models alone (0: skip)",
    )
    parser.add_argument("--chunk", type=int, default=10, help="steps per turn in the step-interleaved section")
    args = parser.parse_args(argv)

    from rich.console import Console

    text = Path(args.corpus).read_text(encoding="utf-8")
    modes = [m for m in args.modes.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="bench-minigpt-") as tmp:
        reference_workspace(Path(tmp))
        import data as data_mod
        import train as train_mod

        # The bar draws for real (ANSI codes, redraws) into /dev/null, as it would on a terminal.
        devnull = open(os.devnull, "w")
        train_mod._Progress.console = Console(file=devnull, force_terminal=True, width=100)
        base = train_mod.TrainConfig(
            corpus=args.corpus,
            out_dir=str(Path(tmp) / "out"),
            max_iters=args.steps,
            lr_decay_iters=args.steps,
            warmup_iters=min(100, args.steps // 10),
            eval_interval=args.steps + 1,
            eval_iters=20,
            threads=args.threads,
        )
        print(
            f"config: {base.n_layer} layers, {base.n_head} heads, {base.n_embd}-dim, context {base.block_size}, "
            f"batch {base.batch_size}, bias {base.bias} (ours-bias, plain-bias: True), {args.steps} steps per run, "
            f"{args.rounds} rounds, torch threads "
            f"{args.threads}, corpus {Path(args.corpus).name} ({len(text):,} characters)"
        )
        results: dict[str, list[dict]] = {m: [] for m in modes}
        warm_up = dataclasses.replace(base, max_iters=10, lr_decay_iters=10, warmup_iters=1, eval_iters=2)
        for r in range(-1, args.rounds):  # round -1: a short untimed run of each mode (first-use costs)
            # Every other round runs the modes in reverse order: a mode is not always first or last.
            for mode in modes if r % 2 == 0 else modes[::-1]:
                cfg = warm_up if r < 0 else base
                if mode in ("plain", "plain-fusedopt", "plain-bias"):
                    out = run_plain(
                        train_mod, data_mod, cfg, text, fused_adamw=mode == "plain-fusedopt", bias=mode == "plain-bias"
                    )
                elif mode == "ours-written":
                    out = run_ours(train_mod, dataclasses.replace(cfg, fused=False), bar=False)
                elif mode == "ours-bias":
                    out = run_ours(train_mod, dataclasses.replace(cfg, bias=True), bar=False)
                else:
                    out = run_ours(train_mod, cfg, bar=mode == "ours+bar")
                if r < 0:
                    continue
                results[mode].append(out)
                print(
                    f"  round {r + 1} {mode:14s} wall {out['wall']:9,.0f} tokens/s  CPU {out['cpu']:9,.0f} tokens/s  "
                    f"train {out['train']:.4f}  val {out['val']:.4f}",
                    flush=True,
                )
        devnull.close()
        if args.interleaved > 0:
            import model as model_mod

            steps_out = interleaved(train_mod, data_mod, model_mod, base, text, args.interleaved, args.chunk)
    if modes:
        report(results, modes, args.rounds)
    if args.interleaved > 0:
        report_interleaved(steps_out, args.interleaved, args.chunk)
    return 0


def report(results: dict[str, list[dict]], modes: list[str], rounds: int) -> None:
    def med(mode, key):
        return statistics.median(o[key] for o in results[mode])

    print(
        f"\n{'mode':15s} {'wall tok/s':>10s} {'(min-max)':>17s} {'CPU tok/s':>10s} {'(min-max)':>17s} "
        f"{'train loss':>10s} {'val loss':>9s}  (medians over {rounds} rounds)"
    )
    for m in modes:
        spread = {
            k: f"{min(o[k] for o in results[m]):,.0f}-{max(o[k] for o in results[m]):,.0f}" for k in ("wall", "cpu")
        }
        print(
            f"{m:15s} {med(m, 'wall'):10,.0f} {spread['wall']:>17s} {med(m, 'cpu'):10,.0f} {spread['cpu']:>17s} "
            f"{med(m, 'train'):10.4f} {med(m, 'val'):9.4f}"
        )

    def ratio(a, b, label, target):
        if a not in results or b not in results:
            return
        for key in ("wall", "cpu"):
            per_round = [x[key] / y[key] for x, y in zip(results[a], results[b])]
            print(
                f"{label} ({key:4s}): median of per-round ratios {statistics.median(per_round):.3f} "
                f"[{', '.join(f'{r:.3f}' for r in per_round)}]; ratio of medians {med(a, key) / med(b, key):.3f}"
                f"  ({target})"
            )

    ratio("ours", "plain", "ours / plain fused GPT (nanoGPT's CPU optimizer), no biases", "target >= 1.0")
    ratio("ours", "plain-fusedopt", "ours / plain fused GPT with AdamW(fused=True)", "model-only")
    ratio("ours-bias", "plain-bias", "ours / plain, both with biases (GPT-2's layout)", "same shape")
    ratio("ours", "ours-bias", "ours without / with biases", "the bias flag")
    ratio("ours", "ours+bar", "no bar / with bar", "target <= 1.02")
    ratio("ours", "ours-written", "fused / written-out", "the handout's table")


if __name__ == "__main__":
    sys.exit(main())
