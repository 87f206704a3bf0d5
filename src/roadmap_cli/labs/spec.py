"""The lab spec (`labs/<id>/lab.yaml`): pydantic models, loading with
`file:line:col` errors, and finding labs.

The labs root is the installed project's `labs/` (paths.labs_root()), or
$ROADMAP_LABS_DIR (tests point it at fake labs). `solution_files` targets are
relative to the labs root's parent: the project root in a checkout, the
package's `_data` folder in a wheel.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from roadmap_cli.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    import yaml  # imported where a spec is parsed: `roadmap status` reads validated specs from a cache

from roadmap_cli.labs.plan import SPEC_FILE, labs_root, project_root, solution_sources  # noqa: F401 - this module's API too

KEBAB = r"^[a-z0-9]+(-[a-z0-9]+)*$"


class Text(BaseModel):
    """A text in both languages; `zh` falls back to `en`."""

    model_config = ConfigDict(extra="forbid")
    en: str = Field(min_length=1)
    zh: Optional[str] = None

    def get(self, lang: str) -> str:
        return (self.zh or self.en) if lang == "zh" else self.en


class Hint(Text):
    """A hint; `parts`/`tests` say which failures it helps with (optional:
    a hint naming neither is general). `roadmap lab hint` picks by what failed last."""

    parts: list[str] = Field(default_factory=list)
    tests: list[str] = Field(default_factory=list)  # node-id prefixes relative to tests/


def _relative_test_prefixes(value: list[str]) -> list[str]:
    for prefix in value:
        if not prefix.strip() or prefix.startswith("/") or ".." in Path(prefix.split("::")[0]).parts:
            raise ValueError(f"test prefix {prefix!r} must be relative to tests/ and stay inside it")
    return value


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=KEBAB)
    title: Text
    points: float = Field(ge=0)
    tests: list[str] = Field(min_length=1)
    needs_cuda: bool = False
    # The part grades the learner's @triton.jit kernel: compiled on a GPU, interpreted on the CPU, so it runs
    # differently there (`dev check --gpu` runs exactly the triton and needs_cuda parts). dev check's static
    # row holds it to the reference solution (authoring/devcheck.py).
    triton: StrictBool = False
    proves: list[str] = Field(default_factory=list)

    @field_validator("tests")
    @classmethod
    def _relative_prefixes(cls, value: list[str]) -> list[str]:
        return _relative_test_prefixes(value)


class Rule(BaseModel):
    """One thing the handout says code must do, must not do or must return
    (docs/labs.md, "Rules"). `section` is an exact heading of README.md;
    `tests` are node-id prefixes relative to tests/ that check it. An empty
    `tests` list loads (so `lab list` keeps working) but fails `dev check`."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=KEBAB)
    section: str = Field(min_length=1)
    text: str = Field(min_length=1)
    # The README.md sentence(s) it enforces, verbatim (whitespace-normalised; authoring/handout.py).
    quote: Optional[Union[str, list[str]]] = None
    tests: list[str] = Field(default_factory=list)
    # Checked only under the Triton interpreter (bounds of every load/store, the launch recorder, elements
    # loaded): on a GPU those checks record nothing, so `dev check` there reports the rule as not checked.
    interpreter_only: bool = False

    @field_validator("tests")
    @classmethod
    def _relative_prefixes(cls, value: list[str]) -> list[str]:
        return _relative_test_prefixes(value)


class NotRule(BaseModel):
    """A normative handout sentence that needs no test, and why in one line
    (given code, a measured figure, an explanation): it counts as covered."""

    model_config = ConfigDict(extra="forbid")
    quote: Union[str, list[str]]
    why: str = Field(min_length=1)


class WrongVariant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=KEBAB)
    description: str = Field(min_length=1)
    fails: list[str] = Field(min_length=1)
    breaks: list[str] = Field(default_factory=list)  # ids of the rules this variant breaks
    # Caught only by interpreter-only checks (an unmasked load whose lanes are never stored, an extra grid row,
    # the tile order, the interpreter's tile sizes): on a GPU it is expected to pass, and dev check skips it.
    interpreter_only: bool = False


class KnownSurvivor(BaseModel):
    """A mutant `roadmap dev mutate` may let survive, and why (reported as explained).

    `id` is the mutant's id as `dev mutate` prints it; `match` is a regular
    expression searched in "<file>:<function>: <operator> <description>" and
    in the mutant's diff (it survives edits elsewhere in the file)."""

    model_config = ConfigDict(extra="forbid")
    id: Optional[str] = Field(default=None, pattern=r"^[0-9a-f]{6,64}$")
    match: Optional[str] = None
    reason: str = Field(min_length=1)

    @field_validator("match")
    @classmethod
    def _valid_regex(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _id_or_match(self) -> "KnownSurvivor":
        if self.id is None and self.match is None:
            raise ValueError("a known survivor needs an `id` or a `match`")
        return self


class LabSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format_version: Literal[1]
    id: str = Field(pattern=KEBAB)
    title: Text
    stage: int = Field(ge=0)
    summary: Text
    time_limit_s: float = Field(default=300, gt=0)
    # RLIMIT_AS of the learner process (grading_kit/sandbox.py); None: the
    # engine's default on CPU, no limit with CUDA.
    memory_limit_mb: Optional[int] = Field(default=None, ge=256)
    parts: list[Part] = Field(min_length=1)
    hints: list[Hint] = Field(default_factory=list)
    solution_files: dict[str, str] = Field(default_factory=dict)
    # Files of tests/ (besides adapter.py) that the learner process may import: the only part of the grader
    # it sees (grading/isolation.py learner_shim). Never a test, conftest.py or anything holding expected values.
    learner_side: list[str] = Field(default_factory=list)
    # What the handout's code may import beyond the default list, and what the handout forbids, per file
    # (grading_kit/labcode.py: the lab-code check behind the wall, before any learner module is imported).
    lab_code: Optional[dict] = None
    # None: the lab's rules are not written yet (dev check warns); [] would
    # claim a lab whose handout states nothing checkable.
    rules: Optional[list[Rule]] = None
    not_rules: list[NotRule] = Field(default_factory=list)
    # "required" (the default): dev check fails a rule without `quote:` and a normative README.md sentence
    # nothing quotes. "pending": those are warnings while the quotes are written (a quote that is not in
    # README.md fails either way).
    quotes: Literal["required", "pending"] = "required"
    wrong: list[WrongVariant] = Field(default_factory=list)
    known_survivors: list[KnownSurvivor] = Field(default_factory=list)

    _root: Path = PrivateAttr(default=Path("."))

    # --- where things are -------------------------------------------------
    @property
    def root(self) -> Path:
        return self._root

    @property
    def tests_dir(self) -> Path:
        return self._root / "tests"

    @property
    def starter_dir(self) -> Path:
        return self._root / "starter"

    @property
    def solution_dir(self) -> Path:
        return self._root / "solution"

    @property
    def readme(self) -> Path:
        return self._root / "README.md"

    def patch_file(self, wrong_id: str) -> Path:
        return self._root / "wrong" / f"{wrong_id}.patch"

    def solution_sources(self) -> dict[str, Path]:
        """Workspace-relative path -> source file of the reference solution
        (solution/ overlaid with solution_files), starter excluded."""
        return solution_sources(self.solution_dir, self.solution_files)

    # --- parts --------------------------------------------------------------
    def part(self, part_id: str) -> Part:
        for part in self.parts:
            if part.id == part_id:
                return part
        ids = [p.id for p in self.parts]
        raise NotFoundError(f"part of {self.id}", part_id, ids, hint=f"its parts: {', '.join(ids)}")

    def part_prefixes(self) -> list[tuple[str, list[str]]]:
        return [(p.id, list(p.tests)) for p in self.parts]


# ---------------------------------------------------------------- locations


def _mark_of(node: yaml.Node | None, loc: tuple, *, at_key: bool = False) -> Optional[yaml.Mark]:
    """The YAML position of pydantic's error location (or its deepest existing
    parent); `at_key` points at the last key itself (an unknown key)."""
    import yaml

    if node is None:
        return None
    mark = node.start_mark
    for i, key in enumerate(loc):
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(key):
                    node = value_node
                    last = i == len(loc) - 1
                    mark = key_node.start_mark if (at_key and last) else value_node.start_mark
                    break
            else:
                return mark
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            mark = node.start_mark
        else:
            return mark
    return mark


def _where(path: Path, mark: Optional[yaml.Mark]) -> str:
    if mark is None:
        return f"{path}:1:1"
    return f"{path}:{mark.line + 1}:{mark.column + 1}"


def load_lab(lab_dir: Path) -> LabSpec:
    """Load and validate `lab_dir/lab.yaml`; every problem as `file:line:col: message`."""
    lab_dir = Path(lab_dir)
    path = lab_dir / SPEC_FILE
    from roadmap_cli.formats.yamlsafe import YamlProblem, check_file_size, load_with_nodes

    try:
        check_file_size(path)
        text = path.read_text(encoding="utf-8")
    except YamlProblem as problem:
        raise ValidationError(f"invalid lab spec {path}", details=problem.lines(path)) from None
    except OSError as exc:
        raise ValidationError(f"cannot read lab spec {path}: {exc.strerror or exc}") from None

    try:
        # One bounded parse (size, depth, no aliases, no duplicate keys): a
        # third-party lab's spec is input like any other.
        data, node = load_with_nodes(text)
    except YamlProblem as problem:
        raise ValidationError(f"invalid lab spec {path}", details=problem.lines(path)) from None
    if not isinstance(data, dict):
        raise ValidationError(f"invalid lab spec {path}", details=[f"{path}:1:1: expected a mapping at the top level"])
    try:
        spec = LabSpec.model_validate(data)
    except PydanticValidationError as exc:
        details = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            dotted = ".".join(str(p) for p in loc) or "(top)"
            mark = _mark_of(node, loc, at_key=err["type"] == "extra_forbidden")
            details.append(f"{_where(path, mark)}: {dotted}: {err['msg']}")
        raise ValidationError(f"invalid lab spec {path} ({len(details)} problem(s))", details=details) from None
    spec._root = lab_dir.resolve()
    problems = _cross_check(spec, node, path)
    if problems:
        raise ValidationError(f"invalid lab spec {path} ({len(problems)} problem(s))", details=problems)
    return spec


def _cross_check(spec: LabSpec, node: yaml.Node, path: Path) -> list[str]:
    """Rules a single field cannot express: ids, references, files on disk."""
    problems: list[str] = []

    def at(*loc) -> str:
        return _where(path, _mark_of(node, loc))

    if spec.id != spec.root.name:
        problems.append(f"{at('id')}: id {spec.id!r} must equal the folder name {spec.root.name!r}")
    seen: set[str] = set()
    for i, part in enumerate(spec.parts):
        if part.id in seen:
            problems.append(f"{at('parts', i, 'id')}: duplicate part id {part.id!r}")
        seen.add(part.id)
    for i, hint in enumerate(spec.hints):
        for j, part_id in enumerate(hint.parts):
            if part_id not in seen:
                problems.append(f"{at('hints', i, 'parts', j)}: unknown part {part_id!r}")
    rule_seen: set[str] = set()
    for i, rule in enumerate(spec.rules or []):
        if rule.id in rule_seen:
            problems.append(f"{at('rules', i, 'id')}: duplicate rule id {rule.id!r}")
        rule_seen.add(rule.id)
    wrong_seen: set[str] = set()
    for i, wrong in enumerate(spec.wrong):
        for j, rule_id in enumerate(wrong.breaks):
            if rule_id not in rule_seen:
                problems.append(f"{at('wrong', i, 'breaks', j)}: unknown rule {rule_id!r}")
        if wrong.id in wrong_seen:
            problems.append(f"{at('wrong', i, 'id')}: duplicate wrong variant id {wrong.id!r}")
        wrong_seen.add(wrong.id)
        for j, part_id in enumerate(wrong.fails):
            if part_id not in seen:
                problems.append(f"{at('wrong', i, 'fails', j)}: unknown part {part_id!r}")
        if not spec.patch_file(wrong.id).is_file():
            problems.append(f"{at('wrong', i, 'id')}: missing file wrong/{wrong.id}.patch")
    for folder in ("starter", "tests"):
        if not (spec.root / folder).is_dir():
            problems.append(f"{at('id')}: missing folder {folder}/")
    if not spec.readme.is_file():
        problems.append(f"{at('id')}: missing handout README.md")
    problems += [f"{at('lab_code')}: {text}" for text in lab_code_problems(spec.lab_code)]
    for i, name in enumerate(spec.learner_side):
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            problems.append(f"{at('learner_side', i)}: {name!r} must be a file name in tests/ (no folders)")
        elif name == "conftest.py" or name.startswith("test_") or not name.endswith(".py"):
            problems.append(
                f"{at('learner_side', i)}: {name!r} cannot be learner-side: only helper modules "
                f"(*.py, not a test_*.py or conftest.py) are shown to the learner process"
            )
        elif not (spec.tests_dir / name).is_file():
            problems.append(f"{at('learner_side', i)}: {name!r} not found in tests/")
    for target, source in spec.solution_files.items():
        if target.startswith("/") or ".." in Path(target).parts:
            problems.append(f"{at('solution_files', target)}: workspace path {target!r} must stay inside the workspace")
        if not (project_root() / source).is_file():
            problems.append(f"{at('solution_files', target)}: {source!r} not found under {project_root()}")
    return problems


def _lab_dirs() -> list[Path]:
    root = labs_root()
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / SPEC_FILE).is_file())


def lab_ids() -> list[str]:
    return [p.name for p in _lab_dirs()]


def all_labs() -> list[LabSpec]:
    """Every lab, sorted by (stage, id). A broken spec raises ValidationError."""
    return sorted((load_lab(p) for p in _lab_dirs()), key=lambda s: (s.stage, s.id))


# `roadmap status` reads every lab's spec for its labs section: parsing fourteen lab.yaml files with the
# bounded YAML reader cost it more than all its SQL (issue 36). When a command sets a cache folder (status
# does: the data home's cache/), load_all() reads the validated specs back from one JSON file instead,
# keyed by everything they were read from (below); a miss, or any invalid lab, is read the slow way.
_cache_dir: Optional[Path] = None
CACHE_FORMAT = 1


def use_cache(folder: Optional[Path]) -> None:
    """load_all() keeps its validated specs in `folder` (None: never cached)."""
    global _cache_dir
    _cache_dir = folder


def _cache_key(dirs: list[Path]) -> str:
    """sha256 of what a lab's validation reads: every lab.yaml's bytes, and the modification times of the
    folders whose entries the cross-checks look for (an added or deleted README, test, starter or wrong
    variant changes its folder's mtime), plus this module, roadmap's and pydantic's versions. (A
    solution_files source deleted outside the lab folders is not seen: `dev check` reads specs uncached.)"""
    import hashlib
    import os

    import pydantic

    from roadmap_cli import __version__

    digest = hashlib.sha256(f"{CACHE_FORMAT}|{__version__}|{pydantic.VERSION}|{labs_root()}|{project_root()}".encode())
    for module in (__file__,):
        st = os.stat(module)
        digest.update(f"|{st.st_size}:{st.st_mtime_ns}".encode())
    for lab_dir in dirs:
        digest.update(b"\0" + str(lab_dir).encode() + b"\0" + (lab_dir / SPEC_FILE).read_bytes())
        for sub in ("", "tests", "starter", "wrong"):
            try:
                digest.update(f"|{sub}:{os.stat(lab_dir / sub).st_mtime_ns}".encode())
            except OSError:
                digest.update(f"|{sub}:-".encode())
    return digest.hexdigest()


def _load_cached(dirs: list[Path]) -> Optional[tuple[str, list[LabSpec]]]:
    """(key, specs): the specs when the cache holds them (else an empty list); None when no cache is set."""
    if _cache_dir is None:
        return None
    import json

    try:
        key = _cache_key(dirs)
    except OSError:
        return None
    try:
        rows = json.loads((_cache_dir / f"labs-{key[:40]}.json").read_bytes())
        specs = []
        for row in rows:
            spec = LabSpec.model_validate(row["spec"])
            spec._root = Path(row["root"])
            specs.append(spec)
        return key, specs
    except (OSError, ValueError, KeyError, TypeError):  # a miss, or a file that is not ours: read the labs
        return key, []


def _store_cached(key: str, specs: list[LabSpec]) -> None:
    """Written atomically (two commands may race); a read-only home only costs speed."""
    import json
    import os
    import tempfile

    try:
        _cache_dir.mkdir(parents=True, exist_ok=True)
        for old in _cache_dir.glob("labs-*.json"):  # one labs tree per data home is the usual case
            old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".labs-", suffix=".tmp", dir=_cache_dir)
        with os.fdopen(fd, "w") as out:
            json.dump([{"root": str(s.root), "spec": s.model_dump(mode="json")} for s in specs], out)
        os.replace(tmp, _cache_dir / f"labs-{key[:40]}.json")
    except OSError:
        pass


def load_all() -> tuple[list[LabSpec], dict[str, ValidationError]]:
    """Every valid lab, and the problems of the invalid ones (by folder name):
    one lab being written must not break `lab list` for the others."""
    dirs = _lab_dirs()
    cached = _load_cached(dirs)
    if cached is not None and cached[1]:
        return sorted(cached[1], key=lambda s: (s.stage, s.id)), {}
    specs, broken = [], {}
    for path in dirs:
        try:
            specs.append(load_lab(path))
        except ValidationError as exc:
            broken[path.name] = exc
    if cached is not None and specs and not broken:
        _store_cached(cached[0], specs)
    return sorted(specs, key=lambda s: (s.stage, s.id)), broken


def find_lab(lab_id: str) -> LabSpec:
    if not re.match(KEBAB, lab_id or ""):
        raise NotFoundError("lab", lab_id, lab_ids(), hint="see `roadmap lab list`")
    lab_dir = labs_root() / lab_id
    if not (lab_dir / SPEC_FILE).is_file():
        raise NotFoundError("lab", lab_id, lab_ids(), hint="see `roadmap lab list`")
    return load_lab(lab_dir)


def lab_code_problems(data) -> list[str]:
    """What is wrong with a lab.yaml `lab_code:` mapping (grading_kit/labcode.py reads it in the learner
    process; the labs layer may not import the kit, so it is validated here)."""
    problems: list[str] = []
    if data is None:
        return problems
    if not isinstance(data, dict) or set(data) - {"imports", "forbid", "unpickle", "check", "why"}:
        return ["must be a mapping with `imports:` and/or `forbid:`"]
    unpickle = data.get("unpickle")
    if unpickle is not None and (
        not isinstance(unpickle, dict)
        or set(unpickle) != {"files", "why"}
        or not isinstance(unpickle["files"], list)
        or not str(unpickle["why"]).strip()
    ):
        problems.append("unpickle: {files: [...], why: ...} (given code that loads full pickles)")
    if "check" in data and (
        not isinstance(data["check"], bool) or not data["check"] and not str(data.get("why") or "").strip()
    ):
        problems.append("check: true or false; `check: false` needs a `why:` (only the engine's test fixtures)")
    for i, entry in enumerate(data.get("imports") or []):
        if not isinstance(entry, dict) or set(entry) - {"module", "files", "attributes", "why"}:
            problems.append(f"imports[{i}]: keys are module, files, attributes, why")
            continue
        module = entry.get("module")
        if not isinstance(module, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module):
            problems.append(f"imports[{i}].module: a dotted module name")
        elif (
            module.split(".")[0] in ("sys", "builtins", "importlib", "gc", "inspect", "roadmap_cli")
            and entry.get("attributes") is None
        ):
            problems.append(
                f"imports[{i}]: {module} reaches into the grading process; list the `attributes:` "
                "the handout's code needs"
            )
        if not isinstance(entry.get("why"), str) or not entry["why"].strip():
            problems.append(f"imports[{i}].why: say why the handout's code needs it")
        for key in ("files", "attributes"):
            if entry.get(key) is not None and (
                not isinstance(entry[key], list) or not all(isinstance(x, str) for x in entry[key])
            ):
                problems.append(f"imports[{i}].{key}: a list of names")
    for i, entry in enumerate(data.get("forbid") or []):
        if not isinstance(entry, dict) or set(entry) - {"names", "files", "why"}:
            problems.append(f"forbid[{i}]: keys are names, files, why")
            continue
        if (
            not isinstance(entry.get("names"), list)
            or not entry["names"]
            or not all(isinstance(x, str) and x for x in entry["names"])
        ):
            problems.append(f"forbid[{i}].names: a list of dotted names")
        if not isinstance(entry.get("why"), str) or not entry["why"].strip():
            problems.append(f"forbid[{i}].why: quote the handout's reason")
        if entry.get("files") is not None and (
            not isinstance(entry["files"], list) or not all(isinstance(x, str) for x in entry["files"])
        ):
            problems.append(f"forbid[{i}].files: a list of workspace file names")
    return problems
