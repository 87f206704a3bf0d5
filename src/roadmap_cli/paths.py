"""Where things live: the data home (user state) and the data root (shipped files).

Data home: `--home`, then `$ROADMAP_HOME`, then the platform's user data dir.
Data root: the folder holding `curriculum.yaml`, `labs/` and `kernels/`. In a
wheel they are package data under `roadmap_cli/_data`; in a source checkout
(editable install, tests) they are the repository's top level.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from roadmap_cli.errors import StoreError

APP_NAME = "roadmap"


def resolve_home(explicit: str | os.PathLike | None = None) -> Path:
    """Return the data home, creating it if needed; a clear error if unusable."""
    if explicit is not None and not str(explicit).strip():
        raise StoreError("--home is empty (give a directory, or leave it out to use $ROADMAP_HOME)")
    if explicit:
        home = Path(explicit).expanduser()
    elif os.environ.get("ROADMAP_HOME"):
        home = Path(os.environ["ROADMAP_HOME"]).expanduser()
    else:
        from platformdirs import user_data_dir

        home = Path(user_data_dir(APP_NAME, appauthor=False))
    if home.exists() and not home.is_dir():
        raise StoreError(f"data home {home} is a file, not a directory (set --home or ROADMAP_HOME to a directory)")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # e.g. a parent that is a file, or a read-only file system
        raise StoreError(f"cannot create data home {home}: {exc.strerror or exc}") from None
    if not home.is_dir():
        raise StoreError(f"data home {home} is not a directory")
    if not os.access(home, os.X_OK):
        raise StoreError(f"data home {home} cannot be entered (no permission; set --home or ROADMAP_HOME)")
    # A home we cannot write is still usable for reads: the store opens it
    # read-only and refuses writes with one line (store/engine.py).
    return home


@lru_cache(maxsize=1)
def data_root() -> Path:
    """The folder with curriculum.yaml, labs/ and kernels/."""
    packaged = Path(__file__).resolve().parent / "_data"
    if (packaged / "curriculum.yaml").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "curriculum.yaml").is_file():
        return checkout
    raise StoreError("installation is incomplete: curriculum.yaml not found (reinstall roadmap-cli)")


def default_curriculum_path() -> Path:
    return data_root() / "curriculum.yaml"


def labs_root() -> Path:
    return data_root() / "labs"


def kernels_root() -> Path:
    return data_root() / "kernels"


def private_dir(
    path: str | os.PathLike, setting: str = "ROADMAP_CPP_CACHE", example: str = "~/.cache/roadmap/cpp"
) -> Path:
    """`path` as a folder only this user can use, made if missing (mode 0700).

    For the caches the engine keeps in the shared temp folder (`/tmp/roadmap-cpp-cache-<uid>`, …): another
    account on the machine could make that name first and plant artefacts that a grade would load as this
    user's. A folder that is a link or not ours is refused (GraderError), never used; ours is closed to others.
    The refusal names `setting`, the environment variable that moves the folder (a user cannot remove another
    account's folder from a sticky /tmp), with `example`, a folder of their own."""
    from roadmap_cli.errors import GraderError

    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(folder)
    except OSError as exc:
        raise GraderError(f"cannot make the cache folder {folder}: {exc.strerror or exc}") from None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise GraderError(
            f"the cache folder {folder} is a link or another user's: another account may have made "
            f"it to plant files; set {setting} to a folder of your own (e.g. {setting}={example}) "
            f"and grade again"
        )
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)  # ours, made by an older roadmap or by hand: closed to others from now on
    return folder
