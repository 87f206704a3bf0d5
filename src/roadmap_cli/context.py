"""Global options (`--home`, `--curriculum`, `--lang`) and lazy access to the
store and the curriculum for CLI commands.

Nothing is opened until a command asks for it, so `--help` touches neither the
database nor the YAML file.
"""

from __future__ import annotations

import locale
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    from roadmap_cli.curriculum import Curriculum
    from roadmap_cli.store import Store

LANGS = ("en", "zh")


def detect_lang() -> str:
    """`zh` when the locale says Chinese, else `en`."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


@dataclass
class AppContext:
    home_option: Optional[str] = None
    curriculum_option: Optional[str] = None
    lang_option: Optional[str] = None
    _home: Optional[Path] = None
    _store: Any = None
    _lite: Any = None  # store/lite.py's LiteStore once `lean_store` opened one (False: it could not)
    _curriculum: Any = None
    _cache: dict = field(default_factory=dict)

    @property
    def home(self) -> Path:
        if self._home is None:
            from roadmap_cli.paths import resolve_home

            self._home = resolve_home(self.home_option)
        return self._home

    def store(self) -> "Store":
        if self._store is None:
            from roadmap_cli.store import open_store

            self._store = open_store(self.home)
        return self._store

    def lean_store(self) -> Any:
        """The store for `roadmap grade`'s hot path: the full one if it is open
        already, else store/lite.py's (the stdlib sqlite3, no SQLAlchemy) when
        it can take the database as it is, else the full one."""
        if self._store is not None:
            return self._store
        if self._lite is None:
            from roadmap_cli.store.lite import open_lite

            self._lite = open_lite(self.home) or False
        return self._lite or self.store()

    def setting(self, key: str) -> Any:
        from roadmap_cli.store.settings import get_setting

        return get_setting(self._store or self._lite or self.store(), key)

    @property
    def lang(self) -> str:
        if self.lang_option:
            return self.lang_option
        env = os.environ.get("ROADMAP_LANG")
        if env and env not in LANGS:
            from roadmap_cli.errors import UserError

            raise UserError(f"ROADMAP_LANG={env!r} is not a language roadmap knows (choose en or zh)")
        return env or self.setting("lang") or detect_lang()

    def _curriculum_choice(self) -> tuple[Optional[str], str]:
        """The chosen curriculum file (None: the built-in one) and where the choice came from."""
        if self.curriculum_option:
            return self.curriculum_option, "--curriculum"
        if os.environ.get("ROADMAP_CURRICULUM"):
            return os.environ["ROADMAP_CURRICULUM"], "$ROADMAP_CURRICULUM"
        return self.setting("curriculum"), "setting"

    def curriculum_path(self) -> Path:
        from roadmap_cli.paths import default_curriculum_path

        chosen, source = self._curriculum_choice()
        if not chosen:
            return default_curriculum_path()
        path = Path(chosen).expanduser()
        if source == "setting" and not path.exists():
            # A file saved by `init --use-curriculum` that has since moved: say
            # where the path comes from and how to get going again.
            from roadmap_cli.errors import UserError

            raise UserError(
                f"curriculum file not found: {path} (saved by `roadmap init --use-curriculum`; "
                "run it again with the file's new path, or with `default` for the built-in curriculum)"
            )
        return path

    def curriculum(self) -> "Curriculum":
        if self._curriculum is None:
            from roadmap_cli.curriculum import load_curriculum

            self._curriculum = load_curriculum(self.curriculum_path(), cache_dir=self.home / "cache")
        return self._curriculum


_current = AppContext()


def current() -> AppContext:
    return _current


def reset(**options: Any) -> AppContext:
    """Start a fresh context (each CLI invocation, and each test, gets one)."""
    global _current
    _current = AppContext(**options)
    return _current
