"""`roadmap grade --on NAME` on a bare box (issue 36, item 1), against a real OpenSSH server on loopback.

The far python is a fresh `python -m venv --without-pip` of this test run's
own Python: the standard library and nothing else (no pip, no torch, no
typer, not roadmap). The first `grade --on` must give its managed venv pip
(ensurepip), install torch (the CPU build: this machine has no NVIDIA driver)
and every other dependency, then grade; the second must reuse all of it.

The honest shortcut: this machine reaches PyPI only (PyTorch's CPU index is
not reachable), so the remote is added with `--torch torch==2.13.0
--torch-index pip`: pip's own configuration there (here, a find-links folder
holding the CPU wheel), the override a box behind a mirror uses. The first
grade takes about a minute (pip unpacking torch, triton, onnxruntime, ... from
its cache); the rest are seconds.

A second far python has no ensurepip (as Debian's python3 without
python3.X-venv): the grade stops at once with one line naming the package and
the exact ssh command that installs it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TORCH_SPEC = "torch==2.13.0"  # the CPU wheel that lies on this kind of machine's disk (pip's find-links)


def _bare_python(folder: Path) -> Path:
    """A python with the standard library only: a venv without pip of this interpreter's base Python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True, timeout=120
    )
    python = folder / "bin" / "python"
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u, json; print(json.dumps("
            "[m for m in ('pip', 'torch', 'typer', 'pydantic', 'roadmap_cli') if u.find_spec(m)]))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert json.loads(probe.stdout) == [], probe  # truly bare
    return python


def _python_without_ensurepip(folder: Path, python: Path) -> Path:
    """`python` as Debian's python3 is without python3.X-venv: `import ensurepip` fails."""
    shadow = folder / "no-ensurepip"
    (shadow / "ensurepip").mkdir(parents=True)
    (shadow / "ensurepip" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ensurepip'\", name='ensurepip')\n"
    )
    wrapper = folder / "python3-no-venv"
    # Its own managed folder: the bare python's venv (another test's) must not be found ready.
    root = folder / "no-venv-root"
    wrapper.write_text(
        f"#!/bin/sh\nROADMAP_REMOTE_ROOT={shlex.quote(str(root))} PYTHONPATH={shlex.quote(str(shadow))} "
        f'exec {shlex.quote(str(python))} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="module")
def bare_far(tmp_path_factory):
    from sshd import far_side

    pythons = tmp_path_factory.mktemp("bare-pythons")
    bare = _bare_python(pythons / "bare")
    # The far side's pip configuration, as a box behind a mirror has it (a login there gets no PIP_* of ours).
    pip_env = tuple(
        f'{k}="{v}"'
        for k, v in os.environ.items()
        if k in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT")
    )
    server = far_side(tmp_path_factory.mktemp("bare-far-root"), more_env=pip_env)
    root = server.far_root
    server.bare, server.no_venv = bare, _python_without_ensurepip(pythons, bare)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)  # a managed venv with torch: 2 GB


@pytest.fixture
def ssh_env(bare_far, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROADMAP_SSH_CONFIG", str(bare_far.client_config))
    return bare_far


# Runs before the bare-python test: that one leaves a ready managed venv under the account's shared ROOT, which
# `remote check` then reports for any python of the account (this test's ROOT differs only inside its python
# wrapper, which the probe's shell cannot see).
def test_a_python_without_ensurepip_is_one_line_naming_the_package_and_the_exact_ssh_command(
    ssh_env, run_cli, adder_workspace: Path, roadmap_home: Path
):
    far = ssh_env
    assert run_cli("remote", "add", "novenv", far.url, "--python", str(far.no_venv)).exit_code == 0
    try:
        version = "%d.%d" % sys.version_info[:2]
        ssh = f"ssh -t -F {far.client_config} -p {far.port} {far.user}@127.0.0.1"
        result = run_cli("grade", "--on", "novenv")
        assert result.exit_code == 5, result
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert "has no ensurepip" in result.stderr
        assert f"`{ssh} sudo apt-get install -y python{version}-venv`" in result.stderr, result.stderr
        assert (f"`roadmap remote add novenv {far.url} --replace --python PATH`") in result.stderr
        root = far.no_venv.parent / "no-venv-root"
        assert root.is_dir() and not list(root.glob("envs/*"))  # nothing installed, no wheel sent for nothing
        check = run_cli("remote", "check", "novenv")
        assert check.exit_code == 0 and f"{ssh} sudo apt-get install -y python{version}-venv" in check.stdout, check
        assert "a first `grade --on` installs torch, the CPU build" in check.stdout  # no NVIDIA driver here
    finally:
        run_cli("remote", "remove", "novenv")


# Also before the bare-python test, for the same reason (a known wrong answer: with a ready managed venv under
# the shared ROOT, `remote check` reports that venv even for a --python that does not exist).
def test_remote_check_honours_python_and_names_a_missing_one(ssh_env, run_cli, roadmap_home: Path):
    far = ssh_env
    run_cli("remote", "add", "nopy", far.url, "--python", "/nonexistent/python3")
    try:
        data = run_cli("remote", "check", "nopy", "--json").json()["data"]
        assert data["python"] is None
        out = run_cli("remote", "check", "nopy").stdout
        assert "/nonexistent/python3 not found" in out
    finally:
        run_cli("remote", "remove", "nopy")


@pytest.mark.e2e  # a whole install on the far side
@pytest.mark.slow
def test_first_grade_on_a_bare_python_installs_torch_cpu_and_the_rest_and_the_second_reuses(
    ssh_env, run_cli, adder_workspace: Path, roadmap_home: Path
):
    far = ssh_env
    assert (
        run_cli(
            "remote", "add", "bare", far.url, "--python", str(far.bare), "--torch", TORCH_SPEC, "--torch-index", "pip"
        ).exit_code
        == 0
    )
    try:
        # `remote check` probes the python grade --on will use, not python3 from the PATH.
        check = run_cli("remote", "check", "bare", "--json")
        facts = check.json()["data"]
        assert check.exit_code == 0, check
        assert facts["executable"] == str(far.bare) and facts["torch"] is None and facts["ensurepip"] is True
        assert facts["torch_install"] == f"{TORCH_SPEC} from pip's own configuration there (--torch-index)"

        first = run_cli("grade", "--on", "bare", "--json")
        assert first.exit_code == 1, first  # the starter fails, as it does locally
        data = first.json()["data"]
        assert data["graded_on"] == "bare" and data["sent"]["installed"] is True
        err = first.stderr
        assert "its python has no torch: pip installs torch==2.13.0 from pip's own configuration there" in err, err
        assert "missing here:" in err and "torch<2.14,>=2.5" in err  # roadmap's own requirement, named
        assert "installed torch 2.13.0+cpu: the CPU build (no CUDA)" in err, err
        assert "installing with pip:" in err and "typer" in err and "Traceback" not in err
        local = run_cli("grade", "--json").json()["data"]
        assert [(p["id"], p["status"], p["points"]) for p in data["parts"]] == [
            (p["id"], p["status"], p["points"]) for p in local["parts"]
        ]
        assert data["device"] == local["device"] and data["not_graded_here"] == ["gpu"]

        # What the managed venv holds: the torch CPU build, and pip (it did not have it from the far python).
        venv_python = next(far.far_root.glob("envs/*/bin/python"))
        built = subprocess.run(
            [str(venv_python), "-c", "import torch, typer, pip; print(torch.__version__, torch.version.cuda)"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert built.stdout.split() == ["2.13.0+cpu", "None"], built
        # `remote check` now probes that venv, what every later grade runs with: torch is there.
        checked = run_cli("remote", "check", "bare", "--json").json()["data"]
        assert checked["executable"] == str(venv_python) and checked["managed_venv"] == str(venv_python.parents[1])
        assert checked["torch"] == "2.13.0+cpu" and checked["torch_install"] is None, checked

        # The second grade reuses it: nothing installed, nothing from pip.
        (adder_workspace / "adder.py").write_text("def add(a, b):\n    return a + b\n")
        second = run_cli("grade", "--on", "bare", "--json")
        assert second.json()["data"]["sent"]["installed"] is False, second
        assert "pip" not in second.stderr and "first use" not in second.stderr
        assert any(p["id"] == "add" and p["status"] == "passed" for p in second.json()["data"]["parts"])
        # The footer says the grade ran remotely, and where.
        third = run_cli("grade", "--on", "bare")
        assert f"graded remotely on bare ({far.user}@127.0.0.1:{far.port})" in third.stdout, third
        assert "graded remotely" not in run_cli("grade").stdout
    finally:
        run_cli("remote", "remove", "bare")


def test_the_host_key_hint_names_port_and_user(
    run_cli, roadmap_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from roadmap_cli.grading.remote.registry import Remote, ssh_failure

    monkeypatch.delenv("ROADMAP_SSH_CONFIG", raising=False)
    remote = Remote(name="box", host="127.0.0.1", user="root", port=50869)
    error = ssh_failure(remote, "Host key verification failed.\n")
    assert "(connect once with `ssh -p 50869 root@127.0.0.1` to accept the host key)" in str(error)
    monkeypatch.setenv("ROADMAP_SSH_CONFIG", str(tmp_path / "my config"))
    assert Remote(name="b", host="gpu").ssh_command() == f"ssh -F '{tmp_path / 'my config'}' gpu"


def test_torch_plan_cpu_without_a_driver_cuda_with_one_and_the_overrides():
    from roadmap_cli.grading.remote import agent

    args, index, why = agent.torch_plan("torch<2.14,>=2.3", None, None)
    assert args == ["torch<2.14,>=2.3", "--index-url", agent.CPU_TORCH_INDEX] and "CPU build" in why
    args, index, why = agent.torch_plan("torch<2.14,>=2.3", {}, "550.54.15")
    assert args == ["torch<2.14,>=2.3"] and index is None and "NVIDIA driver 550.54.15" in why and "CUDA" in why
    args, index, why = agent.torch_plan("torch<2.14,>=2.3", {"spec": "torch==2.13.0", "index": "pip"}, None)
    assert args == ["torch==2.13.0"] and index is None and "pip's own configuration" in why
    args, _, _ = agent.torch_plan("torch", {"index": "https://mirror.example/whl/cu124"}, None)
    assert args == ["torch", "--index-url", "https://mirror.example/whl/cu124"]


def test_remote_add_refuses_a_bad_torch_setting_in_one_line(run_cli):
    result = run_cli("remote", "add", "x", "ssh://me@gpu", "--torch-index", "mirror.local")
    assert result.exit_code == 2 and "--torch-index 'mirror.local': give an index URL" in result.stderr
    result = run_cli("remote", "add", "x", "ssh://me@gpu", "--torch", "--pre")
    assert result.exit_code == 2, result
    data = run_cli(
        "remote", "add", "x", "ssh://me@gpu", "--torch", "torch==2.13.0", "--torch-index", "pip", "--json"
    ).json()["data"]
    assert (data["torch"], data["torch_index"]) == ("torch==2.13.0", "pip")
    listed = run_cli("remote", "list", "--json").json()["data"]["remotes"][0]
    assert (listed["torch"], listed["torch_index"]) == ("torch==2.13.0", "pip")


def test_a_failed_torch_install_names_the_exact_command_that_uses_pips_own_configuration():
    from roadmap_cli.errors import RoadmapError
    from roadmap_cli.grading.remote.near import _raise
    from roadmap_cli.grading.remote.registry import Remote

    box = Remote(name="box", host="203.0.113.7", user="ubuntu", port=2222, python="/usr/bin/python3")
    with pytest.raises(RoadmapError) as caught:
        _raise(
            {
                "error": "pip could not install torch<2.14,>=2.3: ERROR: No matching distribution found for torch",
                "kind": "torch-install",
            },
            box,
        )
    assert str(caught.value).endswith(
        "(to take torch from the mirror or wheels pip is configured with there: "
        "`roadmap remote add box ssh://ubuntu@203.0.113.7:2222 --replace "
        "--python /usr/bin/python3 --torch-index pip`)"
    )
