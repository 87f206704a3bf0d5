"""`roadmap dev mutate LAB`: how many realistic bugs does the grader catch?

Mutants of the reference solution (mutants.py: one small mistake each, only
inside solution regions) are graded with the real engine, each in its own
temporary workspace, stopping a part at its first failing test, `jobs` at a
time. Each mutant is

  killed              some graded part failed, crashed or timed out;
  survived            every graded part passed: a bug the grader misses;
  equivalent-suspect  survived, and every learner_side call returned the same
                      output digest as the reference (sandbox contract, item 6)
                      under the same secret seed, and again under a second seed;
  explained           survived, and lab.yaml `known_survivors` says why;
  invalid             the mutated file does not compile (excluded);
  not-gradable-here   it only touches code graded on a CUDA GPU (excluded);
  error               the grader itself broke (excluded, listed).

score = killed / (killed + survived); the target is 95%. Survivors are
attributed to the parts that killed other mutants of the same function
(else of the same file): a cheap coverage map that needs no tracing inside
the learner process. Results are cached in <home>/mutate/<lab>.json, keyed by
mutant id (hash of its diff), grader sha, solution sha, device and parts, so
a rerun grades only what changed.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError
from roadmap_cli.labs import workspace as ws
from roadmap_cli.labs.device import DeviceInfo, detect_device
from roadmap_cli.labs.mutants import Mutant, generate
from roadmap_cli.labs.runner import GradeRun, gradable_parts, grade_workspace, tests_sha256
from roadmap_cli.labs.spec import LabSpec
from roadmap_cli.labs.starter_build import solution_text

TARGET = 0.95
CACHE_VERSION = 1
EXCLUDED = ("invalid", "not-gradable-here", "error")


@dataclass
class MutantResult:
    id: str
    file: str
    line: int  # in the solution view (what a learner sees)
    function: str
    operator: str
    description: str
    diff: str
    status: str  # killed|survived|equivalent-suspect|explained|invalid|not-gradable-here|error
    parts_failed: list[str] = field(default_factory=list)
    covered_by: list[str] = field(default_factory=list)  # survivors: parts that test this code
    message: str = ""
    reason: str = ""  # explained: lab.yaml's reason
    seconds: float = 0.0
    cached: bool = False

    @property
    def label(self) -> str:
        return f"{self.file}:{self.function or '<module>'}: {self.operator} {self.description}"


@dataclass
class MutateReport:
    lab: str
    device: str
    parts: list[str]
    generated: int
    results: list[MutantResult]
    part_stats: dict[str, dict]
    counts: dict[str, int]
    score: Optional[float]
    target: float
    ok: bool
    graded_now: int
    digests: bool  # were output digests available (equivalence detection on)?
    notes: list[str]
    grader_sha256: str
    solution_sha256: str
    seconds: float


# ---------------------------------------------------------------- mutants


def _unified(rel: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{rel}", f"b/{rel}", n=2))


def _first_changed_line(diff: str) -> int:
    match = re.search(r"^@@ -(\d+)(?:,(\d+))? ", diff, re.M)
    if not match:
        return 0
    start, length = int(match.group(1)), int(match.group(2) or 1)
    context = 0
    for line in diff.split("\n@@", 1)[0].splitlines()[3:]:
        if line.startswith(" "):
            context += 1
        else:
            break
    return start + context if length else start


def all_mutants(spec: LabSpec) -> list[tuple[Mutant, MutantResult]]:
    """Every mutant of the lab's single source with its (ungraded) result row, sorted by id."""
    out = []
    for rel, source in spec.solution_sources().items():
        text = source.read_text(encoding="utf-8")
        original = solution_text(text, rel)
        for mutant in generate(text, rel):
            view = solution_text(mutant.text, rel)
            diff = _unified(rel, original, view)
            if not diff:
                continue
            mutant_id = hashlib.sha256(diff.encode()).hexdigest()[:12]
            status, message = "", ""
            if rel.endswith(".py"):
                try:
                    compile(view, rel, "exec")
                except SyntaxError as exc:
                    status = "invalid"
                    message = f"does not compile: {exc.msg}"
            row = MutantResult(mutant_id, rel, _first_changed_line(diff), mutant.function, mutant.operator,
                               mutant.description, diff, status, message=message)
            out.append((mutant, row))
    unique = {row.id: (m, row) for m, row in out}
    return [unique[k] for k in sorted(unique)]


def explain(spec: LabSpec, row: MutantResult) -> Optional[str]:
    for known in spec.known_survivors:
        if known.id and row.id.startswith(known.id):
            return known.reason
        if known.match and (re.search(known.match, row.label) or re.search(known.match, row.diff)):
            return known.reason
    return None


def solution_sha256(spec: LabSpec) -> str:
    digest = hashlib.sha256()
    for rel, source in sorted(spec.solution_sources().items()):
        digest.update(rel.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


# ---------------------------------------------------------------- grading


class _Grader:
    """Grades the reference and mutants under fixed secret seeds, collecting output digests."""

    def __init__(self, spec: LabSpec, device: DeviceInfo, parts: list[str], seeds: tuple[int, int],
                 timeout: Optional[float]) -> None:
        self.spec, self.device, self.parts, self.seeds, self.timeout = spec, device, parts, seeds, timeout
        self.reference: dict[int, list] = {}
        self.lock = threading.Lock()

    def grade(self, overrides: Optional[dict[str, str]], seed: int) -> tuple[GradeRun, list]:
        with tempfile.TemporaryDirectory(prefix=f"roadmap-mutate-{self.spec.id}-") as tmp:
            path = Path(tmp) / "ws"
            path.mkdir()
            ws.write_solution(self.spec, path, overrides)
            digests = Path(tmp) / "digests.jsonl"
            run = grade_workspace(self.spec, path, parts=self.parts, timeout=self.timeout, device=self.device,
                                  stop_part_on_fail=True, secret_seed=seed,
                                  extra_env={"ROADMAP_OUTPUT_DIGESTS": str(digests)})
            return run, _read_digests(digests)

    def reference_digests(self, seed: int) -> list:
        with self.lock:
            if seed not in self.reference:
                run, digests = self.grade(None, seed)
                if run.outcome != "passed":
                    raise UserError(f"the reference solution of {self.spec.id} does not pass "
                                    f"({run.outcome}: {_first_failure(run, self.parts)}); fix it before mutating")
                self.reference[seed] = digests
                self.reference_seconds = run.duration_s
            return self.reference[seed]


def _read_digests(path: Path) -> list:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        rows.append((row.get("test"), row.get("call"), row.get("n"), row.get("digest")))
    return sorted(rows, key=lambda r: tuple(str(x) for x in r))


def _first_failure(run: GradeRun, parts: list[str]) -> str:
    for p in parts:
        part = run.part(p)
        if part.status != "passed":
            return f"{p}: {(part.message or part.status).splitlines()[0][:200]}"
    return (run.message or run.log_tail[-300:]).strip()


def _classify(grader: _Grader, mutant: Mutant, row: MutantResult) -> None:
    t0 = time.monotonic()
    run, digests = grader.grade({mutant.file: mutant.text}, grader.seeds[0])
    if run.outcome == "error":
        row.status, row.message = "error", _first_failure(run, grader.parts)
    elif run.outcome == "passed":
        row.status = "survived"
        reference = grader.reference_digests(grader.seeds[0])
        if reference and digests == reference:
            run2, digests2 = grader.grade({mutant.file: mutant.text}, grader.seeds[1])
            if run2.outcome == "passed" and digests2 == grader.reference_digests(grader.seeds[1]):
                row.status = "equivalent-suspect"
                row.message = f"same outputs as the reference on {len(reference)} learner_side call(s), 2 seeds"
            elif run2.outcome != "passed":
                row.status, row.parts_failed = "killed", [p for p in grader.parts if run2.part(p).status == "failed"]
                row.message = "killed under the second seed: " + _first_failure(run2, grader.parts)
    else:  # failed, crash, timeout
        row.status = "killed"
        row.parts_failed = [p for p in grader.parts if run.part(p).status == "failed"]
        row.message = f"{run.outcome}: {_first_failure(run, grader.parts)}"
    row.seconds = round(time.monotonic() - t0, 2)


# ---------------------------------------------------------------- cache


def _cache_path(home: Path, lab: str) -> Path:
    return home / "mutate" / f"{lab}.json"


def _load_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("results", {}) if data.get("version") == CACHE_VERSION else {}


def _save_cache(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": CACHE_VERSION, "results": results}, indent=1), encoding="utf-8")
    tmp.replace(path)


# ---------------------------------------------------------------- the run


def run_mutate(spec: LabSpec, home: Path, *, jobs: int = 2, sample: Optional[int] = None, seed: int = 0,
               part: Optional[str] = None, timeout: Optional[float] = None, device: Optional[DeviceInfo] = None,
               on_start: Optional[Callable[[int], None]] = None,
               on_result: Optional[Callable[[MutantResult], None]] = None) -> MutateReport:
    t_start = time.monotonic()
    device = device or detect_device()
    here = gradable_parts(spec, device)
    if part is not None:
        spec.part(part)  # NotFoundError with did-you-mean
        if part not in here:
            raise UserError(f"part {part} of {spec.id} needs a CUDA GPU ({device.reason})")
    parts = [part] if part else here
    if not parts:
        raise UserError(f"nothing of {spec.id} can be graded here ({device.reason})")
    notes: list[str] = []
    candidates = all_mutants(spec)
    generated = len(candidates)
    gpu_only = [(m, r) for m, r in candidates if m.operator.startswith("cuda") and not device.cuda]
    for _, row in gpu_only:
        row.status, row.message = "not-gradable-here", "CUDA source: graded only on a CUDA GPU"
    if gpu_only:
        notes.append(f"{len(gpu_only)} mutant(s) of CUDA sources are not gradable here (no CUDA GPU): not sampled")
    pool = [(m, r) for m, r in candidates if r.status != "not-gradable-here"]
    if sample is not None and sample < len(pool):
        pool = sorted(random.Random(seed).sample(pool, sample), key=lambda mr: mr[1].id)
        notes.append(f"sample of {sample} mutant(s), seed {seed}, out of {generated} generated")
    chosen = pool + (gpu_only if sample is None else [])

    grader_sha, sol_sha = tests_sha256(spec.tests_dir), solution_sha256(spec)
    key_suffix = f":{grader_sha[:16]}:{sol_sha[:16]}:{device.kind}:{','.join(parts)}"
    cache_file = _cache_path(home, spec.id)
    cache = _load_cache(cache_file)
    todo = []
    for mutant, row in chosen:
        if row.status:
            continue
        hit = cache.get(row.id + key_suffix)
        if hit:
            row.status, row.parts_failed, row.message, row.seconds = (hit["status"], hit["parts_failed"],
                                                                      hit["message"], hit["seconds"])
            row.cached = True
        else:
            todo.append((mutant, row))
    if on_start:
        on_start(len(chosen))
    for _, row in chosen:
        if row.status and on_result and (row.cached or row.status in EXCLUDED):
            on_result(row)

    seeds = (1_000_003 * seed + 17, 1_000_003 * seed + 29)
    grader = _Grader(spec, device, parts, seeds, None)
    digests_on = False
    if todo:
        reference = grader.reference_digests(seeds[0])  # also proves the reference passes
        digests_on = bool(reference)
        grader.timeout = timeout or min(spec.time_limit_s, max(20.0, 4 * grader.reference_seconds))
        lock = threading.Lock()

        def work(item: tuple[Mutant, MutantResult]) -> MutantResult:
            mutant, row = item
            _classify(grader, mutant, row)
            with lock:
                cache[row.id + key_suffix] = {k: getattr(row, k) for k in ("status", "parts_failed", "message",
                                                                           "seconds")}
                _save_cache(cache_file, cache)
            if on_result:
                on_result(row)
            return row

        if jobs <= 1:
            for item in todo:
                work(item)
        else:
            with ThreadPoolExecutor(max_workers=jobs) as executor:
                list(executor.map(work, todo))
    if todo and not digests_on:
        notes.append("no output digests (the grader has no learner sandbox yet): survivors are not checked "
                     "for equivalence")
    results = [row for _, row in chosen]
    for row in results:
        if row.status == "survived":
            reason = explain(spec, row)
            if reason:
                row.status, row.reason = "explained", reason
    _attribute(results)
    return _report(spec, device, parts, generated, results, len(todo), digests_on, notes, grader_sha, sol_sha,
                   round(time.monotonic() - t_start, 1))


def _attribute(results: list[MutantResult]) -> None:
    """Survivors -> the parts that killed other mutants of the same function (else file)."""
    by_function: dict[tuple[str, str], set[str]] = {}
    by_file: dict[str, set[str]] = {}
    for row in results:
        if row.status == "killed":
            by_function.setdefault((row.file, row.function), set()).update(row.parts_failed)
            by_file.setdefault(row.file, set()).update(row.parts_failed)
    for row in results:
        if row.status in ("survived", "equivalent-suspect", "explained"):
            parts = by_function.get((row.file, row.function)) or by_file.get(row.file) or set()
            row.covered_by = sorted(parts)


def _report(spec, device, parts, generated, results, graded_now, digests_on, notes, grader_sha, sol_sha,
            seconds) -> MutateReport:
    counts = {s: 0 for s in ("killed", "survived", "equivalent-suspect", "explained", *EXCLUDED)}
    for row in results:
        counts[row.status] = counts.get(row.status, 0) + 1
    part_stats = {}
    for p in parts:
        killed = sum(1 for r in results if r.status == "killed" and p in r.parts_failed)
        survived = sum(1 for r in results if r.status == "survived" and p in r.covered_by)
        part_stats[p] = {"killed": killed, "survived": survived,
                         "score": round(killed / (killed + survived), 4) if killed + survived else None}
    unattributed = sum(1 for r in results if r.status == "survived" and not r.covered_by)
    if unattributed:
        notes.append(f"{unattributed} survivor(s) in code no killed mutant touched: no part to attribute them to")
    scored = counts["killed"] + counts["survived"]
    score = round(counts["killed"] / scored, 4) if scored else None
    return MutateReport(spec.id, f"{device.kind} ({device.name})", parts, generated, results, part_stats, counts,
                        score, TARGET, score is None or score >= TARGET, graded_now, digests_on, notes,
                        grader_sha, sol_sha, seconds)


def report_dict(report: MutateReport) -> dict:
    data = asdict(report)
    data["results"] = [asdict(r) for r in report.results]
    return data
