"""A worker's submission builds its GPU code where the wall lets it, inside the submission's temporary folder
(red team X1/P3).

The worker gives each submission's grade a HOME of its own; the grader computed the learner's
TORCH_EXTENSIONS_DIR/TRITON_CACHE_DIR from that HOME while the engine's wall granted folders under the worker
user's ~/.cache/roadmap/gpu: load_inline/Triton could not build, and what learner code wrote into the granted
folders stayed on the worker's disk after the grade. Now the engine names the GPU cache once for both, and a
worker's is in the submission's temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_weak_sandbox_judge import RIGHT_ADD, workspace  # noqa: F401 - fixtures (wall: conftest.py)


@pytest.mark.parametrize("named", [True, False], ids=["worker", "another-home-only"])
def test_a_submissions_gpu_build_folders_are_the_walls_and_lie_in_its_temp_folder(
    run_cli, wall, workspace: Path, tmp_path: Path, named: bool
) -> None:
    """worker: grade_home_env names the cache in the submission's folder. another-home-only: a grade whose
    environment only moves HOME still builds where the wall lets it (the engine's cache)."""
    from roadmap_cli.grading.queue import grade_home_env
    from roadmap_cli.grading.runner import GradeJob
    from roadmap_cli.labs.spec import find_lab

    scratch = tmp_path / "roadmap-submission-x"
    scratch.mkdir()
    (workspace / "adder.py").write_text(
        "import os\n"
        "for var in ('TRITON_CACHE_DIR', 'TORCH_EXTENSIONS_DIR'):\n"
        "    with open(os.path.join(os.environ[var], 'probe'), 'w') as fh:\n"
        "        fh.write('x')\n"
        "with open('where.txt', 'w') as fh:\n"
        "    fh.write(os.environ['TRITON_CACHE_DIR'])\n" + RIGHT_ADD
    )
    env = grade_home_env(scratch)
    if not named:
        del env["ROADMAP_GPU_CACHE"]
    job = GradeJob(find_lab("adder"), workspace, parts=["add"], extra_env=env).start()
    run = job.finish()
    assert run.sandbox == "strong"
    assert run.parts[0].status == "passed", run.parts[0].message
    where = (workspace / "where.txt").read_text()
    if named:
        assert where.startswith(str(scratch / "home" / ".cache" / "roadmap" / "gpu") + os.sep), where
    else:
        from roadmap_cli.grading_kit import learner_extras

        assert where.startswith(str(learner_extras.cache_root()) + os.sep), where
    assert os.path.exists(os.path.join(where, "probe"))
