"""labs/plan.py: the lab as `roadmap grade` needs it to start pytest early,
read without pydantic; never the authority (prestart.validated compares it with
the validated spec)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roadmap_cli.labs import plan
from roadmap_cli.grading import options, prestart
from roadmap_cli.labs.spec import find_lab, lab_ids

FIXTURES = Path(__file__).parent / "fixtures_labs"


@pytest.mark.parametrize("lab_id", lab_ids())
def test_every_lab_reads_as_a_plan_equal_to_its_validated_spec(lab_id):
    spec = find_lab(lab_id)
    read = plan.read_plan(spec.root)
    assert read is not None and plan.fingerprint(read) == plan.fingerprint(spec)
    assert read.solution_sources() == spec.solution_sources()


def test_forbidden_sources_are_the_same_from_a_plan_and_from_the_spec():
    from roadmap_cli.grading.isolation import forbidden_sources

    spec = find_lab("minigpt")
    listed = forbidden_sources(spec)
    assert listed == forbidden_sources(plan.read_plan(spec.root))
    every = {str(find_lab(i).solution_dir) for i in lab_ids()}
    assert every <= set(listed)  # every lab's reference, not only this one's


@pytest.mark.parametrize(
    "text",
    [
        "id: x\nparts: []\n",  # no part
        "id: 3\nparts: [{id: a, tests: [t.py]}]\n",  # an id that is not text
        "id: x\nparts: [{id: a, tests: [t.py], needs_cuda: 'yes'}]\n",  # a flag that is not a bool
        "id: x\ntime_limit_s: true\nparts: [{id: a, tests: [t.py]}]\n",  # a bool is not a time
        "id: x\nmemory_limit_mb: 1.5\nparts: [{id: a, tests: [t.py]}]\n",
        "id: x\nparts: [{id: a}]\n",  # no tests
        "- just\n- a list\n",
        "id: x\nparts: [{id: a, tests: [t.py]}]\nbad: [unclosed\n",  # not YAML
        "a: &anchor 1\nb: *anchor\nid: x\nparts: [{id: a, tests: [t.py]}]\n",  # aliases: yamlsafe refuses them
    ],
)
def test_a_spec_that_does_not_read_cleanly_gives_no_plan(tmp_path: Path, text: str):
    (tmp_path / "lab.yaml").write_text(text)
    assert plan.read_plan(tmp_path) is None


def test_the_defaults_are_the_specs():
    fields = {f.name: f for f in dataclasses.fields(plan.LabPlan)}
    from roadmap_cli.labs.spec import LabSpec

    assert fields["time_limit_s"].default == LabSpec.model_fields["time_limit_s"].default
    assert fields["memory_limit_mb"].default == LabSpec.model_fields["memory_limit_mb"].default


@pytest.fixture
def solved_adder(adder_workspace: Path) -> Path:  # adder_workspace: tests/conftest.py
    (adder_workspace / "adder.py").write_text((FIXTURES / "labs" / "adder" / "solution" / "adder.py").read_text())
    (adder_workspace / "mul.py").write_text((FIXTURES / "kernels" / "mul.py").read_text())
    yield adder_workspace
    prestart.discard()


def test_a_plan_that_disagrees_with_the_spec_is_never_graded(solved_adder, monkeypatch):
    """A plan read differently from the validated spec (here: another time
    limit) starts a job the normal path refuses: it is killed and the spec's
    own job runs."""
    real = plan.read_plan
    monkeypatch.setattr(plan, "read_plan", lambda d: dataclasses.replace(real(d), time_limit_s=7.0))
    assert prestart.start(options.read([]))
    early = prestart.take(None, part=None, timeout=None)
    assert early is not None and early.timeout == 7.0
    assert prestart.validated(early, find_lab("adder")) is None and early.proc.poll() is not None


def test_a_claimed_job_carries_the_validated_spec(solved_adder):
    from roadmap_cli.labs.spec import LabSpec

    assert prestart.start(options.read([]))
    assert isinstance(prestart._started.spec, plan.LabPlan)
    spec = find_lab("adder")
    claimed = prestart.validated(prestart.take(None, part=None, timeout=None), spec)
    assert claimed.proc is not None and claimed.spec is spec and isinstance(claimed.spec, LabSpec)
    claimed.abort()


def test_pytest_starts_before_pydantic_or_typer_is_imported(solved_adder):
    probe = (
        "import sys\n"
        "from roadmap_cli.grading import options, prestart\n"
        "ok = prestart.start(options.read([]))\n"
        "print(ok, sorted(m for m in ('pydantic', 'typer', 'rich', 'sqlalchemy') if m in sys.modules))\n"
        "prestart.discard()\n"
    )
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=solved_adder, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "True []", proc.stdout + proc.stderr


def test_a_plan_is_read_again_when_its_lab_yaml_changes(tmp_path):
    """read_plan caches by the file's signature (dev check grades ~500 times in
    one process): an edited lab.yaml must never be served from the cache."""
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "lab.yaml").write_text("id: x\nparts: [{id: a, tests: [t.py]}]\n")
    first = plan.read_plan(lab)
    assert first is not None and plan.read_plan(lab) is first  # unchanged: the same object
    (lab / "lab.yaml").write_text("id: x\ntime_limit_s: 7\nparts: [{id: a, tests: [t.py]}, {id: b, tests: [u.py]}]\n")
    second = plan.read_plan(lab)
    assert second is not None and [p.id for p in second.parts] == ["a", "b"] and second.time_limit_s == 7
    (lab / "lab.yaml").write_text("- not a lab\n")
    assert plan.read_plan(lab) is None
    (lab / "lab.yaml").unlink()
    assert plan.read_plan(lab) is None
