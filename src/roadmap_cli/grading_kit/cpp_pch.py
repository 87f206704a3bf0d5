"""The precompiled header of a torch extension's leading system includes
(grading_kit/cpp_build.py `torch_extension` uses it with `-include`): built
once per block of includes and torch version, behind the wall, checked on use.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from roadmap_cli.grading_kit.cpp_cache import (
    cache_root,
    digest,
    parse_deps,
    portable,
    still_valid,
    walled_run,
    write_manifest,
)

PCH_VAR = "ROADMAP_CPP_PCH"  # "1": build the precompiled header when missing (dev check sets it)
_SYSTEM_INCLUDE = re.compile(r"#\s*include\s*<([^<>\s]+)>\s*(//.*)?")


def leading_system_includes(text: str) -> list[str]:
    """The `#include <...>` lines a C++ source starts with, in order (blank
    lines and `//` comments may sit between them), up to its first other line."""
    block = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        match = _SYSTEM_INCLUDE.fullmatch(line)
        if match is None:
            break
        block.append(f"#include <{match.group(1)}>")
    return block


def precompiled_header(
    sources: list[Path], compile_flags: list[str], timeout_s: float, build: bool = True
) -> Optional[Path]:
    """A header of the sources' own leading system includes, precompiled with
    the extension's exact flags, for `g++ -include`; None when there is none
    to share (no such block, or the sources' blocks differ) or it fails to build.

    Why: <torch/extension.h> and ATen are most of a torch extension's compile
    (7.4 s of 7.4 for the cpp-extension solution, 2.8 s with this header), and
    dev check compiles one extension per C++ variant. It changes nothing a
    source sees: the same headers, in the same order, first in every
    translation unit; the source's own #include lines then find them included
    (include guards) and gcc uses the .gch only when the flags match, parsing
    the header as text otherwise. Cost: 16 s and ~430 MB once per block and
    torch version, which is why a grade builds it only in dev check
    (ROADMAP_CPP_PCH=1; `build`) and otherwise uses one that is already there
    (`roadmap watch` builds it in the background, prebuild_precompiled_header)."""
    import fcntl

    import torch

    blocks = {tuple(leading_system_includes(s.read_text(encoding="utf-8", errors="replace"))) for s in sources}
    if len(blocks) != 1 or not next(iter(blocks)):
        return None
    block = "\n".join(next(iter(blocks))) + "\n"
    key = digest([b"pch", torch.__version__.encode(), " ".join(compile_flags).encode(), block.encode()])
    folder = cache_root() / f"pch-{key}"
    header, gch, failed = folder / "roadmap_pch.h", folder / "roadmap_pch.h.gch", folder / "FAILED"
    manifest = folder / "manifest.json"
    if gch.exists() and _pch_valid(manifest, gch):
        return header
    if failed.exists() or not build:
        return None  # not built (yet): compile without it rather than wait for one being built
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build; a concurrent grade waits for it and uses it
        if gch.exists() and _pch_valid(manifest, gch):
            return header
        header.write_text(block)
        scratch = Path(tempfile.mkdtemp(prefix=".build-pch-", dir=cache_root()))
        tmp = scratch / "roadmap_pch.h.gch"
        try:
            # The block names headers the learner chose (`#include <../../x>` is a name too): behind the wall,
            # where only the system and the Python runtime exist.
            try:
                proc = walled_run(
                    [
                        "g++",
                        *compile_flags,
                        "-x",
                        "c++-header",
                        str(header),
                        "-MD",
                        "-MF",
                        str(scratch / "deps.d"),
                        "-o",
                        str(tmp),
                    ],
                    scratch,
                    [folder],
                    timeout_s,
                )
            except subprocess.TimeoutExpired:
                return None
            deps = parse_deps(scratch / "deps.d", scratch)
            if proc.returncode != 0 or deps is None:
                failed.write_text(proc.stderr + proc.stdout)  # the extension's own compile will report the error
                return None
            os.replace(tmp, gch)
            st = gch.stat()
            write_manifest(
                manifest, {"deps": portable(deps, [], scratch), "gch": [st.st_size, st.st_mtime_ns, st.st_ino]}
            )
        finally:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)  # a build stopped part-way (watch quit) leaves no 400 MB behind
    return header


def _pch_valid(manifest: Path, gch: Path) -> bool:
    """The headers it was built from are unchanged and the .gch is the file built then (its size, time and
    inode: hashing 400 MB per grade would cost more than the header saves; only ever loaded behind the wall)."""
    try:
        st = gch.stat()
        recorded = json.loads(manifest.read_text()).get("gch")
    except (OSError, ValueError):
        return False
    return recorded == [st.st_size, st.st_mtime_ns, st.st_ino] and still_valid(manifest, None, [])
