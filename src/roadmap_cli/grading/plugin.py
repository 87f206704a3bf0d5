"""The engine's pytest plugin: per-test outcomes streamed to the engine, and
the `record_perf` / `grade_fraction` fixtures grader tests use.

`roadmap grade` runs the grader as `python -I -m pytest -p roadmap_cli.grading.plugin`
in a child process. $ROADMAP_GRADE_FD names a descriptor (a pipe) holding the
engine's config: the HMAC key, the results descriptor, parts, the sandbox
settings and the secret seed; it is read once and closed. Results travel back
as MAC'd JSON lines on the results descriptor (grading/channel.py), one event per
line, written as soon as it happens: if the grader dies, the engine still
knows which test was running. The engine never parses pytest's terminal output.

Learner code never runs in this process: `@kit.learner_side` adapter
functions and `kit.learner_module` run in the learner process (grading_kit/
sandbox.py), started here while pytest collects.

Events (each a JSON object with an "event" key):
  session        pytest started
  collected      tests: [[nodeid, part], ...], unassigned: [nodeid, ...]
  collect_error  nodeid (a file), part, message
  start          nodeid, part             (a test began)
  result         nodeid, part, outcome (passed|failed|error|skipped),
                 duration_s, message, fraction, perf: [...]
  device         torch/triton versions and the GPU, if the tests imported torch
  void           reason (the learner's code did something that voids the attempt)
  finish         exitstatus

Part selection (from the config):
  {"parts": [{"id": ..., "tests": [prefix, ...]}, ...],
   "selected": [part ids] | null, "stop_part_on_fail": bool, "verbose": bool}
Tests of parts that are not selected are deselected; tests that belong to no
part are deselected and reported. With stop_part_on_fail, once a test of a
part fails the rest of that part is skipped (`dev check` uses it on the
known-wrong variants: one failure per part is all it needs). With verbose
(`roadmap grade -v`) a failure message keeps the whole assertion diff and the
traceback's frames that matter to the learner: their own code and the
test's check (never the grading kit's helpers).

Without $ROADMAP_GRADE_FD (running a lab's tests by hand with
`pytest -p roadmap_cli.grading.plugin labs/<id>/tests`) the fixtures still work,
nothing is written, and learner code runs in-process (no sandbox).
"""

from __future__ import annotations

import ast
import gc
import json
import math
import os
import re
import sys
import time
from typing import Any, Optional

import pytest

from roadmap_cli.labs.nodeids import part_for

MESSAGE_LIMIT = 4000  # characters of a failure message kept per test
VERBOSE_MESSAGE_LIMIT = 20000
# Frames from these folders are machinery, not where a learner should look.
_MACHINERY = (
    os.sep + "grading_kit" + os.sep,
    os.sep + "site-packages" + os.sep,
    os.sep + "_pytest" + os.sep,
    os.sep + "pluggy" + os.sep,
    "<frozen ",
)


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

        self.special: dict[str, tuple[str, str]] = {}  # nodeid -> (outcome, message) of a learner crash/timeout

    def emit(self, event: str, **data: Any) -> None:
        if self.out is None:
            return
        data["event"] = event
        # Unbuffered: a crash must not lose what was already known.
        self.out.emit(data)


_state = _State()

# The grade's network (grading_kit/oswall.enter_grade_network) is made here, as this module is imported (`-p`, before
# any conftest.py): unshare(CLONE_NEWUSER) refuses a process with more than one thread, and a lab's conftest.py that
# imports torch starts one (the OpenMP pool, on a machine with several cores and OMP_NUM_THREADS unset). Made later,
# in pytest_configure, it failed for every such grade: the learner's server then sat in a network of its own, and
# the reference of llm-serving failed ("GET /health did not answer"). None: not asked for (or a warm grader forked
# after this import: pytest_configure makes it then, in a child that has one thread).
_early_network: Optional[bool] = None
if os.environ.pop("ROADMAP_GRADE_NETWORK", None) == "1":
    from roadmap_cli.grading_kit import oswall as _oswall

    _early_network = _oswall.enter_grade_network()


def _read_engine_config() -> Optional[dict]:
    fd_text = os.environ.pop("ROADMAP_GRADE_FD", None)
    if not fd_text:
        return None
    fd = int(fd_text)
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return json.loads(b"".join(chunks))


def _not_dumpable() -> None:
    """Other processes of this user (the learner process) cannot read this
    one's memory or open its descriptors through /proc (not against root)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


_plain_ast_parse = ast.parse


def _ast_parse_without_gc(*args: Any, **kwargs: Any) -> Any:
    """`ast.parse` that the cyclic garbage collector cannot interrupt.

    CPython 3.11 counts the AST constructor's depth in ONE counter per
    interpreter and resets it at the start of every parse, then raises
    "SystemError: AST constructor recursion depth mismatch" if it does not
    come back to where it started. A parse started inside another parse
    breaks the outer one, and that happens in a grader: the collector runs
    in the middle of pytest's parse of a failing test's source, finalizes an
    asyncio Task whose exception nobody retrieved (a test that gave up on a
    learner's server leaves such tasks behind), the Task logs it, logging
    formats the traceback, and 3.11's traceback calls ast.parse. The
    SystemError escaped pytest's report building as an INTERNALERROR and
    ended the whole session (llm-serving, issue 26). With the collector off
    nothing else runs Python code during the C parse, so it cannot nest."""
    if not gc.isenabled():
        return _plain_ast_parse(*args, **kwargs)
    gc.disable()
    try:
        return _plain_ast_parse(*args, **kwargs)
    finally:
        gc.enable()


def refuse_links_out_of(*folders: str) -> None:
    """This process (the grader, outside the wall) reads the learner's files
    and reads and writes the grade's scratch folder (pytest's tmp_path), both
    writable by learner code; that code may, during the grade, have swapped a
    file or a folder there for a symbolic link to anywhere the grading user can
    read or write (a credential, the data home, the grader's own files), for a
    test to quote back in a failure message or to overwrite. Every open of a
    path under one of `folders` that resolves outside that folder is refused
    (the test fails)."""
    roots = [(os.path.join(os.path.abspath(f), ""), os.path.join(os.path.realpath(f), "")) for f in folders]

    def hook(event: str, args: tuple) -> None:
        if event != "open" or isinstance(args[0], int) or args[0] is None:
            return
        path = os.path.abspath(os.fsdecode(args[0]))
        for given, root in roots:
            if (path.startswith(given) or path.startswith(root)) and not os.path.join(
                os.path.realpath(path), ""
            ).startswith(root):
                raise PermissionError(
                    f"{path} is a link out of the learner's folders (to {os.path.realpath(path)}): "
                    "the grader does not follow it"
                )

    sys.addaudithook(hook)


def pytest_configure(config: pytest.Config) -> None:
    # pytest (failure reports, assertion rewriting) and traceback look
    # ast.parse up on the module at call time, so this reaches them all.
    ast.parse = _ast_parse_without_gc
    spec = _read_engine_config()
    if spec:
        from roadmap_cli.grading_kit import sandbox
        from roadmap_cli.grading.channel import Emitter

        wall = (spec.get("sandbox") or {}).get("os_wall")
        if wall and not os.environ.get("ROADMAP_WARM_LEARNER_FD"):
            # Before anything starts: this process and every walled one it starts get the grade's own network
            # (grading_kit/oswall.py). dev check's warm learner was started by the engine, on the host's network
            # (it runs the project's own code, never a learner's): its grades stay there to reach it.
            from roadmap_cli.grading_kit import oswall

            wall["shared_net"] = _early_network if _early_network is not None else oswall.enter_grade_network()
        _not_dumpable()
        _state.out = Emitter(int(spec["results_fd"]), bytes.fromhex(spec["key"]))
        os.environ["ROADMAP_SECRET_SEED"] = str(spec.get("secret_seed", "0"))  # not in /proc/<pid>/environ
        sandbox.configure(spec.get("sandbox"))
        if spec.get("sandbox") and (
            os.environ.get("ROADMAP_DEVICE") == "cuda" or os.environ.get("ROADMAP_GRADER_CUDA_GUARD") == "1"
        ):
            # Only the learner process opens a CUDA context (EXCLUSIVE_PROCESS mode refuses a second one):
            # grader code that would initialise CUDA raises instead (grading_kit/placement.py). A CUDA grade
            # imports torch anyway; ROADMAP_GRADER_CUDA_GUARD=1 sets the guard on a CPU grade (tests).
            from roadmap_cli.grading_kit.placement import guard_grader_against_cuda

            guard_grader_against_cuda()
        if (spec.get("sandbox") or {}).get("workspace"):
            # The workspace and pytest's basetemp (the grade's scratch folder, where tmp_path lives): both are
            # the learner's to write (red team, issue 35: a link planted in tmp_path made a test overwrite a host file).
            folders = [spec["sandbox"]["workspace"]]
            if getattr(config.option, "basetemp", None):
                folders.append(str(config.option.basetemp))
            refuse_links_out_of(*folders)
        sandbox.on_violation = lambda reason: _state.emit("void", reason=reason)
        _state.parts = [(p["id"], list(p["tests"])) for p in spec.get("parts", [])]
        selected = spec.get("selected")
        _state.selected = set(selected) if selected is not None else None
        _state.stop_part_on_fail = bool(spec.get("stop_part_on_fail"))
        _state.verbose = bool(spec.get("verbose"))


def pytest_sessionstart(session: pytest.Session) -> None:
    _state.emit("session", pid=os.getpid(), python=sys.version.split()[0], pytest=pytest.__version__)
    from roadmap_cli.grading_kit import sandbox

    if sandbox.active():
        sandbox.client().start()  # its imports (torch, the adapter) overlap with collection


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
    _state.emit(
        "collected",
        tests=[[item.nodeid, _part(item.nodeid) if _state.parts else None] for item in items],
        unassigned=getattr(_state, "unassigned", []),
    )


def _collect_part(nodeid: str) -> Optional[str]:
    """The part of a file that failed to import: the first part with a test in it."""
    for part_id, prefixes in _state.parts:
        for prefix in prefixes:
            if prefix.split("::", 1)[0] == nodeid or prefix.startswith(nodeid.rstrip("/") + "/"):
                return part_id
    return None


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _state.emit(
            "collect_error",
            nodeid=report.nodeid,
            part=_collect_part(report.nodeid),
            message=_trim(str(report.longrepr)),
        )


def _learner_requests() -> int:
    from roadmap_cli.grading_kit import sandbox

    return sandbox.requests_sent()


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _state.reports[nodeid] = {
        "outcome": "passed",
        "duration_s": 0.0,
        "message": None,
        "requests_at_start": _learner_requests(),
    }
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
        out.append(
            (
                kind,
                os.path.relpath(path, workspace) if kind == "yours" else os.path.basename(path),
                entry.lineno + 1,
                entry.name,
                statement,
            )
        )
    return out


def _located(message: str, frames: list, learner_frames: Optional[list[str]] = None) -> str:
    """The failure, then where: the learner's deepest frame and the test's check.

    `learner_frames` ("adder.py:2 in add", outermost first) come from the
    learner's own process (grading_kit/learner_errors.py) when the code ran
    in the sandbox; otherwise the workspace frames of this traceback are used.
    """
    checks = [f for f in frames if f[0] == "check"]
    yours = [f for f in frames if f[0] == "yours"]
    lines = [message]
    if learner_frames:
        lines.append(f"  in your code: {learner_frames[-1]}")
    elif yours:
        _, file, line, func, _ = yours[-1]
        lines.append(f"  in your code: {file}:{line} in {func}")
    if checks:
        _, file, line, func, statement = checks[-1]
        lines.append(f"  checked by: {file}:{line} in {func}" + (f": {statement.splitlines()[0]}" if statement else ""))
    if _state.verbose and (frames or learner_frames):
        lines.append("traceback (the test's check and your code, outermost first):")
        for kind, file, line, func, statement in frames:
            lines.append(f"  {file}:{line} in {func}" + ("  (yours)" if kind == "yours" else ""))
            lines += [f"      {s}" for s in statement.splitlines()[:3]]
        lines += [f"  {f}  (yours)" for f in learner_frames or []]
    return "\n".join(lines)


def not_implemented(message: str, function: Optional[str]) -> str:
    """A learner's NotImplementedError as what it means: a function not written yet.

    `function` is the learner's deepest frame; the starters' messages ("view:
    see README.md, section ...", "implement add(a, b): see ...", "matmul is not
    implemented yet: see ...") lose the prefix that repeats it, keeping the
    README pointer: `not implemented yet: view (see README.md, section "...")`.
    Never "torch allows it, yours refuses it": an unwritten function refuses nothing."""
    text = message.strip()
    prefix = re.match(r"^(?:implement\s+)?([A-Za-z_][\w.]*)(?:\([^)]*\))?(?:\s+is not implemented yet)?:\s*", text)
    if prefix and (function is None or prefix.group(1).rsplit(".", 1)[-1] == function or text.startswith("implement")):
        function = function or prefix.group(1)
        text = text[prefix.end() :]
    name = function or "a function"
    return f"not implemented yet: {name} ({text})" if text else f"not implemented yet: {name}"


def _deepest_function(frames: list, learner_frames: Optional[list[str]]) -> Optional[str]:
    if learner_frames:
        return learner_frames[-1].rsplit(" in ", 1)[-1].strip() or None
    yours = [f for f in frames if f[0] == "yours"]
    return yours[-1][3] if yours else None


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


def _bare_report(item: pytest.Item, call, exc: BaseException) -> pytest.TestReport:
    """The test's report without pytest's source rendering, for when that
    rendering itself raised: an error inside pytest's report building would
    otherwise be an INTERNALERROR that ends the whole grade (every later part
    unrecorded). The test keeps the outcome its exception gave it."""
    excinfo = call.excinfo
    value = excinfo.value
    if isinstance(value, pytest.skip.Exception):
        outcome, longrepr = "skipped", (str(item.path), item.location[1] or 0, f"Skipped: {value}")
    else:
        outcome = "failed"
        longrepr = f"{type(value).__name__}: {value}\n  (pytest could not show where: {type(exc).__name__}: {exc})"
    return pytest.TestReport(
        item.nodeid,
        item.location,
        {k: 1 for k in item.keywords},
        outcome,
        longrepr,
        call.when,
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Learner crashes and timeouts get their own outcome; an exception from
    learner code is reported at the learner's line, not at the proxy's."""
    outcome = yield
    excinfo = call.excinfo
    if excinfo is None:
        return
    from roadmap_cli.grading_kit.learner_errors import LearnerCrashed, LearnerError, LearnerTimeout, LearnerViolation

    try:
        report = outcome.get_result()
    except Exception as exc:  # pytest could not render this failure: fail the test, never the session
        report = _bare_report(item, call, exc)
        outcome.force_result(report)
    frames: list = []
    if report.failed:
        try:
            # The test's own check (and workspace frames): a mismatch is named
            # there, never at a helper's line inside grading_kit.
            frames = _frames(excinfo, item)
        except Exception:  # never let the message builder break a grade
            frames = []
        report.roadmap_frames = frames
    exc = excinfo.value
    if isinstance(exc, LearnerCrashed):
        _state.special.setdefault(item.nodeid, ("crashed", _trim(str(exc))))
    elif isinstance(exc, LearnerTimeout):
        _state.special.setdefault(item.nodeid, ("timeout", _trim(str(exc))))
    elif isinstance(exc, LearnerViolation):
        _state.special.setdefault(item.nodeid, ("failed", _trim(str(exc))))
    elif isinstance(exc, LearnerError):
        kind = (exc.learner_type or type(exc).__name__).rsplit(".", 1)[-1]
        text = (
            not_implemented(str(exc), _deepest_function(frames, exc.learner_frames))
            if kind == "NotImplementedError"
            else f"{kind}: {exc}"
        )
        _state.special.setdefault(
            item.nodeid,
            ("failed" if call.when == "call" else "error", _trim(_located(text, frames, exc.learner_frames))),
        )
    elif isinstance(exc, NotImplementedError) and any(f[0] == "yours" for f in frames):
        # Learner code imported into the grader's process (no sandbox) raised it.
        _state.special.setdefault(
            item.nodeid,
            (
                "failed" if call.when == "call" else "error",
                _trim(_located(not_implemented(str(exc), _deepest_function(frames, None)), frames)),
            ),
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _state.reports.setdefault(report.nodeid, {"outcome": "passed", "duration_s": 0.0, "message": None})
    entry["duration_s"] += float(getattr(report, "duration", 0.0) or 0.0)
    if entry["outcome"] != "passed":
        return  # keep the first problem (e.g. a call failure, not the teardown after it)
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = _message(report)
        special = _state.special.pop(report.nodeid, None)
        if special:
            entry["outcome"] = special[0] if special[0] != "failed" else entry["outcome"]
            entry["message"] = special[1]
    elif report.skipped and report.when in ("setup", "call"):
        entry["outcome"] = "skipped"
        entry["message"] = _message(report)
        # A skip after the learner's code answered may follow from what it answered (red team P4: a reported
        # device name missing from the table): results.py counts it as not passed.
        entry["after_learner"] = _learner_requests() > entry.get("requests_at_start", 0)


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    entry = _state.reports.pop(nodeid, {"outcome": "passed", "duration_s": 0.0, "message": None})
    part = _part(nodeid)
    _state.special.pop(nodeid, None)
    if entry["outcome"] in ("failed", "error", "crashed", "timeout") and part is not None:
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
        after_learner=bool(entry.get("after_learner")),
    )


def _device_info() -> dict:
    """Device facts from inside the grader (it imported torch anyway)."""
    info: dict[str, Any] = {"interpret_mode": os.environ.get("TRITON_INTERPRET") == "1"}
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_version"] = getattr(torch, "__version__", None)
        # The GPU as the engine found it (asking torch here would open a CUDA context in the grader).
        if os.environ.get("ROADMAP_DEVICE") == "cuda" and os.environ.get("ROADMAP_GPU_NAME"):
            info["device"] = os.environ["ROADMAP_GPU_NAME"]
            info["device_capability"] = os.environ.get("ROADMAP_GPU_CAPABILITY") or None
    triton = sys.modules.get("triton")
    if triton is not None:
        info["triton_version"] = getattr(triton, "__version__", None)
    return info


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from roadmap_cli.grading_kit import sandbox

    sandbox.shutdown()
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
