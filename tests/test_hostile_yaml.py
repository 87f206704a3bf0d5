"""Bounded YAML everywhere (issue 12 item 1, issue 19 item 11).

Billion laughs, 10,000-deep nesting, a 50 MB file, duplicate keys and
unsafe tags, fed to every reader of YAML (curriculum load, curriculum
validate, lab.yaml) in a process with a capped address space: each is
refused with `file:line:col` in at most 0.5 s and 200 MB (the numbers are
printed by bench/bench_hostile.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hostile_probes import MEMORY_LIMIT_MB, TIME_LIMIT_S, run_probes
from roadmap_cli.formats.yamlsafe import MAX_DEPTH, YamlProblem, load_yaml


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[dict]:
    return run_probes(tmp_path_factory.mktemp("hostile"))


def test_every_hostile_input_is_refused_quickly_and_small(records):
    assert len(records) >= 27
    for r in records:
        assert r["refused"], r
        assert not r["message"].startswith("CRASH"), r
        assert r["seconds"] <= TIME_LIMIT_S, r
        if r["peak_mb"] == r["peak_mb"]:  # NaN where /proc/self/clear_refs is not writable
            assert r["peak_mb"] <= MEMORY_LIMIT_MB, r


def test_yaml_refusals_name_file_line_and_column(records):
    for r in records:
        if r["target"] != "roadmap import":
            assert re.search(r"\.yaml:\d+:\d+: ", r["message"]), r


def test_limits_at_their_edges():
    nested = "k:\n" + "- " * (MAX_DEPTH - 1) + "x\n"  # a mapping + MAX_DEPTH-1 sequences: at the limit
    assert load_yaml(nested)
    with pytest.raises(YamlProblem, match="nesting deeper"):
        load_yaml("k:\n" + "- " * MAX_DEPTH + "x\n")
    with pytest.raises(YamlProblem, match="anchors and aliases") as info:
        load_yaml("a: 1\nb: &x 2\n")
    assert (info.value.line, info.value.col) == (2, 4)
    with pytest.raises(YamlProblem, match="limited to") as info:
        load_yaml("a: 1\n", max_bytes=3)
    with pytest.raises(YamlProblem, match="duplicate key 'c'") as info:
        load_yaml("a: 1\nb: {c: 1, c: 2}\na: 3\n")
    assert (info.value.line, info.value.col) == (2, 11)
    assert info.value.lines("f.yaml") == [
        "f.yaml:2:11: duplicate key 'c' (YAML would keep only the last one)",
        "f.yaml:3:1: duplicate key 'a' (YAML would keep only the last one)",
    ]
    with pytest.raises(YamlProblem, match="single YAML document"):
        load_yaml("a: 1\n---\nb: 2\n")
    assert load_yaml("") is None and load_yaml("a: [1, {b: c}]\n") == {"a": [1, {"b": "c"}]}


def test_validate_and_init_give_one_verdict_on_duplicate_keys(run_cli, tmp_path: Path):
    from roadmap_cli.paths import default_curriculum_path

    text = default_curriculum_path().read_text(encoding="utf-8")
    first_key = next(line for line in text.splitlines() if line.startswith("title:"))
    path = tmp_path / "dup.yaml"
    path.write_text(text + first_key + "\n", encoding="utf-8")
    validate = run_cli("curriculum", "validate", str(path))
    init = run_cli("init", "--use-curriculum", str(path))
    assert validate.exit_code == 2 and init.exit_code == 2, (validate, init)
    assert "duplicate key 'title'" in validate.stdout + validate.stderr
    assert "duplicate key 'title'" in init.stdout + init.stderr
