"""Hostile inputs and a probe runner shared by tests/test_hostile_yaml.py and
bench/bench_hostile.py (issue 12, "Measured").

`run_probes(workdir)` writes every input under `workdir`, then runs each
one through its reader in ONE fresh Python process whose address space is
capped (RLIMIT_AS: its size after imports + 1 GiB), so a regression ends
in MemoryError instead of exhausting the machine. Per probe it records:
refused cleanly (a one-line/`file:line:col` refusal, not a crash), the
message, seconds, and peak memory above the RSS before the call (VmHWM,
reset per probe through /proc/self/clear_refs).

YAML refusals do not depend on the input's size (the size check reads no
bytes; the others stop at the first offending event). An import refusal
does: the JSON is parsed whole first, ~20-50 ms per MB on the shared test
machine, so the huge-string probe uses 4 MB (40x the per-string limit);
a 16 MB one took 0.3-0.8 s there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TIME_LIMIT_S = 0.5
MEMORY_LIMIT_MB = 200.0

MINIMAL_CURRICULUM_HEAD = "format_version: 1\ntitle: {zh: x, en: x}\n"


def _billion_laughs() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def yaml_inputs() -> dict[str, str | None]:
    """name -> document text (None: generated as a file, see write_inputs)."""
    return {
        "billion-laughs": _billion_laughs(),
        "many-aliases": "a: &x 1\nb: [" + ", ".join(["*x"] * 100_000) + "]\n",
        "deep-block-10000": "k:\n" + "- " * 10_000 + "x\n",
        "deep-flow-10000": "k: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "deep-mapping-10000": "k: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
        "duplicate-keys": MINIMAL_CURRICULUM_HEAD + "title: {zh: y, en: y}\n",
        "python-tag": "k: !!python/object/apply:os.system ['echo pwned']\n",
        "file-50mb": None,
    }


def import_inputs() -> dict[str, str | None]:
    return {
        "json-deep-100000": "[" * 100_000 + "]" * 100_000,
        "json-huge-string": None,  # a 4 MB string in one row (40x the limit), written by write_inputs
        "json-nan-hours": json.dumps(
            {
                "format": "roadmap-export",
                "version": 1,
                "schema_version": 4,
                "tables": {
                    "cadence_entries": [
                        {
                            "id": 1,
                            "kind": "hours",
                            "on_date": "2026-01-05",
                            "hours": float("nan"),
                            "created_at": "2026-01-05T10:00:00+00:00",
                        }
                    ]
                },
            }
        ),
    }


def write_inputs(workdir: Path) -> list[tuple[str, str, Path]]:
    """(input name, target, path) for every probe; files are written here, outside the measured process."""
    workdir.mkdir(parents=True, exist_ok=True)
    probes = []
    for name, text in yaml_inputs().items():
        path = workdir / f"{name}.yaml"
        if text is None:
            with open(path, "w", encoding="utf-8") as fh:  # 50 MB of a valid-looking list
                line = "- " + "x" * 98 + "\n"
                fh.write(MINIMAL_CURRICULUM_HEAD + "items:\n")
                for _ in range(50 * 1024 * 1024 // len(line) + 1):
                    fh.write(line)
        else:
            path.write_text(text, encoding="utf-8")
        lab = workdir / "labs" / name
        lab.mkdir(parents=True, exist_ok=True)
        spec = lab / "lab.yaml"
        if spec.exists() or spec.is_symlink():
            spec.unlink()
        spec.symlink_to(path)
        probes += [(name, "curriculum load", path), (name, "curriculum validate", path), (name, "lab.yaml", lab)]
    for name, text in import_inputs().items():
        path = workdir / f"{name}.json"
        if text is None:
            row = {
                "id": 1,
                "title": "x" * (4 * 1024 * 1024),
                "title_key": "x",
                "status": "to-read",
                "added_on": "2026-01-05",
            }
            text = json.dumps(
                {"format": "roadmap-export", "version": 1, "schema_version": 4, "tables": {"papers": [row]}}
            )
        path.write_text(text, encoding="utf-8")
        probes.append((name, "roadmap import", path))
    return probes


# The measured process: imports first, then caps its address space, then probes.
_CHILD = r"""
import gc, json, os, resource, sys, time
from pathlib import Path

from roadmap_cli.curriculum.loader import check_curriculum, load_curriculum
from roadmap_cli.errors import RoadmapError
from roadmap_cli.labs.spec import load_lab
from roadmap_cli.cli import main
import roadmap_cli.portable.rowcheck, roadmap_cli.portable.archive, roadmap_cli.store.tables  # noqa: F401 (imports off the clock)
import contextlib, io
with contextlib.redirect_stderr(io.StringIO()):
    try:
        main(["import", "/nonexistent/warm-up.json"])  # first call: the db commands' imports, off the clock
    except SystemExit:
        pass

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # MB
    return 0.0

size = status("VmSize") * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (int(size + 2**30), int(size + 2**30)))
can_reset = os.access("/proc/self/clear_refs", os.W_OK)

def run(target, path):
    if target == "curriculum load":
        load_curriculum(Path(path))
        return None
    if target == "curriculum validate":
        report = check_curriculum(Path(path))
        return report.errors[0] if report.errors else None
    if target == "lab.yaml":
        load_lab(Path(path))
        return None
    if target == "roadmap import":
        import io, contextlib
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                main(["import", path])
            except SystemExit as exc:
                if exc.code not in (0, None):
                    text = err.getvalue()
                    return text if text.count("\n") == 1 and "Traceback" not in text else None
        return None

for name, target, path in json.loads(sys.stdin.read()):
    gc.collect()
    if can_reset:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # VmHWM := current RSS
    before = status("VmRSS")
    start = time.perf_counter()
    refused, message = False, None
    try:
        message = run(target, path)
        refused = message is not None
    except RoadmapError as exc:
        refused, message = True, (exc.details[0] if exc.details else exc.message)
    except BaseException as exc:  # a crash: MemoryError, RecursionError, ... is what the probe looks for
        message = f"CRASH {type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.perf_counter() - start
    peak = (status("VmHWM") - before) if can_reset else float("nan")
    print(json.dumps({"input": name, "target": target, "refused": refused, "message": (message or "").strip()[:300],
                      "seconds": seconds, "peak_mb": peak}), flush=True)
"""


def run_probes(workdir: Path, env: dict | None = None) -> list[dict]:
    probes = write_inputs(workdir)
    home = workdir / "home"
    child_env = dict(os.environ if env is None else env, ROADMAP_HOME=str(home), ROADMAP_LANG="en", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps([(n, t, str(p)) for n, t, p in probes]),
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env,
    )
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(records) != len(probes):
        raise AssertionError(f"probe process ended early (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return records


def table(records: list[dict]) -> str:
    lines = [
        f"{'input':<20} {'reader':<20} {'refused':<8} {'seconds':>8} {'t/limit':>8} {'peak MB':>8} {'m/limit':>8}  message"
    ]
    for r in records:
        lines.append(
            f"{r['input']:<20} {r['target']:<20} {'yes' if r['refused'] else 'NO':<8} {r['seconds']:>8.3f} "
            f"{r['seconds'] / TIME_LIMIT_S:>8.2f} {r['peak_mb']:>8.1f} {r['peak_mb'] / MEMORY_LIMIT_MB:>8.2f}  "
            f"{r['message'][:90]}"
        )
    worst_t = max(r["seconds"] for r in records)
    worst_m = max(r["peak_mb"] for r in records)
    lines.append(
        f"{len(records)} probes, {sum(r['refused'] for r in records)} clean refusals; worst time "
        f"{worst_t:.3f} s ({worst_t / TIME_LIMIT_S:.2f} of the {TIME_LIMIT_S} s limit), worst peak "
        f"{worst_m:.1f} MB ({worst_m / MEMORY_LIMIT_MB:.2f} of the {MEMORY_LIMIT_MB:.0f} MB limit)"
    )
    return "\n".join(lines)
