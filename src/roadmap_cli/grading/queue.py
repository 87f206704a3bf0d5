"""The cohort's grading queue: `roadmap submit`, `roadmap worker`, `roadmap submissions`.

The queue is procrastinate's (store/queue.py makes its tables): a learner's
`submit` inserts a snapshot row into `roadmap_submissions`, whose trigger
defers the job in the same transaction; `worker` runs a procrastinate worker
whose task unpacks the snapshot into a temporary folder, grades it with the
same engine as `roadmap grade` (pre-check, then GradeJob: the supervisor,
the grader, the learner process behind the OS wall) and records the attempt
for the submitting learner with this machine's device.

Delivery is at least once; recording is exactly once:

- a worker killed mid-grade (kill -9) stops sending heartbeats; every other
  worker asks procrastinate for the stalled jobs (`get_stalled_jobs`: jobs
  in `doing` whose worker's heartbeat is older than --stalled-after) and
  puts them back (`retry_job`), so another worker grades them;
- the attempt is inserted in the same transaction that sets the
  submission's `attempt_id` (UNIQUE), after `SELECT ... FOR UPDATE` on the
  submission: a job run twice (a rescued job whose first worker was only
  slow, a crash after the commit) records the first result and no second.

Ctrl-C stops the worker: running grades are cancelled (nothing recorded),
their jobs go back to the queue (procrastinate's retry), the worker
unregisters. procrastinate is imported only here, inside functions.

The learner's side (submit, submissions) is grading/submissions.py.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import GraderError, StoreError, UserError
from roadmap_cli.grading.submissions import ensure_queue, instructor, require_server
from roadmap_cli.grading.submissions import submissions, submit  # noqa: F401 - cli/queue.py imports them from here
from roadmap_cli.store.values import WORKER_PREFIX as GRADED_ON_PREFIX  # grade_attempts.graded_on of a worker's attempt


# ---------------------------------------------------------------- the worker


def grade_home_env(scratch: Path) -> dict[str, str]:
    """A submission's grade gets a fresh, empty HOME of its own (and XDG folders inside it), never the
    instructor's: no ~/.pgpass, no dotfile, nothing an earlier submission left. The credentials themselves never
    leave this process: grader_env drops DATABASE_URL and PG* (grading/launch.py), and every process is started
    with only the descriptors it is passed."""
    home = scratch / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    # Its GPU build folders (torch extensions, Triton cache) too: in the submission's temporary folder, removed
    # with it, never the worker user's ~/.cache on the real disk (red team P3). Nothing is lost: a submission's
    # workspace is a new folder every time, so its caches were never reused anyway.
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "ROADMAP_GPU_CACHE": str(home / ".cache" / "roadmap" / "gpu"),
    }


class _Stopping(Exception):
    """The worker is stopping (Ctrl-C): the grade was cancelled and its job goes back to the queue."""


def _conninfo() -> str:
    """psycopg's connection string for procrastinate's pool, from DATABASE_URL (with its password)."""
    from psycopg.conninfo import make_conninfo
    from sqlalchemy.engine import make_url

    url = make_url(os.environ["DATABASE_URL"])
    params = {
        "host": url.host,
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "dbname": url.database,
        "connect_timeout": os.environ.get("ROADMAP_PG_CONNECT_TIMEOUT", "10"),
    }
    params.update({k: (v[0] if isinstance(v, tuple) else v) for k, v in url.query.items()})
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


@dataclass
class WorkerOptions:
    labs: Optional[list[str]] = None  # None: every lab's queue
    concurrency: int = 1
    allow_weak_sandbox: bool = False
    heartbeat_s: float = 10.0
    stalled_after_s: float = 30.0
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


def check_worker_can_start(store, options: WorkerOptions) -> tuple[str, str]:
    """Everything a worker refuses to start without, each as one line; (sandbox, why weak)."""
    from roadmap_cli.grading_kit import oswall
    from roadmap_cli.labs.service import find_lab

    require_server(store, "worker")
    if options.concurrency < 1:
        raise UserError(f"--concurrency must be at least 1 (got {options.concurrency})")
    if options.stalled_after_s <= options.heartbeat_s:
        raise UserError(
            f"--stalled-after ({options.stalled_after_s:g} s) must be longer than --heartbeat "
            f"({options.heartbeat_s:g} s): a live worker would be taken for a dead one"
        )
    for lab in options.labs or []:
        find_lab(lab)  # an unknown id: did-you-mean
    try:
        sandbox, why = oswall.status()
    except oswall.WallUnavailable as exc:
        raise GraderError(str(exc)) from None
    if sandbox != oswall.STRONG and not options.allow_weak_sandbox:
        raise UserError(
            f"a worker grades other people's code, and the OS-level sandbox is not available here "
            f"({why}): install bubblewrap (Debian package `bubblewrap`) with user namespaces on, or "
            "pass --allow-weak-sandbox to accept the in-process sandbox only"
        )
    if not instructor(store):
        raise UserError(
            f"a worker records attempts for every learner, so it runs as the cohort's instructor (the "
            f"database's owner); you are logged in as learner {store.learner!r}"
        )
    ensure_queue(store)
    return sandbox, why


class Worker:
    """One `roadmap worker` process: procrastinate's worker plus the stalled-job rescue."""

    def __init__(self, store, options: WorkerOptions, on_event: Callable[[dict], None]) -> None:
        from roadmap_cli.labs.device import detect_device

        self.store, self.options, self.on_event = store, options, on_event
        self.device = detect_device()
        self._cancels: set[threading.Event] = set()
        self._put_back: set[int] = set()  # submissions a Ctrl-C cancelled: their jobs go back to the queue
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.graded = 0
        self.warm = None  # warm graders for the worker's life (grading/warm.py), started by run()

    # -- one job (runs in a thread of procrastinate's worker)

    def grade_submission(self, submission_id: int) -> None:
        from roadmap_cli.store.queue import TABLE

        row = self.store.read_sql(
            lambda sql: sql.rows(
                f"SELECT learner, lab_id, files, commit_sha, dirty, attempt_id FROM {TABLE} WHERE id = :id",
                id=submission_id,
            )
        )
        if not row or row[0][5] is not None:
            return  # gone, or graded and recorded before a crash: never twice
        learner, lab_id, files, sha, dirty, _ = row[0]
        self.store.write_sql(
            lambda sql: sql.execute(
                f"UPDATE {TABLE} SET status = 'running', worker = :w, device = :d, started_at = now(), "
                "tries = tries + 1 WHERE id = :id AND attempt_id IS NULL",
                w=self.options.name,
                d=self.device.name,
                id=submission_id,
            )
        )
        self.on_event({"event": "start", "submission": submission_id, "learner": learner, "lab": lab_id})
        cancel = threading.Event()
        with self._lock:
            if self.stopping.is_set():
                cancel.set()
            self._cancels.add(cancel)
        t0 = time.monotonic()
        try:
            spec, run = self._grade(lab_id, bytes(files), cancel)
        except (UserError, GraderError, ValueError, OSError, RecursionError, MemoryError) as exc:
            # (RecursionError, MemoryError: learner files no check anticipated; the row ends, never "running")
            self._finish_not_graded(submission_id, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            self.on_event(
                {
                    "event": "not-graded",
                    "submission": submission_id,
                    "learner": learner,
                    "lab": lab_id,
                    "message": str(exc),
                }
            )
            return
        finally:
            with self._lock:
                self._cancels.discard(cancel)
        if cancel.is_set():
            self.store.write_sql(
                lambda sql: sql.execute(
                    f"UPDATE {TABLE} SET status = 'queued', worker = NULL WHERE id = :id AND attempt_id IS NULL",
                    id=submission_id,
                )
            )
            self._put_back.add(submission_id)
            raise _Stopping(f"submission {submission_id}: the worker stopped; back in the queue")
        attempt_id, number, recorded = self._record(submission_id, learner, spec, run, sha, dirty)
        self.graded += recorded
        self.on_event(
            {
                "event": "graded",
                "submission": submission_id,
                "learner": learner,
                "lab": lab_id,
                "attempt_id": attempt_id,
                "attempt_number": number,
                "recorded": recorded,
                "outcome": run.outcome,
                "score": run.score,
                "max_score": run.max_score,
                "seconds": round(time.monotonic() - t0, 2),
            }
        )

    def _grade(self, lab_id: str, files: bytes, cancel: threading.Event):
        import tempfile

        from roadmap_cli.grading import precheck
        from roadmap_cli.grading.runner import GradeJob
        from roadmap_cli.grading.snapshot import unpack
        from roadmap_cli.labs.service import find_lab

        spec = find_lab(lab_id)
        with tempfile.TemporaryDirectory(prefix="roadmap-submission-") as tmp:
            ws = Path(tmp) / "workspace"
            ws.mkdir()
            try:
                unpack(files, ws)
            except Exception as exc:  # noqa: BLE001 - a broken archive is the submission's problem, one line
                raise ValueError(f"the submission's files cannot be unpacked: {exc}") from None
            job = GradeJob(
                spec, ws, cancel=cancel, device=self.device, warm=self.warm, extra_env=grade_home_env(Path(tmp))
            )
            problem = precheck.check_workspace(ws)
            if problem is not None:
                run = precheck.failed_run(job, problem)
            else:
                job.start()
                run = job.finish(None)
        return spec, run

    def _record(self, submission_id: int, learner: str, spec, run, sha, dirty) -> tuple[int, int, bool]:
        """(attempt id, its number in the learner's lab, recorded now)."""
        from roadmap_cli.grading.grade import attempt_number_in, attempt_writer
        from roadmap_cli.store.queue import TABLE

        # The temporary folder is gone; the attempt says which submission it graded.
        run = replace(run, workspace=f"submission {submission_id}")
        # verified: this worker graded the submitted files itself (only the instructor's role may write that),
        # behind the OS wall. A weak-sandbox grade (--allow-weak-sandbox) ran the learner's code as the worker's
        # user: recorded, never verified (the board shows it apart, as a self-graded attempt is).
        from roadmap_cli.grading_kit.oswall import STRONG

        body = attempt_writer(
            spec,
            run,
            sha,
            dirty,
            learner=learner,
            graded_on=GRADED_ON_PREFIX + self.options.name.rsplit(":", 1)[0],
            verified=run.sandbox == STRONG,
        )

        def write(sql):
            # The submitter's queue (store/server.py): their own commands never race this write.
            sql.execute("SELECT pg_advisory_xact_lock(hashtext(:key))", key="roadmap-learner:" + learner)
            existing = sql.scalar(f"SELECT attempt_id FROM {TABLE} WHERE id = :id FOR UPDATE", id=submission_id)
            if existing is not None:  # another run of this job recorded it first
                return int(existing), attempt_number_in(sql, spec.id, learner, int(existing)), False
            attempt_id, _marked = body(sql)
            sql.execute(
                f"UPDATE {TABLE} SET status = 'done', attempt_id = :a, finished_at = now(), outcome = :o, "
                "score = :s, max_score = :m, message = :msg, worker = :w, device = :d WHERE id = :id",
                a=attempt_id,
                o=run.outcome,
                s=run.score,
                m=run.max_score,
                msg=run.message,
                w=self.options.name,
                d=run.device,
                id=submission_id,
            )
            return attempt_id, attempt_number_in(sql, spec.id, learner, attempt_id), True

        return self.store.write_sql(write)

    def _finish_not_graded(self, submission_id: int, message: str) -> None:
        """The worker could not grade it (no attempt): "not-graded", never an attempt's "failed"."""
        from roadmap_cli.store.queue import TABLE

        self.store.write_sql(
            lambda sql: sql.execute(
                f"UPDATE {TABLE} SET status = 'not-graded', finished_at = now(), message = :m "
                "WHERE id = :id AND attempt_id IS NULL",
                m=message[:2000],
                id=submission_id,
            )
        )

    def fail_unknown_labs(self) -> list[int]:
        """Fail at once every queued submission for a lab this install does not have (a learner's login can
        insert one by raw SQL: its job sits in a queue no worker serves). Returns their procrastinate jobs."""
        from roadmap_cli.labs.service import lab_ids
        from roadmap_cli.store.queue import TABLE

        known = set(lab_ids())
        rows = self.store.read_sql(
            lambda sql: sql.rows(
                f"SELECT id, lab_id, job_id FROM {TABLE} WHERE status = 'queued' AND attempt_id IS NULL"
            )
        )
        jobs = []
        for submission_id, lab_id, job_id in rows:
            if lab_id in known:
                continue
            self._finish_not_graded(
                submission_id,
                f"no lab {lab_id[:80]!r} exists here: nothing to grade it with (labs: {', '.join(sorted(known))})",
            )
            self.on_event(
                {"event": "not-graded", "submission": submission_id, "lab": lab_id[:80], "message": "unknown lab"}
            )
            if job_id is not None:
                jobs.append(int(job_id))
        return jobs

    # -- stopping

    def stop(self) -> None:
        """Ctrl-C: cancel running grades (their jobs go back to the queue) and stop fetching."""
        with self._lock:
            self.stopping.set()
            for cancel in self._cancels:
                cancel.set()

    # -- the loop

    def run(self, *, max_seconds: Optional[float] = None) -> dict:
        import asyncio

        from roadmap_cli.grading.isolation import not_dumpable
        from roadmap_cli.grading.launch import warm_graders

        _quiet_library_logs()
        # It holds the cohort's credential (DATABASE_URL in its /proc/PID/environ, the password in its memory):
        # no other process of this user may read either, from the first moment.
        not_dumpable()
        # A worker grades submission after submission: each forks a warm grader instead of
        # importing torch and pytest again. Started here, in the thread that runs the worker
        # (the zygote's parent-death signal follows the thread that starts it).
        self.warm = warm_graders(self.device)
        self.warm.wait_ready()  # "ready" means warm: the first submission is not graded cold
        try:
            asyncio.run(self._main(max_seconds))
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a server gone away is one line, never a traceback
            raise StoreError(_server_line(exc, self.store)) from None
        finally:
            self.warm.close()
        return {"graded": self.graded, "worker": self.options.name}

    async def _main(self, max_seconds: Optional[float]) -> None:
        import asyncio
        import signal

        import procrastinate
        from procrastinate import PsycopgConnector, RetryStrategy

        from roadmap_cli.store.queue import QUEUE_PREFIX, TASK

        opts = self.options
        app = procrastinate.App(
            connector=PsycopgConnector(conninfo=_conninfo(), min_size=1, max_size=opts.concurrency + 3, timeout=10)
        )

        # Only _Stopping is retried: a grade that could not run is recorded as not-graded, not run again.
        @app.task(name=TASK, retry=RetryStrategy(max_attempts=1000, wait=0, retry_exceptions={_Stopping}))
        def grade_submission(submission: int) -> None:
            self.grade_submission(int(submission))

        queues = [QUEUE_PREFIX + lab for lab in opts.labs] if opts.labs else None
        async with app.open_async():
            worker = asyncio.create_task(
                app.run_worker_async(
                    queues=queues,
                    concurrency=opts.concurrency,
                    wait=True,
                    install_signal_handlers=False,
                    name=opts.name,
                    update_heartbeat_interval=opts.heartbeat_s,
                    stalled_worker_timeout=opts.stalled_after_s,
                    listen_notify=True,
                )
            )
            rescue = asyncio.create_task(self._rescue_stalled(app, queues))
            loop = asyncio.get_running_loop()

            def on_signal() -> None:
                self.on_event({"event": "stopping"})
                self.stop()
                worker.cancel()  # procrastinate's graceful stop: waits for the (now cancelled) grades

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, on_signal)
            if max_seconds is not None:
                loop.call_later(max_seconds, on_signal)
            self.on_event(
                {
                    "event": "ready",
                    "worker": opts.name,
                    "queues": queues,
                    "device": self.device.name,
                    "concurrency": opts.concurrency,
                }
            )
            try:
                await asyncio.wait({worker, rescue}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                rescue.cancel()
                # After Ctrl-C the stop is already under way (on_signal cancelled the worker once: procrastinate's
                # graceful stop, which waits for the cancelled grades to hand their jobs back). A second cancel
                # would abort that wait and leave a job `doing` (the rescue task, which ends as soon as the worker
                # is stopping, made this a race: seen under load).
                if not worker.done() and not self.stopping.is_set():
                    self.stop()
                    worker.cancel()
                for task in (worker, rescue):
                    try:
                        await task
                    except asyncio.CancelledError:
                        pass
                await self._requeue_own(app)
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    async def _requeue_own(self, app) -> None:
        """A grade this worker cancelled at Ctrl-C put its submission back (status queued) and raised for a
        retry; when procrastinate's shutdown ends before it recorded that retry, the job would stay `doing`
        until another worker's stalled-job rescue found it (seen under load). Put such jobs back now: this
        worker is gone, so their heartbeats are gone too."""
        from procrastinate.exceptions import ConnectorException

        if not self._put_back:
            return
        try:
            stalled = await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=0)
        except ConnectorException:
            return  # the server went away: the other workers' rescue puts them back
        for job in stalled:
            if str(job.task_kwargs.get("submission")) in {str(n) for n in self._put_back}:
                try:
                    await app.job_manager.retry_job(job)
                except ConnectorException:
                    continue  # another worker put it back first

    async def _rescue_stalled(self, app, queues) -> None:
        """Jobs of workers that stopped sending heartbeats (killed, machine gone) go back to the queue."""
        import asyncio

        from procrastinate.exceptions import ConnectorException

        while not self.stopping.is_set():
            for job_id in await asyncio.to_thread(self.fail_unknown_labs):
                try:
                    await app.job_manager.cancel_job_by_id_async(job_id, delete_job=True)
                except Exception:  # noqa: BLE001 - already gone, or taken: the row says failed either way
                    pass
            for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=self.options.stalled_after_s):
                if queues is not None and job.queue not in queues:
                    continue
                try:
                    await app.job_manager.retry_job(job)
                except ConnectorException:
                    continue  # another worker put it back first
                self.on_event({"event": "rescued", "job": job.id, "submission": job.task_kwargs.get("submission")})
            await asyncio.sleep(self.options.heartbeat_s)


def _quiet_library_logs() -> None:
    """procrastinate logs each job's exception with its traceback; the worker prints its own one-line events."""
    import logging

    # psycopg's pool logs every failed reconnection while the server is down, and psycopg itself warns when the
    # server goes away in the middle of cancelling a query ("query cancellation interrupted"): the worker's one
    # line says it once. "psycopg" covers its children ("psycopg.pool").
    for name in ("procrastinate", "psycopg"):
        logger = logging.getLogger(name)
        logger.propagate = False
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())


def _server_line(exc: BaseException, store) -> str:
    """One line for whatever the worker's connection died of (the server stopped, unreachable)."""
    from roadmap_cli.store.server import describe_server_error

    seen = exc
    for _ in range(10):  # procrastinate wraps psycopg's error: look down the chain
        line = describe_server_error(seen, store.url)
        if line:
            return line
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            break
        seen = nxt
    return f"the worker stopped: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
