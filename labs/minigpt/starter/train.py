"""Train the GPT on a text, character by character (README.md, section 5).

    python train.py                         # Shakespeare (run prepare_data.py once first)
    python train.py --corpus my_text.txt    # any UTF-8 text
    python train.py --resume                # continue from out/ckpt.pt (Ctrl-C saves one and stops)
    python train.py --threads 2             # torch CPU threads (default 1, see TrainConfig.threads)

What you will learn: the pieces of a real training loop. AdamW with weight decay
on matrices only, a learning rate that warms up then follows a cosine down,
gradient clipping, periodic validation, and checkpoints that resume exactly
where they stopped (model, optimizer AND the batch sampler's random state).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch

from data import get_batch, split_train_val
from model import GPT, GPTConfig
from tokenizer import CharTokenizer


@dataclass
class TrainConfig:
    corpus: str | None = None  # a UTF-8 text file; None: the Shakespeare that prepare_data.py caches
    out_dir: str = "out"  # where ckpt.pt goes
    # model (nanoGPT's shakespeare_char CPU configuration)
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 64
    dropout: float = 0.0
    fused: bool = True  # F.layer_norm + F.scaled_dot_product_attention (README.md, section 4.2); False: yours
    # No biases in the Linears and LayerNorms, as nanoGPT's shakespeare_char config (README.md,
    # section 4.3): fewer tensors, as good; --bias gives GPT-2's layout.
    bias: bool = False
    # optimisation
    batch_size: int = 12
    max_iters: int = 2000
    learning_rate: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    lr_decay_iters: int = 2000  # the cosine reaches min_lr here (usually = max_iters)
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # clip the global gradient norm to this (0: no clipping)
    # evaluation and checkpoints
    eval_interval: int = 250
    eval_iters: int = 20
    seed: int = 1337
    device: str = "cpu"
    resume: bool = False
    progress: bool = True
    # torch's CPU threads, chosen on purpose (README.md, section 5.6). A model this small gets
    # at most ~1.4x from a second intra-op thread on an idle machine, but when the cores are busy
    # the threads wait for each other and a step can take 10x longer (measured: 0.77 s vs 11 s
    # per step on a loaded 2-core box). One thread degrades gracefully; --threads 2 on an idle
    # machine; 0 leaves torch's default (one per core).
    threads: int = 1


@dataclass
class TrainResult:
    model: GPT
    tokenizer: CharTokenizer
    optimizer: torch.optim.Optimizer
    history: list[dict] = field(default_factory=list)  # one {"iter", "loss", "lr"} per optimizer step
    val_history: list[dict] = field(default_factory=list)  # one {"iter", "train", "val"} per evaluation
    checkpoint: Path | None = None
    tokens_per_s: float = 0.0
    interrupted_at: int | None = None  # Ctrl-C: the iteration the saved checkpoint resumes at


def get_lr(it: int, cfg: TrainConfig) -> float:
    """Linear warm-up for warmup_iters steps, then a cosine from learning_rate down to min_lr."""
    # TODO (README.md, section 5.1):
    #   it <  warmup_iters:    learning_rate * (it + 1) / (warmup_iters + 1)
    #   it >  lr_decay_iters:  min_lr
    #   otherwise: ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)      # 0 -> 1
    #              min_lr + 0.5 * (1 + cos(pi * ratio)) * (learning_rate - min_lr)
    raise NotImplementedError("get_lr: see README.md, section 5.1")


def configure_optimizer(model: GPT, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay only on matrices (>= 2 dims), not on biases or LayerNorm gains."""
    # TODO (README.md, section 5.2): two parameter groups, matrices with weight_decay and
    # vectors with 0.0; torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2),
    # fused=True)   (fused: one kernel for the whole update; the same math, faster).
    raise NotImplementedError("configure_optimizer: see README.md, section 5.2")


@torch.no_grad()
def estimate_loss(model: GPT, splits: dict[str, torch.Tensor], cfg: TrainConfig) -> dict[str, float]:
    """Mean loss over eval_iters batches of each split, in eval mode (no dropout).

    Uses its own generator with a fixed seed, so evaluating never disturbs the
    training batches (and a resumed run sees exactly the same ones).
    """
    # TODO (README.md, section 5.3): model.eval(); for each split, a FRESH
    # torch.Generator().manual_seed(cfg.seed + 1), eval_iters batches from get_batch, the mean
    # loss; model.train() again; return {"train": ..., "val": ...}.
    raise NotImplementedError("estimate_loss: see README.md, section 5.3")


def save_checkpoint(path: Path, result: TrainResult, iter_num: int, batch_gen: torch.Generator, cfg: TrainConfig) -> None:
    """Everything a resumed run needs to continue the same curve."""
    # TODO (README.md, section 5.4): torch.save a dict with at least
    #   "model" (state_dict), "optimizer" (state_dict), "iter_num" (the NEXT iteration to run),
    #   "model_config" (asdict(result.model.config): ALL its fields, bias included, or sample.py
    #   rebuilds the wrong model), "train_config", "chars" (tokenizer.chars),
    #   "batch_rng" (batch_gen.get_state()), "history", "val_history".
    # Write to a temporary file and rename it, so a crash never leaves half a checkpoint.
    raise NotImplementedError("save_checkpoint: see README.md, section 5.4")


def load_checkpoint(path: Path, device: str = "cpu") -> dict:
    return torch.load(path, map_location=device, weights_only=False)


def _read_corpus(cfg: TrainConfig) -> str:
    if cfg.corpus:
        return Path(cfg.corpus).read_text(encoding="utf-8")
    import prepare_data

    return prepare_data.load_default_corpus()


def train(cfg: TrainConfig) -> TrainResult:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    text = _read_corpus(cfg)
    tokenizer = CharTokenizer(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    train_data, val_data = split_train_val(data, 0.1)

    torch.manual_seed(cfg.seed)  # the model's initial weights
    model_cfg = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
                          n_head=cfg.n_head, n_embd=cfg.n_embd, dropout=cfg.dropout, fused=cfg.fused,
                          bias=cfg.bias)
    model = GPT(model_cfg).to(cfg.device)
    optimizer = configure_optimizer(model, cfg)
    batch_gen = torch.Generator().manual_seed(cfg.seed)  # the training batches
    result = TrainResult(model=model, tokenizer=tokenizer, optimizer=optimizer)
    ckpt_path = Path(cfg.out_dir) / "ckpt.pt"
    result.checkpoint = ckpt_path

    start = 0
    splits = {"train": train_data, "val": val_data}
    # TODO (README.md, section 5.5), the training loop:
    # - if cfg.resume: load out_dir/ckpt.pt and restore the model, the optimizer, batch_gen's
    #   state, history and val_history; start at ckpt["iter_num"].
    # - progress = _Progress(cfg.max_iters, start, enabled=cfg.progress): the bar, given below.
    # - with progress, _StopOnCtrlC() as stop:   (both given below)
    #   for it in range(start, cfg.max_iters):
    #     if stop.requested (Ctrl-C was pressed): save_checkpoint(..., it, ...), set
    #       result.interrupted_at = it and return result (python train.py --resume continues there);
    #     every eval_interval steps: with progress.evaluating(model, 2 * cfg.eval_iters):
    #       estimate_loss -> result.val_history.append({"iter": it, ...}),
    #       and save a checkpoint (iter_num = it); a resumed run skips this when val_history
    #       already ends with step it's entry (README.md 5.5: a crash's checkpoint vs Ctrl-C's);
    #     set every param group's "lr" to get_lr(it, cfg);
    #     x, y = get_batch(train_data, ..., generator=batch_gen); _, loss = model(x, y);
    #     zero_grad, backward, torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip), step;
    #     result.history.append({"iter": it, "loss": loss.item(), "lr": lr});
    #     update result.tokens_per_s (steps x batch_size x block_size over the time spent in the
    #     steps, evaluation left out); progress.advance(loss, tokens_per_s).
    # - at the end: one more estimate_loss for val_history and a final checkpoint (iter_num = max_iters).
    raise NotImplementedError("train: see README.md, section 5.5")


class _Progress:
    """A rich progress bar with the loss and tokens/s (or nothing when disabled).

    It never slows the steps it reports: nothing draws in a background thread
    (auto_refresh=False), the bar is redrawn from the training thread between two
    steps, at most 4 times a second, so it never competes with torch's threads.
    """

    REFRESH_S = 0.25  # at most 4 redraws a second
    console = None  # a rich Console to draw on (bench.py uses one); None: the terminal

    def __init__(self, total: int, done: int, enabled: bool):
        self.enabled = enabled
        self.done = done
        self.last_draw = 0.0
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description:5s}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[info]}"), TimeRemainingColumn(),
                                auto_refresh=False, console=self.console)
            self.task = self.bar.add_task("train", total=total, completed=done, info="")

    def __enter__(self):
        if self.enabled:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)

    def _due(self) -> bool:
        now = time.perf_counter()
        if now - self.last_draw < self.REFRESH_S:
            return False
        self.last_draw = now
        return True

    def advance(self, loss: float, tokens_per_s: float) -> None:
        self.done += 1
        if self.enabled and self._due():
            self.bar.update(self.task, completed=self.done, info=f"loss {loss:.4f}  {tokens_per_s:,.0f} tok/s")
            self.bar.refresh()

    @contextlib.contextmanager
    def evaluating(self, model: torch.nn.Module, batches: int):
        """Show evaluation as its own bar, advanced by a forward hook on the model (it runs
        in this thread, once per evaluation batch), so the display never freezes while
        estimate_loss runs."""
        if not self.enabled:
            yield
            return
        task = self.bar.add_task("eval", total=batches, info="validation loss")
        seen = [0]

        def on_forward(module, args, output):
            seen[0] += 1
            if self._due():
                self.bar.update(task, completed=seen[0])
                self.bar.refresh()

        handle = model.register_forward_hook(on_forward)
        self.bar.refresh()
        try:
            yield
        finally:
            handle.remove()
            self.bar.remove_task(task)
            self.bar.update(self.task, completed=self.done)
            self.bar.refresh()

    def note(self, message: str) -> None:
        if self.enabled:
            self.bar.console.print(message)


class _StopOnCtrlC:
    """The first Ctrl-C asks the loop to stop after the current step (it saves a checkpoint);
    a second one stops at once. Outside the main thread (e.g. under a grader) it does nothing."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nCtrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to quit at once)", flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the MiniGPT character model.")
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default, help=f"default: {f.default}")
    cfg = TrainConfig(**vars(parser.parse_args(argv)))
    import prepare_data

    try:
        result = train(cfg)
    except prepare_data.CorpusError as exc:  # no corpus yet: say how to get one, no traceback
        raise SystemExit(f"error: {exc}") from None
    except KeyboardInterrupt:  # a second Ctrl-C: the last periodic checkpoint is what is saved
        raise SystemExit(f"stopped; the last periodic checkpoint in {cfg.out_dir} resumes with: "
                         f"python train.py --resume ...") from None
    if result.interrupted_at is not None:
        print(f"stopped at iteration {result.interrupted_at} of {cfg.max_iters}; checkpoint {result.checkpoint}. "
              f"Resume with the same settings plus --resume:\n  python train.py --resume "
              + " ".join(a for a in (argv if argv is not None else __import__("sys").argv[1:]) if a != "--resume"))
        return
    last = result.val_history[-1]
    print(f"done: train loss {last['train']:.4f}, val loss {last['val']:.4f}, "
          f"{result.tokens_per_s:,.0f} tokens/s, checkpoint {result.checkpoint}")


if __name__ == "__main__":
    main()
