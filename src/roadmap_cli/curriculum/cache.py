"""A cache of validated curricula, so `roadmap status` skips YAML parsing.

Parsing and validating curriculum.yaml takes tens of milliseconds; loading the
validated model back from JSON takes a few. The key is the sha256 of the
file's bytes plus everything that could change the result (the format, the
package and pydantic versions, and the model/check sources), so an edited
file or an upgraded roadmap is simply a miss. Only valid curricula are
stored; a cache file that cannot be read is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional

from roadmap_cli.curriculum.models import FORMAT_VERSION, Curriculum

CACHE_FORMAT = 1
KEEP_FILES = 8  # a few curricula (the built-in one, a user's own) stay cached


def _code_fingerprint() -> str:
    """Changes whenever the models or checks change (editable installs)."""
    from roadmap_cli import __version__
    from roadmap_cli.curriculum import base, checks, formula, models, quiz_checks, quiz_models, units

    parts = [str(CACHE_FORMAT), str(FORMAT_VERSION), __version__]
    try:
        import pydantic

        parts.append(pydantic.VERSION)
    except AttributeError:  # pragma: no cover
        pass
    for module in (base, models, checks, quiz_models, quiz_checks, formula, units):
        try:
            st = os.stat(module.__file__)
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        except (OSError, TypeError):  # pragma: no cover - frozen/zipped installs
            parts.append(module.__name__)
    return "|".join(parts)


def cache_key(raw: bytes) -> str:
    digest = hashlib.sha256(_code_fingerprint().encode())
    digest.update(b"\0")
    digest.update(raw)
    return digest.hexdigest()


def _file(cache_dir: Path, key: str) -> Path:
    return cache_dir / f"curriculum-{key[:40]}.json"


def load(cache_dir: Path, key: str) -> Optional[Curriculum]:
    """The cached curriculum for `key`, or None on a miss or a bad file."""
    path = _file(cache_dir, key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return Curriculum.model_validate_json(data)
    except ValueError:  # pydantic.ValidationError is a ValueError
        return None


def store(cache_dir: Path, key: str, curriculum: Curriculum) -> None:
    """Write atomically (two processes may race); never fail the command."""
    import tempfile  # only on a miss: keeps the cached path's imports small

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".curriculum-", suffix=".tmp", dir=cache_dir)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(curriculum.model_dump_json().encode())
            os.replace(tmp, _file(cache_dir, key))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _prune(cache_dir)
    except OSError:
        pass  # a read-only home only costs speed


def _prune(cache_dir: Path) -> None:
    files = sorted(cache_dir.glob("curriculum-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP_FILES:]:
        try:
            old.unlink()
        except OSError:
            pass
