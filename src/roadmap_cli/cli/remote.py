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
    return {"name": remote.name, "url": remote.url, "user": remote.user, "host": remote.host, "port": remote.port,
            "added": remote.added, "python": remote.python}


@remote_app.command("add")
def add(
    name: NameArg,
    url: Annotated[str, typer.Argument(help="ssh://user@host[:port] (a Host alias from ~/.ssh/config works too: "
                                            "ssh://gpu-box).")],
    replace: Annotated[bool, typer.Option("--replace", help="Point an existing name at this URL.")] = False,
    python: Annotated[Optional[str], typer.Option("--python", help="The far side's python for `grade --on` "
                                                  "(absolute path; default: python3 on the remote's PATH). "
                                                  "If it imports torch, its packages are reused.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember a machine under a name. Nothing is contacted: `roadmap remote check NAME` tries it."""
    from roadmap_cli import remotes
    from roadmap_cli.output import emit

    remote = remotes.add(context.current().home, name, url, replace=replace, python=python)
    emit("remote add", _row(remote), as_json=as_json,
         render=lambda console: console.print(f"Added remote {remote.name}: {remote.url}\n"
                                              f"Next: `roadmap remote check {remote.name}`."))


@remote_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """Every remote, with its URL."""
    from roadmap_cli import remotes
    from roadmap_cli.output import emit

    rows = [_row(r) for r in remotes.load(context.current().home).values()]

    def render(console):
        if not rows:
            console.print("No remotes yet: `roadmap remote add NAME ssh://user@host[:port]`.")
            return
        # Lines, not a table: a name or URL is never cut to fit a narrow terminal (it wraps whole there).
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            console.print(f"{row['name']:<{width}}  {row['url']}  (added {row['added']})", markup=False,
                          highlight=False, soft_wrap=True)

    emit("remote list", {"remotes": rows}, as_json=as_json, render=render)


@remote_app.command("remove")
def remove(name: NameArg, as_json: JsonOpt = False) -> None:
    """Forget a remote: its shared ssh connection is closed, and its far agent (`grade --on`) asked to stop
    when that connection is still open (else it stops itself after 15 idle minutes). Files on the machine
    are left there."""
    from roadmap_cli import remotes
    from roadmap_cli.grading.remote_grade import stop_far_agent
    from roadmap_cli.output import emit

    home = context.current().home
    stop_far_agent(home, remotes.get(home, name))  # through the shared connection, before it is closed
    remote = remotes.remove(home, name)
    emit("remote remove", _row(remote), as_json=as_json,
         render=lambda console: console.print(f"Removed remote {remote.name} ({remote.url})."))


def _gib(value: Optional[int]) -> str:
    return "-" if value is None else f"{value / 2**30:.1f} GiB"


@remote_app.command("check")
def check(
    name: NameArg,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds to wait for the machine.")] = 60,
    as_json: JsonOpt = False,
) -> None:
    """Connect once: python, torch and its CUDA, GPU model, driver and free disk on the far side."""
    from dataclasses import asdict

    from roadmap_cli import remotes
    from roadmap_cli.output import emit

    facts = remotes.check(context.current().home, name, timeout_s=timeout)
    data = {**asdict(facts), "gpu_model": facts.gpu_model, "driver": facts.driver}

    def render(console):
        torch = facts.torch or "not installed"
        if facts.torch and facts.torch_cuda:
            torch += f" (CUDA {facts.torch_cuda}, {'GPU visible' if facts.cuda_available else 'no GPU visible'})"
        elif facts.torch:
            torch += " (CPU build)"
        lines = [
            ("reached in", f"{facts.round_trip_s:.2f} s"),
            ("host", f"{facts.hostname or '-'} ({facts.os or '-'}, {facts.cpus or '-'} CPUs)"),
            ("python", facts.python or "python3 not found"),
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
