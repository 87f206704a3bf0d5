"""Loading a curriculum: file:line:col errors, the lookup methods, the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from roadmap_cli.curriculum import Text, load_curriculum, validate_curriculum
from roadmap_cli.errors import NotFoundError, UserError, ValidationError

MINIMAL = """\
format_version: 1
title: {zh: 测试, en: Test}
final_goal: {zh: 目标, en: Goal}
cadence:
  weekly_hours: {min: 10, max: 15}
stages:
  - number: 1
    id: one
    title: {zh: 一, en: One}
    goal: {zh: 一, en: One}
    planned_weeks: 2
    checkpoints:
      - id: s1-a
        kind: explain
        text: {zh: 甲, en: A}
  - number: 2
    id: two
    title: {zh: 二, en: Two}
    goal: {zh: 二, en: Two}
    planned_weeks: 3
    checkpoints:
      - id: s2-b
        kind: build
        text: {zh: 乙, en: B}
        proved_by: [{lab: no-such-lab, part: p1}]
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ValidationError) as info:
        load_curriculum(path)
    assert info.value.message == f"{path}: {len(info.value.details)} problem(s)"
    # validate reports the same errors (plus warnings, which load ignores)
    assert [p for p in validate_curriculum(path) if ": warning: " not in p] == info.value.details
    return [d.replace(f"{path}:", "") for d in info.value.details]


def test_minimal_file_loads(tmp_path):
    cur = load_curriculum(write(tmp_path, MINIMAL))
    assert [s.id for s in cur.stages] == ["one", "two"]
    assert cur.reading_list == [] and cur.plans == []


@pytest.mark.parametrize(
    "old, new, expected",
    [
        # unknown key: points at the key, suggests the right one
        (
            "    planned_weeks: 2\n",
            "    planned_weeks: 2\n    planed: 3\n",
            "12:5: stages[0]: unknown key 'planed' (did you mean 'planned_weeks'?)",
        ),
        # wrong type: points at the value
        ("planned_weeks: 2", "planned_weeks: two", "11:20: stages[0].planned_weeks: input should be a valid integer"),
        # a plain string where {zh, en} is expected
        ("title: {zh: 一, en: One}", "title: One", "9:12: stages[0].title: expected {zh: ..., en: ...}, got 'One'"),
        # missing key: points at the mapping that lacks it
        ("    planned_weeks: 3\n", "", "16:5: stages[1]: missing required key 'planned_weeks'"),
        # wrong literal
        (
            "kind: explain",
            "kind: explian",
            "14:15: stages[0].checkpoints[0].kind: Input should be 'explain' or 'build'",
        ),
        # a build checkpoint without proof
        ("        proved_by: [{lab: no-such-lab, part: p1}]\n", "", "23:15: build checkpoint 's2-b' needs proved_by"),
        # unknown format
        ("format_version: 1", "format_version: 2", "1:17: unsupported format_version 2"),
        # an unquoted arXiv id is a float in YAML
        (
            "cadence:",
            "reading_list:\n  - {id: x, title: X, arxiv: 2305.13245, stage: 1, kind: paper}\ncadence:",
            "5:30: reading_list[0].arxiv: expected a string, got the number 2305.13245 (quote it",
        ),
    ],
)
def test_schema_errors_have_line_and_column(tmp_path, old, new, expected):
    assert old in MINIMAL
    problems = problems_of(tmp_path, MINIMAL.replace(old, new, 1))
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    problems = problems_of(tmp_path, MINIMAL.replace("goal: {zh: 一, en: One}", "goal: {zh: 一, en: One"))
    assert problems == [
        "11:18: YAML syntax error: did not find expected ',' or '}' (while parsing a flow mapping at 10:11)"
    ]


def test_duplicate_ids_point_at_the_repeat(tmp_path):
    text = MINIMAL.replace("      - id: s2-b", "      - id: s1-a").replace("    id: two", "    id: one")
    problems = problems_of(tmp_path, text)
    assert problems == [
        "17:9: duplicate stage id 'one' (first used at stages[0].id)",
        "22:13: duplicate checkpoint id 's1-a' (first used at stages[0].checkpoints[0].id)",
    ]


def test_dangling_references(tmp_path):
    text = MINIMAL + (
        "milestones:\n"
        "  - {id: m1, number: 1, title: {zh: x, en: x}, stages: [1, 7]}\n"
        "reading_list:\n"
        "  - {id: r1, title: R, arxiv: '1706.03762', stage: 11, kind: paper, phase: nope/p1}\n"
    )
    text = text.replace(
        "    planned_weeks: 2\n",
        "    planned_weeks: 2\n    resources:\n      - {title: {zh: x, en: x}, kind: book, reading: missing}\n",
    )
    assert problems_of(tmp_path, text) == [
        "13:54: unknown reading 'missing'",
        "29:60: milestone 'm1' refers to unknown stage 7",
        "31:52: reading 'r1' refers to unknown stage 11",
        "31:76: reading 'r1' refers to unknown phase 'nope/p1' (write plan-id/phase-id)",
    ]


def test_every_problem_is_reported_not_just_the_first(tmp_path):
    text = MINIMAL.replace("planned_weeks: 2", "planned_weeks: -1").replace("kind: explain", "kind: maybe")
    assert len(problems_of(tmp_path, text)) == 2


def test_empty_and_non_mapping_files(tmp_path):
    assert problems_of(tmp_path, "") == ["1:1: the file is empty (expected a curriculum mapping)"]
    assert problems_of(tmp_path, "- a\n")[0].startswith("1:1: the top level must be a mapping")


def test_unsafe_yaml_tags_are_refused(tmp_path):
    problems = problems_of(tmp_path, "!!python/object/apply:os.system ['echo hi']\n")
    assert problems[0].startswith("1:1: YAML syntax error: could not determine a constructor")


def test_duplicate_yaml_keys_are_reported_by_validate(tmp_path):
    path = write(tmp_path, MINIMAL.replace("    planned_weeks: 2\n", "    planned_weeks: 2\n    planned_weeks: 3\n"))
    assert f"{path}:12:5: duplicate key 'planned_weeks' (YAML would keep only the last one)" in validate_curriculum(
        path
    )


def test_missing_lab_is_a_warning_not_an_error(tmp_path):
    path = write(tmp_path, MINIMAL)
    assert validate_curriculum(path) == [
        f"{path}:25:27: warning: checkpoint 's2-b': lab 'no-such-lab' does not exist yet"
    ]


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="curriculum file not found"):
        load_curriculum(tmp_path / "nope.yaml")
    with pytest.raises(UserError, match="not found"):
        validate_curriculum(tmp_path / "nope.yaml")


def test_lookups(tmp_path):
    cur = load_curriculum(write(tmp_path, MINIMAL))
    assert cur.stage(2).id == "two" and cur.stage("2").id == "two" and cur.stage("one").number == 1
    with pytest.raises(NotFoundError, match=r"unknown stage 'onee' \(did you mean 'one'\?\)"):
        cur.stage("onee")
    with pytest.raises(NotFoundError):
        cur.stage(3)
    assert cur.checkpoint("s2-b").kind == "build"
    with pytest.raises(NotFoundError, match="did you mean 's2-b'"):
        cur.checkpoint("s2-c")
    assert [c.id for c in cur.all_checkpoints()] == ["s1-a", "s2-b"]
    assert cur.stage_of("s2-b").number == 2
    assert [c.id for c in cur.checkpoints_proved_by("no-such-lab", "p1")] == ["s2-b"]
    assert cur.checkpoints_proved_by("no-such-lab", "p2") == []


def test_text_and_models_are_frozen():
    text = Text(zh="中", en="mid")
    assert text.get("zh") == "中" and text.get("en") == "mid"
    with pytest.raises(Exception):
        text.en = "x"
    with pytest.raises(Exception):
        Text(zh="中", en="mid", fr="milieu")


# --- the cache -------------------------------------------------------------


def test_cache_hit_skips_parsing(tmp_path, monkeypatch):
    from roadmap_cli.curriculum import loader

    path, cache_dir = write(tmp_path, MINIMAL), tmp_path / "cache"
    first = load_curriculum(path, cache_dir=cache_dir)
    assert len(list(cache_dir.glob("curriculum-*.json"))) == 1

    def boom(*args, **kwargs):
        raise AssertionError("parsed the YAML despite a cache hit")

    monkeypatch.setattr(loader, "_problems", boom)
    assert load_curriculum(path, cache_dir=cache_dir) == first


def test_a_changed_file_is_read_again(tmp_path):
    path, cache_dir = write(tmp_path, MINIMAL), tmp_path / "cache"
    assert load_curriculum(path, cache_dir=cache_dir).title.en == "Test"
    path.write_text(MINIMAL.replace("en: Test", "en: Changed"), encoding="utf-8")
    assert load_curriculum(path, cache_dir=cache_dir).title.en == "Changed"
    # ... and an invalid edit is reported, not hidden by the old cache entry
    path.write_text(MINIMAL.replace("planned_weeks: 2", "planned_weeks: x"), encoding="utf-8")
    with pytest.raises(ValidationError):
        load_curriculum(path, cache_dir=cache_dir)


def test_a_corrupt_cache_file_is_ignored_and_rewritten(tmp_path):
    path, cache_dir = write(tmp_path, MINIMAL), tmp_path / "cache"
    load_curriculum(path, cache_dir=cache_dir)
    (entry,) = cache_dir.glob("curriculum-*.json")
    entry.write_text("{not json")
    assert load_curriculum(path, cache_dir=cache_dir).stage(1).id == "one"
    assert entry.read_text().startswith('{"format_version":1')


def test_an_unwritable_cache_dir_only_costs_speed(tmp_path):
    path = write(tmp_path, MINIMAL)
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    assert load_curriculum(path, cache_dir=blocker / "cache").stage(2).id == "two"


def test_the_example_in_docs_is_a_valid_curriculum(tmp_path):
    doc = Path(__file__).resolve().parents[1] / "docs" / "curriculum.md"
    example = doc.read_text(encoding="utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    cur = load_curriculum(write(tmp_path, example))
    assert cur.stage("transformer-basics").checkpoints[1].proved_by[0].part == "attention"


def test_a_part_missing_from_an_existing_lab_is_a_warning(tmp_path, monkeypatch):
    labs = tmp_path / "labs"
    (labs / "no-such-lab").mkdir(parents=True)
    (labs / "no-such-lab" / "lab.yaml").write_text("parts:\n  - id: p2\n  - id: p3\n", encoding="utf-8")
    monkeypatch.setattr("roadmap_cli.paths.labs_root", lambda: labs)
    path = write(tmp_path, MINIMAL)
    assert validate_curriculum(path) == [
        f"{path}:25:46: warning: checkpoint 's2-b': lab 'no-such-lab' has no part 'p1' (parts: p2, p3)"
    ]
    (labs / "no-such-lab" / "lab.yaml").write_text("parts:\n  - id: p1\n", encoding="utf-8")
    assert validate_curriculum(path) == []
