"""Every enumerated column of the store, defined once.

The engine writes these values (grading/results.py, grading/grade.py,
tracker/progress.py, research/, quiz/) and `roadmap import` accepts exactly these
(portable/rowcheck.py): both read them from here, so a value the engine can store is a
value an export can bring back (issue 36: `watch` recorded "interrupted"
attempts that import refused). tests/test_store_values.py stores one row per
value listed here, exports, imports and compares.

Plain tuples, no imports: `roadmap status` and the grade's fast path load this.
"""

from __future__ import annotations

# grade_attempts.outcome: how the whole run ended (grading/results.py).
# "interrupted": Ctrl-C, or `roadmap watch` cancelled the run (a save, or quitting).
ATTEMPT_OUTCOMES = ("passed", "failed", "error", "timeout", "crash", "interrupted")
# Outcomes that say nothing about the learner's code: never part of a best score or a passed part.
UNCOUNTED_OUTCOMES = ("timeout", "interrupted")
UNCOUNTED_SQL = "(" + ", ".join(f"'{o}'" for o in UNCOUNTED_OUTCOMES) + ")"  # for `outcome NOT IN ...`

# roadmap_submissions.status (PostgreSQL only, store/queue.py; not exported): a submission in the cohort's queue.
# "done": the worker graded it and recorded an attempt (whose outcome may be "failed": a test failed);
# "not-graded": the worker could not grade it at all (an unreadable snapshot, a grader error): no attempt.
# "failed" is an attempt's word only (migration 12 renamed the queue's old 'failed').
SUBMISSION_STATUSES = ("queued", "running", "done", "not-graded")

# grade_test_results.outcome: one test (grading/plugin.py's pytest outcomes, then the engine's own:
# crashed/timeout when the child died while it ran, not-run when it never started).
TEST_OUTCOMES = ("passed", "failed", "error", "skipped", "crashed", "timeout", "not-run")

# grade_attempts.parts[].status: one part in one attempt (grading/results.py).
# not-graded-here: needs a CUDA GPU this machine lacks; not-run: another part was selected (--part),
# -x stopped first, a filter matched none of its tests, or the run was interrupted; focused: -k/--test
# ran some of its tests and they passed (never a passed part).
PART_STATUSES = ("passed", "failed", "skipped", "not-graded-here", "not-run", "focused")
# The statuses of a part this attempt graded (passed, or graded and not passed).
GRADED_PART_STATUSES = ("passed", "failed", "skipped")
# The statuses of a gradable part this attempt left out: the attempt is a part attempt.
LEFT_OUT_PART_STATUSES = ("not-run", "focused")

# grade_attempts.sandbox: "strong" behind the OS wall (bubblewrap), "weak" the in-process sandbox
# only (grading_kit/oswall.py); NULL: recorded before migration 7.
SANDBOXES = ("strong", "weak")

# grade_attempts.graded_on: NULL (this machine), a remote's name (`grade --on NAME`), or
# WORKER_PREFIX + the cohort worker's name (grading/queue.py).
WORKER_PREFIX = "worker:"
# A remote's name (grading/remote/registry.py adds only names that match; an import accepts only them).
REMOTE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$"

# checkpoint_progress.source: SELF_SOURCES, or LAB_SOURCE_PREFIX + "<lab>/<part>" (the part that proved it),
# or in a cohort SELF_GRADED_SOURCE_PREFIX + "<lab>/<part>" (a part the learner's own machine graded: a claim
# until a verified grade proves it; store/roles.py).
SELF_SOURCES = ("self", "self (forced)")
LAB_SOURCE_PREFIX = "lab:"
SELF_GRADED_SOURCE_PREFIX = "self-graded:"

# settings.key of a learner's settings (`roadmap init`; rowcheck.SETTING_RULES says what each value must be).
# The database-wide scope (learner '') also holds "learner": the home's pinned learner id (store/learners.py).
SETTING_KEYS = ("start_date", "weekly_hours", "lang", "curriculum")

# papers.status (research/papers.py); COUNTED ones count for the cadence on read_on.
PAPER_STATUSES = ("to-read", "reading", "read", "reproduced")
COUNTED_PAPER_STATUSES = ("read", "reproduced")
# papers.metadata_source: the registry the fetched fields came from (research/fetch.py); NULL: never fetched.
METADATA_SOURCES = ("arxiv", "crossref", "datacite")

# cadence_entries.kind (research/entries.py): the logged items, and study hours.
ENTRY_KINDS = ("reproduction", "experiment", "benchmark", "report", "blog", "oss", "workshop-paper", "hours")

# review_cards.item / review_logs.item: "<kind>:<id>"; review_logs.source, review_logs.rating (FSRS).
REVIEW_ITEM_KINDS = ("checkpoint", "question")
REVIEW_SOURCES = ("quiz", "review")
REVIEW_RATINGS = (1, 2, 3, 4)  # again, hard, good, easy


def checkpoint_source_problem(source: object) -> str | None:
    """Why `source` is not a checkpoint_progress.source the engine writes, or None."""
    if source in SELF_SOURCES:
        return None
    for prefix in (LAB_SOURCE_PREFIX, SELF_GRADED_SOURCE_PREFIX):
        if isinstance(source, str) and source.startswith(prefix) and "/" in source[len(prefix) :]:
            return None
    return (
        f"source {source!r} is not one of {', '.join(SELF_SOURCES)}, {LAB_SOURCE_PREFIX}<lab>/<part> or "
        f"{SELF_GRADED_SOURCE_PREFIX}<lab>/<part>"
    )
