"""`roadmap grade --on` (warm remote, loopback ssh) vs a local `roadmap grade` of the same lab, same run.

A throwaway sshd on 127.0.0.1 (tests/sshd.py, forwarding to unix sockets
allowed, as a stock sshd does) is the remote; its python is this interpreter
(it imports torch: the managed venv reuses it, nothing is downloaded). Two
labs, each with its own server and data home: the fixture lab `adder`
(tests/fixtures_labs, as in tests/test_grade_on.py) and a real one,
`gpu-architecture --part occupancy` (CPU-gradable). Per lab, one warm-up
grade --on installs the venv and starts the far agent
(grading/remote/daemon.py), a second one reaches it; then N rounds alternate
a local grade and a grade --on, each a fresh `python -m roadmap_cli` process
as a learner runs it, with one file changed before each (so each --on also
sends a file). Prints the medians, the ratio (budget: 1.3x), which path the
--on grades took, and the load average (other work on the machine skews
both sides alike, but not equally: say it with the figures).

    python bench/bench_grade_on.py [--rounds N] [--lab adder|gpu-architecture]... [--cold-far-graders] [--no-far-agent]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


LABS = {
    # lab: (fixture labs?, --part, the file changed before each grade)
    "adder": (True, None, "adder.py"),
    "gpu-architecture": (False, "occupancy", "occupancy.py"),
}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench(sshd: str, lab: str, rounds: int, cold_far: bool = False, no_agent: bool = False) -> None:
    from sshd import Server

    fixture, part, touched = LABS[lab]
    labs = REPO / "tests" / "fixtures_labs" / "labs"
    labs_env = f"ROADMAP_LABS_DIR={labs} " if fixture else ""
    part_args = ["--part", part] if part else []
    with tempfile.TemporaryDirectory(prefix="bench-grade-on-") as tmp:
        tmp_path = Path(tmp)
        far_root = tmp_path / "far"
        server = Server(
            sshd,
            forwarding="local",
            extra_config=(
                f"SetEnv ROADMAP_REMOTE_ROOT={far_root} {labs_env}ROADMAP_DEVICE=cpu ROADMAP_DEV_UNLOCKED=1"
                + (" ROADMAP_WARM_GRADERS=0" if cold_far else ""),
            ),
        ).start()
        try:
            env = dict(
                os.environ,
                ROADMAP_HOME=str(tmp_path / "home"),
                ROADMAP_DEVICE="cpu",
                ROADMAP_DEV_UNLOCKED="1",
                ROADMAP_SSH_CONFIG=str(server.client_config),
                ROADMAP_LANG="en",
            )
            env.pop("ROADMAP_LABS_DIR", None)
            env.pop("ROADMAP_FAR_AGENT", None)
            if no_agent:
                env["ROADMAP_FAR_AGENT"] = "0"  # every grade --on logs in, as before the far agent
            if fixture:
                env["ROADMAP_LABS_DIR"] = str(labs)
            ws = tmp_path / "ws"
            vias: list[str] = []

            def roadmap(*argv: str, cwd: Path = tmp_path) -> float:
                start = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-m", "roadmap_cli", *argv],
                    cwd=cwd,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                elapsed = time.perf_counter() - start
                if proc.returncode not in (0, 1):
                    sys.exit(f"roadmap {' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
                if "--on" in argv and "--json" in argv:
                    vias.append(json.loads(proc.stdout)["data"]["sent"]["via"])
                    if vias[-1] != "agent" and len(vias) > 1 and not no_agent:
                        print(f"  (a grade --on went through {vias[-1]}: {proc.stderr.strip()[:300]!r})")
                return elapsed

            roadmap("lab", "start", lab, "--dir", str(ws))
            roadmap("remote", "add", "loop", server.url, "--python", sys.executable)
            first = roadmap("grade", "--on", "loop", *part_args, "--json", cwd=ws)
            time.sleep(3)  # the far agent this grade started imports what it preloads (not timed)
            second = roadmap("grade", "--on", "loop", *part_args, "--json", cwd=ws)
            label = (
                f"{lab}{' --part ' + part if part else ''}{', far graders cold' if cold_far else ''}"
                f"{', no far agent' if no_agent else ''}"
            )
            print(
                f"[{label}] first grade --on (wheel, venv{'' if no_agent else ', starts the far agent'}): "
                f"{first:.2f} s; second: {second:.2f} s"
            )
            local, remote = [], []
            original = (ws / touched).read_text()
            print(f"  load average before: {_load()}")
            for i in range(rounds):
                (ws / touched).write_text(original + f"\n# round {i}\n")
                local.append(roadmap("grade", *part_args, "--json", cwd=ws))
                (ws / touched).write_text(original + f"\n# round {i} again\n")
                remote.append(roadmap("grade", "--on", "loop", *part_args, "--json", cwd=ws))
            print(f"  load average after:  {_load()}")
            lm, rm = statistics.median(local), statistics.median(remote)
            print(f"  local grade:         median {lm:.2f} s  ({', '.join(f'{t:.2f}' for t in local)})")
            print(f"  grade --on (warm):   median {rm:.2f} s  ({', '.join(f'{t:.2f}' for t in remote)})")
            print(f"  --on went through:   {', '.join(sorted(set(vias[2:])))} (first: {vias[0]}, second: {vias[1]})")
            print(f"  ratio --on / local:  {rm / lm:.2f}x (budget 1.30x)")
            roadmap("remote", "remove", "loop")  # stops the far agent, closes the shared ssh connection
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lab", action="append", choices=sorted(LABS), help="default: every lab above")
    parser.add_argument(
        "--cold-far-graders",
        action="store_true",
        help="the far agent starts each grader cold (ROADMAP_WARM_GRADERS=0 there), as a local "
        "grade does: what is left is the cost of the connection alone",
    )
    parser.add_argument(
        "--no-far-agent",
        action="store_true",
        help="every grade --on logs in and starts python there (ROADMAP_FAR_AGENT=0): the old path",
    )
    args = parser.parse_args()
    from sshd import find_sshd

    sshd = find_sshd()
    if sshd is None:
        sys.exit("no sshd here (install openssh-server)")
    for lab in args.lab or list(LABS):
        bench(sshd, lab, args.rounds, args.cold_far_graders, args.no_far_agent)


if __name__ == "__main__":
    main()
