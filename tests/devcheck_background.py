"""The one `dev check` over every lab, started in the background as soon as
collection is done, so it runs beside the other tests instead of after them
(test_labs_dev_check.py waits for it and reads its report). It is an `e2e`
test: .ci/run's `pytest -m e2e` runs it, beside the other end-to-end proofs,
after README's test command.

Why: the dev check is ~5 minutes on 2 cores, and most other tests spend their
time waiting on a subprocess, a socket or a database, leaving a core idle.
Started first and read last, the two overlap; nothing is skipped and the check
is the same command with the same flags. Its output goes to files (never a
pipe nobody reads until the end, which would stall it once full), and a
session that ends early (-x, Ctrl-C) kills it with the whole process group it
started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reaper import die_with_parent

TEST_NAME = "test_dev_check_every_lab"


@dataclass
class BackgroundDevCheck:
    proc: subprocess.Popen
    folder: Path

    def result(self, timeout: float) -> tuple[int, str, str]:
        """Wait for it; (exit code, stdout, stderr)."""
        code = self.proc.wait(timeout=timeout)
        return code, (self.folder / "stdout").read_text(), (self.folder / "stderr").read_text()

    def stop(self) -> None:
        """Kill it if it still runs (the session ended early), and remove its files."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> BackgroundDevCheck:
    folder = Path(tempfile.mkdtemp(prefix="roadmap-devcheck-"))
    env = dict(os.environ, ROADMAP_HOME=str(folder / "home"), PYTHONUNBUFFERED="1")
    env.pop("TRITON_INTERPRET", None)  # the engine decides, per grade run
    with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "roadmap_cli", "dev", "check", "--jobs", "2", "--json"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=folder,
            start_new_session=True,  # its own group: stop() kills every grade it started
            preexec_fn=die_with_parent,  # not Linux: stop() at the session's end still ends it
        )  # a pytest killed outright (no stop()) takes it along
    return BackgroundDevCheck(proc, folder)
