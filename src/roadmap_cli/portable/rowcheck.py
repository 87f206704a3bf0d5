"""What a stored row must look like, checked in two places.

1. `validate_export(...)`: every row of a `roadmap import` file, before
   anything is written. The first problem refuses the whole file with its
   JSON path, e.g. `$.tables.papers[3].rating: rating 99 is not within 1..5`.
   The rules are the ones the commands enforce when they write (statuses,
   ratings, hours per day, dates, lab ids) plus what the readers rely on
   (attempt `parts` is a JSON list of {id, points, max_points, status}).
2. `first_bad_row(store)`: a few SQL queries that find a row already in the
   database which would crash a reader (written by an older roadmap, by hand
   with sqlite3, or by a bug). They scan every row (~0.1 s on a well-filled
   database), so they run only after a command crashed: `explain_crash`,
   called by `cli.main`, turns the traceback into one line naming the row
   and how to repair it, exit 3. A crash no stored row explains keeps its
   traceback (it is a bug).
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta
from typing import Any, Iterable, Optional

from roadmap_cli.errors import StoreError, UserError
from roadmap_cli.store import values

MAX_TEXT = 100_000  # characters in one text value (a long note is ~10 KB)
MAX_ID = 500  # characters in an id, key, tag or path-like value
MAX_JSON_DEPTH = 20  # nesting inside a JSON column (parts/perf need 3)
MAX_ROWS = 1_000_000

# The enumerated columns' values are the engine's own (store/values.py): what a grade can store, an import accepts.
LAB_OUTCOMES = values.ATTEMPT_OUTCOMES
TEST_OUTCOMES = values.TEST_OUTCOMES
PART_STATUSES = values.PART_STATUSES
DATE_COLUMNS = ("on_date", "read_on", "added_on")  # local dates, YYYY-MM-DD
TIMESTAMP_COLUMNS = (
    "completed_at",
    "created_at",
    "started_at",
    "shown_at",
    "applied_at",
    "taken_at",
    "reviewed_at",
    "updated_at",
)
# Rows numbered per learner (migration 12; research/numbers.py): each learner's numbers are unique and ≥ 1.
NUMBERED_TABLES = ("papers", "cadence_entries")
SHORT_TEXT = {
    "key",
    "checkpoint_id",
    "source",
    "lab_id",
    "kind",
    "status",
    "outcome",
    "part_id",
    "tag",
    "arxiv_id",
    "doi",
    "device",
    "device_capability",
    "torch_version",
    "triton_version",
    "commit_sha",
    "grader_sha256",
    "bibtex_key",
    "learner",
    "item",
    "due",
    "due_after",
    "sandbox",
    "graded_on",
}


class RowProblem(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


# ---------------------------------------------------------------- import: Python rules


def json_depth(value: Any) -> int:
    """Nesting depth without recursion (a hostile document cannot overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _type_problem(column, value: Any) -> Optional[str]:
    """The column's SQL type, as JSON: str / int / finite number / bool."""
    if value is None:
        return None if column.nullable else "is required (null)"
    import sqlalchemy as sa

    kind_type = getattr(column.type, "impl", column.type)  # SQLModel's AutoString decorates a String
    kind = {sa.Boolean: bool, sa.Integer: int, sa.Float: float, sa.String: str}
    kind = next((py for sql, py in kind.items() if isinstance(kind_type, sql)), None)
    if kind is None:
        return None
    if kind is bool:
        return None if isinstance(value, bool) else f"{value!r} is not true/false"
    if kind is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else f"{value!r} is not a whole number"
    if kind is float:
        return None if _is_number(value) else f"{value!r} is not a finite number"
    if kind is str:
        if not isinstance(value, str):
            return f"{value!r} is not a string"
        limit = MAX_ID if column.name in SHORT_TEXT else MAX_TEXT
        if len(value) > limit:
            return f"is {len(value)} characters long (at most {limit})"
    return None


def _date_problem(column: str, value: str, today: date) -> Optional[str]:
    try:
        day = date.fromisoformat(value)
    except ValueError:
        return f"{value!r} is not a date (YYYY-MM-DD)"
    if len(value) != 10:
        return f"{value!r} is not a date (YYYY-MM-DD)"
    if day > today + timedelta(days=1):  # a day of slack for time zones
        return f"{value} is in the future"
    return None


def _timestamp_problem(value: str, now: datetime) -> Optional[str]:
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return f"{value!r} is not an ISO timestamp"
    if stamp.tzinfo is not None and stamp > now + timedelta(days=1):
        return f"{value} is in the future"
    return None


def _json_list(value: str, required: tuple[str, ...], numbers: tuple[str, ...]) -> Optional[str]:
    """A JSON column holding a list of objects with `required` keys."""
    try:
        items = json.loads(value)
    except RecursionError:
        return "nests too deeply"
    except ValueError as exc:
        return f"is not JSON ({exc})"
    if not isinstance(items, list):
        return f"is not a JSON list (got {type(items).__name__})"
    if json_depth(items) > MAX_JSON_DEPTH:
        return f"nests deeper than {MAX_JSON_DEPTH} levels"
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"item {i} is not an object"
        missing = [key for key in required if key not in item]
        if missing:
            return f"item {i} lacks {', '.join(missing)}"
        for key in numbers:
            if key in item and not _is_number(item[key]):
                return f"item {i}: {key} {item[key]!r} is not a finite number"
    return None


SETTING_RULES = {  # one rule per values.SETTING_KEYS (tests/test_store_values.py)
    "start_date": lambda v: None if isinstance(v, str) and _date_ok(v) else "must be a date string (YYYY-MM-DD)",
    "weekly_hours": lambda v: None if _is_number(v) and 0 < v <= 100 else "must be a number of hours within 0..100",
    "lang": lambda v: None if v in ("en", "zh") else 'must be "en" or "zh"',
    "curriculum": lambda v: (
        None if v is None or isinstance(v, str) and len(v) <= 4096 else "must be a file path (string)"
    ),
}


def _learner_rule(value) -> Optional[str]:
    from roadmap_cli.store.learners import _NAME

    return (
        None
        if isinstance(value, str) and _NAME.fullmatch(value)
        else "must be a learner id (letters, digits, . _ @ + -)"
    )


def _date_ok(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


def _row_rules(table: str, row: dict, ctx: dict) -> Iterable[tuple[str, str]]:
    """(column, problem) for the domain rules of one row (types already checked)."""
    get = row.get
    if table == "settings":
        try:
            value = json.loads(get("value"))
        except RecursionError:
            yield "value", "nests too deeply"
            return
        except ValueError:
            yield "value", f"{get('value')!r} is not JSON"
            return
        rule = SETTING_RULES.get(get("key"))
        if get("learner") == "" and get("key") == "learner":  # the home's pinned learner id (store/learners.py)
            rule = _learner_rule
        if rule is None:
            yield "key", f"{get('key')!r} is not a setting roadmap knows ({', '.join(SETTING_RULES)})"
        elif rule(value):
            yield "value", f"{get('key')} {rule(value)}, got {value!r}"
    if "lab_id" in row and get("lab_id") is not None and ctx["lab_ids"] is not None:
        if get("lab_id") not in ctx["lab_ids"]:
            yield "lab_id", f"{get('lab_id')!r} is not a lab id"
    if get("stage") is not None and ctx["stages"]() is not None and get("stage") not in ctx["stages"]():
        yield "stage", f"stage {get('stage')} does not exist in the curriculum"
    if table == "papers":
        if get("status") not in values.PAPER_STATUSES:
            yield "status", f"status {get('status')!r} is not one of {', '.join(values.PAPER_STATUSES)}"
        if get("rating") is not None and not 1 <= get("rating") <= 5:
            yield "rating", f"rating {get('rating')} is not within 1..5"
        if get("year") is not None and not 1000 <= get("year") <= ctx["today"].year + 1:
            yield "year", f"year {get('year')} is not a plausible year"
        if not (get("title") or "").strip():
            yield "title", "title is empty"
        if get("metadata_source") is not None and get("metadata_source") not in values.METADATA_SOURCES:
            yield (
                "metadata_source",
                (
                    f"metadata_source {get('metadata_source')!r} is not one of "
                    f"{', '.join(values.METADATA_SOURCES)} (or null)"
                ),
            )
    if table == "cadence_entries":
        from roadmap_cli.research.entries import MAX_HOURS_PER_DAY

        if get("kind") not in values.ENTRY_KINDS:
            yield "kind", f"kind {get('kind')!r} is not one of {', '.join(values.ENTRY_KINDS)}"
        hours = get("hours")
        if get("kind") == "hours" and hours is None:
            yield "hours", "an hours entry needs hours"
        if hours is not None and not 0 <= hours <= MAX_HOURS_PER_DAY:
            yield "hours", f"hours {hours} is not within 0..{MAX_HOURS_PER_DAY:g}"
    if table == "grade_attempts":
        if get("outcome") not in LAB_OUTCOMES:
            yield "outcome", f"outcome {get('outcome')!r} is not one of {', '.join(LAB_OUTCOMES)}"
        if get("sandbox") is not None and get("sandbox") not in values.SANDBOXES:
            yield "sandbox", f"sandbox {get('sandbox')!r} is not one of {', '.join(values.SANDBOXES)} (or null)"
        if get("graded_on") is not None and _graded_on_problem(get("graded_on")):
            yield "graded_on", _graded_on_problem(get("graded_on"))
        for column in ("duration_s", "score", "max_score"):
            if get(column) is not None and get(column) < 0:
                yield column, f"{column} {get(column)} is negative"
        if get("score") is not None and get("max_score") is not None and get("score") > get("max_score"):
            yield "score", f"score {get('score')} is more than max_score {get('max_score')}"
        problem = _json_list(get("parts"), ("id", "points", "max_points", "status"), ("points", "max_points"))
        if problem:
            yield "parts", f"parts {problem}"
        else:
            for i, part in enumerate(json.loads(get("parts"))):
                if not isinstance(part["id"], str) or part["status"] not in PART_STATUSES:
                    yield "parts", f"parts item {i}: id must be a string and status one of {', '.join(PART_STATUSES)}"
                elif not 0 <= part["points"] <= part["max_points"]:
                    yield (
                        "parts",
                        f"parts item {i}: points {part['points']} is not within 0..max_points {part['max_points']}",
                    )
        problem = _json_list(get("perf"), (), ())
        if problem:
            yield "perf", f"perf {problem}"
    if table == "grade_test_results" and get("outcome") not in TEST_OUTCOMES:
        yield "outcome", f"outcome {get('outcome')!r} is not one of {', '.join(TEST_OUTCOMES)}"
    if table == "checkpoint_progress" and values.checkpoint_source_problem(get("source")):
        yield "source", values.checkpoint_source_problem(get("source"))
    if table == "lab_hints" and get("hint_index") is not None and get("hint_index") < 0:
        yield "hint_index", f"hint_index {get('hint_index')} is negative"
    if table in ("quiz_attempts", "review_cards", "review_logs"):
        from roadmap_cli.quiz.records import row_problems

        yield from row_problems(table, row)
    if table == "lab_workspaces" and get("path") is not None and not get("path").startswith("/"):
        yield "path", f"path {get('path')!r} is not an absolute path"


def _graded_on_problem(value: str) -> Optional[str]:
    """graded_on: a remote's name (`grade --on NAME`) or worker:<name> (the cohort queue's worker)."""
    import re

    if re.match(values.REMOTE_NAME_PATTERN, value) or (
        value.startswith(values.WORKER_PREFIX) and value[len(values.WORKER_PREFIX) :].strip()
    ):
        return None
    return f"graded_on {value!r} is not a remote's name nor {values.WORKER_PREFIX}<name>"


def validate_export(tables_data: dict, tables: dict, *, lab_ids: Optional[set], stages) -> None:
    """Raise UserError with the JSON path of the first problem in the export's rows.

    `stages` is the set of stage numbers, or a function returning it (called
    only when a row has a stage: loading the curriculum is not free)."""
    today = date.today()
    now = datetime.now().astimezone()
    known: list = []

    def stage_numbers():
        if not known:
            known.append(stages() if callable(stages) else stages)
        return known[0]

    ctx = {"lab_ids": lab_ids, "stages": stage_numbers, "today": today}
    keys_seen: dict[str, set] = {}
    numbers_seen: dict[str, set] = {}  # (learner, number): a learner's papers and entries are numbered 1..n once
    for name in sorted(tables_data):
        rows = tables_data[name]
        base = f"$.tables.{name}"
        if not isinstance(rows, list):
            raise UserError(f"{base}: table {name}: expected a list of rows, got {type(rows).__name__}")
        if len(rows) > MAX_ROWS:
            raise UserError(f"{base}: {len(rows)} rows is more than {MAX_ROWS}")
        table = tables[name]
        columns = table.columns
        pk = [c.name for c in table.primary_key.columns]
        seen = keys_seen.setdefault(name, set())
        for i, row in enumerate(rows):
            where = f"{base}[{i}]"
            if not isinstance(row, dict):
                raise UserError(f"{where}: table {name}, row {i + 1}: expected an object, got {type(row).__name__}")
            extra = sorted(set(row) - set(columns.keys()))
            if extra:
                raise UserError(f"{where}: table {name}: unknown column(s) {', '.join(extra)}")
            for column in columns:
                if column.name in ("imported", "verified"):
                    continue  # set by the import itself (an imported attempt is never verified)
                if column.name == "learner" and "learner" not in row:
                    continue  # an export from before migration 5: the importing learner's rows
                if column.name == "number" and "number" not in row and name in NUMBERED_TABLES:
                    continue  # an export from before migration 12: the number is the id (archive.with_learner_numbers)
                if column.name == "learner" and isinstance(row["learner"], str) and row["learner"]:
                    from roadmap_cli.store.learners import validate_learner

                    try:
                        validate_learner(row["learner"])
                    except UserError as exc:
                        raise UserError(f"{where}.learner: {exc.message}") from None
                if column.name not in row and not column.nullable:
                    raise UserError(
                        f"{where}.{column.name}: table {name}: missing {column.name} (required); nothing was imported"
                    )
                problem = _type_problem(column, row.get(column.name))
                if problem:
                    raise UserError(f"{where}.{column.name}: {column.name} {problem}")
                value = row.get(column.name)
                if value is None:
                    continue
                if column.name in DATE_COLUMNS:
                    problem = _date_problem(column.name, value, today)
                elif column.name in TIMESTAMP_COLUMNS:
                    problem = _timestamp_problem(value, now)
                if problem:
                    raise UserError(f"{where}.{column.name}: {column.name} {problem}")
            key = tuple(row.get(c) for c in pk)
            if key in seen:
                raise UserError(f"{where}: duplicate {'/'.join(pk)} {key if len(key) > 1 else key[0]!r} in {name}")
            seen.add(key)
            if name in NUMBERED_TABLES:
                number = row.get("number", row.get("id"))
                if not isinstance(number, int) or isinstance(number, bool) or number < 1:
                    raise UserError(f"{where}.number: number {number!r} is not a whole number ≥ 1")
                owner = (row.get("learner"), number)
                if owner in numbers_seen.setdefault(name, set()):
                    whose = f" of learner {owner[0]!r}" if owner[0] is not None else ""
                    raise UserError(f"{where}.number: two rows{whose} in {name} have number {number}")
                numbers_seen[name].add(owner)
            for column, problem in _row_rules(name, row, ctx):
                raise UserError(f"{where}.{column}: {problem}")
    # References between tables (the database would refuse them only halfway through).
    papers = {k[0] for k in keys_seen.get("papers", ())}
    attempts = {k[0] for k in keys_seen.get("grade_attempts", ())}
    for name, column, targets in (
        ("paper_tags", "paper_id", papers),
        ("cadence_entries", "paper_id", papers),
        ("grade_test_results", "attempt_id", attempts),
    ):
        for i, row in enumerate(tables_data.get(name, [])):
            if row.get(column) is not None and row[column] not in targets:
                raise UserError(f"$.tables.{name}[{i}].{column}: {column} {row[column]} refers to no row of the export")


# ---------------------------------------------------------------- rows already stored: SQL checks

_NUM = "('integer', 'real')"
# (table, condition that is true for a row a reader would crash on, what is wrong)
_BAD_ROW_SQL = [
    ("settings", "key", "NOT json_valid(value)", "value is not JSON"),
    (
        "settings",
        "key",
        "key = 'weekly_hours' AND json_valid(value) AND json_type(value) NOT IN " + _NUM,
        "weekly_hours is not a number",
    ),
    (
        "settings",
        "key",
        "key IN ('start_date', 'lang') AND json_valid(value) AND json_type(value) != 'text'",
        "the value is not a string",
    ),
    (
        "settings",
        "key",
        "key = 'start_date' AND json_valid(value) AND json_type(value) = 'text' "
        "AND date(json_extract(value, '$')) IS NOT json_extract(value, '$')",
        "start_date is not a date",
    ),
    (
        "grade_attempts",
        "id",
        "typeof(parts) != 'text' OR NOT json_valid(parts) OR json_type(parts) != 'array'",
        "parts is not a JSON list",
    ),
    (
        "grade_attempts",
        "id",
        "typeof(perf) != 'text' OR NOT json_valid(perf) OR json_type(perf) != 'array'",
        "perf is not a JSON list",
    ),
    (
        "grade_attempts",
        "id",
        "CASE WHEN json_valid(parts) AND json_type(parts) = 'array' THEN EXISTS ("
        "SELECT 1 FROM json_each(grade_attempts.parts) e WHERE e.type != 'object' "
        "OR json_type(e.value, '$.id') IS NOT 'text' "
        "OR json_type(e.value, '$.points') NOT IN " + _NUM + " OR json_type(e.value, '$.points') IS NULL "
        "OR json_type(e.value, '$.max_points') NOT IN " + _NUM + " OR json_type(e.value, '$.max_points') IS NULL) "
        "ELSE 0 END",
        "a part lacks id, points or max_points",
    ),
    (
        "grade_attempts",
        "id",
        f"typeof(score) NOT IN {_NUM} OR typeof(max_score) NOT IN {_NUM} OR typeof(duration_s) NOT IN {_NUM}",
        "score, max_score or duration_s is not a number",
    ),
    (
        "grade_attempts",
        "id",
        "typeof(started_at) != 'text' OR datetime(started_at) IS NULL",
        "started_at is not a timestamp",
    ),
    ("grade_test_results", "id", f"typeof(duration_s) NOT IN {_NUM}", "duration_s is not a number"),
    ("cadence_entries", "id", "typeof(on_date) != 'text' OR date(on_date) IS NOT on_date", "on_date is not a date"),
    (
        "cadence_entries",
        "id",
        f"hours IS NOT NULL AND (typeof(hours) NOT IN {_NUM} OR hours < 0)",
        "hours is not a number ≥ 0",
    ),
    ("cadence_entries", "id", "kind = 'hours' AND hours IS NULL", "an hours entry has no hours"),
    ("cadence_entries", "id", "stage IS NOT NULL AND typeof(stage) != 'integer'", "stage is not a number"),
    (
        "papers",
        "id",
        "status NOT IN (" + ", ".join(f"'{s}'" for s in values.PAPER_STATUSES) + ")",
        "status is not one of " + ", ".join(values.PAPER_STATUSES),
    ),
    (
        "papers",
        "id",
        "read_on IS NOT NULL AND (typeof(read_on) != 'text' OR date(read_on) IS NOT read_on)",
        "read_on is not a date",
    ),
    ("papers", "id", "typeof(added_on) != 'text' OR date(added_on) IS NOT added_on", "added_on is not a date"),
    (
        "papers",
        "id",
        "rating IS NOT NULL AND (typeof(rating) != 'integer' OR rating NOT BETWEEN 1 AND 5)",
        "rating is not within 1..5",
    ),
    (
        "papers",
        "id",
        "(stage IS NOT NULL AND typeof(stage) != 'integer') OR (year IS NOT NULL AND typeof(year) != 'integer')",
        "stage or year is not a whole number",
    ),
    ("papers", "id", "typeof(number) != 'integer' OR number < 1", "number is not a whole number ≥ 1"),
    ("cadence_entries", "id", "typeof(number) != 'integer' OR number < 1", "number is not a whole number ≥ 1"),
    (
        "checkpoint_progress",
        "checkpoint_id",
        "typeof(completed_at) != 'text' OR datetime(completed_at) IS NULL",
        "completed_at is not a timestamp",
    ),
    ("lab_hints", "id", "typeof(hint_index) != 'integer'", "hint_index is not a whole number"),
    (
        "review_cards",
        "item",
        "typeof(card) != 'text' OR NOT json_valid(card) OR json_type(card, '$.due') IS NOT 'text'",
        "card is not an FSRS card (JSON with a due time)",
    ),
    (
        "quiz_attempts",
        "id",
        "typeof(correct) != 'integer' OR typeof(total) != 'integer' OR correct > total",
        "correct/total are not whole numbers with correct <= total",
    ),
]


def first_bad_row(store) -> Optional[str]:
    """'<table> row <key>: <what>' for the first stored row a reader would crash on, else None.

    Plain SQL (JSON1 and date functions): a handful of scans of small tables,
    well under a millisecond each for a learner's database."""
    import sqlalchemy as sa

    with store.connection() as conn:
        for table, key, condition, what in _BAD_ROW_SQL:
            found = conn.execute(sa.text(f"SELECT {key} FROM {table} WHERE {condition} LIMIT 1")).first()
            if found is not None:
                return f"{table} row {key}={found[0]!r}: {what}"
    return None


def explain_crash(exc: BaseException, store) -> Optional[StoreError]:
    """A StoreError naming the malformed stored row behind `exc`, or None.

    `store` is the one the crashed command already opened (None: it opened
    none, and nothing is opened here); any failure of the examination itself
    means "no".
    """
    if store is None or store.path is None:
        return None
    try:
        problem = first_bad_row(store)
    except Exception:  # the diagnosis must never hide the original error
        return None
    if problem is None:
        return None
    return StoreError(
        f"database {store.where} holds a malformed row ({problem}); repair it: "
        "`roadmap export -o fix.json`, correct or delete that row in the file, "
        f"then `roadmap import fix.json --replace` ({type(exc).__name__} while reading it)"
    )
