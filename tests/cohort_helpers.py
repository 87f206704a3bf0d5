"""What the cohort tests on a real PostgreSQL share (test_cohort_queue.py, test_cohort_roles.py,
test_cohort_verified.py): act as a login, a raw psycopg connection as a login, a learner's login made
by `roadmap cohort add-learner`."""

from __future__ import annotations


def as_login(monkeypatch, url: str) -> None:
    """The next commands run as the login of `url` (DATABASE_URL), with a fresh context."""
    from roadmap_cli import context

    monkeypatch.setenv("DATABASE_URL", url)
    context.reset()


def sql(url: str):
    """A raw autocommit psycopg connection as the login of `url` (what a learner could do with psql)."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return psycopg.connect(
        host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database, autocommit=True
    )


def add_learner(run_cli, cohort: dict, name: str) -> str:
    """`roadmap cohort add-learner NAME` as the instructor; the role is dropped with the cohort fixture.
    Returns the learner's DATABASE_URL."""
    result = run_cli("cohort", "add-learner", name, "--json")
    assert result.exit_code == 0, result
    cohort["learners"].append(name)
    return result.json()["data"]["database_url"]
