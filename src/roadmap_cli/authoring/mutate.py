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
  invalid             the mutated file does not compile: a Python syntax
                      error, or a C/C++ build that failed during the grade
                      (grading_kit.cpp_cache's build log) (excluded);
  not-gradable-here   it only touches code graded on a CUDA GPU (excluded);
  error               the grader itself broke (excluded, listed).

score = killed / (killed + survived); the target is 95%. Survivors are
attributed to the parts that killed other mutants of the same function
(else of the same file): a cheap coverage map that needs no tracing inside
the learner process. Results are cached in <home>/mutate/<lab>.json, keyed by
mutant id (hash of its diff), grader sha, solution sha, device and parts, so
a rerun grades only what changed.

The report also lists, per lab, the lab.yaml rules (docs/labs.md, "Rules")
whose tests no killed mutant failed: a hint where the mutator is blind (no
mutant breaks that rule) or the rule's tests are weak. Since each part stops
at its first failing test, a mutant counts only for the first test it failed
in each part: the list is an upper bound on the truly untouched rules.
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError
from roadmap_cli.grading_kit.cpp_cache import read_build_failures
from roadmap_cli.authoring import mutants_cpp
from roadmap_cli.labs import workspace as ws
from roadmap_cli.labs.device import DeviceInfo, detect_device
from roadmap_cli.authoring.mutant_rows import MutantResult, all_mutants, explain, solution_sha256
from roadmap_cli.authoring.mutants import Mutant
from roadmap_cli.authoring.mutate_coverage import Coverage, measure
from roadmap_cli.grading.results import BAD_TEST_OUTCOMES
from roadmap_cli.grading.launch import warm_graders
from roadmap_cli.grading.runner import GradeRun, grade_workspace, tests_sha256
from roadmap_cli.grading.selection import gradable_parts
from roadmap_cli.grading.warm import WarmGraders
from roadmap_cli.labs.spec import LabSpec

TARGET = 0.95
CACHE_VERSION = 3  # 3: killed mutants keep the tests they failed (rules_untouched)
CACHED_FIELDS = ("status", "parts_failed", "graded_parts", "message", "seconds", "tests_failed")
EXCLUDED = ("invalid", "not-gradable-here", "error")
# A C/C++ mutant compiles its sources again inside its grade (each mutant has a
# new build hash): its time limit is the reference's plus this much.
BUILD_ALLOWANCE_S = 300.0


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
    # Rules (lab.yaml `rules:`) with a test in a graded part that no killed
    # mutant failed; None when the lab lists no rules.
    rules_untouched: Optional[list[str]] = None


# ---------------------------------------------------------------- grading


class _Grader:
    """Grades the reference and mutants under fixed secret seeds, collecting output digests."""

    def __init__(
        self,
        spec: LabSpec,
        device: DeviceInfo,
        parts: list[str],
        seeds: tuple[int, int],
        timeout: Optional[float],
        warm: Optional[WarmGraders] = None,
    ) -> None:
        self.spec, self.device, self.parts, self.seeds, self.timeout = spec, device, parts, seeds, timeout
        self.warm = warm  # each grade forks a warm grader (grading/warm.py) when there is one
        self.user_timeout = timeout is not None
        self.reference: dict[int, list] = {}
        self.unstable: set[tuple] = set()  # (test, call, n) whose digest varies between reference runs
        self.lock = threading.Lock()

    def grade(
        self,
        overrides: Optional[dict[str, str]],
        seed: int,
        parts: Optional[list[str]] = None,
        build_failures: Optional[list] = None,
    ) -> tuple[GradeRun, list]:
        """One grade; the C/C++ builds that failed in it are appended to `build_failures`."""
        timeout = self.timeout
        if overrides and not self.user_timeout and timeout and any(mutants_cpp.is_cpp(f) for f in overrides):
            timeout += BUILD_ALLOWANCE_S
        with tempfile.TemporaryDirectory(prefix=f"roadmap-mutate-{self.spec.id}-") as tmp:
            path = Path(tmp) / "ws"
            path.mkdir()
            ws.write_solution(self.spec, path, overrides)
            digests, builds = Path(tmp) / "digests.jsonl", Path(tmp) / "builds.jsonl"
            run = grade_workspace(
                self.spec,
                path,
                parts=parts or self.parts,
                timeout=timeout,
                device=self.device,
                stop_part_on_fail=True,
                secret_seed=seed,
                extra_env={"ROADMAP_OUTPUT_DIGESTS": str(digests), "ROADMAP_CPP_BUILD_LOG": str(builds)},
                warm=self.warm,
            )
            if build_failures is not None:
                build_failures.extend(read_build_failures(builds))
            return run, _read_digests(digests)

    def reference_digests(self, seed: int) -> list:
        with self.lock:
            if seed not in self.reference:
                run, digests = self.grade(None, seed)
                _stop_if_interrupted(run)
                if run.outcome != "passed":
                    raise UserError(
                        f"the reference solution of {self.spec.id} does not pass "
                        f"({run.outcome}: {_first_failure(run, self.parts)}); fix it before mutating"
                    )
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


def _same_outputs(run: GradeRun, digests: list, reference: list, unstable: set) -> bool:
    """Digests of the tests this (part-restricted) run executed, against the
    reference's, leaving out the calls whose output varies run to run."""
    ran = {t.nodeid for t in run.tests}
    expected = [r for r in reference if r[0] in ran and r[:3] not in unstable]
    return bool(expected) and [r for r in digests if r[:3] not in unstable] == expected


def _failed_tests(run: GradeRun) -> list[str]:
    return [t.nodeid for t in run.tests if t.outcome in BAD_TEST_OUTCOMES]


def rules_untouched(spec: LabSpec, parts: list[str], results: list[MutantResult]) -> Optional[list[str]]:
    """The ids of the rules with a test in `parts` that no killed mutant failed."""
    if spec.rules is None:
        return None
    from roadmap_cli.labs.nodeids import part_for, prefix_matches

    failed = [n for r in results if r.status == "killed" for n in r.tests_failed]
    prefixes = spec.part_prefixes()
    untouched = []
    for rule in spec.rules:
        graded = [t for t in rule.tests if part_for(t, prefixes) in parts]
        if graded and not any(prefix_matches(t, n) for t in graded for n in failed):
            untouched.append(rule.id)
    return untouched


def _stop_if_interrupted(run: GradeRun) -> None:
    """Ctrl-C reaches only this process (each grade's pytest runs in its own
    session), and the runner records it as an "interrupted" run. That run says
    nothing about the mutant: stop here instead of classifying (and caching)
    it as killed. With -j 1 this is what makes Ctrl-C stop `dev mutate`."""
    if run.outcome == "interrupted":
        raise KeyboardInterrupt


def _classify(grader: _Grader, mutant: Mutant, row: MutantResult, parts: list[str]) -> None:
    t0 = time.monotonic()
    row.graded_parts = parts
    failed_builds: list = []
    run, digests = grader.grade({mutant.file: mutant.text}, grader.seeds[0], parts, failed_builds)
    _stop_if_interrupted(run)
    if failed_builds:  # not a bug the tests could catch: the learner would see a compile error
        row.status = "invalid"
        row.message = "does not compile: " + failed_builds[0].get("first_error", "").splitlines()[0][:300]
    elif run.outcome == "error":
        row.status, row.message = "error", _first_failure(run, parts)
    elif run.outcome == "passed":
        row.status = "survived"
        if _same_outputs(run, digests, grader.reference_digests(grader.seeds[0]), grader.unstable):
            run2, digests2 = grader.grade({mutant.file: mutant.text}, grader.seeds[1], parts)
            _stop_if_interrupted(run2)
            if run2.outcome == "passed" and _same_outputs(
                run2, digests2, grader.reference_digests(grader.seeds[1]), grader.unstable
            ):
                row.status = "equivalent-suspect"
                row.message = f"same outputs as the reference on {len(digests)} learner_side call(s), 2 seeds"
            elif run2.outcome != "passed":
                row.status, row.parts_failed = "killed", [p for p in parts if run2.part(p).status == "failed"]
                row.tests_failed = _failed_tests(run2)
                row.message = "killed under the second seed: " + _first_failure(run2, parts)
    else:  # failed, crash, timeout
        row.status = "killed"
        row.parts_failed = [p for p in parts if run.part(p).status == "failed"]
        row.tests_failed = _failed_tests(run)
        row.message = f"{run.outcome}: {_first_failure(run, parts)}"
    row.seconds = round(time.monotonic() - t0, 2)


# ---------------------------------------------------------------- cache


def _cache_path(home: Path, lab: str) -> Path:
    return home / "mutate" / f"{lab}.json"


def _load_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"results": {}, "coverage": {}}
    if data.get("version") != CACHE_VERSION:
        return {"results": {}, "coverage": {}}
    return {"results": data.get("results", {}), "coverage": data.get("coverage", {})}


def _save_cache(path: Path, cache: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": CACHE_VERSION, **cache}, indent=1), encoding="utf-8")
    tmp.replace(path)


# ---------------------------------------------------------------- the run


def run_mutate(
    spec: LabSpec,
    home: Path,
    *,
    jobs: int = 2,
    sample: Optional[int] = None,
    seed: int = 0,
    part: Optional[str] = None,
    timeout: Optional[float] = None,
    device: Optional[DeviceInfo] = None,
    on_start: Optional[Callable[[int], None]] = None,
    on_result: Optional[Callable[[MutantResult], None]] = None,
) -> MutateReport:
    device = device or detect_device()
    # Hundreds of grades: each forks a warm grader instead of importing torch and pytest again.
    # Started here, in the calling thread: its parent-death signal follows the thread that starts it.
    with warm_graders(device) as warm:
        return _run_mutate(
            spec,
            home,
            jobs=jobs,
            sample=sample,
            seed=seed,
            part=part,
            timeout=timeout,
            device=device,
            on_start=on_start,
            on_result=on_result,
            warm=warm,
        )


def _run_mutate(
    spec: LabSpec,
    home: Path,
    *,
    jobs: int,
    sample: Optional[int],
    seed: int,
    part: Optional[str],
    timeout: Optional[float],
    device: DeviceInfo,
    on_start: Optional[Callable[[int], None]],
    on_result: Optional[Callable[[MutantResult], None]],
    warm: WarmGraders,
) -> MutateReport:
    t_start = time.monotonic()
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
    gpu_only = [(m, r) for m, r in candidates if mutants_cpp.gpu_only(m.file) and not device.cuda]
    for _, row in gpu_only:
        row.status, row.message = "not-gradable-here", "CUDA source: graded only on a CUDA GPU"
    if gpu_only:
        notes.append(f"{len(gpu_only)} mutant(s) of CUDA sources are not gradable here (no CUDA GPU): not sampled")
    pool = [(m, r) for m, r in candidates if r.status != "not-gradable-here"]

    grader_sha, sol_sha = tests_sha256(spec.tests_dir), solution_sha256(spec)
    key_suffix = f":{grader_sha[:16]}:{sol_sha[:16]}:{device.kind}:{','.join(parts)}"
    coverage_key = f"coverage:{grader_sha[:16]}:{sol_sha[:16]}:{device.kind}:{','.join(here)}"
    cache_file = _cache_path(home, spec.id)
    cache = _load_cache(cache_file)
    seeds = (1_000_003 * seed + 17, 1_000_003 * seed + 29)

    def run_parallel(fn, items):
        if jobs <= 1:
            return [fn(item) for item in items]
        executor = ThreadPoolExecutor(max_workers=jobs)
        try:
            return list(executor.map(fn, items))
        finally:
            # Ctrl-C: the queued mutants are dropped, the ones running finish
            # (their results are cached); a rerun picks up from there.
            executor.shutdown(wait=True, cancel_futures=True)

    grader = _Grader(spec, device, parts, seeds, None, warm)
    coverage: Optional[Coverage] = None
    if part is not None:  # only the mutants in code this part runs: the others would survive trivially
        coverage = _coverage(spec, device, here, seeds[0], cache, coverage_key, run_parallel, notes, grader)
        _save_cache(cache_file, cache)
        pool = [(m, r) for m, r in pool if part in coverage.parts_for(m.file, m.function)]
        notes.append(f"{len(pool)} mutant(s) in code that part {part} runs")
    if sample is not None and sample < len(pool):
        pool = sorted(random.Random(seed).sample(pool, sample), key=lambda mr: mr[1].id)
        notes.append(f"sample of {sample} mutant(s), seed {seed}, out of {generated} generated")
    chosen = pool + (gpu_only if sample is None and part is None else [])

    todo = []
    for mutant, row in chosen:
        if row.status:
            continue
        hit = cache["results"].get(row.id + key_suffix)
        if hit:
            for key in CACHED_FIELDS:
                setattr(row, key, hit[key])
            row.cached = True
        else:
            todo.append((mutant, row))
    if on_start:
        on_start(len(chosen))
    for _, row in chosen:
        if row.status and on_result and (row.cached or row.status in EXCLUDED):
            _explain(spec, row)
            on_result(row)

    digests_on = False
    if todo:
        reference = grader.reference_digests(seeds[0])  # also proves the reference passes
        digests_on = bool(reference)
        grader.timeout = timeout or min(spec.time_limit_s, max(20.0, 4 * grader.reference_seconds))
        grader.user_timeout = timeout is not None
        if coverage is None:
            coverage = _coverage(spec, device, here, seeds[0], cache, coverage_key, run_parallel, notes, grader)
            _save_cache(cache_file, cache)
        grader.unstable = coverage.unstable
        lock = threading.Lock()

        def work(item: tuple[Mutant, MutantResult]) -> MutantResult:
            mutant, row = item
            covering = [p for p in coverage.parts_for(mutant.file, mutant.function) if p in parts]
            _classify(grader, mutant, row, covering or parts)
            with lock:
                cache["results"][row.id + key_suffix] = {k: getattr(row, k) for k in CACHED_FIELDS}
                _save_cache(cache_file, cache)
            _explain(spec, row)  # after caching: the cache keeps the grader's verdict, lab.yaml may change
            if on_result:
                on_result(row)  # the live line says "explained" when the final table will
            return row

        run_parallel(work, todo)
    if todo and not digests_on:
        notes.append(
            "no output digests (the lab's adapter makes no learner_side calls, or there is no learner "
            "sandbox): survivors are not checked for equivalence"
        )
    results = [row for _, row in chosen]
    for row in results:
        _explain(spec, row)
    _attribute(results, parts)
    return _report(
        spec,
        device,
        parts,
        generated,
        results,
        len(todo),
        digests_on,
        notes,
        grader_sha,
        sol_sha,
        round(time.monotonic() - t_start, 1),
    )


def _explain(spec: LabSpec, row: MutantResult) -> None:
    """A survivor, or an equivalent-suspect, that lab.yaml's known_survivors
    explains becomes "explained" with its reason (neither counts in the score)."""
    if row.status in ("survived", "equivalent-suspect"):
        reason = explain(spec, row)
        if reason:
            row.status, row.reason = "explained", reason


def _coverage(spec, device, parts, seed, cache, key, run_parallel, notes, grader: _Grader) -> Coverage:
    """Which parts run which function (mutate_coverage), measured once per grader/solution and cached."""
    if len(parts) == 1:
        cov = Coverage(parts)
    elif key in cache["coverage"]:
        cov = Coverage.from_json(cache["coverage"][key])
    else:
        cov = measure(spec, device, parts, seed, spec.time_limit_s, run_parallel, _read_digests, warm=grader.warm)
        cov.unstable = _unstable(grader.reference_digests(seed), cov.digests)
        cache["coverage"][key] = cov.to_json()
    if cov.blind:
        notes.append(
            f"coverage unknown for part(s) {', '.join(sorted(cov.blind))} (their probed reference grade "
            "failed): every mutant is graded on them"
        )
    return cov


def _unstable(reference: list, other: list) -> set:
    """(test, call, n) keys whose digest differs between two runs under the same seed."""
    ran = {r[0] for r in other}
    first = {r[:3]: r[3] for r in reference if r[0] in ran}
    second = {r[:3]: r[3] for r in other}
    return {k for k in first.keys() | second.keys() if first.get(k) != second.get(k)}


def _attribute(results: list[MutantResult], parts: list[str]) -> None:
    """Survivors -> the parts that run their code: the coverage-selected parts
    they were graded on. Where that was every part (module-level code, no
    coverage), narrowed to the parts that killed other mutants of the same
    function (else file), when there are any."""
    by_function: dict[tuple[str, str], set[str]] = {}
    by_file: dict[str, set[str]] = {}
    for row in results:
        if row.status == "killed":
            by_function.setdefault((row.file, row.function), set()).update(row.parts_failed)
            by_file.setdefault(row.file, set()).update(row.parts_failed)
    for row in results:
        if row.status in ("survived", "equivalent-suspect", "explained"):
            row.covered_by = list(row.graded_parts)
            if len(parts) > 1 and set(row.graded_parts) >= set(parts):
                found = by_function.get((row.file, row.function)) or by_file.get(row.file) or set()
                row.covered_by = [p for p in parts if p in found] or row.covered_by


def _report(
    spec, device, parts, generated, results, graded_now, digests_on, notes, grader_sha, sol_sha, seconds
) -> MutateReport:
    counts = {s: 0 for s in ("killed", "survived", "equivalent-suspect", "explained", *EXCLUDED)}
    for row in results:
        counts[row.status] = counts.get(row.status, 0) + 1
    part_stats = {}
    for p in parts:
        killed = sum(1 for r in results if r.status == "killed" and p in r.parts_failed)
        survived = sum(1 for r in results if r.status == "survived" and p in r.covered_by)
        part_stats[p] = {
            "killed": killed,
            "survived": survived,
            "score": round(killed / (killed + survived), 4) if killed + survived else None,
        }
    unattributed = sum(1 for r in results if r.status == "survived" and not r.covered_by)
    if unattributed:
        notes.append(f"{unattributed} survivor(s) in code no killed mutant touched: no part to attribute them to")
    scored = counts["killed"] + counts["survived"]
    score = round(counts["killed"] / scored, 4) if scored else None
    return MutateReport(
        spec.id,
        f"{device.kind} ({device.name})",
        parts,
        generated,
        results,
        part_stats,
        counts,
        score,
        TARGET,
        score is None or score >= TARGET,
        graded_now,
        digests_on,
        notes,
        grader_sha,
        sol_sha,
        seconds,
        rules_untouched(spec, parts, results),
    )


def report_dict(report: MutateReport) -> dict:
    data = asdict(report)
    data["results"] = [asdict(r) for r in report.results]
    return data
