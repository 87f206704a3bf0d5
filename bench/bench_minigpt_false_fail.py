"""A right training loop never fails the minigpt grader: the reference solution and
reference variants that order their work differently (all valid by the handout)
run through the training part's white-box checks on many seeds.

    python bench/bench_minigpt_false_fail.py                 # 200 seeds per variant
    python bench/bench_minigpt_false_fail.py --seeds 20      # a quick look
    python bench/bench_minigpt_false_fail.py --readable 200  # also: the generation part's readable-text
                                                             # test over 200 sampling seeds

Each seed is cheap: a 1-layer, 16-wide model, 12 steps of 4 x 8 tokens; the grader replays
steps 1-3 as a chain and steps 6 and 11 alone (--size graded: the graded run itself, slow). Per variant it prints how many seeds failed any check and the
largest parameter difference to the grader's replay (relative to the update) against the
tolerance the grader uses (margin = tolerance / worst difference; below 1 is a false fail).

Variants (each is the reference train.py with one change a right learner might make):
- reference:       the lab's solution as is;
- prefetch:        nanoGPT's order: the next batch is drawn right after the forward pass;
- lr-after-batch:  the batch is drawn before the learning rate is set;
- zero-grad-first: optimizer.zero_grad(set_to_none=False) at the top of the step;
- adamw-for-loop:  AdamW(foreach=False), a different (per-tensor) implementation of the same update;
- clip-by-groups:  clips the parameters gathered from the optimizer's groups (another summation order).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "minigpt"
TESTS = LAB / "tests"

STEP = """            x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, generator=batch_gen, device=cfg.device)
            _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()"""
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "reference": [],
    "prefetch": [
        (
            STEP,
            """            if it == start:
                x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, generator=batch_gen, device=cfg.device)
            _, loss = model(x, y)
            if it + 1 < cfg.max_iters:  # prefetch the next batch while this one's gradients are pending
                x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, generator=batch_gen, device=cfg.device)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()""",
        ),
    ],
    "lr-after-batch": [
        (
            """            lr = get_lr(it, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, generator=batch_gen, device=cfg.device)""",
            """            x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, generator=batch_gen, device=cfg.device)
            lr = get_lr(it, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr""",
        ),
    ],
    "zero-grad-first": [
        (
            STEP,
            """            optimizer.zero_grad(set_to_none=False)
            x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, generator=batch_gen, device=cfg.device)
            _, loss = model(x, y)
            loss.backward()""",
        ),
    ],
    "adamw-for-loop": [
        ("betas=(cfg.beta1, cfg.beta2), fused=True)", "betas=(cfg.beta1, cfg.beta2), foreach=False)"),
    ],
    "clip-by-groups": [
        (
            "torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)",
            "torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], cfg.grad_clip)",
        ),
    ],
}

# bias: the seed's parity picks the layout (even: GPT-2's biases, odd: none), so both are checked.
TINY = dict(
    n_layer=1,
    n_head=2,
    n_embd=16,
    block_size=8,
    dropout=0.0,
    bias=False,
    batch_size=4,
    max_iters=12,
    learning_rate=1e-2,
    min_lr=1e-3,
    warmup_iters=3,
    lr_decay_iters=12,
    weight_decay=0.1,
    beta1=0.9,
    beta2=0.99,
    grad_clip=0.5,
    eval_interval=4,
    eval_iters=2,
    resume=False,
    progress=False,
    device="cpu",
    threads=1,
)
KEEP, SINGLE = (1, 2, 3), (6, 11)
SIZES = {"tiny": (TINY, KEEP, SINGLE)}  # --size graded: the graded run's own config (slow: ~10 s per seed)


def make_workspace(folder: Path, name: str) -> Path:
    """starter/ overlaid with solution/, then the variant's edits to train.py."""
    for sub in ("starter", "solution"):
        for path in (LAB / sub).glob("*.py"):
            shutil.copy(path, folder / path.name)
    train = folder / "train.py"
    source = train.read_text(encoding="utf-8")
    for old, new in VARIANTS[name]:
        if old not in source:
            raise SystemExit(f"variant {name}: the reference train.py no longer contains the text it edits")
        source = source.replace(old, new, 1)
    train.write_text(source, encoding="utf-8")
    return folder


def child(name: str, seeds: list[int], out_dir: str, size: str) -> dict:
    """In a fresh interpreter with ROADMAP_WORKSPACE set: run the training checks per seed."""
    sys.path.insert(0, str(TESTS))
    import torch

    torch.set_num_threads(1)
    import adapter
    import conftest
    import test_training

    corpus = conftest.CORPUS.read_text(encoding="utf-8")
    corpus_file = conftest.CORPUS
    if size == "tiny":  # a 30 KB excerpt: each seed then costs well under a second
        corpus = corpus[:30_000]
        corpus_file = Path(out_dir).parent / "excerpt.txt"
        corpus_file.write_text(corpus, encoding="utf-8")
    config, keep, single = (
        SIZES[size] if size in SIZES else (conftest.TRAIN_CONFIG, conftest.REPLAY_KEEP, conftest.SINGLE_STEPS)
    )
    failures, worst = [], {}
    for seed in seeds:
        cfg = dict(config, seed=seed, corpus=str(corpus_file), out_dir=str(Path(out_dir) / str(seed)))
        if size == "tiny":
            cfg["bias"] = seed % 2 == 0
        try:
            run = dict(adapter.watch_training(cfg, keep_steps=keep, single_steps=single), config=cfg)
            test_training.test_every_step_uses_the_scheduled_learning_rate(run)
            test_training.test_every_step_clips_to_grad_clip(run)
            test_training.test_batches_come_from_the_training_generator_in_order(run, corpus)
            test_training.test_history_validation_and_final_checkpoint(run, Path(cfg["out_dir"]))
            test_training.test_the_model_follows_train_config_bias(run)
            test_training.test_the_checkpoint_rebuilds_the_same_model(run, Path(cfg["out_dir"]))
            differences = test_training.replay_differences(run)
        except BaseException as exc:  # pytest.fail raises a BaseException subclass
            failures.append((seed, f"{type(exc).__name__}: {str(exc)[:200]}"))
            continue
        for label, (_, diff) in differences.items():
            worst[label] = max(worst.get(label, 0.0), diff)
            if diff > conftest.replay_tolerance(0):
                failures.append((seed, f"{label}: replay difference {diff:.2e}"))
    return {"failures": failures, "worst": worst, "tolerance": conftest.replay_tolerance(0)}


def readable(samples: int) -> None:
    """The generation part's readable-text test on the grader's weights for the graded config,
    over many sampling seeds: the lowest fraction against the 50% threshold."""
    sys.path.insert(0, str(TESTS))
    import re

    import torch

    torch.set_num_threads(1)
    import conftest
    import ref_train

    text = conftest.CORPUS.read_text(encoding="utf-8")
    cfg = conftest.TRAIN_CONFIG
    model, tok = ref_train.train_reference(text, cfg, cfg["seed"], cfg["max_iters"])
    known = {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    fractions = []
    for seed in range(samples):
        torch.manual_seed(seed)
        idx = torch.full((8, 1), tok.stoi["\n"])
        with torch.no_grad():
            for _ in range(150):
                logits = model(idx[:, -cfg["block_size"] :])[0][:, -1] / 0.6
                kth = torch.topk(logits, 10).values[:, [-1]]
                probs = logits.masked_fill(logits < kth, float("-inf")).softmax(-1)
                idx = torch.cat([idx, torch.multinomial(probs, 1)], 1)
        words = [w for w in re.findall(r"[A-Za-z]+", "\n".join(tok.decode(r) for r in idx.tolist())) if len(w) >= 2]
        fractions.append(sum(w.lower() in known for w in words) / max(len(words), 1))
    fractions.sort()
    print(
        f"readable text over {samples} sampling seeds: min {fractions[0]:.3f}, 1st percentile "
        f"{fractions[len(fractions) // 100]:.3f}, median {fractions[len(fractions) // 2]:.3f} "
        f"(threshold 0.50: margin {fractions[0] - 0.5:+.3f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset")
    parser.add_argument("--readable", type=int, default=0, help="also check the readable-text test over N seeds")
    parser.add_argument(
        "--size",
        choices=["tiny", "graded"],
        default="tiny",
        help="tiny: 12 steps of a 16-wide model per seed; graded: the graded run's config",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, seeds, out_dir, size = json.loads(args.child)
        print(json.dumps(child(name, seeds, out_dir, size)))
        return 0
    if args.readable:
        readable(args.readable)
    seeds = list(range(1000, 1000 + args.seeds))
    env = dict(os.environ, OMP_NUM_THREADS="1", ROADMAP_DEVICE="cpu")
    total_fail = 0
    print(
        f"{'variant':16s} {'seeds':>5s} {'failed':>6s}  worst |learner - replay| / |replay - start| against the "
        f"tolerance, per step (margin)"
    )
    for name in args.variants.split(","):
        with tempfile.TemporaryDirectory(prefix=f"ff-{name}-") as tmp:
            ws = make_workspace(Path(tmp), name)
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps([name, seeds, str(Path(tmp) / "out"), args.size])],
                env=dict(env, ROADMAP_WORKSPACE=str(ws), PYTHONPATH=str(ws)),
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                print(f"{name}: the child failed:\n{proc.stderr[-2000:]}")
                return 1
            res = json.loads(proc.stdout.strip().splitlines()[-1])
        tol = res["tolerance"]
        worst = "; ".join(f"{label}: {value:.1e}" for label, value in res["worst"].items())
        top = max(res["worst"].values(), default=0.0)
        worst += f"  (tolerance {tol:.0e}, margin {tol / max(top, 1e-12):.0f}x)"
        print(f"{name:16s} {len(seeds):5d} {len(res['failures']):6d}  {worst}   [{time.perf_counter() - start:.0f} s]")
        for seed, why in res["failures"][:3]:
            print(f"    seed {seed}: {why}")
        total_fail += len(res["failures"])
    print(f"false fails: {total_fail}")
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
