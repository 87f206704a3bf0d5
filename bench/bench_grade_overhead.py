"""The lab engine's own overhead per `roadmap grade`, against a bare pytest run
of the same tests, measured side by side (alternating) in this run.

    python bench/bench_grade_overhead.py                # the fake `adder` lab
    python bench/bench_grade_overhead.py cuda-matmul    # a real lab (its reference solution)

engine   = wall time of `roadmap grade ID --json` in a fresh process (CLI start,
           spec, device detection, git, the supervisor, the pytest child, the
           plugin and its sandboxed learner process, recording the attempt and
           checkpoints through store/lite.py);
baseline = wall time of `python -m pytest -q <the same test files>` with the
           same environment (workspace on PYTHONPATH, TRITON_INTERPRET=1 on CPU,
           plugin autoload off in both) and no engine.
overhead = engine - baseline (the budget in issue 3: <= 1.5 s on the 2-core box;
           issue 13 item 5: <= 0.8 s on the fixture lab).

    python bench/bench_grade_overhead.py --before 053fb57   # also the engine as of a git ref

before   = wall time of the same `roadmap grade` with the engine's source as of
           REF (`git archive REF src`, put first on PYTHONPATH): e.g. the engine
           before the learner sandbox. Printed as the ratio after / before
           (issue 19 target: <= 1.15x on the real labs).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE_LABS = REPO / "tests" / "fixtures_labs" / "labs"


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, int]:
    """(wall s, CPU s of the process and everything it waited for, exit code).

    CPU seconds are reported too because wall time on a shared, busy box
    mostly measures the other processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lab", nargs="?", default="adder", help="lab id (default: the fake engine-test lab 'adder')")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", metavar="REF", help="also time the engine as of this git ref (side by side)")
    args = parser.parse_args()

    env = dict(os.environ)
    if args.lab == "adder":
        env["ROADMAP_LABS_DIR"] = str(FAKE_LABS)
        os.environ["ROADMAP_LABS_DIR"] = str(FAKE_LABS)
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.device import detect_device
    from roadmap_cli.grading.selection import gradable_parts
    from roadmap_cli.labs.spec import find_lab

    spec = find_lab(args.lab)
    device = detect_device()
    with tempfile.TemporaryDirectory(prefix="roadmap-bench-") as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        env["ROADMAP_HOME"] = str(home)
        subprocess.run(
            [sys.executable, "-m", "roadmap_cli", "lab", "start", spec.id, "--dir", str(workspace)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        ws.write_solution(spec, workspace)

        parts = set(gradable_parts(spec, device))
        targets = [str(spec.tests_dir / p) for part in spec.parts if part.id in parts for p in part.tests]
        bare_env = dict(
            env,
            ROADMAP_WORKSPACE=str(workspace),
            PYTHONPATH=str(workspace),
            ROADMAP_DEVICE="cuda" if device.cuda else "cpu",
            PYTHONDONTWRITEBYTECODE="1",
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
            ROADMAP_SECRET_SEED="1",
        )
        if not device.cuda:
            bare_env["TRITON_INTERPRET"] = "1"
        engine_cmd = [sys.executable, "-m", "roadmap_cli", "grade", spec.id, "--json"]
        before_env = None
        if args.before:
            old_src = Path(tmp) / "before"
            old_src.mkdir()
            # The fixture lab's adapter changes with the engine: take both from REF.
            paths = ["src"] + (["tests/fixtures_labs"] if args.lab == "adder" else [])
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.before, *paths], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old_src)], input=archive, check=True)
            before_env = dict(env, PYTHONPATH=str(old_src / "src"))
            # A real lab: the same (current) lab folder for both engines.
            before_env["ROADMAP_LABS_DIR"] = (
                str(old_src / "tests" / "fixtures_labs" / "labs") if args.lab == "adder" else str(spec.root.parent)
            )
        bare_cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "roadmap_cli.grading.plugin",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(spec.tests_dir),
            *targets,
        ]

        engine, bare, engine_cpu, bare_cpu, before, before_cpu = [], [], [], [], [], []
        for i in range(args.repeats):
            # Alternate, so load from other processes hits all sides alike.
            e, ec, rc_e = timed(engine_cmd, workspace, env)
            b, bc, rc_b = timed(bare_cmd, workspace, bare_env)
            engine.append(e)
            bare.append(b)
            engine_cpu.append(ec)
            bare_cpu.append(bc)
            line = (
                f"run {i + 1}: engine {e:.2f}s wall {ec:.2f}s cpu (exit {rc_e})   "
                f"bare pytest {b:.2f}s wall {bc:.2f}s cpu (exit {rc_b})"
            )
            if before_env is not None:
                o, oc, rc_o = timed(engine_cmd, workspace, before_env)
                before.append(o)
                before_cpu.append(oc)
                line += f"   before {o:.2f}s wall {oc:.2f}s cpu (exit {rc_o})"
            print(line, flush=True)

    med = statistics.median
    me, mb, mec, mbc = med(engine), med(bare), med(engine_cpu), med(bare_cpu)
    load = os.getloadavg()[0]
    print(
        f"\nlab {spec.id} on {device.name}, {args.repeats} alternating runs (medians), "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"  {'':24} {'wall s':>8} {'cpu s':>8}")
    print(f"  {'roadmap grade':24} {me:8.2f} {mec:8.2f}")
    print(f"  {'bare python -m pytest':24} {mb:8.2f} {mbc:8.2f}")
    print(f"  {'engine overhead':24} {me - mb:+8.2f} {mec - mbc:+8.2f}   (issue 13 target: <= 0.8 s wall on 'adder')")
    print(f"  ratio engine / bare: {me / mb:.2f}x wall, {mec / mbc:.2f}x cpu")
    if before:
        mo, moc = med(before), med(before_cpu)
        print(f"  {'roadmap grade @ ' + args.before:24} {mo:8.2f} {moc:8.2f}")
        print(f"  ratio engine / before: {me / mo:.2f}x wall, {mec / moc:.2f}x cpu   (target: <= 1.15x)")


if __name__ == "__main__":
    main()
