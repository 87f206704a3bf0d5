"""Remote machines: remote add|list|remove|check (a rented GPU reached over ssh)."""

from typing import Optional

import typer
from typing_extensions import Annotated

from roadmap_cli import context

JsonOpt = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]
NameArg = Annotated[str, typer.Argument(help="The remote's name (see `roadmap remote list`).")]

remote_app = typer.Typer(
    help="Machines you grade on over ssh (e.g. a rented GPU): add, list, remove, check. "
    "ssh uses your ~/.ssh/config and ssh-agent; roadmap never stores a password.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(remote_app, name="remote")


def _row(remote) -> dict:
    return {
        "name": remote.name,
        "url": remote.url,
        "user": remote.user,
        "host": remote.host,
        "port": remote.port,
        "added": remote.added,
        "python": remote.python,
        "torch": remote.torch,
        "torch_index": remote.torch_index,
    }


@remote_app.command("add")
def add(
    name: NameArg,
    url: Annotated[
        str, typer.Argument(help="ssh://user@host[:port] (a Host alias from ~/.ssh/config works too: ssh://gpu-box).")
    ],
    replace: Annotated[bool, typer.Option("--replace", help="Point an existing name at this URL.")] = False,
    python: Annotated[
        Optional[str],
        typer.Option(
            "--python",
            help="The far side's python for `grade --on` "
            "(absolute path; default: python3 on the remote's PATH). "
            "If it imports torch, its packages are reused.",
        ),
    ] = None,
    torch: Annotated[
        Optional[str],
        typer.Option(
            "--torch",
            metavar="SPEC",
            help="Where the far python has no torch: the pip requirement a first "
            "`grade --on` installs (e.g. torch==2.13.0, or a wheel's path there; default: roadmap's torch range).",
        ),
    ] = None,
    torch_index: Annotated[
        Optional[str],
        typer.Option(
            "--torch-index",
            metavar="URL|pip",
            help="The index pip takes torch from there (default: PyTorch's CPU "
            "index on a machine without an NVIDIA driver, PyPI's CUDA build with one); `pip`: pip's own "
            "configuration there (pip.conf: a mirror, find-links).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember a machine under a name. Nothing is contacted: `roadmap remote check NAME` tries it."""
    from roadmap_cli.grading.remote import registry
    from roadmap_cli.formats.output import emit

    remote = registry.add(
        context.current().home, name, url, replace=replace, python=python, torch=torch, torch_index=torch_index
    )
    emit(
        "remote add",
        _row(remote),
        as_json=as_json,
        render=lambda console: console.print(
            f"Added remote {remote.name}: {remote.url}\nNext: `roadmap remote check {remote.name}`."
        ),
    )


@remote_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """Every remote, with its URL."""
    from roadmap_cli.grading.remote import registry
    from roadmap_cli.formats.output import emit

    rows = [_row(r) for r in registry.load(context.current().home).values()]

    def render(console):
        if not rows:
            console.print("No remotes yet: `roadmap remote add NAME ssh://user@host[:port]`.")
            return
        # Lines, not a table: a name or URL is never cut to fit a narrow terminal (it wraps whole there).
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            console.print(
                f"{row['name']:<{width}}  {row['url']}  (added {row['added']})",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )

    emit("remote list", {"remotes": rows}, as_json=as_json, render=render)


@remote_app.command("remove")
def remove(name: NameArg, as_json: JsonOpt = False) -> None:
    """Forget a remote: its far agent (`grade --on`) is asked to stop (through the shared ssh connection, or
    a login when none is open; an unreachable machine gets one line, and its agent stops by itself after 15
    idle minutes), and the shared connection is closed. Files on the machine are left there."""
    from roadmap_cli.grading.remote import registry
    from roadmap_cli.grading.remote.session import stop_far_agent
    from roadmap_cli.formats.output import emit

    home = context.current().home
    far_agent = stop_far_agent(home, registry.get(home, name))  # through the shared connection, before it is closed
    remote = registry.remove(home, name)
    word, _, why = far_agent.partition(": ")

    def render(console):
        console.print(f"Removed remote {remote.name} ({remote.url}).", markup=False, highlight=False)
        if word == "unreachable":
            # Not an error: the remote is forgotten either way; the far agent ends itself when idle.
            typer.echo(
                f"warning: could not reach {remote.name} to stop its far agent ({why}); it stops by itself "
                f"after 15 idle minutes",
                err=True,
            )

    emit(
        "remote remove",
        {**_row(remote), "far_agent": word, "far_agent_problem": why or None},
        as_json=as_json,
        render=render,
    )


def _gib(value: Optional[int]) -> str:
    return "-" if value is None else f"{value / 2**30:.1f} GiB"


@remote_app.command("check")
def check(
    name: NameArg,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds to wait for the machine.")] = 60,
    as_json: JsonOpt = False,
) -> None:
    """Connect once, with the python `grade --on` uses there (this roadmap's managed venv once a first
    `grade --on` made it, else `remote add --python`): python, torch and its CUDA (or which build a first
    grade would install), GPU model, driver and free disk on the far side."""
    from dataclasses import asdict

    from roadmap_cli.grading.remote import registry
    from roadmap_cli.formats.output import emit

    from roadmap_cli.grading.remote.wheel import build_tag

    home = context.current().home
    remote = registry.get(home, name)
    # This build's managed venv there, once a first `grade --on` made it, is what every later grade runs with.
    try:
        tag = build_tag(home)[0]
    except (OSError, ImportError, ValueError):  # no build to name (a broken install): the far python is probed
        tag = None
    facts = registry.check(home, name, timeout_s=timeout, tag=tag)
    data = {**asdict(facts), "gpu_model": facts.gpu_model, "driver": facts.driver}

    def render(console):
        torch = facts.torch or "not installed"
        if facts.torch and facts.torch_cuda:
            torch += f" (CUDA {facts.torch_cuda}, {'GPU visible' if facts.cuda_available else 'no GPU visible'})"
        elif facts.torch:
            torch += " (CPU build)"
        elif facts.torch_install:
            torch += f"; a first `grade --on` installs {facts.torch_install}"
        python = (
            (f"{facts.python} ({facts.executable})" if facts.executable else facts.python)
            if facts.python
            else f"{remote.python or 'python3'} not found"
        )
        if facts.managed_venv:
            python = f"{facts.python} (roadmap's managed venv {facts.managed_venv}, made by the first `grade --on`)"
        if facts.python and facts.ensurepip is False and not facts.torch:
            package = "python" + ".".join(facts.python.split(".")[:2]) + "-venv"
            python += (
                f"; no ensurepip, so no pip for a venv: run "
                f"`{remote.ssh_command('sudo', 'apt-get', 'install', '-y', package, tty=True)}`"
            )
        lines = [
            ("reached in", f"{facts.round_trip_s:.2f} s"),
            ("host", f"{facts.hostname or '-'} ({facts.os or '-'}, {facts.cpus or '-'} CPUs)"),
            ("python", python),
            ("torch", torch),
            ("GPU", ", ".join(g["name"] for g in facts.gpus) if facts.gpus else "none (no nvidia-smi)"),
            ("driver", facts.driver or "-"),
            ("free disk (home)", _gib(facts.disk_free_bytes)),
        ]
        # Lines, not a table: a host name, OS string or URL is never cut at a narrow terminal.
        console.print(f"{facts.name} — {facts.url}", markup=False, highlight=False, soft_wrap=True)
        for label, value in lines:
            console.print(f"  {label:<17} {value}", markup=False, highlight=False, soft_wrap=True)

    emit("remote check", data, as_json=as_json, render=render)
