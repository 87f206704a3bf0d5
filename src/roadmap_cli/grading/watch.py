"""`roadmap watch`: re-grade on every save, the part you are on first.

The loop a learner lives in (edit, save, read the failure, fix) without
typing `roadmap grade` each time, like rustlings' `watch`:

- the part graded is the first one not passed yet (or `--part`); when it
  passes, the next one starts at once; when every part gradable here has
  passed, a save grades all of them;
- a save during a run cancels it (the grader's whole process group is
  killed, the attempt is recorded as "interrupted") and starts a new one;
- only the first failure is shown in full, then one line for the lab;
- keys in a terminal: h hint for the current part, r re-run, a all parts,
  q quit (the terminal is put in cbreak mode and restored on exit); when
  stdin is not a terminal, output is plain lines and Ctrl-C stops it;
- every grade is recorded exactly like `roadmap grade`.

Threads: the main thread owns the terminal and an event queue; one thread
watches files (watchfiles, debounced), one reads keys, one runs the current
grade. SQLite connections are per thread (the engine's pool handles that).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Optional

DEBOUNCE_MS = 120  # saves closer together than this are one change (editors write in bursts)
IGNORED_DIRS = {"out", ".ipynb_checkpoints", "wandb"}
IGNORED_SUFFIXES = (".pt", ".pth", ".bin", ".log", ".tmp", ".swp", ".swx", "~")


def _watch_filter():
    from watchfiles import DefaultFilter

    class WorkspaceFilter(DefaultFilter):
        """Source edits, not what training or git writes."""

        def __call__(self, change, path: str) -> bool:
            if path.endswith(IGNORED_SUFFIXES) or any(part in IGNORED_DIRS for part in Path(path).parts):
                return False
            return super().__call__(change, path)

    return WorkspaceFilter()


class Watcher:
    def __init__(
        self,
        ctx,
        lab_id: Optional[str],
        cwd: Path,
        *,
        part: Optional[str] = None,
        timeout: Optional[float] = None,
        out=None,
        on: Optional[str] = None,
    ) -> None:
        from roadmap_cli.labs import service
        from roadmap_cli.labs.device import detect_device
        from roadmap_cli.grading.selection import gradable_parts

        self.ctx = ctx
        self.on = on  # a remote's name (`watch --on NAME`): every grade runs there (grading/remote/near.py)
        self.store = ctx.store()  # created here, in the main thread; used by the grade thread
        self.spec, self.path = service.resolve_workspace(self.store, lab_id, cwd)
        if not self.path.is_dir():
            from roadmap_cli.errors import UserError

            raise UserError(
                f"workspace {self.path} is gone: run `{service.start_command(ctx.home, self.spec.id, self.path)}`"
            )
        if on is not None:
            from roadmap_cli.grading.remote import registry

            registry.get(ctx.home, on)  # an unknown name is one line with did-you-mean, before anything starts
            # What the remote can grade is known after its first grade (parts it cannot grade come back
            # "not graded here"); until then every part is a candidate.
            self.gradable = [p.id for p in self.spec.parts]
            self.cuda = any(p.needs_cuda for p in self.spec.parts)
        else:
            device = detect_device()
            self.gradable = gradable_parts(self.spec, device)
            self.cuda = device.cuda
        if part is not None:
            self.spec.part(part)  # a typo is one line with did-you-mean
            if part not in self.gradable:
                from roadmap_cli.errors import UserError

                raise UserError(f"part {part} of {self.spec.id} needs a CUDA GPU: it cannot be graded here")
        self.explicit_part = part
        self.current: Optional[str] = part or self._first_unpassed()
        self.timeout = timeout
        self.out = out or sys.stdout
        self.events: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.cancel: Optional[threading.Event] = None
        self.worker: Optional[threading.Thread] = None
        self.print_lock = threading.Lock()
        self.tty = sys.stdin.isatty() and self.out.isatty()
        self.pending_all = False
        # Warm graders (grading/warm.py) for every grade after the first: a save is re-graded
        # without importing torch and pytest again. Started once the first grade is done, so
        # its start-up never competes with the first result for the CPU.
        self.warm = None
        self.prebuild = None  # the background build of a C++ lab's precompiled header (_prebuild_cpp_header)

    # ------------------------------------------------------------ output

    def say(self, text: str = "") -> None:
        with self.print_lock:
            self.out.write(text + "\n")
            self.out.flush()

    # ------------------------------------------------------------ state

    def _best(self) -> dict[str, float]:
        from roadmap_cli.labs import service

        return service._progress(service._attempt_rows(self.store, self.spec.id))[0]

    def _first_unpassed(self) -> Optional[str]:
        best = self._best()
        return next((p for p in self.gradable if p not in best), None)

    def _summary_line(self) -> str:
        """One line for the lab: every part's state and the best score."""
        from roadmap_cli.labs import service

        best = self._best()
        marks = []
        for p in self.spec.parts:
            if p.id not in self.gradable:
                marks.append(f"{p.id} (needs a CUDA GPU)")
            else:
                marks.append(f"{p.id} {'✓' if p.id in best else '·'}")
        summary = service._summary(self.spec, best, 1, True, self.cuda)
        return (
            f"{self.spec.id}: {summary['state_text']} · best {summary['best_score']:g}/{summary['max_score']:g} · "
            + "  ".join(marks)
        )

    # ------------------------------------------------------------ threads

    def _watch_files(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(
                self.path,
                watch_filter=_watch_filter(),
                debounce=DEBOUNCE_MS,
                step=20,
                stop_event=self.stop,
                yield_on_timeout=False,
                raise_interrupt=False,
            ):
                # Name the files as they are now: an editor's temporary file
                # (written, then renamed over the real one) is not news.
                names = sorted({os.path.relpath(p, self.path) for _, p in changes if os.path.exists(p)}) or sorted(
                    {os.path.relpath(p, self.path) for _, p in changes}
                )
                self.events.put(("change", names, time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - reported, and the loop stops
            self.events.put(("error", f"cannot watch {self.path}: {exc}", time.monotonic()))

    def _read_keys(self) -> None:
        import select

        fd = sys.stdin.fileno()
        while not self.stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                ch = os.read(fd, 1).decode("utf-8", "replace")
                if not ch:  # stdin closed
                    return
                self.events.put(("key", ch, time.monotonic()))

    def _grade(self, parts: Optional[list[str]], cancel: threading.Event, reason: str) -> None:
        from roadmap_cli.grading.grade import grade

        part = parts[0] if parts and len(parts) == 1 else None
        try:
            if self.on is not None:
                from roadmap_cli.grading.remote.near import grade_on

                # Only the files changed since the last send go; the attempt is recorded here.
                outcome = grade_on(
                    lambda: self.store,
                    self.ctx.home,
                    self.on,
                    self.spec.id,
                    self.path,
                    part=part,
                    timeout=self.timeout,
                    cancel=cancel,
                    on_progress=lambda line: self.say(f"  {line}"),
                )
            else:
                outcome = grade(
                    lambda: self.store,
                    self.ctx.home,
                    self.spec.id,
                    self.path,
                    part=part,
                    timeout=self.timeout,
                    cancel=cancel,
                    lang=self.ctx.lang,
                    warm=self.warm,
                )
            self.events.put(("done", outcome, time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - a grader problem is shown, the watch goes on
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.events.put(("failed", message, time.monotonic()))

    # ------------------------------------------------------------ runs

    def _start(self, reason: str, everything: bool = False) -> None:
        parts = None if everything or self.current is None else [self.current]
        what = "all parts" if parts is None else f"part {parts[0]}"
        self.say(f"▶ grading {what} ({reason})")
        self.cancel = threading.Event()
        self.worker = threading.Thread(target=self._grade, args=(parts, self.cancel, reason), daemon=True)
        self.worker.start()

    def _warm_up(self) -> None:
        """Start the warm graders, from the main thread (the zygote's parent-death
        signal follows the thread that starts it); local grades only.
        ROADMAP_WARM_GRADERS=0 keeps every grade cold (to compare, or to rule
        the warm grader out when something looks wrong)."""
        if self.warm is None and self.on is None and os.environ.get("ROADMAP_WARM_GRADERS") != "0":
            from roadmap_cli.grading.launch import warm_graders
            from roadmap_cli.labs.device import detect_device

            self.warm = warm_graders(detect_device())
            self._prebuild_cpp_header()

    def _stop_prebuild(self) -> None:
        """End the header build with its g++ (a half-built header is never used: it is renamed into place
        only when done, and the build removes its partial file on SIGTERM)."""
        import signal
        import subprocess

        if self.prebuild.poll() is None:
            try:
                os.killpg(self.prebuild.pid, signal.SIGTERM)
                self.prebuild.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.prebuild.pid, signal.SIGKILL)
                self.prebuild.wait()
            except ProcessLookupError:
                pass

    def _prebuild_cpp_header(self) -> None:
        """A lab with C++ sources compiles them on every save that changes one: ~7 s, nearly all of it g++
        parsing torch's headers. Build those headers precompiled once, in the background at low priority
        (~16 s), and every later compile takes ~3 s (grading_kit/cpp_build.py: a grade uses the header
        once it exists and never waits for it)."""
        import subprocess

        sources = sorted(str(p) for p in self.path.glob("*.cpp"))
        if not sources:
            return
        self.prebuild = subprocess.Popen(
            [sys.executable, "-m", "roadmap_cli.grading_kit.cpp_build", *sources],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=lambda: os.nice(10),
        )

    def _stop_run(self) -> None:
        """Cancel the running grade and wait for it: its process group is killed, no orphan."""
        if self.worker is not None and self.worker.is_alive():
            self.cancel.set()
            self.worker.join()
        self.worker = None

    def _running(self) -> bool:
        return self.worker is not None and self.worker.is_alive()

    def _report(self, outcome) -> bool:
        """Show a finished grade; True when the current part passed (move on)."""
        run = outcome.run
        if run.outcome == "interrupted":
            self.say("  (cancelled: not counted)")
            return False
        if outcome.precheck is not None:
            self.say(f"✗ pre-check: {outcome.precheck.report()}")
            return False
        ran = [p for p in run.parts if p.status not in ("not-run", "not-graded-here")]
        for p in ran:
            mark = "✓" if p.status == "passed" else "✗"
            self.say(f"{mark} {p.id}: {p.status} ({p.tests_passed}/{p.tests_total} tests)")
        failed = next((p for p in ran if p.status != "passed"), None)
        if failed is not None and failed.message:
            # Only the first failure, in full: one thing to fix at a time.
            self.say("  " + failed.message.strip().replace("\n", "\n  "))
        elif run.message and run.outcome != "passed":
            self.say(f"  {run.message}")
        if outcome.checkpoints_marked:
            self.say(f"  checkpoints completed: {', '.join(outcome.checkpoints_marked)}")
        if outcome.hint_offer:
            self.say(f"  {outcome.hint_offer} (press h)" if self.tty else f"  {outcome.hint_offer}")
        where = f"{outcome.graded_where} · " if getattr(outcome, "graded_where", None) else ""  # `watch --on`
        self.say(f"  attempt #{outcome.attempt_number} · {run.duration_s:.1f}s · {where}{self._summary_line()}")
        # Move on when the part we are on passed (also in an all-parts run where another part failed).
        return self.current is not None and any(p.id == self.current and p.status == "passed" for p in ran)

    def _hint(self) -> None:
        from roadmap_cli.labs import hints

        # The part watch is on (its focused runs grade it), else the first part still failing.
        for line in hints.lines(hints.next_hint(self.store, self.spec.id, self.ctx.lang, part=self.current)):
            self.say(line)

    # ------------------------------------------------------------ loop

    def run(self) -> int:
        keys = "h hint · r re-run · a all parts · q quit" if self.tty else "not a terminal: line output, Ctrl-C to stop"
        self.say(f"watching {self.spec.id} in {self.path} ({keys})")
        threading.Thread(target=self._watch_files, daemon=True).start()
        saved_tty = None
        if self.tty:
            import termios
            import tty

            saved_tty = termios.tcgetattr(sys.stdin.fileno())
            tty.setcbreak(sys.stdin.fileno())  # keys arrive one at a time, no echo; Ctrl-C still works
            threading.Thread(target=self._read_keys, daemon=True).start()
        try:
            if (
                self.on is not None
                and not self.explicit_part
                and self.current is not None
                and any(p.needs_cuda for p in self.spec.parts)
            ):
                # Which parts the remote can grade is not known yet: its first grade takes them all.
                self._start(f"first grade on {self.on}: all parts", everything=True)
            elif self.current is None:
                self.say(f"every part gradable here has passed: {self._summary_line()}")
                self.say("save a file to grade all parts again")
            else:
                self._start("the first part not passed yet")
            return self._loop()
        except KeyboardInterrupt:
            return 130
        finally:
            self.stop.set()
            self._stop_run()
            if self.warm is not None:
                self.warm.close()
            if self.prebuild is not None:
                self._stop_prebuild()
            if saved_tty is not None:
                import termios

                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved_tty)

    def _loop(self) -> int:
        while True:
            kind, payload, _ = self.events.get()
            if kind == "change":
                # The run in progress graded old code: cancel it, start again.
                self._stop_run()
                self._start(
                    f"saved {', '.join(payload[:3])}{' …' if len(payload) > 3 else ''}", everything=self.current is None
                )
            elif kind == "done":
                self.worker = None
                self._warm_up()
                if self.on is not None:  # what the remote cannot grade (no GPU there) leaves the rotation
                    lost = {p.id for p in payload.run.parts if p.status == "not-graded-here"}
                    self.gradable = [p for p in self.gradable if p not in lost]
                    self.cuda = any(p.needs_cuda for p in self.spec.parts if p.id in self.gradable)
                moved = self._report(payload)
                if moved or (self.current is not None and self.current not in self.gradable):
                    nxt = self._first_unpassed()
                    if nxt is None:
                        self.current = None
                        self.say("every part gradable here has passed — save a file to grade all parts again")
                    else:
                        self.current = nxt
                        self._start(f"next part: {nxt}")
            elif kind == "failed":
                self.worker = None
                self.say(f"error: {payload}")
            elif kind == "error":
                self.say(f"error: {payload}")
                return 3
            elif kind == "key":
                key = payload.lower()
                if key == "q":
                    self._stop_run()
                    self.say("bye")
                    return 0
                if key == "h":
                    self._hint()
                elif key == "r":
                    self._stop_run()
                    self._start("re-run", everything=self.current is None)
                elif key == "a":
                    self._stop_run()
                    self._start("all parts", everything=True)
