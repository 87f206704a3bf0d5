"""The MiniGPT lab's loss history, read from its workspace checkpoint without torch.

`train.py` saves `out/ckpt.pt` with `torch.save` (labs/minigpt/README.md,
section 5.4): a zip whose `*/data.pkl` pickles a dict holding, beside the
model's tensors, `history` ([{"iter", "loss", "lr"}] per optimizer step) and
`val_history` ([{"iter", "train", "val"}] per evaluation) as plain Python
lists. Those are all we need, so the pickle is read with an unpickler that
resolves no class at all: every global it names (tensor rebuilders, storage
types, anything else) becomes an inert stub, and tensor storages are never
loaded. Importing torch would cost seconds; executing a pickle's globals
would run whatever a tampered file asked for. This does neither.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

MAX_PICKLE_BYTES = 64 * 1024 * 1024  # data.pkl holds no tensor data: a few MB at most
CHECKPOINT_RELATIVE = Path("out") / "ckpt.pt"  # TrainConfig.out_dir's default, run from the workspace


@dataclass
class LossHistory:
    source: Optional[str]  # the checkpoint read (None: none found)
    train: list[tuple[int, float]] = field(default_factory=list)  # (iteration, training loss)
    val: list[tuple[int, float]] = field(default_factory=list)  # (iteration, validation loss)
    problem: Optional[str] = None  # why there is no curve, in words


class _Inert:
    """Whatever the pickle builds from a global: accepts anything, does nothing."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __setstate__(self, state) -> None:
        pass

    def __setitem__(self, key, value) -> None:
        pass


def _inert(*args, **kwargs) -> _Inert:
    return _Inert()


class _HistoryUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict  # state dicts: harmless, and keeps dict-ness
        return _inert

    def persistent_load(self, pid):
        return None  # tensor storages: never read


def _points(rows, key: str) -> list[tuple[int, float]]:
    """(iteration, value) pairs; a diverged run's NaN/inf losses cannot be drawn and are left out."""
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("iter"), int) and isinstance(row.get(key), (int, float)):
            if math.isfinite(row[key]):
                out.append((row["iter"], float(row[key])))
    return out


def read_checkpoint(path: Path) -> LossHistory:
    """The history in one `torch.save` checkpoint, or a LossHistory saying what is wrong."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if not names:
                return LossHistory(str(path), problem=f"{path} is not a torch checkpoint (no data.pkl inside)")
            info = archive.getinfo(names[0])
            if info.file_size > MAX_PICKLE_BYTES:
                return LossHistory(str(path), problem=f"{path}: data.pkl is {info.file_size} bytes, too big to read")
            payload = archive.read(info)
        state = _HistoryUnpickler(io.BytesIO(payload)).load()
    except (OSError, zipfile.BadZipFile) as exc:
        return LossHistory(str(path), problem=f"cannot read {path}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a damaged pickle: say so, draw no curve
        return LossHistory(str(path), problem=f"cannot read {path}: {type(exc).__name__}: {exc}")
    if not isinstance(state, dict):
        return LossHistory(str(path), problem=f"{path} does not hold a training checkpoint dict")
    history = LossHistory(str(path), _points(state.get("history"), "loss"), _points(state.get("val_history"), "val"))
    if not history.train and not history.val:
        history.problem = f"{path} holds no loss history yet"
    return history


def minigpt_loss_history(store, lab_id: str = "minigpt") -> LossHistory:
    """The loss history of the newest MiniGPT workspace that has a checkpoint."""
    from roadmap_cli.labs.service import workspaces

    recorded = workspaces(store, lab_id)
    if not recorded:
        return LossHistory(None, problem=f"no {lab_id} workspace yet (roadmap lab start {lab_id})")
    for _, workspace in recorded:
        checkpoint = workspace / CHECKPOINT_RELATIVE
        if checkpoint.is_file():
            return read_checkpoint(checkpoint)
    return LossHistory(
        None, problem=f"no {CHECKPOINT_RELATIVE} in the {lab_id} workspace yet (run python train.py there)"
    )


def thin(points: list[tuple[int, float]], limit: int = 400) -> list[tuple[int, float]]:
    """At most `limit` points, evenly spaced, first and last kept (a 5,000-step
    run would make a chart file of 5,000 points no eye can tell apart)."""
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]
