"""A learner printing a flood costs neither RAM nor disk (issue 19 item 9,
issue 12 item 2): output is drained as it comes and only a bounded tail is
kept, in the grader process (learner output) and in the engine (grader
output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures_labs"
FLOOD_MB = 200


def test_bounded_tail_keeps_only_the_end() -> None:
    from roadmap_cli.grading_kit.boundedlog import BoundedTail

    tail = BoundedTail(cap=64 * 1024)
    line = b"x" * 1023 + b"\n"
    for i in range(FLOOD_MB * 1024):  # 200 MB in 1 KiB writes
        tail.feed(line)
    tail.feed(b"the end\n")
    assert tail.size <= 64 * 1024 + len(line)
    assert tail.total == FLOOD_MB * 1024 * 1024 + 8
    assert tail.text().endswith("the end\n") and "earlier bytes of output dropped" in tail.text()
    big = BoundedTail(cap=10)
    big.feed(b"0123456789abcdef")
    assert big.bytes() == b"6789abcdef"


def test_a_learner_printing_200_mb_is_graded_with_bounded_memory(tmp_path: Path) -> None:
    env = dict(
        os.environ, ROADMAP_LABS_DIR=str(FIXTURES / "labs"), ROADMAP_DEVICE="cpu", ROADMAP_HOME=str(tmp_path / "home")
    )
    ws = tmp_path / "ws"
    roadmap = [sys.executable, "-m", "roadmap_cli"]
    subprocess.run(
        [*roadmap, "lab", "start", "adder", "--dir", str(ws)], env=env, check=True, stdout=subprocess.DEVNULL
    )
    (ws / "adder.py").write_text(
        textwrap.dedent(f"""
        import sys
        PRINTED = []

        def add(a, b):
            if not PRINTED:   # once per learner process: {FLOOD_MB} MB to stdout and stderr
                chunk = "y" * (1 << 20)
                for _ in range({FLOOD_MB // 2}):
                    print(chunk)
                    print(chunk, file=sys.stderr)
                PRINTED.append(1)
            return a + b
    """)
    )
    # A fresh wrapper process measures the grade alone: ru_maxrss of RUSAGE_CHILDREN
    # is the largest waited-for descendant (roadmap, the supervisor, the grader,
    # the learner process) over that process's life.
    wrapper = (
        "import resource, subprocess, sys\n"
        "proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.stdout.write(proc.stdout)\n"
        "sys.exit(proc.returncode)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, *roadmap, "grade", "--part", "add", "--json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    peak_kb = int(proc.stderr.strip().splitlines()[-1])
    data = json.loads(proc.stdout)["data"]
    assert proc.returncode == 0 and data["outcome"] == "part-passed", proc.stdout[-2000:]
    print(f"peak RSS of the grade's processes: {peak_kb / 1024:.0f} MB")
    assert peak_kb < 150 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
    assert len(proc.stdout) < 1_000_000
    assert not [p for p in ws.rglob("*") if p.is_file() and p.stat().st_size > 1_000_000]
