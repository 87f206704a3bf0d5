"""Loading and validating a curriculum file, with `file:line:col` errors.

    load_curriculum(path, cache_dir)  -> Curriculum, or ValidationError with every problem
    check_curriculum(path)            -> CheckReport(errors, warnings), for `curriculum validate`
    validate_curriculum(path)         -> the same as a flat list of "file:line:col: message"

The happy path is: read bytes -> (cache hit: JSON -> model) or (safe-load
YAML -> pydantic -> reference checks -> cache). Only when something is wrong
are the node positions (kept from the one bounded parse, roadmap_cli.formats.yamlsafe)
used, to turn each problem's `loc` path into a line and column.
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from roadmap_cli.curriculum import cache, checks, positions
from roadmap_cli.curriculum.models import Curriculum
from roadmap_cli.errors import UserError, ValidationError

Problem = tuple[tuple, str]


@dataclass
class CheckReport:
    path: Path
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _read(path: Path) -> bytes:
    from roadmap_cli.formats.yamlsafe import YamlProblem, check_file_size

    try:
        check_file_size(path)  # a 50 MB file is refused from its size, never read
    except YamlProblem as problem:
        raise ValidationError(f"{path}: 1 problem(s)", details=problem.lines(path)) from None
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"curriculum file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"curriculum path is a directory, not a YAML file: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read curriculum {path}: {exc.strerror or exc}") from None


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"{path}: 1 problem(s)",
            details=[f"{path}:1:1: the file is not UTF-8 text ({exc.reason} at byte {exc.start})"],
        ) from None


def _safe_load(path: Path, text: str) -> tuple[Any, Any, list[str]]:
    """(data, root node, []) or (None, None, ["file:line:col: why", ...]).

    One bounded loader (roadmap_cli.formats.yamlsafe) for every path, so `curriculum
    validate` and `init --use-curriculum` give the same verdict: size, depth,
    aliases and duplicate keys are refused by both."""
    from roadmap_cli.formats.yamlsafe import YamlProblem, load_with_nodes

    try:
        data, node = load_with_nodes(text)
    except YamlProblem as problem:
        return None, None, problem.lines(path)
    return data, node, []


def _allowed_keys(loc: tuple) -> list[str]:
    """Field names of the model that sits at `loc` (for did-you-mean)."""
    from roadmap_cli.curriculum.quiz_models import QUESTION_CLASSES

    model: Any = Curriculum
    for part in loc:
        if isinstance(part, int):
            continue
        if part in QUESTION_CLASSES and model in QUESTION_CLASSES.values():
            model = QUESTION_CLASSES[part]  # the kind step of a question's loc picks its class
            continue
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return []
        annotation = fields[part].annotation
        # Unwrap Optional[X] and list[X] down to a model class.
        while typing.get_origin(annotation) is not None:
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if not args:
                return []
            annotation = args[0]
        model = annotation
    return list(getattr(model, "model_fields", {}) or [])


def _dotted(loc: tuple) -> str:
    return checks.dotted(loc) or "(top level)"


def _without_union_tags(loc: tuple) -> tuple:
    """A quiz question's loc carries its kind as a path step
    (`questions, 2, numeric, formula`); the YAML has no such node."""
    from roadmap_cli.curriculum.quiz_models import QUESTION_KINDS

    return tuple(
        part for k, part in enumerate(loc) if not (part in QUESTION_KINDS and k >= 2 and loc[k - 2] == "questions")
    )


def _pydantic_problems(exc: Any) -> list[tuple[tuple, str, bool]]:
    """(loc, message, points_at_key) for each pydantic error, in plain words."""
    out = []
    for err in exc.errors(include_url=False):
        raw_loc = tuple(err["loc"])
        loc, kind, value = _without_union_tags(raw_loc), err["type"], err.get("input")
        where = _dotted(loc)
        if kind == "extra_forbidden":
            key = loc[-1]
            close = difflib.get_close_matches(str(key), _allowed_keys(raw_loc[:-1]), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out.append((loc, f"{_dotted(loc[:-1])}: unknown key {key!r}{hint}", True))
        elif kind == "missing":
            out.append((loc[:-1], f"{_dotted(loc[:-1])}: missing required key {loc[-1]!r}", False))
        elif kind == "model_type" and (err.get("ctx") or {}).get("class_name") == "Text":
            out.append((loc, f"{where}: expected {{zh: ..., en: ...}}, got {value!r}", False))
        elif kind == "string_type" and isinstance(value, float):
            out.append((loc, f'{where}: expected a string, got the number {value!r} (quote it, e.g. "{value}")', False))
        elif kind.endswith("_type") or kind.endswith("_parsing"):
            out.append((loc, f"{where}: {err['msg'].lower()}, got {value!r}", False))
        else:
            out.append((loc, f"{where}: {err['msg']}", False))
    return out


def _problems(path: Path, text: str, *, with_warnings: bool) -> tuple[Optional[Curriculum], list[str], list[str]]:
    """Parse and validate; return (curriculum or None, errors, warnings)."""
    from pydantic import ValidationError as PydanticError

    data, root_node, syntax_errors = _safe_load(path, text)
    if syntax_errors:
        return None, syntax_errors, []
    if data is None:
        return None, [f"{path}:1:1: the file is empty (expected a curriculum mapping)"], []
    if not isinstance(data, dict):
        return None, [f"{path}:1:1: the top level must be a mapping (format_version, title, stages, ...)"], []

    located: list[tuple[tuple, str, bool]] = []
    curriculum: Optional[Curriculum] = None
    version_problem = checks.check_format_version(data)
    if version_problem:
        located.append((*version_problem, False))
    else:
        try:
            curriculum = Curriculum.model_validate(data)
        except PydanticError as exc:
            located += _pydantic_problems(exc)
        else:
            located += [(loc, msg, False) for loc, msg in checks.check_references(curriculum)]
    warnings_located: list[Problem] = []
    if with_warnings and curriculum is not None and not located:
        from roadmap_cli.paths import labs_root

        try:
            root = labs_root()
        except Exception:  # an incomplete install has no labs to compare with
            root = None
        warnings_located = checks.check_lab_links(curriculum, root)

    if not located and not warnings_located and not with_warnings:
        return curriculum, [], []  # the fast path: no positions needed

    errors = []
    for loc, msg, at_key in located:
        line, col = positions.locate(root_node, loc, at_key=at_key)
        errors.append((line, col, f"{path}:{line}:{col}: {msg}"))
    warnings = []
    for loc, msg in warnings_located:
        line, col = positions.locate(root_node, loc)
        warnings.append(f"{path}:{line}:{col}: warning: {msg}")
    errors.sort(key=lambda e: (e[0], e[1]))
    ordered = [e[2] for e in errors]
    return (curriculum if not ordered else None), ordered, warnings


def load_curriculum(path: Path, cache_dir: Optional[Path] = None) -> Curriculum:
    """The validated curriculum at `path` (from the cache when unchanged).

    Raises UserError if the file cannot be read, ValidationError (with every
    `file:line:col: message` in `details`) if it is not a valid curriculum.
    """
    path = Path(path)
    raw = _read(path)
    key = cache.cache_key(raw) if cache_dir is not None else ""
    if cache_dir is not None:
        hit = cache.load(Path(cache_dir), key)
        if hit is not None:
            return hit
    curriculum, errors, _ = _problems(path, _decode(path, raw), with_warnings=False)
    if errors or curriculum is None:
        raise ValidationError(f"{path}: {len(errors)} problem(s)", details=errors)
    if cache_dir is not None:
        cache.store(Path(cache_dir), key, curriculum)
    return curriculum


def check_curriculum(path: Path) -> CheckReport:
    """Every error and warning of the file at `path` (never cached)."""
    path = Path(path)
    raw = _read(path)
    try:
        text = _decode(path, raw)
    except ValidationError as exc:
        return CheckReport(path, errors=list(exc.details))
    _, errors, warnings = _problems(path, text, with_warnings=True)
    return CheckReport(path, errors=errors, warnings=warnings)


def validate_curriculum(path: Path) -> list[str]:
    """All problems as "file:line:col: message" (empty = valid), errors
    first, then warnings (marked "warning:"), which do not make it invalid."""
    report = check_curriculum(path)
    return report.errors + report.warnings
