"""The engine's pytest plugin: per-test outcomes streamed to the engine, and
the `record_perf` / `grade_fraction` fixtures grader tests use.

`roadmap grade` runs the grader as `python -m pytest -p roadmap_cli.labs.plugin`
in a child process. Results travel back as JSON lines appended to the file
named by $ROADMAP_RESULTS, one event per line, flushed as soon as it happens:
if the learner's code kills the interpreter (os.abort, a segfault), the
engine still knows which test was running. The engine never parses pytest's
terminal output.

Events (each a JSON object with an "event" key):
  session        pytest started
  collected      tests: [[nodeid, part], ...], unassigned: [nodeid, ...]
  collect_error  nodeid (a file), part, message
  start          nodeid, part             (a test began)
  result         nodeid, part, outcome (passed|failed|error|skipped),
                 duration_s, message, fraction, perf: [...]
  device         torch/triton versions and the GPU, if the tests imported torch
  finish         exitstatus

Part selection: $ROADMAP_PARTS names a JSON file
  {"parts": [{"id": ..., "tests": [prefix, ...]}, ...],
   "selected": [part ids] | null, "stop_part_on_fail": bool, "verbose": bool}
Tests of parts that are not selected are deselected; tests that belong to no
part are deselected and reported. With stop_part_on_fail, once a test of a
part fails the rest of that part is skipped (`dev check` uses it on the
known-wrong variants: one failure per part is all it needs). With verbose
(`roadmap grade -v`) a failure message keeps the whole assertion diff and the
traceback's frames that matter to the learner: their own code and the
test's check (never the grading kit's helpers).

Without $ROADMAP_RESULTS (running a lab's tests by hand with
`pytest -p roadmap_cli.labs.plugin labs/<id>/tests`) the fixtures still work
and nothing is written.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Optional

import pytest

from roadmap_cli.labs.nodeids import part_for

MESSAGE_LIMIT = 4000  # characters of a failure message kept per test
VERBOSE_MESSAGE_LIMIT = 20000
# Frames from these folders are machinery, not where a learner should look.
_MACHINERY = (os.sep + "grading_kit" + os.sep, os.sep + "site-packages" + os.sep, os.sep + "_pytest" + os.sep,
              os.sep + "pluggy" + os.sep, "<frozen ")


class _State:
    def __init__(self) -> None:
        self.out = None
        self.parts: list[tuple[str, list[str]]] = []
        self.selected: Optional[set[str]] = None
        self.stop_part_on_fail = False
        self.part_of: dict[str, Optional[str]] = {}
        self.failed_parts: set[str] = set()
        self.perf: dict[str, list[dict]] = {}
        self.fraction: dict[str, float] = {}
        self.reports: dict[str, dict] = {}
        self.verbose = False

    def emit(self, event: str, **data: Any) -> None:
        if self.out is None:
            return
        data["event"] = event
        self.out.write(json.dumps(data, default=str) + "\n")
        # Flush every line: a crash must not lose what was already known.
        self.out.flush()


_state = _State()


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("ROADMAP_RESULTS")
    if path:
        _state.out = open(path, "a", encoding="utf-8")
    spec_path = os.environ.get("ROADMAP_PARTS")
    if spec_path:
        with open(spec_path, encoding="utf-8") as fh:
            spec = json.load(fh)
        _state.parts = [(p["id"], list(p["tests"])) for p in spec.get("parts", [])]
        selected = spec.get("selected")
        _state.selected = set(selected) if selected is not None else None
        _state.stop_part_on_fail = bool(spec.get("stop_part_on_fail"))
        _state.verbose = bool(spec.get("verbose"))


def pytest_sessionstart(session: pytest.Session) -> None:
    _state.emit("session", pid=os.getpid(), python=sys.version.split()[0], pytest=pytest.__version__)


def _part(nodeid: str) -> Optional[str]:
    if nodeid not in _state.part_of:
        _state.part_of[nodeid] = part_for(nodeid, _state.parts) if _state.parts else None
    return _state.part_of[nodeid]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if not _state.parts:
        return
    kept, dropped, unassigned = [], [], []
    for item in items:
        part = _part(item.nodeid)
        if part is None:
            unassigned.append(item.nodeid)
            dropped.append(item)
        elif _state.selected is not None and part not in _state.selected:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    _state.unassigned = unassigned


def pytest_collection_finish(session: pytest.Session) -> None:
    # After every deselection (ours, and pytest's own -k): what will really run.
    items = session.items
    _state.emit("collected", tests=[[item.nodeid, _part(item.nodeid) if _state.parts else None] for item in items],
                unassigned=getattr(_state, "unassigned", []))


def _collect_part(nodeid: str) -> Optional[str]:
    """The part of a file that failed to import: the first part with a test in it."""
    for part_id, prefixes in _state.parts:
        for prefix in prefixes:
            if prefix.split("::", 1)[0] == nodeid or prefix.startswith(nodeid.rstrip("/") + "/"):
                return part_id
    return None


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _state.emit("collect_error", nodeid=report.nodeid, part=_collect_part(report.nodeid),
                    message=_trim(str(report.longrepr)))


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _state.reports[nodeid] = {"outcome": "passed", "duration_s": 0.0, "message": None}
    _state.emit("start", nodeid=nodeid, part=_part(nodeid))


def pytest_runtest_setup(item: pytest.Item) -> None:
    part = _part(item.nodeid)
    if _state.stop_part_on_fail and part in _state.failed_parts:
        pytest.skip(f"part {part!r} already failed (stop at the first failure per part)")


def _trim(text: str) -> str:
    text = text.strip()
    limit = VERBOSE_MESSAGE_LIMIT if _state.verbose else MESSAGE_LIMIT
    return text if len(text) <= limit else text[:limit] + "\n…"


def _frames(excinfo, item) -> list[tuple[str, str, int, str, str]]:
    """(kind, file, line, function, statement) of the frames a learner should
    see, outermost first: "check" (the test's own line) and "yours" (a file of
    the workspace). The grading kit, the adapter and libraries are left out."""
    workspace = os.environ.get("ROADMAP_WORKSPACE")
    test_file = str(getattr(item, "path", "") or "")
    out = []
    for entry in excinfo.traceback:
        path = str(entry.path)
        if any(m in path for m in _MACHINERY):
            continue
        if workspace and path.startswith(workspace.rstrip(os.sep) + os.sep):
            kind = "yours"
        elif path == test_file:
            kind = "check"
        else:
            continue
        try:
            statement = str(entry.statement).strip()
        except Exception:  # source not available (e.g. a file changed since)
            statement = ""
        out.append((kind, os.path.relpath(path, workspace) if kind == "yours" else os.path.basename(path),
                    entry.lineno + 1, entry.name, statement))
    return out


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    if call.excinfo is not None and report.failed and not call.excinfo.errisinstance(pytest.skip.Exception):
        try:
            report.roadmap_frames = _frames(call.excinfo, item)
        except Exception:  # never let the message builder break a grade
            report.roadmap_frames = []
    return report


def _located(message: str, frames: list) -> str:
    """The failure, then where: the test's check and the learner's deepest frame."""
    checks = [f for f in frames if f[0] == "check"]
    yours = [f for f in frames if f[0] == "yours"]
    lines = [message]
    if yours:
        _, file, line, func, _ = yours[-1]
        lines.append(f"  in your code: {file}:{line} in {func}()")
    if checks:
        _, file, line, func, statement = checks[-1]
        lines.append(f"  checked by: {file}:{line} in {func}" + (f": {statement.splitlines()[0]}" if statement else ""))
    if _state.verbose and frames:
        lines.append("traceback (the test's check and your code, outermost first):")
        for kind, file, line, func, statement in frames:
            lines.append(f"  {file}:{line} in {func}" + ("  (yours)" if kind == "yours" else ""))
            lines += [f"      {s}" for s in statement.splitlines()[:3]]
    return "\n".join(lines)


def _message(report: pytest.TestReport) -> Optional[str]:
    """A readable failure message: where it happened, then what.

    `reprcrash` is the deepest frame of the exception: for a learner's
    NotImplementedError it names the learner's file and line.
    """
    longrepr = report.longrepr
    if longrepr is None:
        return None
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        frames = getattr(report, "roadmap_frames", None)
        if frames:
            return _trim(_located(crash.message, frames))
        if str(crash.path).startswith("<"):
            # e.g. "<frozen importlib._bootstrap>" for a SyntaxError or a missing
            # module in the learner's file: the message already names the file.
            return _trim(crash.message)
        where = f"{os.path.basename(str(crash.path))}:{crash.lineno}"
        return _trim(f"{crash.message}\n  at {where}")
    return _trim(str(longrepr))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _state.reports.setdefault(report.nodeid, {"outcome": "passed", "duration_s": 0.0, "message": None})
    entry["duration_s"] += float(getattr(report, "duration", 0.0) or 0.0)
    if entry["outcome"] != "passed":
        return  # keep the first problem (e.g. a call failure, not the teardown after it)
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = _message(report)
    elif report.skipped and report.when in ("setup", "call"):
        entry["outcome"] = "skipped"
        entry["message"] = _message(report)


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    entry = _state.reports.pop(nodeid, {"outcome": "passed", "duration_s": 0.0, "message": None})
    part = _part(nodeid)
    if entry["outcome"] in ("failed", "error") and part is not None:
        _state.failed_parts.add(part)
    _state.emit(
        "result",
        nodeid=nodeid,
        part=part,
        outcome=entry["outcome"],
        duration_s=round(entry["duration_s"], 6),
        message=entry["message"],
        fraction=_state.fraction.pop(nodeid, None),
        perf=_state.perf.pop(nodeid, []),
    )


def _device_info() -> dict:
    """Device facts from inside the grader (it imported torch anyway)."""
    info: dict[str, Any] = {"interpret_mode": os.environ.get("TRITON_INTERPRET") == "1"}
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_version"] = getattr(torch, "__version__", None)
        try:
            if torch.cuda.is_available():
                info["device"] = torch.cuda.get_device_name(0)
                major, minor = torch.cuda.get_device_capability(0)
                info["device_capability"] = f"{major}.{minor}"
        except Exception:  # a broken driver must not turn a grade into a crash
            pass
    triton = sys.modules.get("triton")
    if triton is not None:
        info["triton_version"] = getattr(triton, "__version__", None)
    return info


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _state.emit("device", **_device_info())
    _state.emit("finish", exitstatus=int(exitstatus), at=time.time())
    if _state.out is not None:
        _state.out.close()
        _state.out = None


# ----------------------------------------------------------------- fixtures


@pytest.fixture
def record_perf(request: pytest.FixtureRequest):
    """`record_perf(name, value, unit, **extra)`: store a performance figure
    (e.g. "tflops", 312.5, "TFLOP/s", shape="4096x4096x4096") in the attempt."""
    nodeid = request.node.nodeid

    def record(name: str, value: float, unit: str, **extra: Any) -> None:
        figure = {"test": nodeid, "name": str(name), "value": float(value), "unit": str(unit)}
        for key, val in extra.items():
            figure[key] = val if isinstance(val, (int, float, str, bool)) or val is None else str(val)
        _state.perf.setdefault(nodeid, []).append(figure)

    return record


@pytest.fixture
def grade_fraction(request: pytest.FixtureRequest):
    """`grade_fraction(f)`: partial credit 0..1 for this test if it passes
    (a failing test earns 0 whatever it set). The last call wins."""
    nodeid = request.node.nodeid

    def set_fraction(fraction: float) -> float:
        value = float(fraction)
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"grade_fraction must be within 0..1, got {fraction!r}")
        _state.fraction[nodeid] = value
        return value

    return set_fraction
