"""C++ builds behind the wall, and a cache that cannot be fooled (issue 35
items 3 and 4; grading_kit/cpp_build.py).

The compiler reads learner-controlled input: an `#include` or `.incbin` of
any path it can see. It runs behind the grade's OS wall, so a learner header
that names a file outside the view (the data home, a reference, a
credential) does not compile. The cache key covers every file the
preprocessor read, not only the listed inputs, and an artefact is checked
against its recorded sha256 on use.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")

MAIN = '#include <cstdio>\n#include "lib.h"\nint main(int, char**) { std::printf("value %d\\n", value()); return 0; }\n'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cpp-cache"
    monkeypatch.setenv("ROADMAP_CPP_CACHE", str(root))
    from roadmap_cli.grading_kit import cpp_cache

    cpp_cache._hashed.clear()
    yield root
    cpp_cache._hashed.clear()


@pytest.fixture
def walled_grade(wall, tmp_path: Path):
    """The grader side of a grade behind the wall (conftest.py's `wall`), as the plugin configures it."""
    from roadmap_cli.grading_kit import oswall, sandbox

    sandbox.configure(
        {
            "os_wall": {
                "read_only": oswall.python_runtime(),
                "hide": oswall.runtime_hides(),
                "read_write": [],
                "cwd": "/",
            }
        }
    )
    yield
    sandbox.configure(None)


def _project(tmp_path: Path) -> tuple[Path, Path]:
    grader, ws = tmp_path / "grader", tmp_path / "ws"
    grader.mkdir()
    ws.mkdir()
    (grader / "main.cpp").write_text(MAIN)
    (ws / "lib.h").write_text('#pragma once\n#include "extra.h"\ninline int value() { return EXTRA; }\n')
    (ws / "extra.h").write_text("#define EXTRA 1\n")
    return grader, ws


def test_a_learner_header_cannot_include_or_incbin_what_the_wall_does_not_show(
    tmp_path: Path, cache: Path, walled_grade
) -> None:
    from roadmap_cli.grading_kit import cpp_build

    grader, ws = _project(tmp_path)
    secret = tmp_path / "elsewhere" / "secret.h"
    secret.parent.mkdir()
    secret.write_text("#define EXTRA 42\n")
    (ws / "extra.h").write_text(f'#include "{secret}"\n')
    with pytest.raises(cpp_build.CppBuildError) as err:
        cpp_build.asan_binary(grader / "main.cpp", ws, [ws / "lib.h"])
    assert "No such file" in err.value.first_error, err.value.log
    (ws / "extra.h").write_text(f'#define EXTRA 1\n__asm__(".incbin \\"{secret}\\"");\n')
    with pytest.raises(cpp_build.CppBuildError) as err:
        cpp_build.asan_binary(grader / "main.cpp", ws, [ws / "lib.h"])
    assert "not found" in err.value.log, err.value.log
    # The host's compiler reads it without complaint: only the wall stops it.
    (ws / "extra.h").write_text(f'#include "{secret}"\n')
    assert subprocess.run(["g++", "-E", f"-I{ws}", str(grader / "main.cpp")], capture_output=True).returncode == 0


def test_the_cache_key_covers_every_included_file_and_artefacts_are_checked_on_use(tmp_path: Path, cache: Path) -> None:
    from roadmap_cli.grading_kit import cpp_build, cpp_cache

    grader, ws = _project(tmp_path)

    def build_and_run() -> tuple[bool, str]:
        cpp_cache._hashed.clear()  # a new grade: a new grader process
        result = cpp_build.asan_binary(grader / "main.cpp", ws, [ws / "lib.h"])
        out = subprocess.run([str(result.path)], capture_output=True, text=True).stdout.strip()
        return result.cached, out

    assert build_and_run() == (False, "value 1")
    assert build_and_run() == (True, "value 1")
    # extra.h is not an input anyone listed: the preprocessor read it, so the key covers it.
    (ws / "extra.h").write_text("#define EXTRA 2\n")
    assert build_and_run() == (False, "value 2")
    # The same code from another workspace hits the cache (dev check's temporary folders).
    other = tmp_path / "ws2"
    shutil.copytree(ws, other)
    cpp_cache._hashed.clear()
    assert cpp_build.asan_binary(grader / "main.cpp", other, [other / "lib.h"]).cached
    # An artefact that is not what was built (a planted or damaged file) is built again, never used.
    entry = next(cache.glob("asan-*/asan"))
    entry.write_bytes(entry.read_bytes() + b"\0")
    cached, out = build_and_run()
    assert (cached, out) == (False, "value 2")
