"""What the engine tells a grade's plugin, once, through the config pipe: the
result channel's key and descriptor, the secret seed, the parts, and for the
learner process its limits, what it may not read or write, what lab code may
import, and its view behind the OS wall (grading/runner.py's GradeJob sends it).
"""

from __future__ import annotations

import json
from pathlib import Path

from roadmap_cli.grading.isolation import forbidden_sources, learner_shim, learner_view
from roadmap_cli.grading_kit.oswall import STRONG


# Learner-process memory (RLIMIT_AS) when lab.yaml sets no memory_limit_mb:
# torch + triton (interpreter) peak at ~0.8 GB of address space on CPU,
# leaving ~3 GB for the learner's tensors. Not applied with CUDA: the driver
# reserves tens of GB of virtual address space at initialisation.
DEFAULT_MEMORY_LIMIT_MB = 4096
LEARNER_NOFILE = 1024
# Processes the learner's tree may have at once behind the OS wall (RLIMIT_NPROC counts per user namespace there;
# the kernel exempts root, see grading_kit/oswall.py). gloo workers, a server and torch's threads fit well inside.
LEARNER_NPROC = 512


def grade_config(job, results_w: int) -> bytes:
    """The engine's config for the plugin (and, in "sandbox", for the learner process), for `job`, the
    GradeJob being started (its key, scratch folders and artefacts made)."""
    from roadmap_cli.grading import integrity, manifest

    spec, tests_dir = job.spec, job.spec.tests_dir
    memory = getattr(spec, "memory_limit_mb", None) or (None if job.device.cuda else DEFAULT_MEMORY_LIMIT_MB)
    # What the learner process sees of the grader: the adapter and the lab's declared learner-side files,
    # copied out of tests/ (never tests/ itself: it holds reference models and expected values).
    shims = getattr(job.learners, "shims", None) if job.learners is not None else None
    # Never inside the scratch folder: the learner writes there, and could swap the shim for a link to
    # anywhere before the next bwrap binds it (grading_kit/oswall.py `_mounts`).
    shim = learner_shim(spec, shims or job.shim_parent.name)
    config = {
        "key": job.key.hex(),
        "results_fd": results_w,
        "secret_seed": str(job.secret_seed),
        "parts": [{"id": p.id, "tests": p.tests} for p in spec.parts],
        "selected": job.selected,
        "stop_part_on_fail": job.stop_part_on_fail,
        "verbose": job.focus.verbose,
        "sandbox": {
            "workspace": str(job.workspace),
            "tests_dir": shim,
            "memory_limit_mb": memory,
            "nofile": LEARNER_NOFILE,
            "forbidden_read": forbidden_sources(spec),
            "forbidden_write": [
                str(tests_dir.resolve()),
                *(str(p) for p in integrity.GRADER_CODE),
                *(str(p) for p in [manifest.pycache_dir()] if p is not None),
            ],
            "preload": ["adapter"] if (Path(shim) / "adapter.py").is_file() else [],
            # What lab code may import and use: checked in the learner process before its first import.
            "lab_code": getattr(spec, "lab_code", None),
            "learner_side": [Path(name).stem for name in getattr(spec, "learner_side", ())],
            "grade_token": job.grade_token,
            # Behind the OS wall (bubblewrap) when it works here; None: the in-process sandbox only.
            # This grade's C++ builds, linked here by the grader (grading_kit/cpp_build.py): never the
            # whole cache, which holds other learners' compiled work.
            "artefacts": job.artefacts,
            "os_wall": (
                learner_view(spec, str(job.workspace), job.tmp.name, shim, job.artefacts, job.gpu_cache)
                if job.sandbox == STRONG
                else None
            ),
            "nproc": LEARNER_NPROC,
        },
    }
    return json.dumps(config).encode()
