"""Watching the learner's training loop from the inside (runs in the learner process).

`watch_training` runs the learner's `train()` with the grader's stand-in tokenizer,
split, batches and model swapped into train.py (stand_in.py: answers looked up in
tables the grader sent, a model that is not a GPT), so only the learner's loop is
under test, and records plain facts for the grader process:

- every training batch the loop fed the model (forwards in train mode with
  gradients on), the parameters before the first step and after chosen steps,
  and the global RNG state before the first step (for the grader's replay);
- around chosen single steps k: the parameters and the optimizer's state
  (Adam's moments) before step k and the parameters after it, so the grader can
  check that one step on its own, with no float drift from the steps before;
- per optimizer step: the learning rate of each group and the gradient norm the
  optimizer saw (after clipping); at the first step, which parameters are in
  which group with which weight decay and betas;
- every evaluation forward (train mode? gradients on?);
- clip_grad_norm_ calls and their max_norm.

Nothing here decides pass or fail: the tests do, in the grader process.
"""

from __future__ import annotations

import contextlib
import io
import os
import time

import torch

import stand_in


class _Display:
    """Stands in for train.py's _Progress: draws nothing, counts what the loop reports."""

    def __init__(self, watch, total, done, enabled=False, *args, **kwargs):
        self.watch = watch

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def advance(self, *args, **kwargs):
        self.watch.advances += 1

    def note(self, *args, **kwargs):
        pass

    @contextlib.contextmanager
    def evaluating(self, *args, **kwargs):
        self.watch.evaluating += 1
        yield


class _Stop:
    """Stands in for train.py's _StopOnCtrlC: `requested` turns True once `stop_at` steps ran."""

    def __init__(self, watch):
        self.watch = watch

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def requested(self) -> bool:
        return self.watch.stop_at is not None and len(self.watch.xs) >= self.watch.stop_at


class SimulatedCrash(BaseException):
    """Raised inside the loop to stop a run as a crash would (not a KeyboardInterrupt:
    the loop may handle Ctrl-C by saving a checkpoint, a crash saves nothing)."""


def _state(model) -> dict:
    return {n: t.detach().cpu().clone() for n, t in model.state_dict().items()}


def _plain(value):
    """A learner's history entry as plain data (floats for tensors and numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if torch.is_tensor(value):
        return float(value.detach().cpu().reshape(-1)[0]) if value.numel() == 1 else value.detach().cpu().tolist()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return value
    return repr(value)


class TrainWatch:
    def __init__(self, keep_steps=(), crash_at_step: int | None = None, single_steps=(),
                 stop_at_step: int | None = None):
        self.stop_at = stop_at_step
        self.advances = 0
        self.evaluating = 0
        self.keep = set(keep_steps)
        self.single = set(single_steps)
        self.single_before: dict[int, dict] = {}
        self.single_after: dict[int, dict] = {}
        self.crash_at = crash_at_step
        self.model = None
        self.xs: list[torch.Tensor] = []
        self.ys: list = []
        self.initial = None
        self.rng_before_first_step = None
        self.lrs: list[list[float]] = []
        self.grad_norms: list[float] = []
        self.groups = None
        self.snapshots: dict[int, dict] = {}
        self.steps = 0
        self.eval_forwards: list[dict] = []
        self.clip_calls = 0
        self.clip_max_norms: set[float] = set()
        self.optimizer_classes: set[str] = set()

    # -- the grader's stand-in model, handed to the learner's train() in place of model.GPT
    def make_model(self, config, *args, **kwargs):
        cfg = stand_in.GPTConfig(**{k: getattr(config, k) for k in stand_in.GPTConfig.__dataclass_fields__
                                     if hasattr(config, k)})
        self.model = stand_in.GPT(cfg)
        self.model.on_forward = self._on_forward
        return self.model

    def _on_forward(self, model, idx, targets):
        if model.training and torch.is_grad_enabled():
            if self.crash_at is not None and len(self.xs) == self.crash_at:
                raise SimulatedCrash(f"simulated crash at training step {self.crash_at}")
            if self.initial is None:
                self.initial = _state(model)
                self.rng_before_first_step = torch.get_rng_state()
            self.xs.append(idx.detach().cpu().clone())
            self.ys.append(None if targets is None else targets.detach().cpu().clone())
        else:
            self.eval_forwards.append({"training": bool(model.training), "grad": torch.is_grad_enabled(),
                                       "after_step": len(self.xs)})

    # -- global optimizer hooks
    def _pre_step(self, optimizer, args, kwargs):
        self.optimizer_classes.add(f"{type(optimizer).__module__}.{type(optimizer).__qualname__}")
        if self.model is None:
            return
        if self.groups is None:
            names = {id(p): n for n, p in self.model.named_parameters()}
            self.groups = [{"names": [names.get(id(p), "?") for p in g["params"]],
                            "weight_decay": float(g.get("weight_decay", 0.0)), "lr": float(g.get("lr", 0.0)),
                            "betas": [float(b) for b in g.get("betas", (0.0, 0.0))]} for g in optimizer.param_groups]
        self.lrs.append([float(g["lr"]) for g in optimizer.param_groups])
        if self.steps in self.single:
            names = {id(p): n for n, p in self.model.named_parameters()}
            moments = {}
            for p, st in optimizer.state.items():
                if id(p) in names:
                    moments[names[id(p)]] = {k: (v.detach().cpu().clone() if torch.is_tensor(v) else v)
                                             for k, v in st.items()}
            self.single_before[self.steps] = {"params": _state(self.model), "state": moments}
        grads = [p.grad.detach().double().norm() for p in self.model.parameters() if p.grad is not None]
        self.grad_norms.append(float(torch.stack(grads).norm()) if grads else 0.0)

    def _post_step(self, optimizer, args, kwargs):
        if self.model is None:
            return
        if self.steps in self.single:
            self.single_after[self.steps] = _state(self.model)
        self.steps += 1
        if self.steps in self.keep:
            self.snapshots[self.steps] = _state(self.model)

    @contextlib.contextmanager
    def watching(self, train_mod, data_mod):
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        original_clip = torch.nn.utils.clip_grad_norm_

        def clip_spy(parameters, max_norm, *args, **kwargs):
            self.clip_calls += 1
            self.clip_max_norms.add(float(max_norm))
            return original_clip(parameters, max_norm, *args, **kwargs)

        swaps = [(train_mod, "GPT", self.make_model), (train_mod, "GPTConfig", stand_in.GPTConfig),
                 (train_mod, "CharTokenizer", stand_in.CharTokenizer),
                 (train_mod, "split_train_val", stand_in.split_train_val), (train_mod, "get_batch", stand_in.get_batch),
                 (data_mod, "split_train_val", stand_in.split_train_val), (data_mod, "get_batch", stand_in.get_batch),
                 (torch.nn.utils, "clip_grad_norm_", clip_spy),
                 (train_mod, "_Progress", lambda *a, **k: _Display(self, *a, **k)),
                 (train_mod, "_StopOnCtrlC", lambda *a, **k: _Stop(self))]
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in swaps if hasattr(owner, name)]
        handles = [register_optimizer_step_pre_hook(self._pre_step), register_optimizer_step_post_hook(self._post_step)]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the grader's replay uses one thread too: same arithmetic, same order
        try:
            for owner, name, value in swaps:
                setattr(owner, name, value)
            yield self
        finally:
            for owner, name, value in saved:
                setattr(owner, name, value)
            for h in handles:
                h.remove()
            torch.set_num_threads(threads)

    def facts(self, result, seconds: float, crashed: bool) -> dict:
        ys = self.ys if all(y is not None for y in self.ys) else []
        return {
            "steps": self.steps, "crashed": crashed, "seconds": seconds,
            "xs": torch.stack(self.xs) if self.xs else None, "ys": torch.stack(ys) if ys else None,
            "missing_targets": any(y is None for y in self.ys),
            "initial": self.initial, "rng_before_first_step": self.rng_before_first_step,
            "lrs": self.lrs, "grad_norms": self.grad_norms, "groups": self.groups, "snapshots": self.snapshots,
            "single_before": self.single_before, "single_after": self.single_after,
            "eval_forwards": self.eval_forwards, "clip_calls": self.clip_calls,
            "clip_max_norms": sorted(self.clip_max_norms), "optimizer_classes": sorted(self.optimizer_classes),
            "optimizer_is_adamw": None if result is None else isinstance(getattr(result, "optimizer", None),
                                                                         torch.optim.AdamW),
            "history": None if result is None else _plain(list(getattr(result, "history", []))),
            "val_history": None if result is None else _plain(list(getattr(result, "val_history", []))),
            "tokens_per_s": None if result is None else float(getattr(result, "tokens_per_s", 0.0) or 0.0),
            "interrupted_at": None if result is None else _plain(getattr(result, "interrupted_at", None)),
            "progress_advances": self.advances, "progress_evaluations": self.evaluating,
            "final": None if self.model is None else _state(self.model),
            "vocab_size": None if self.model is None else self.model.config.vocab_size,
            # the GPTConfig(bias=...) the learner's train() built its model with
            "model_bias": None if self.model is None else bool(self.model.config.bias),
        }


@contextlib.contextmanager
def _crashing_save(crash_at_call: int | None, saves: list):
    """With crash_at_call = n, the n-th torch.save writes the first half of its bytes to
    its target and then raises SimulatedCrash: a crash (or a full disk) in the middle of
    writing a checkpoint. `saves` collects each call's iter_num, the crashed one too."""
    if crash_at_call is None:
        yield
        return
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        saves.append(obj.get("iter_num") if isinstance(obj, dict) else None)
        if len(saves) != crash_at_call:
            return real_save(obj, f, *args, **kwargs)
        buffer = io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        half = buffer.getvalue()[: len(buffer.getvalue()) // 2]
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as out:
                out.write(half)
        else:
            f.write(half)
            f.flush()
        raise SimulatedCrash(f"simulated crash in the middle of torch.save call {crash_at_call}")

    torch.save = save
    try:
        yield
    finally:
        torch.save = real_save


def run(train_mod, data_mod, cfg: dict, given: dict, keep_steps=(), crash_at_step: int | None = None,
        single_steps=(), stop_at_step: int | None = None, crash_in_save: int | None = None) -> dict:
    """`given`: the stand-ins' tables (stand_in.GIVEN), computed by the grader for this run's corpus.
    crash_in_save = n: the n-th torch.save crashes half-way (_crashing_save); the facts then
    say what out_dir/ckpt.pt holds after the crash ("ckpt_after_crash": its iter_num, or
    why it does not load) and the iter_num of every save ("saves")."""
    stand_in.GIVEN["vocab"] = dict(given["vocab"])
    stand_in.GIVEN["splits"] = {tuple(key): n for key, n in given["splits"]}
    watch = TrainWatch(keep_steps, crash_at_step, single_steps, stop_at_step)
    result, crashed, saves = None, False, []
    start = time.perf_counter()
    with watch.watching(train_mod, data_mod), _crashing_save(crash_in_save, saves):
        try:
            result = train_mod.train(train_mod.TrainConfig(**cfg))
        except SimulatedCrash:
            crashed = True
    facts = watch.facts(result, time.perf_counter() - start, crashed)
    if crash_in_save is not None:
        facts["saves"] = [None if s is None else int(s) for s in saves]
        path = os.path.join(cfg["out_dir"], "ckpt.pt")
        try:
            facts["ckpt_after_crash"] = int(torch.load(path, map_location="cpu", weights_only=False)["iter_num"])
        except Exception as exc:  # noqa: BLE001 - a half-written file: said in the test's message
            facts["ckpt_after_crash"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return facts


def read_checkpoint(path) -> dict | None:
    """The checkpoint's contents as plain data (read here, in the learner process)."""
    from pathlib import Path

    if not Path(path).is_file():
        return None
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    out = {"keys": sorted(str(k) for k in ckpt)}
    if "model" in ckpt:
        out["model"] = {str(n): t.detach().cpu().clone() for n, t in ckpt["model"].items()}
    for key in ("iter_num",):
        out[key] = int(ckpt[key]) if key in ckpt else None
    for key in ("history", "val_history", "chars"):
        out[key] = _plain(list(ckpt[key])) if key in ckpt else None
    out["has_batch_rng"] = "batch_rng" in ckpt
    config = ckpt.get("model_config")
    out["model_config"] = _plain(dict(config)) if isinstance(config, dict) else _plain(config)
    out["rebuild_error"] = _rebuild_error(config, out.get("model"))
    return out


def _rebuild_error(config, state) -> str | None:
    """What sample.py's load_model does, on the grader's stand-in model (the handout's names and shapes): GPT(GPTConfig(**model_config))
    (no "bias" key: True, as in checkpoints from before the flag) and load_state_dict(strict).
    None when it works, else why not."""
    if not isinstance(config, dict) or state is None:
        return "the checkpoint has no model_config dict or no model state dict"
    fields = stand_in.GPTConfig.__dataclass_fields__
    try:
        model = stand_in.GPT(stand_in.GPTConfig(**{"bias": True, **{k: v for k, v in config.items() if k in fields}}))
        model.load_state_dict(state)
    except Exception as exc:  # a missing key, a wrong shape: said in the test's message
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return None
