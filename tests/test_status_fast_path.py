"""`roadmap status` within its budget (issue 36, item 6): the pieces that keep it there.

- The plain status line (`status`, `--json`, root options) runs without typer's parameter adapters (they
  import pydantic's TypeAdapter machinery for every option); anything else still goes through typer.
- The labs section reads the lab specs validated once, from the data home's cache/; an edited lab.yaml,
  or a lab that became invalid, is read again (never a stale dashboard).
The timing itself is bench/bench_status.py's (a ratio against the import floor in the same run).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE_LABS = Path(__file__).parent / "fixtures_labs" / "labs"

PROBE = """
import json, sys
from roadmap_cli.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write('\\nPROBE' + json.dumps({'code': code, 'adapters': 'typer._adapters' in sys.modules,
                                          'yaml': 'yaml' in sys.modules}) + '\\n')
"""


def _run(args: list[str], home: Path, labs: Path = FIXTURE_LABS) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "ROADMAP_HOME": str(home),
            "ROADMAP_LABS_DIR": str(labs),
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "ROADMAP_LANG": "en",
        },
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE")]
    assert line, proc.stderr[-2000:]
    return json.loads(line[-1][len("PROBE") :]), proc


def test_plain_status_skips_typers_adapters_and_the_rest_still_parses_with_typer(tmp_path: Path):
    home = tmp_path / "home"
    for args in (["status"], ["status", "--json"], ["--home", str(home), "status"], ["status", "--lang", "en"]):
        probe, proc = _run(args, home)
        assert probe["code"] in (0, None) and not probe["adapters"], (args, proc.stderr[-1500:])
    probe, proc = _run(["status", "--json"], home)
    assert json.loads(proc.stdout)["command"] == "status"
    # A bad root option value is still one line; an unknown option goes to typer (its one line, exit 2).
    probe, proc = _run(["--lang", "xx", "status"], home)
    assert probe["code"] == 2 and "unknown language 'xx'" in proc.stderr and "Traceback" not in proc.stderr
    probe, proc = _run(["status", "--bogus"], home)
    assert probe["code"] == 2 and "No such option" in proc.stderr and probe["adapters"]


def test_the_labs_section_is_cached_and_an_edited_or_broken_lab_is_read_again(tmp_path: Path):
    shutil.copytree(FIXTURE_LABS.parent, tmp_path / "fixtures")  # the labs and the kernels they name
    labs = tmp_path / "fixtures" / "labs"
    home = tmp_path / "home"

    def titles() -> dict:
        probe, proc = _run(["status", "--json"], home, labs)
        assert probe["code"] in (0, None), proc.stderr[-1500:]
        return {lab["id"]: lab["title"]["en"] for lab in json.loads(proc.stdout)["data"]["labs"]}, probe

    first, _ = titles()
    assert set(first) == {"adder", "leaky"}
    assert len(list((home / "cache").glob("labs-*.json"))) == 1
    again, probe = titles()
    assert again == first and not probe["yaml"]  # read from the cache: no YAML parsed
    spec = labs / "adder" / "lab.yaml"
    text = spec.read_text()
    assert 'title: {en: "Adder (engine test lab)"' in text
    spec.write_text(text.replace('title: {en: "Adder (engine test lab)"', 'title: {en: "Adder, renamed"', 1))
    edited, probe = titles()
    assert edited["adder"] == "Adder, renamed" and probe["yaml"]  # a miss: parsed again
    (labs / "leaky" / "README.md").unlink()  # the lab is invalid now (no handout): gone, as without a cache
    broken, _ = titles()
    assert set(broken) == {"adder"}
