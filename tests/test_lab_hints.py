"""Every hint of every real lab names the part(s) it is for.

`roadmap lab hint` picks hints by the part that failed last; a hint without
`parts:` would be handed out for any failure (gpu-architecture's occupancy
hints after coalescing failures), so the labs may not have any."""

from __future__ import annotations

from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parent.parent / "labs"
LAB_IDS = sorted(p.parent.name for p in LABS.glob("*/lab.yaml"))


@pytest.mark.parametrize("lab", LAB_IDS)
def test_every_hint_names_existing_parts(lab: str) -> None:
    from roadmap_cli.labs.spec import load_lab

    spec = load_lab(LABS / lab)
    parts = {p.id for p in spec.parts}
    for i, hint in enumerate(spec.hints, 1):
        assert hint.parts, f"{lab}: hint {i} has no `parts:` ({hint.en[:50]}...)"
        assert set(hint.parts) <= parts, f"{lab}: hint {i} names unknown parts {set(hint.parts) - parts}"


def test_the_labs_are_found() -> None:
    assert "gpu-architecture" in LAB_IDS and len(LAB_IDS) >= 9
