"""The profiling lab's starter fails as every other lab's does: "not implemented yet: FUNCTION
(see README.md, section ...)", the section named once, never a wrong-answer message such as
"0 spans named 'request'" about a function nobody has written yet."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_spans_starter_says_not_implemented_yet_naming_its_section_once(run_cli, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert run_cli("lab", "start", "profiling", "--dir", ws).exit_code == 0
    data = run_cli("grade", "profiling", "--part", "spans", "--json").json()["data"]
    failed = [t for t in data["tests"] if t["outcome"] == "failed"]
    assert failed, data["tests"]
    for t in failed:
        first = t["message"].splitlines()[0]
        assert (
            first == 'not implemented yet: handle_request_traced (see README.md, section "Part 4: OpenTelemetry spans")'
        ), (t["nodeid"], t["message"])
        assert t["message"].count("README.md") == 1, t["message"]
