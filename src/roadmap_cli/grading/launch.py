"""How a grader process starts (grading/runner.py's GradeJob starts it): the
interpreter's argv (isolated, no `site`, bytecode only from a private cache),
the supervisor in front of it, our own pytest config, and its environment
(nothing of the user's pytest set-up, no database credential). The warm
graders and dev check's warm learner are started with the same flags and
environment.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from roadmap_cli.grading.isolation import warm_learner_view
from roadmap_cli.labs.device import DeviceInfo

if TYPE_CHECKING:  # pragma: no cover
    from roadmap_cli.grading.warm import WarmGraders, WarmLearners
    from roadmap_cli.labs.spec import LabSpec

# Our own pytest config: the workspace's pytest.ini/conftest.py/pyproject are never read.
PYTEST_INI = "[pytest]\naddopts =\npython_files = test_*.py\n"
SUPERVISOR = Path(__file__).with_name("_supervisor.py")
# Variables a grader process must not inherit from the user's shell.
_DROP_ENV = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "TRITON_INTERPRET",
    "ROADMAP_RESULTS",
    "ROADMAP_PARTS",
    "ROADMAP_SECRET_SEED",
    "ROADMAP_GRADE_FD",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "ROADMAP_WARM_LEARNER_FD",
    "ROADMAP_WARM_LEARNER_ROOT",
)


def pycache_args() -> list[str]:
    """`-X pycache_prefix=DIR`: the grader reads and writes bytecode only in a
    cache of its own (kept across grades, or torch would be compiled again
    every time); `-B` (nothing written) when no such folder can be made."""
    from roadmap_cli.grading.manifest import pycache_dir

    where = pycache_dir()
    return ["-X", f"pycache_prefix={where}"] if where is not None else ["-B"]


def grader_python(code: str) -> list[str]:
    """argv for the grader's interpreter running `code`: isolated (-I), and
    with no `site` (-S): no .pth file runs, whoever wrote it (a weak grade's
    learner code can write site-packages); sys.path is the standard library
    and exactly the folders `site` would add (grading_kit/oswall.py
    `site_paths`), fixed by the engine. Bytecode only from the grader's
    private cache (pycache_args)."""
    from roadmap_cli.grading_kit.oswall import site_paths

    boot = f"import sys; sys.path.extend({site_paths()!r}); " + code
    return [sys.executable, "-I", "-S", *pycache_args(), "-u", "-c", boot]


# Set for a grader whose learner processes are walled: it enters the grade's own network before anything else
# (grading/plugin.py reads it at import; grading_kit/oswall.enter_grade_network).
GRADE_NETWORK_VAR = "ROADMAP_GRADE_NETWORK"

PYTEST_MAIN = "import runpy; sys.argv[0] = 'pytest'; runpy.run_module('pytest', run_name='__main__', alter_sys=True)"


# A grade never opens the database: no credential for it reaches a grader (nor, through it, learner code). libpq
# reads every PG* variable (PGPASSWORD, PGPASSFILE, PGSERVICEFILE, ...); DATABASE_URL holds roadmap's own.
_CREDENTIAL_ENV = ("DATABASE_URL",)
_CREDENTIAL_PREFIX = "PG"


def is_credential_var(name: str) -> bool:
    return name in _CREDENTIAL_ENV or name.startswith(_CREDENTIAL_PREFIX)


def grader_env(device: DeviceInfo) -> dict:
    """Every grader process's environment on this device, less what is per
    grade: also the environment a warm grader (grading/warm.py) starts with."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV and not is_credential_var(k)}
    env.update(
        ROADMAP_DEVICE="cuda" if device.cuda else "cpu",
        # Only our plugin: third-party plugins (e.g. hypothesis, ~0.5 s) stay out of
        # the grader unless a test imports them itself.
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    if not device.cuda:
        env["TRITON_INTERPRET"] = "1"  # set before triton is imported: kernels run on CPU tensors
    else:
        # What graders ask of the GPU (bf16 only from capability 8, the device table), from the engine's own
        # probe: a grader that asked torch would open a CUDA context of its own (grading_kit/placement.py).
        env["ROADMAP_GPU_NAME"] = device.name
        if device.capability:
            env["ROADMAP_GPU_CAPABILITY"] = device.capability
    return env


def warm_graders(device: DeviceInfo) -> "WarmGraders":
    """A warm grader (grading/warm.py) for many grades on `device`, started
    with the same interpreter flags and environment as a cold grader."""
    from roadmap_cli.grading.warm import WarmGraders

    return WarmGraders(grader_env(device), grader_python)


def warm_learners(specs: list["LabSpec"], device: DeviceInfo) -> Optional["WarmLearners"]:
    """A warm learner for dev check's grades of `specs` on `device`, with the
    environment a learner process gets there; None without the OS wall (a
    warm learner only ever runs behind it)."""
    from roadmap_cli.grading.warm import WarmLearners
    from roadmap_cli.grading_kit import oswall
    from roadmap_cli.grading_kit.sandbox import KEEP_ENV, walled_env

    try:
        if oswall.status()[0] != oswall.STRONG:
            return None
    except oswall.WallUnavailable:
        return None
    env = {k: v for k, v in grader_env(device).items() if k in KEEP_ENV or k.startswith("LC_")}
    # What learner_env sets for every learner that glibc or Python read only at start-up.
    env.setdefault("MALLOC_ARENA_MAX", "4")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TRITON_HOME", None)
    env.update(walled_env({}))  # its own empty HOME and name, as every learner behind the wall
    root = os.path.realpath(tempfile.mkdtemp(prefix="roadmap-check-"))
    # The labs' adapter shims, outside the root: the learners see them read-only (GradeJob makes each there).
    shims = os.path.realpath(tempfile.mkdtemp(prefix="roadmap-shims-"))
    return WarmLearners(env, warm_learner_view(specs, root, shims), root, shims=shims)


def child_env(workspace: Path, device: DeviceInfo, config_fd: int) -> dict:
    env = grader_env(device)
    env.update(
        ROADMAP_WORKSPACE=str(workspace),
        ROADMAP_GRADE_FD=str(config_fd),  # a descriptor number, read once and closed by the plugin
    )
    return env
