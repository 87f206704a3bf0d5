"""This install as a wheel, for the far side of `grade --on`: its build tag and the wheel itself.

The far side keeps one managed venv per build (version + a hash of this install's files); on first use
the wheel of this very install goes there, built from the checkout or repacked from an installed wheel,
cached in the data home.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Callable

from roadmap_cli.grading.remote.registry import RemoteError


def _fingerprint_files(root: Path) -> list[Path]:
    out = [root / "curriculum.yaml", root / "pyproject.toml", root / "hatch_build.py"]
    for folder in (root / "src" / "roadmap_cli", root / "labs", root / "kernels"):
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            out += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith(".pyc")]
    return [p for p in out if p.is_file()]


def build_tag(home: Path) -> tuple[str, Callable[[], Path]]:
    """(TAG, make_wheel): TAG names this install's build (version + a hash of its files' contents), so the
    far side keeps one managed venv per build; make_wheel() returns the wheel (cached under the data home)."""
    from importlib import metadata

    from roadmap_cli import __version__
    from roadmap_cli.paths import data_root

    cache = home / "cache" / "remote-wheels"
    root = data_root()
    if root.name == "_data":  # installed from a wheel: its RECORD hashes every installed file
        dist = metadata.distribution("roadmap-cli")
        record = dist.read_text("RECORD") or ""
        fp = hashlib.sha256(record.encode()).hexdigest()

        def make() -> Path:
            return _cached(cache, fp, lambda out: _repack(dist, out))
    else:
        files = _fingerprint_files(root)
        stat_sig = hashlib.sha256(
            repr([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]).encode()
        ).hexdigest()
        memo = cache / "fingerprints.json"
        try:
            known = json.loads(memo.read_text())
        except (OSError, ValueError):
            known = {}
        fp = known.get(stat_sig)
        if fp is None:
            digest = hashlib.sha256()
            for p in files:
                digest.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
            fp = digest.hexdigest()
            cache.mkdir(parents=True, exist_ok=True)
            memo.write_text(json.dumps({stat_sig: fp}))

        def make() -> Path:
            return _cached(cache, fp, lambda out: _build_checkout(root, out))

    return f"{__version__}-{fp[:12]}", make


def _cached(cache: Path, fp: str, build: Callable[[Path], Path]) -> Path:
    target = cache / f"{fp[:16]}.whl"
    if not target.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        built = build(cache)
        os.replace(built, target)
    return target


def _build_checkout(root: Path, cache: Path) -> Path:
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp, str(root)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wheels = list(Path(tmp).glob("roadmap_cli-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel was written"])[-1]
            raise RemoteError(
                f"cannot build this roadmap's wheel to send (pip wheel {root}): {last} "
                "(a checkout needs hatchling: pip install -e '.[dev]')"
            )
        out = cache / (wheels[0].name + ".part")
        os.replace(wheels[0], out)
        return out


def _repack(dist, cache: Path) -> Path:
    """The installed wheel's files back into a wheel: the package and its dist-info (no scripts, no caches)."""
    import zipfile

    out = cache / "repacked.whl.part"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        for f in dist.files or []:
            name = str(f)
            if (
                name.startswith(("roadmap_cli/", "roadmap_cli-"))
                and "__pycache__" not in name
                and not name.endswith((".pyc", "/RECORD", "/INSTALLER", "/direct_url.json"))
            ):
                whl.write(dist.locate_file(f), name)
    return out


# ---------------------------------------------------------------- the workspace's files
