"""Entry point of the learner process, started by `sandbox.py` as
`python -I -P -B -c "from roadmap_cli.grading_kit._learner_main import main; main()" REQ_FD REPLY_FD`
(the reference table of objects the grader holds is refs.py's).

The grader process (pytest) starts this child and sends it one config
message, then requests; this process imports the learner's modules, runs
`@kit.learner_side` adapter functions and answers with plain data or
references (see wire.py). Nothing here decides a verdict: this process is
untrusted once learner code ran in it.

Set-up order matters: limits, the audit hook and the import layout are in
place before the first learner import; then the lab-code check (labcode.py)
reads every learner source, and learner modules are imported only from the
bytes it checked. The adapter's entry points are captured (`_Pinned`) before
any learner code runs: the grader's calls go to those, and a learner that
replaces or rewrites them (or the grading kit's functions) voids the attempt.
"""

from __future__ import annotations

import faulthandler
import importlib
import importlib.abc
import importlib.util
import os
import pickle
import re
import resource
import sys
import traceback
import types
from typing import Any, Optional

from roadmap_cli.grading_kit import wire
from roadmap_cli.grading_kit.refs import release, remember, resolve_ref

_violations: list[str] = []
_config: dict = {}


# ------------------------------------------------------------------ limits


def _set_limits(memory_limit_mb: int | None, nofile: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, soft) if soft != resource.RLIM_INFINITY else want, want))
    if memory_limit_mb:
        limit = int(memory_limit_mb) << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _drop_privileges() -> None:
    """As root, give up every capability (and the bounding set, so an exec
    cannot regain them): without CAP_SYS_PTRACE this process can no longer
    open the grader's (non-dumpable) /proc/<pid>/fd, mem or environ, i.e.
    neither reach the results channel nor read its HMAC key. Without
    CAP_DAC_OVERRIDE/CAP_FOWNER it can still write files root owns (it IS
    root): the engine's hashes detect that. As a normal user there is
    nothing to drop; non-dumpable processes are already out of reach."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no setuid binary gives privileges back
    if os.geteuid() != 0:
        return
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)())  # _LINUX_CAPABILITY_VERSION_3, all zero


# ------------------------------------------------------------- audit hook


def _install_audit_hook(forbidden_read: list[str], forbidden_write: list[str]) -> None:
    """Refuse (and record) opening the reference solutions, and writing the
    installed grader. A hook sees Python-level opens only (ctypes, a child
    process or a C extension bypass it): it catches the casual cheat and
    the accident; hashes and the separate grader process do the rest."""
    read_roots = tuple(os.path.join(os.path.realpath(p), "") for p in forbidden_read)
    read_files = frozenset(os.path.realpath(p) for p in forbidden_read)
    write_roots = tuple(os.path.join(os.path.realpath(p), "") for p in forbidden_write)
    busy = [False]

    def refused(path: str, writing: bool) -> str | None:
        real = os.path.realpath(path)
        if _PROC_MEM.match(real) or _PROC_MEM.match(path):
            return f"opened {path}: the process's own memory holds the grader's code"
        if real in read_files or real.startswith(read_roots):
            return f"opened the shipped reference solution {real}"
        if writing and real.startswith(write_roots):
            return f"tried to write the installed grader file {real}"
        return None

    def hook(event: str, args: tuple) -> None:
        if busy[0] or event not in ("open", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.system"):
            return
        busy[0] = True
        try:
            if event == "open":
                path, mode, flags = args
                if isinstance(path, int) or path is None:
                    return
                path = os.fsdecode(path)
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                    flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC)
                )
                why = refused(path, writing)
            else:
                # A command line that names a solution file or folder (e.g. `cat .../solution/x.py`).
                text = " ".join(os.fsdecode(a) if isinstance(a, (str, bytes)) else str(a) for a in _flatten(args))
                why = next(
                    (
                        f"ran a command that reads the reference solution ({root.rstrip('/')})"
                        for root in read_roots
                        if root.rstrip("/") in text
                    ),
                    None,
                )
            if why:
                _violations.append(why)
                raise PermissionError(f"not allowed while grading: {why}")
        finally:
            busy[0] = False

    sys.addaudithook(hook)


_PROC_MEM = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/mem$")


def _flatten(args) -> list:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(_flatten(a))
        else:
            out.append(a)
    return out


# ---------------------------------------------------------- import layout


class _GraderFirst(importlib.abc.MetaPathFinder):
    """Top-level modules that exist in the lab's adapter shim (the config's
    "tests_dir": adapter.py and the lab's declared `learner_side` files,
    copied out of tests/ by the engine; never tests/ itself) always come from
    there, so a same-named file in the workspace cannot replace the adapter
    in this process."""

    def __init__(self, tests_dir: str) -> None:
        self.tests_dir = tests_dir

    def find_spec(self, name, path, target=None):
        if path is not None or "." in name:
            return None
        candidate = os.path.join(self.tests_dir, name + ".py")
        if os.path.isfile(candidate):
            return importlib.util.spec_from_file_location(name, candidate)
        return None


def _layout(workspace: str, tests_dir: str) -> None:
    # -I/-P gave us stdlib + site-packages only; the workspace goes first
    # for learner modules, the adapter shim last for its helper modules.
    sys.path[:] = [workspace] + [p for p in sys.path if p and p != workspace] + [tests_dir]
    sys.meta_path.insert(0, _GraderFirst(tests_dir))


class _CheckedSources(importlib.abc.MetaPathFinder):
    """Workspace modules are imported from the bytes the lab-code check read,
    compiled in memory: a file rewritten after the check, one that appeared
    after it, or a planted __pycache__ file never runs."""

    def __init__(self, workspace: str, sources: dict[str, bytes]) -> None:
        self.given = os.path.join(workspace, "")  # as the grader spells it (learner.py compares __file__ with it)
        self.workspace = os.path.join(os.path.realpath(workspace), "")
        self.sources = sources

    def find_spec(self, name, path, target=None):
        leaf = name.rpartition(".")[2]
        folders = [self.given] if path is None else [os.path.join(p, "") for p in path]
        for folder in folders:
            if not os.path.join(os.path.realpath(folder), "").startswith(self.workspace):
                continue
            for candidate, package in (
                (os.path.join(folder, leaf, "__init__.py"), True),
                (os.path.join(folder, leaf + ".py"), False),
            ):
                rel = os.path.relpath(os.path.realpath(candidate), self.workspace)
                if rel in self.sources:
                    loader = _CheckedLoader(self.sources[rel], candidate)
                    return importlib.util.spec_from_file_location(
                        name,
                        candidate,
                        loader=loader,
                        submodule_search_locations=[os.path.dirname(candidate)] if package else None,
                    )
                if os.path.isfile(candidate):
                    self._refuse(f"imported {rel}, which the lab-code check did not read (it appeared after the check)")
            if os.path.isdir(folder) and any(
                entry.startswith(leaf + ".") and entry.endswith((".so", ".pyd", ".pyc")) for entry in os.listdir(folder)
            ):
                self._refuse(
                    f"imported {leaf} from a compiled file: only the Python sources the lab-code check "
                    "read are imported from the workspace"
                )
        return None

    @staticmethod
    def _refuse(why: str) -> None:
        _violations.append(why)
        raise ImportError(f"not allowed while grading: your code {why}")


class _CheckedLoader(importlib.abc.Loader):
    def __init__(self, source: bytes, filename: str) -> None:
        self.source, self.filename = source, filename

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        code = compile(self.source, self.filename, "exec", dont_inherit=True)
        module.__dict__["__builtins__"] = _guarded_builtins()
        exec(code, module.__dict__)  # noqa: S102 - the checked learner module, as import would run it

    def get_source(self, fullname: str) -> str:
        return self.source.decode("utf-8", "replace")


_GUARDED: Optional[dict] = None


def _guarded_builtins() -> dict:
    """The builtins learner modules see: getattr/setattr/delattr/hasattr/vars refuse at run time the names the
    lab-code check refuses in source (a computed name is ordinary in an fx pass); eval, exec, compile,
    globals, locals and breakpoint are absent (the check refused them already: this is the second layer)."""
    global _GUARDED
    if _GUARDED is not None:
        return _GUARDED
    import builtins

    from roadmap_cli.grading_kit.labcode_policy import runtime_refusal

    real = dict(vars(builtins))

    def refuse_name(name) -> None:
        why = runtime_refusal(name)
        if why:
            _violations.append(why)
            raise AttributeError(f"not allowed while grading: your code {why}")

    def getattr_(obj, name, *default):
        refuse_name(name)
        return real["getattr"](obj, name, *default)

    def setattr_(obj, name, value):
        refuse_name(name)
        return real["setattr"](obj, name, value)

    def delattr_(obj, name):
        refuse_name(name)
        return real["delattr"](obj, name)

    def hasattr_(obj, name):
        refuse_name(name)
        return real["hasattr"](obj, name)

    def vars_(*args):
        if not args or isinstance(args[0], (types.ModuleType, types.FunctionType)):
            refuse_name("__dict__")
        return real["vars"](*args)

    guarded = {k: v for k, v in real.items() if k not in ("eval", "exec", "compile", "globals", "locals", "breakpoint")}
    guarded.update(getattr=getattr_, setattr=setattr_, delattr=delattr_, hasattr=hasattr_, vars=vars_)
    _GUARDED = guarded
    return guarded


def _check_lab_code() -> Optional[str]:
    """Run the lab-code check over the workspace (behind the wall, before any learner import); on success
    learner modules come only from the checked bytes. The first problem's line, or None."""
    from roadmap_cli.grading_kit import labcode

    policy = labcode.Policy.from_config(_config.get("lab_code"), _config.get("learner_side") or ())
    try:
        problem, checked = labcode.check_workspace(_config["workspace"], policy)
    except RecursionError:
        return "a source nested too deeply is not allowed in lab code: it cannot be checked"
    if problem is None and policy.enabled:
        sys.meta_path.insert(1, _CheckedSources(_config["workspace"], checked.sources))
    return problem


# ------------------------------------------------------------ captured entry points


class _Pinned:
    """The grader's modules in this process (the adapter shim's, the grading kit's) as they were before any
    learner code ran: the module objects, each function's code, defaults and class members. `_call_target`
    resolves the grader's calls through these, never through sys.modules, and `changed()` says what learner
    code replaced since (checked around every request: the attempt is then void)."""

    def __init__(self) -> None:
        self.modules: dict[str, types.ModuleType] = {}
        self.prints: dict[str, dict[str, tuple]] = {}
        self.names: dict[str, set[str]] = {}
        self.seen: set[str] = set()
        self.seen_count = -1
        self.builtin_names = set(vars(__builtins__) if isinstance(__builtins__, types.ModuleType) else __builtins__)

    def watched(self, name: str) -> bool:
        return name.startswith("roadmap_cli.grading_kit") or os.path.isfile(
            os.path.join(_config.get("tests_dir", "/nonexistent"), name + ".py")
        )

    def pin_loaded(self) -> None:
        if len(sys.modules) == self.seen_count:  # checked around every request: only new modules cost anything
            return
        for name in sys.modules.keys() - self.seen:
            self.seen.add(name)
            module = sys.modules.get(name)
            if isinstance(module, types.ModuleType) and self.watched(name):
                self.modules[name] = module
                self.prints[name] = _fingerprint(module)
                self.names[name] = set(vars(module))
        self.seen_count = len(sys.modules)

    def module(self, name: str) -> types.ModuleType:
        if name not in self.modules:
            module = importlib.import_module(name)
            if self.watched(name):
                self.pin_loaded()
            return self.modules.get(name, module)
        return self.modules[name]

    def changed(self) -> Optional[str]:
        self.pin_loaded()  # grader modules imported since (lazily, by a call) are watched from now on
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                return f"replaced the grader's module {name} in sys.modules"
            now = vars(module)
            for key, value, parts in self.prints[name]:
                if now.get(key, _MISSING) is not value or not _same(value, parts):
                    return f"replaced the grader's {name}.{key} in the learner process"
            for key in now.keys() - self.names[name]:
                if key in self.builtin_names and not key.startswith("__"):
                    return f"added {name}.{key}, which hides the builtin the grader's code calls"
        return None


_MISSING = object()


def _parts_of(value) -> tuple:
    """What else must stay the same object for `value` to do what it did: a function's code, defaults and
    closure cells; a class's methods (and theirs)."""
    if isinstance(value, types.FunctionType):
        return (value.__code__, value.__defaults__, value.__kwdefaults__, value.__closure__)
    if isinstance(value, type):
        return tuple(
            (k, m, _parts_of(m))
            for k, v in vars(value).items()
            if isinstance(v, (types.FunctionType, classmethod, staticmethod, property))
            for m in [getattr(v, "__func__", getattr(v, "fget", v))]
        )
    return ()


def _same(value, parts: tuple) -> bool:
    if isinstance(value, types.FunctionType):
        code, defaults, kwdefaults, closure = parts
        return (
            value.__code__ is code
            and value.__defaults__ is defaults
            and value.__kwdefaults__ is kwdefaults
            and value.__closure__ is closure
        )
    if isinstance(value, type):
        members = vars(value)
        for key, member, member_parts in parts:
            now = members.get(key)
            if getattr(now, "__func__", getattr(now, "fget", now)) is not member or not _same(member, member_parts):
                return False
    return True


def _fingerprint(module: types.ModuleType) -> list[tuple]:
    # Dunder names are the interpreter's and torch.compile's (it keeps __compiled_fn_N / __resume_at_N in the
    # globals of the module it compiled, and replaces them on a recompile): never the grader's own functions.
    return [
        (k, v, _parts_of(v))
        for k, v in list(vars(module).items())
        if not k.startswith("__")
        and isinstance(v, (types.FunctionType, type, types.ModuleType, types.BuiltinFunctionType))
    ]


_pinned: Optional[_Pinned] = None


# ----------------------------------------------------------------- serving


def _call_target(module: str, qualname: str):
    target: Any = _pinned.module(module) if _pinned is not None else importlib.import_module(module)
    for attr in qualname.split("."):
        target = getattr(target, attr)
    return getattr(target, "__wrapped__", target)


def _error_reply(exc: BaseException) -> tuple:
    base = next(
        (k.__name__ for k in type(exc).__mro__ if k.__module__ == "builtins" and issubclass(k, Exception)),
        "RuntimeError",
    )
    learner_type = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
    if type(exc).__module__.startswith(("_pytest", "pytest")):
        # pytest.skip()/fail() raised in this process must not steer the
        # verdict (a learner could "skip" the tests it fails): an error.
        base, learner_type = "RuntimeError", f"pytest outcome {type(exc).__name__} raised in the learner process"
    args = exc.args if all(type(a) in (str, int, float, bool, type(None)) for a in exc.args) else ()
    try:
        message = str(exc)
    except Exception:
        message = f"<{type(exc).__name__} with an unprintable message>"
    ws = os.path.join(_config.get("workspace", "/nonexistent"), "")
    frames = [
        f"{os.path.relpath(f.filename, ws)}:{f.lineno} in {f.name}"
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename.startswith(ws)
    ]
    return ("exc", base, learner_type, args, message[:8000], frames[-30:])


def _handle(op: str, payload: tuple) -> Any:
    if op == "call_fn":
        module, qualname, args, kwargs = payload
        return _call_target(module, qualname)(*args, **kwargs)
    if op == "import":
        from roadmap_cli.grading_kit.learner import learner_module

        return learner_module(payload[0])
    if op == "release":
        for ref_id in payload[0]:
            release(ref_id)
        return None
    obj = resolve_ref(payload[0])
    if op == "getattr":
        return getattr(obj, payload[1])
    if op == "setattr":
        setattr(obj, payload[1], payload[2])
        return None
    if op == "call":
        return obj(*payload[1], **payload[2])
    if op == "len":
        return len(obj)
    if op == "getitem":
        return obj[payload[1]]
    if op == "setitem":
        obj[payload[1]] = payload[2]
        return None
    if op == "iter":
        return iter(obj)
    if op == "next":
        return next(obj)  # StopIteration travels back as an exception
    if op == "contains":
        return payload[1] in obj
    if op == "bool":
        return bool(obj)
    if op == "repr":
        return repr(obj)
    if op == "str":
        return str(obj)
    raise ValueError(f"unknown request {op!r}")


def serve(req_fd: int, reply_fd: int) -> None:
    global _config
    _config = pickle.loads(wire.recv(req_fd))
    _set_limits(_config.get("memory_limit_mb"), int(_config.get("nofile", 1024)))
    from roadmap_cli.grading_kit.learner_extras import nproc_is_per_namespace

    if _config.get("walled") and _config.get("nproc") and nproc_is_per_namespace():
        # Behind the OS wall this process is alone in a new user namespace, where RLIMIT_NPROC counts only the
        # processes started inside it (Linux >= 5.14): a fork bomb stops here. Outside the wall, or on an older
        # kernel, it would count every process of the host user, and CUDA's or OpenMP's threads would fail to
        # start on a busy machine, so it is not set there; root is exempt either way.
        resource.setrlimit(resource.RLIMIT_NPROC, (int(_config["nproc"]), int(_config["nproc"])))
    _drop_privileges()
    faulthandler.enable(file=sys.stderr, all_threads=False)
    _install_audit_hook(_config.get("forbidden_read", []), _config.get("forbidden_write", []))
    _layout(_config["workspace"], _config["tests_dir"])
    from roadmap_cli.grading_kit import sandbox

    sandbox.mark_learner_process()
    # The lab-code check answers at once (the grader waits for this "ready" even in a grade that never calls
    # the learner): a refused workspace imports nothing and every request is answered with the refusal.
    refused = _check_lab_code()
    wire.send(reply_fd, wire.dumps_reply(("ready", None, [refused] if refused else [])))
    if refused:
        _serve_refusal(req_fd, reply_fd, refused)
        return
    for name in _config.get("preload", []):  # e.g. the adapter (and torch with it), while pytest collects
        try:
            importlib.import_module(name)
        except BaseException:  # reported on the first call that needs it
            sys.modules.pop(name, None)
    global _pinned
    _pinned = _Pinned()
    _pinned.pin_loaded()  # before the first learner module: the adapter imports them only when called
    while True:
        try:
            request = wire.recv(req_fd)
        except EOFError:
            return
        adapter_call = False
        try:
            op, payload, released = pickle.loads(request)
            for ref_id in released:
                release(ref_id)
            # Around each adapter call (where facts are made): ~1 ms. Learner code that ran in another request
            # (a method of its object) is caught before the adapter runs again, and none of it changes a fact
            # already sent.
            adapter_call = op == "call_fn"
            tampered = _pinned.changed() if adapter_call else None
            if tampered:
                raise _Tampered(tampered)
            value = _handle(op, payload)
            reply = ("ok", wire.encode(value, remember))
        except BaseException as exc:  # noqa: BLE001 - every learner failure is reported, never fatal here
            reply = _error_reply(exc)
        tampered = _pinned.changed() if adapter_call else None
        if tampered and tampered not in _violations:
            _violations.append(tampered)
        new, _violations[:] = list(_violations), []
        try:
            data = wire.dumps_reply((*reply, new))
        except Exception as exc:  # e.g. an exception argument that cannot be pickled
            data = wire.dumps_reply(
                ("exc", "RuntimeError", "unpicklable", (), f"cannot send the result: {exc}", [], new)
            )
        sys.stdout.flush()
        wire.send(reply_fd, data)


class _Tampered(RuntimeError):
    def __init__(self, why: str) -> None:
        super().__init__(f"not allowed while grading: your code {why}")
        _violations.append(why)


def _serve_refusal(req_fd: int, reply_fd: int, refused: str) -> None:
    """Every request of a refused workspace is answered with the refusal (no learner module is imported)."""
    while True:
        try:
            wire.recv(req_fd)
        except EOFError:
            return
        wire.send(
            reply_fd,
            wire.dumps_reply(
                ("exc", "RuntimeError", "refused by the lab-code check", (), f"not graded: {refused}", [], [refused])
            ),
        )


def main() -> None:
    req_fd, reply_fd = int(sys.argv[1]), int(sys.argv[2])
    serve(req_fd, reply_fd)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: learner atexit handlers must not hang the grade
