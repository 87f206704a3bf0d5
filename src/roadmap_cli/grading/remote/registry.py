"""Remote machines a learner can grade on: `roadmap remote add|list|remove|check`.

Most people on this roadmap rent their GPU by the hour. A remote is a name
for such a machine and the ssh URL that reaches it (`ssh://user@host[:port]`).
The system's OpenSSH client does the connecting, so `~/.ssh/config` (host
aliases, jump hosts, identity files) and a running ssh-agent work exactly as
they do for `ssh` itself; roadmap never asks for or stores a password.

Remotes belong to this machine, not to the learner's progress: they live in a
small JSON file in the data home (`remotes.json`), not in the database a
cohort may share. `ROADMAP_SSH_CONFIG` names an ssh_config to use instead of
`~/.ssh/config` (OpenSSH reads the config from the account's real home
directory, not from $HOME, so this is how a test, or a second set of keys,
points ssh elsewhere).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from roadmap_cli.errors import ExitCode, NotFoundError, RoadmapError, StoreError, UserError
from roadmap_cli.store import values
from roadmap_cli.formats.timeutil import utc_now_iso

FILE_NAME = "remotes.json"
FORMAT_VERSION = 1
NAME_PATTERN = re.compile(values.REMOTE_NAME_PATTERN)
SSH_CONFIG_VAR = "ROADMAP_SSH_CONFIG"
CONTROL_DIR = "ssh-mux"  # in the data home (0700): the sockets of shared ssh connections, one per remote
CONTROL_PERSIST_S = 600  # a shared connection stays open this long after its last grade
SHARE_VAR = "ROADMAP_SSH_SHARE"  # "0": a fresh ssh connection for every grade (no connection sharing)
# ssh exits 255 when the connection itself failed (host unknown, refused, key rejected); any other status is the
# remote command's own.
SSH_CONNECTION_FAILED = 255


class RemoteError(RoadmapError):
    """The remote could not be reached, or what ran there failed."""

    exit_code = ExitCode.REMOTE


@dataclass(frozen=True)
class Remote:
    name: str
    host: str
    user: Optional[str] = None
    port: Optional[int] = None
    added: str = ""
    # The far side's python (`remote add --python`); None: `python3` from the remote login's PATH.
    python: Optional[str] = None
    # Where a first `grade --on` gets torch when the far python has none (`remote add --torch/--torch-index`):
    # a pip requirement (default: roadmap's own torch range) and an index URL, or "pip" for pip's own
    # configuration there (default: the CPU build's index without an NVIDIA driver, PyPI with one).
    torch: Optional[str] = None
    torch_index: Optional[str] = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        return f"ssh://{self.user + '@' if self.user else ''}{host}{':' + str(self.port) if self.port else ''}"

    def ssh_argv(self, command: str, *, connect_timeout_s: int = 10, control: Optional[Path] = None) -> list[str]:
        """`ssh ... HOST COMMAND`, never prompting: a password prompt in a
        command that is not interactive would hang, so keys or an agent are
        required (BatchMode) and the line says so when they are missing.
        `control`: the socket of a shared connection (control_path())."""
        argv = [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={connect_timeout_s}",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
        ]
        if control is not None:
            # OpenSSH's connection sharing: the first grade's ssh leaves a master connection behind (its own
            # session, stdio on /dev/null) for CONTROL_PERSIST_S; the next grades open a session on it and
            # skip the TCP and key exchange. A socket left by a master that is gone is removed by ssh
            # itself (ControlMaster=auto unlinks a refused socket and connects afresh).
            argv += [
                "-o",
                "ControlMaster=auto",
                "-o",
                f"ControlPath={control}",
                "-o",
                f"ControlPersist={CONTROL_PERSIST_S}",
            ]
        config = os.environ.get(SSH_CONFIG_VAR)
        if config:
            argv += ["-F", config]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.user:
            argv += ["-l", self.user]
        # "--" ends ssh's options: a host can never be read as one.
        return argv + ["--", self.host, command]

    def ssh_command(self, *words: str, tty: bool = False) -> str:
        """The exact `ssh` command a person types to reach this remote as roadmap does (its ssh_config, port
        and user), e.g. to accept its host key: `ssh -p 2222 ubuntu@gpu.example.com`."""
        import shlex

        argv = ["ssh"] + (["-t"] if tty else [])  # -t: a command that may prompt (sudo) gets a terminal
        config = os.environ.get(SSH_CONFIG_VAR)
        if config:
            argv += ["-F", config]
        if self.port:
            argv += ["-p", str(self.port)]
        argv.append(f"{self.user}@{self.host}" if self.user else self.host)
        return " ".join(shlex.quote(a) for a in argv + list(words))

    def add_command(self, **changes: str) -> str:
        """The exact `roadmap remote add NAME URL --replace ...` that keeps this remote's settings and
        changes `changes` (e.g. python="PATH")."""
        options = {"python": self.python, "torch": self.torch, "torch-index": self.torch_index}
        options.update({k.replace("_", "-"): v for k, v in changes.items()})
        words = [f"--{k} {v}" for k, v in options.items() if v]
        return " ".join(["roadmap remote add", self.name, self.url, "--replace", *words])


def parse_url(url: str) -> tuple[Optional[str], str, Optional[int]]:
    """`ssh://user@host:port` -> (user, host, port). The user and port are
    optional (ssh's config or defaults fill them in); anything else (another
    scheme, a path, a password in the URL) is refused with one line."""
    text = url.strip()
    if "://" not in text:
        raise UserError(f"remote URL {url!r} must look like ssh://user@host or ssh://user@host:port")
    parts = urlsplit(text)
    if parts.scheme.lower() != "ssh":
        raise UserError(f"remote URL {url!r} uses {parts.scheme!r}; only ssh:// is supported")
    if parts.password is not None:
        raise UserError(
            "a remote URL must not carry a password: use an ssh key or ssh-agent (roadmap never stores passwords)"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UserError(f"remote URL {url!r} has a path or query; give only ssh://user@host[:port]")
    try:
        port = parts.port
    except ValueError:
        raise UserError(f"remote URL {url!r} has a port that is not a number between 1 and 65535") from None
    host = parts.hostname
    if not host:
        raise UserError(f"remote URL {url!r} names no host")
    if host.startswith("-") or (parts.username or "").startswith("-"):
        raise UserError(f"remote URL {url!r}: a host or user may not start with '-'")
    if port is not None and not 1 <= port <= 65535:
        raise UserError(f"remote URL {url!r} has port {port}; ports are 1-65535")
    return parts.username or None, host, port


# ---------------------------------------------------------------- the file in the data home


def _path(home: Path) -> Path:
    return home / FILE_NAME


def load(home: Path) -> dict[str, Remote]:
    """Every remote, by name (empty when none was ever added)."""
    path = _path(home)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown version {data.get('version')!r}")
        return {
            name: Remote(
                name=name,
                host=entry["host"],
                user=entry.get("user"),
                port=entry.get("port"),
                added=entry.get("added", ""),
                python=entry.get("python"),
                torch=entry.get("torch"),
                torch_index=entry.get("torch_index"),
            )
            for name, entry in data["remotes"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(
            f"{path} is not a remotes file roadmap can read ({exc}); fix or delete it, then add the remotes again"
        ) from None


def _save(home: Path, remotes: dict[str, Remote]) -> None:
    """Written to a temporary file and renamed over the old one: a crash
    mid-write never leaves half a file (and never loses the other remotes)."""
    path = _path(home)
    body = {
        "version": FORMAT_VERSION,
        "remotes": {
            name: {k: v for k, v in asdict(r).items() if k != "name" and v is not None}
            for name, r in sorted(remotes.items())
        },
    }
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


def get(home: Path, name: str) -> Remote:
    remotes = load(home)
    if name not in remotes:
        raise NotFoundError(
            "remote",
            name,
            remotes,
            hint="see `roadmap remote list`; add one with `roadmap remote add NAME ssh://user@host`",
        )
    return remotes[name]


def add(
    home: Path,
    name: str,
    url: str,
    *,
    replace: bool = False,
    python: Optional[str] = None,
    torch: Optional[str] = None,
    torch_index: Optional[str] = None,
) -> Remote:
    if not NAME_PATTERN.match(name):
        raise UserError(
            f"remote name {name!r}: use letters, digits, '.', '_' or '-' (at most 40, starting with a letter or digit)"
        )
    user, host, port = parse_url(url)
    remotes = load(home)
    if name in remotes and not replace:
        raise UserError(
            f"remote {name!r} already exists ({remotes[name].url}); use --replace to point it "
            "elsewhere, or choose another name"
        )
    if python is not None and (not python.startswith("/") or any(c.isspace() or c in "'\"$`\\;&|<>" for c in python)):
        raise UserError(
            f"--python {python!r}: give the absolute path of the far side's python (no spaces or "
            "shell characters), e.g. /usr/bin/python3"
        )
    if torch is not None and (not torch.strip() or torch.strip().startswith("-")):
        raise UserError(f"--torch {torch!r}: give a pip requirement, e.g. torch==2.13.0 (or a wheel's path there)")
    if torch_index is not None and torch_index != "pip" and not re.match(r"^(https?|file)://\S+$", torch_index):
        raise UserError(
            f"--torch-index {torch_index!r}: give an index URL (https://…, file://…), or `pip` for "
            "pip's own configuration on the remote"
        )
    remote = Remote(
        name=name,
        host=host,
        user=user,
        port=port,
        added=utc_now_iso(),
        python=python,
        torch=torch.strip() if torch else None,
        torch_index=torch_index,
    )
    if name in remotes:
        close_shared(home, remotes[name])  # replaced: its shared connection goes to the old machine
    remotes[name] = remote
    _save(home, remotes)
    new_key(home, name)  # a fresh key: a replaced remote is another machine, and must not share the old one's
    return remote


def remove(home: Path, name: str) -> Remote:
    remotes = load(home)
    remote = get(home, name)
    del remotes[name]
    _save(home, remotes)
    close_shared(home, remote)
    try:
        _key_path(home, name).unlink()
    except FileNotFoundError:
        pass
    return remote


# ---------------------------------------------------------------- shared connections (OpenSSH ControlMaster)

# A unix socket's path is at most 108 bytes, and ssh binds a temporary name (the path + 17 characters) first.
_MAX_SOCKET_PATH = 90


def control_path(home: Path, remote: Remote) -> Optional[Path]:
    """The control socket of `remote`'s shared connection, or None for no sharing (ROADMAP_SSH_SHARE=0, or a
    data home whose path is too long for a unix socket). The name hashes where the remote points and the ssh
    config in use, so a replaced remote never reuses a connection to the old machine."""
    if os.environ.get(SHARE_VAR) == "0":
        return None
    import hashlib

    ident = "\0".join(
        [remote.name, remote.user or "", remote.host, str(remote.port or ""), os.environ.get(SSH_CONFIG_VAR, "")]
    )
    folder = home / CONTROL_DIR
    path = folder / hashlib.sha256(ident.encode()).hexdigest()[:12]
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)  # whoever can open the socket can run commands on the remote as this user
    except OSError:
        return None
    return path


def close_shared(home: Path, remote: Remote) -> None:
    """End `remote`'s shared connection, if one is open (`remote remove`, `remote add --replace`)."""
    path = control_path(home, remote)
    if path is None or not path.exists():
        return
    try:
        subprocess.run(
            remote.ssh_argv("true", control=path)[:-3] + ["-O", "exit", "--", remote.host],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        path.unlink()  # a master that did not answer: its socket must not outlive the remote
    except OSError:
        pass


# ---------------------------------------------------------------- the result key
#
# `grade --on` results travel signed (HMAC-SHA256) with a key made here at `remote add`: this side keeps it in
# the data home (0600), the far side in the data home of its managed folder, which the OS wall hides from the
# learner's code exactly as it hides this data home from a local grade (grading/isolation.learner_view).
# A remote added before keys existed gets one on its first `grade --on` (key()).


def _key_path(home: Path, name: str) -> Path:
    return home / "remote-keys" / name


def new_key(home: Path, name: str) -> bytes:
    import secrets

    folder = home / "remote-keys"
    key = secrets.token_bytes(32)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = _key_path(home, name)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(key.hex() + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write the key of remote {name!r} in {folder}: {exc.strerror or exc}") from None
    return key


def key(home: Path, name: str) -> bytes:
    """The remote's result key (made now if it was added before keys existed)."""
    try:
        return bytes.fromhex(_key_path(home, name).read_text().strip())
    except FileNotFoundError:
        return new_key(home, name)
    except (OSError, ValueError) as exc:
        try:
            again = get(home, name).add_command()
        except RoadmapError:
            again = f"roadmap remote add {name} URL --replace"
        raise StoreError(
            f"the key of remote {name!r} ({_key_path(home, name)}) is unreadable ({exc}); `{again}` makes a new one"
        ) from None


# ---------------------------------------------------------------- what is on the far side

# Runs on the remote with its own python3, whatever roadmap version (if any) is
# installed there: standard library only, and torch only if it imports. One
# JSON line on stdout, so nothing a login banner prints can be mistaken for it.
_PROBE = r"""
import json, os, platform, shutil, subprocess, sys
out = {"python": platform.python_version(), "executable": sys.executable, "os": platform.platform(),
       "hostname": platform.node(), "cpus": os.cpu_count(),
       "managed_venv": sys.prefix if sys.argv[1:] == ["managed"] else None}
try:
    usage = shutil.disk_usage(os.path.expanduser("~"))
    out["disk_free_bytes"] = usage.free
except OSError:
    out["disk_free_bytes"] = None
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20)
    rows = [[c.strip() for c in line.split(",")] for line in smi.stdout.splitlines() if line.strip()]
    out["gpus"] = [{"name": r[0], "driver": r[1], "memory": r[2]} for r in rows if len(r) >= 3]
except (OSError, subprocess.TimeoutExpired):
    out["gpus"] = []
out["nvidia_driver"] = os.path.exists("/proc/driver/nvidia/version") or bool(out["gpus"])
try:
    import ensurepip
    out["ensurepip"] = True
except ImportError:
    out["ensurepip"] = False
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
except Exception as exc:
    out["torch"] = None
    out["torch_error"] = type(exc).__name__
print("ROADMAP-PROBE " + json.dumps(out))
"""
_PROBE_MARK = "ROADMAP-PROBE "


def _probe_command(python: Optional[str], tag: Optional[str] = None) -> str:
    """What the remote's login shell runs (the probe arrives on stdin), with the python `grade --on` uses
    there: the managed venv of this build (`tag`) once a first grade made it (grading/remote/agent.py's
    ROOT/envs/TAG, `ready` when done), else the far python (`remote add --python`, else python3 on the PATH).
    No such python is an answer, not a failure."""
    import shlex

    py = shlex.quote(python or "python3")
    probe = f"command -v {py} >/dev/null 2>&1 && exec {py} - || echo 'ROADMAP-PROBE {{\"python\": null}}'"
    if not tag:
        return probe
    # The same ROOT the far agent computes (ROADMAP_REMOTE_ROOT where the far side sets it).
    env = '"${ROADMAP_REMOTE_ROOT:-$HOME/.roadmap-remote}/envs/"' + shlex.quote(tag)
    return f'v={env}; if [ -f "$v/ready" ] && [ -x "$v/bin/python" ]; then exec "$v/bin/python" - managed; fi; {probe}'


@dataclass
class RemoteFacts:
    name: str
    url: str
    reachable: bool
    round_trip_s: float
    python: Optional[str] = None
    hostname: Optional[str] = None
    os: Optional[str] = None
    cpus: Optional[int] = None
    torch: Optional[str] = None
    torch_cuda: Optional[str] = None
    cuda_available: Optional[bool] = None
    gpus: Optional[list] = None
    disk_free_bytes: Optional[int] = None
    executable: Optional[str] = None  # the far python's own path (the one `grade --on` uses)
    ensurepip: Optional[bool] = None  # False: a venv made there gets no pip (Debian's python3.X-venv missing)
    nvidia_driver: Optional[bool] = None
    torch_install: Optional[str] = None  # what a first `grade --on` installs there when torch is missing
    managed_venv: Optional[str] = None  # the managed venv probed (a first `grade --on` made it), else None

    @property
    def gpu_model(self) -> Optional[str]:
        return self.gpus[0]["name"] if self.gpus else None

    @property
    def driver(self) -> Optional[str]:
        return self.gpus[0]["driver"] if self.gpus else None


def ssh_failure(remote: Remote, stderr: str) -> RemoteError:
    """ssh's last stderr line as one RemoteError, with a hint where the cause is usual (a key not loaded, a host key not accepted)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "ssh exited without a message"
    hint = ""
    if "Permission denied" in last:
        hint = (
            " (roadmap runs ssh without prompting: load your key into ssh-agent or name it in ~/.ssh/config, "
            f"so that `{remote.ssh_command()}` logs in without a password)"
        )
    elif "Host key verification failed" in last:
        hint = f" (connect once with `{remote.ssh_command()}` to accept the host key)"
    return RemoteError(f"cannot reach remote {remote.name!r} ({remote.url}): {last}{hint}")


def check(home: Path, name: str, *, timeout_s: float = 60, tag: Optional[str] = None) -> RemoteFacts:
    """Connect once and report what the far side has: python, torch and its
    CUDA, the GPU model and driver, free disk in the remote home. `tag`: this
    install's build (grading/remote/wheel.build_tag): its managed venv there,
    when a first `grade --on` made it, is the python probed."""
    remote = get(home, name)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            remote.ssh_argv(_probe_command(remote.python, tag)),
            input=_PROBE,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except FileNotFoundError:
        raise RemoteError(
            "the `ssh` command is not installed here (install OpenSSH's client, e.g. the Debian package openssh-client)"
        ) from None
    except subprocess.TimeoutExpired:
        raise RemoteError(f"remote {name!r} ({remote.url}) did not answer within {timeout_s:.0f} s") from None
    elapsed = time.perf_counter() - start
    if proc.returncode == SSH_CONNECTION_FAILED:
        raise ssh_failure(remote, proc.stderr)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(_PROBE_MARK)), None)
    if line is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RemoteError(f"remote {name!r} answered, but its probe did not run (exit {proc.returncode}): {tail}")
    data = json.loads(line[len(_PROBE_MARK) :])
    fields = {
        k: data.get(k)
        for k in (
            "python",
            "hostname",
            "os",
            "cpus",
            "torch",
            "torch_cuda",
            "cuda_available",
            "gpus",
            "disk_free_bytes",
            "executable",
            "ensurepip",
            "nvidia_driver",
            "managed_venv",
        )
    }
    facts = RemoteFacts(name=name, url=remote.url, reachable=True, round_trip_s=round(elapsed, 3), **fields)
    if facts.python and not facts.torch and not facts.managed_venv:
        facts.torch_install = torch_install_plan(remote, bool(facts.nvidia_driver))
    return facts


def torch_install_plan(remote: Remote, nvidia_driver: bool) -> str:
    """What a first `grade --on` installs where the far python has no torch, and why (the far agent decides
    the same way: grading/remote/agent.torch_plan)."""
    spec = remote.torch or "torch"
    if remote.torch_index:
        where = "pip's own configuration there" if remote.torch_index == "pip" else remote.torch_index
        return f"{spec} from {where} (--torch-index)"
    if nvidia_driver:
        return f"{spec}, the CUDA build from PyPI (an NVIDIA driver is there)"
    return f"{spec}, the CPU build from download.pytorch.org (no NVIDIA driver there)"
