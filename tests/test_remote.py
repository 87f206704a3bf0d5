"""`roadmap remote add|list|remove|check` (issue 28, part 1), the checks against a real OpenSSH server.

The server is a throwaway `sshd -D` on loopback (tests/sshd.py). Without the
binaries these tests skip with the package to install, except where
ROADMAP_REQUIRE_SSHD=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def sshd_server():
    from sshd import PACKAGE_HINT, Server, find_sshd

    sshd = find_sshd()
    if sshd is None:
        message = f"no OpenSSH server here: {PACKAGE_HINT}"
        if os.environ.get("ROADMAP_REQUIRE_SSHD") == "1":
            pytest.fail(message + " (ROADMAP_REQUIRE_SSHD=1: CI must run these tests)", pytrace=False)
        pytest.skip(message)
    server = Server(sshd).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ssh_config(sshd_server, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROADMAP_SSH_CONFIG", str(sshd_server.client_config))
    return sshd_server


def _json(result) -> dict:
    assert result.exit_code == 0, result
    return json.loads(result.stdout)["data"]


# ---------------------------------------------------------------- bookkeeping (no server needed)


def test_add_list_remove_round_trip(run_cli, roadmap_home: Path):
    assert run_cli("remote", "add", "h100", "ssh://ubuntu@gpu.example.com:2222").exit_code == 0
    assert run_cli("remote", "add", "box", "ssh://gpu-box").exit_code == 0  # an ~/.ssh/config alias
    rows = _json(run_cli("remote", "list", "--json"))["remotes"]
    assert [(r["name"], r["url"], r["user"], r["host"], r["port"]) for r in rows] == [
        ("box", "ssh://gpu-box", None, "gpu-box", None),
        ("h100", "ssh://ubuntu@gpu.example.com:2222", "ubuntu", "gpu.example.com", 2222),
    ]
    assert (roadmap_home / "remotes.json").is_file()
    removed = _json(run_cli("remote", "remove", "box", "--json"))
    assert removed["name"] == "box"
    assert [r["name"] for r in _json(run_cli("remote", "list", "--json"))["remotes"]] == ["h100"]


def test_an_ipv6_host_keeps_its_brackets_in_the_url(run_cli):
    data = _json(run_cli("remote", "add", "v6", "ssh://me@[::1]:2200", "--json"))
    assert (data["host"], data["port"], data["url"]) == ("::1", 2200, "ssh://me@[::1]:2200")


def test_adding_a_taken_name_keeps_the_old_url_unless_replace(run_cli):
    run_cli("remote", "add", "gpu", "ssh://a@one")
    result = run_cli("remote", "add", "gpu", "ssh://b@two")
    assert result.exit_code == 2 and "already exists (ssh://a@one)" in result.stderr and "--replace" in result.stderr
    assert _json(run_cli("remote", "list", "--json"))["remotes"][0]["url"] == "ssh://a@one"
    assert run_cli("remote", "add", "gpu", "ssh://b@two", "--replace").exit_code == 0
    assert _json(run_cli("remote", "list", "--json"))["remotes"][0]["url"] == "ssh://b@two"


@pytest.mark.parametrize(
    "url, says",
    [
        ("gpu.example.com", "must look like ssh://user@host"),
        ("https://gpu.example.com", "only ssh:// is supported"),
        ("ssh://me:hunter2@gpu", "must not carry a password"),
        ("ssh://gpu:99999", "1 and 65535"),
        ("ssh://gpu:0", "ports are 1-65535"),
        ("ssh://gpu/home/me", "path or query"),
        ("ssh://", "names no host"),
        ("ssh://-oProxyCommand=x", "may not start with '-'"),
    ],
)
def test_a_bad_url_is_one_line_and_nothing_is_saved(run_cli, roadmap_home: Path, url: str, says: str):
    result = run_cli("remote", "add", "gpu", url)
    assert result.exit_code == 2 and says in result.stderr, result
    assert "Traceback" not in result.stderr and "hunter2" not in result.stderr
    assert not (roadmap_home / "remotes.json").exists()


def test_a_bad_name_and_an_unknown_name(run_cli):
    assert "remote name 'a b'" in run_cli("remote", "add", "a b", "ssh://x").stderr
    run_cli("remote", "add", "lambda-h100", "ssh://x")
    for verb in ("check", "remove"):
        result = run_cli("remote", verb, "lambda-h10")
        assert result.exit_code == 2 and "unknown remote 'lambda-h10' (did you mean 'lambda-h100'?)" in result.stderr


def test_a_damaged_remotes_file_is_one_line_and_is_not_overwritten(run_cli, roadmap_home: Path):
    run_cli("remote", "list")  # creates the home
    (roadmap_home / "remotes.json").write_text("{not json")
    for args in (("remote", "list"), ("remote", "add", "x", "ssh://x")):
        result = run_cli(*args)
        assert result.exit_code == 3 and "remotes.json is not a remotes file" in result.stderr, result
    assert (roadmap_home / "remotes.json").read_text() == "{not json"


def test_remote_commands_never_import_torch(roadmap_home: Path):
    import subprocess

    code = (
        "import sys; from roadmap_cli.cli import main\n"
        "try:\n    main(['remote', 'list'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'remote list imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- against a real sshd


def test_check_reports_the_far_side(run_cli, ssh_config):
    run_cli("remote", "add", "local", ssh_config.url)
    data = _json(run_cli("remote", "check", "local", "--json"))
    assert data["reachable"] is True and data["url"] == ssh_config.url
    assert data["python"] and data["python"].count(".") == 2  # the far side's python3, e.g. 3.11.2
    assert data["disk_free_bytes"] > 0 and data["cpus"] >= 1
    assert data["gpus"] == [] and data["gpu_model"] is None  # this machine has no GPU
    assert data["round_trip_s"] > 0
    # torch on the far side is whatever its python3 imports: on this machine the system python has none.
    import subprocess

    has_torch = subprocess.run(["python3", "-c", "import torch"], capture_output=True).returncode == 0
    assert (data["torch"] is not None) == has_torch
    text = run_cli("remote", "check", "local")
    assert text.exit_code == 0 and "free disk (home)" in text.stdout and "none (no nvidia-smi)" in text.stdout


def test_an_unreachable_remote_is_one_line_exit_5(run_cli, ssh_config):
    from sshd import free_port

    run_cli("remote", "add", "gone", f"ssh://{ssh_config.user}@127.0.0.1:{free_port()}")
    result = run_cli("remote", "check", "gone", "--timeout", "10")
    assert result.exit_code == 5 and "cannot reach remote 'gone'" in result.stderr and "refused" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_key_the_server_does_not_know_says_how_to_fix_it_and_never_prompts(
    run_cli, ssh_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import subprocess

    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    config = tmp_path / "ssh_config"
    config.write_text(ssh_config.client_config.read_text().replace(str(ssh_config.root / "client_ed25519"), str(other)))
    monkeypatch.setenv("ROADMAP_SSH_CONFIG", str(config))
    run_cli("remote", "add", "local", ssh_config.url)
    result = run_cli("remote", "check", "local", "--timeout", "20")
    assert result.exit_code == 5 and "Permission denied" in result.stderr and "ssh-agent" in result.stderr, result


def test_a_long_name_and_url_are_never_cut_on_an_80_column_terminal(tmp_path: Path):
    """On a real terminal (a pty, 80 columns) `remote list` shows the whole name and URL (it wraps, never cuts)."""
    import pexpect

    env = dict(os.environ, ROADMAP_HOME=str(tmp_path / "home"), COLUMNS="80", LINES="40", TERM="xterm")
    url = "ssh://ubuntu-user@gpu-instance-0042.us-east-1.compute.example.com:2222"
    name = "lambda-h100-long-name-box"
    add = pexpect.run(
        f"{sys.executable} -m roadmap_cli remote add {name} {url}",
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 80),
    )
    assert "Added remote" in add
    out = pexpect.run(
        f"{sys.executable} -m roadmap_cli remote list", env=env, encoding="utf-8", timeout=60, dimensions=(40, 80)
    )
    joined = "".join(out.splitlines())  # the terminal's own wrapping splits long lines; nothing may be dropped
    assert name in joined and url in joined and "…" not in out, out
