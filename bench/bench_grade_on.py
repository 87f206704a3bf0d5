"""`roadmap grade --on` (warm remote, loopback ssh) vs a local `roadmap grade` of the same lab, same run.

A throwaway sshd on 127.0.0.1 (tests/sshd.py) is the remote; its python is this
interpreter (it imports torch: the managed venv reuses it, nothing is
downloaded). The fixture lab `adder` (tests/fixtures_labs) is graded, as in
tests/test_grade_on.py. One warm-up grade --on installs the venv; then N rounds
alternate a local grade and a grade --on, each a fresh `python -m roadmap_cli`
process as a learner runs it, with one file changed before each (so each
--on also sends a file). Prints the medians and the ratio (budget: 1.3x).

    python bench/bench_grade_on.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from sshd import Server, find_sshd

    sshd = find_sshd()
    if sshd is None:
        sys.exit("no sshd here (install openssh-server)")
    labs = REPO / "tests" / "fixtures_labs" / "labs"
    with tempfile.TemporaryDirectory(prefix="bench-grade-on-") as tmp:
        tmp_path = Path(tmp)
        far_root = tmp_path / "far"
        server = Server(sshd, extra_config=(f"SetEnv ROADMAP_REMOTE_ROOT={far_root} ROADMAP_LABS_DIR={labs} "
                                            "ROADMAP_DEVICE=cpu ROADMAP_DEV_UNLOCKED=1",)).start()
        try:
            env = dict(os.environ, ROADMAP_HOME=str(tmp_path / "home"), ROADMAP_LABS_DIR=str(labs),
                       ROADMAP_DEVICE="cpu", ROADMAP_DEV_UNLOCKED="1", ROADMAP_SSH_CONFIG=str(server.client_config),
                       ROADMAP_LANG="en")
            ws = tmp_path / "ws"

            def roadmap(*argv: str, cwd: Path = tmp_path) -> float:
                start = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "roadmap_cli", *argv], cwd=cwd, env=env,
                                      capture_output=True, text=True, timeout=600)
                elapsed = time.perf_counter() - start
                if proc.returncode not in (0, 1):
                    sys.exit(f"roadmap {' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
                return elapsed

            roadmap("lab", "start", "adder", "--dir", str(ws))
            roadmap("remote", "add", "loop", server.url, "--python", sys.executable)
            first = roadmap("grade", "--on", "loop", cwd=ws)
            print(f"first grade --on (sends the wheel, sets up the venv): {first:.2f} s")
            local, remote = [], []
            for i in range(args.rounds):
                (ws / "adder.py").write_text(f"def add(a, b):\n    return a + b  # round {i}\n")
                local.append(roadmap("grade", cwd=ws))
                (ws / "adder.py").write_text(f"def add(a, b):\n    return a + b  # round {i} again\n")
                remote.append(roadmap("grade", "--on", "loop", cwd=ws))
            lm, rm = statistics.median(local), statistics.median(remote)
            print(f"local grade:         median {lm:.2f} s  ({', '.join(f'{t:.2f}' for t in local)})")
            print(f"grade --on (warm):   median {rm:.2f} s  ({', '.join(f'{t:.2f}' for t in remote)})")
            print(f"ratio --on / local:  {rm / lm:.2f}x (budget 1.30x)")
            roadmap("remote", "remove", "loop")  # closes the shared ssh connection the grades left open
        finally:
            server.stop()


if __name__ == "__main__":
    main()
