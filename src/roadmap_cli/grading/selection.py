"""Which of a lab's parts a grade runs: those this device can grade (a part
that needs CUDA is not graded here without it), and those `--test` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roadmap_cli.errors import UserError
from roadmap_cli.labs.device import DeviceInfo

if TYPE_CHECKING:  # pragma: no cover - the spec's pydantic models are not needed to start pytest (labs/plan.py)
    from roadmap_cli.labs.spec import LabSpec


def gradable_parts(spec: LabSpec, device: DeviceInfo) -> list[str]:
    return [p.id for p in spec.parts if device.cuda or not p.needs_cuda]


def parts_of_tests(spec: LabSpec, tests: list[str]) -> list[str]:
    """The parts the node ids of `--test` belong to; an id of no part is a user mistake."""
    from roadmap_cli.labs.nodeids import part_for

    parts: list[str] = []
    for nodeid in tests:
        part = part_for(nodeid, spec.part_prefixes())
        if part is None:
            owned = next((p.id for p in spec.parts for prefix in p.tests if prefix.startswith(nodeid)), None)
            part = owned
        if part is None:
            files = sorted({t.split("::")[0] for p in spec.parts for t in p.tests})
            raise UserError(
                f"test {nodeid!r} is in no part of {spec.id}: node ids are relative to the grader's "
                f"tests/ folder, e.g. {files[0]}::test_name (files: {', '.join(files)})"
            )
        if part not in parts:
            parts.append(part)
    return parts
