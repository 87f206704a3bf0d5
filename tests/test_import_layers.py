"""The package's imports flow one way (docs/architecture.md, "Layers").

Every `import` of roadmap_cli code, at module level or inside a function,
counts: a lazy import is still a dependency. A module may import from its own
layer or any layer below it, never above; and no chain of imports may lead
back to where it started (a circle), whatever the layers say.

grading_kit is what the graders import: it may use only itself and the
leaf modules, so a grader never drags the engine, the store or the CLI in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "roadmap_cli"

# Top to bottom. A module belongs to the first layer one of whose prefixes it
# starts with (a package name covers its modules). Folders, not modules: only
# the few modules left at the top of roadmap_cli are named one by one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("entry", ("roadmap_cli.entry", "roadmap_cli.__main__")),
    ("cli", ("roadmap_cli.cli",)),
    ("authoring", ("roadmap_cli.authoring",)),
    ("grading", ("roadmap_cli.grading",)),
    ("grading_kit", ("roadmap_cli.grading_kit",)),
    ("services", ("roadmap_cli.context", "roadmap_cli.portable", "roadmap_cli.reports")),
    ("tracker", ("roadmap_cli.tracker", "roadmap_cli.quiz", "roadmap_cli.research")),
    ("labs", ("roadmap_cli.labs",)),
    ("curriculum", ("roadmap_cli.curriculum",)),
    ("store", ("roadmap_cli.store",)),
    ("leaves", ("roadmap_cli.errors", "roadmap_cli.paths", "roadmap_cli.formats", "roadmap_cli")),
]
# grading_kit sits above the services in the list only so that grading may use
# it; it must not use them (nor labs, store, ...): only itself and the leaves.
KIT_MAY_USE = ("grading_kit", "leaves")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def layer_of(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or (prefix != "roadmap_cli" and module.startswith(prefix + ".")):
                return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md)")


def _target(module: str) -> str:
    """The module an import names, cut back to one that exists (a name inside it)."""
    while module not in MODULES and "." in module:
        module = module.rsplit(".", 1)[0]
    return module


def imports_of(module: str) -> dict[str, int]:
    """roadmap_cli modules `module` imports -> the line of the first such import."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [f"{origin}.{alias.name}" for alias in node.names] or [origin]
        for name in names:
            if name.split(".")[0] != "roadmap_cli":
                continue
            target = _target(name)
            if target in MODULES and target != module:
                found.setdefault(target, node.lineno)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_import_runs_up_a_layer():
    upward = []
    for module, targets in GRAPH.items():
        mine = layer_of(module)
        for target, line in targets.items():
            theirs = layer_of(target)
            if LAYERS[mine][0] == "grading_kit":
                if LAYERS[theirs][0] not in KIT_MAY_USE:
                    upward.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: grading_kit imports {target}")
            elif theirs < mine:
                upward.append(
                    f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: {LAYERS[mine][0]} imports "
                    f"{target} ({LAYERS[theirs][0]}, above it)"
                )
    assert upward == [], "\n".join(upward)


def test_no_import_circles():
    # Tarjan's strongly connected components: any component of two or more modules is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(root: str) -> None:
        # Iterative, so that a deep chain cannot hit the recursion limit.
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert circles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize(
    "source, bad",
    [
        ("from roadmap_cli.cli import lab\n", "roadmap_cli.cli.lab"),
        ("def f():\n    from roadmap_cli import context\n", "roadmap_cli.context"),
    ],
)
def test_the_checker_sees_upward_imports(tmp_path: Path, source: str, bad: str, monkeypatch):
    """The check can fail: a store module importing the CLI (at the top or lazily) is found."""
    fake = "roadmap_cli.store._probe"
    probe = tmp_path / "_probe.py"
    probe.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, fake, probe)
    found = imports_of(fake)
    assert bad in found and layer_of(bad) < layer_of(fake)


def documented_tree() -> set[str]:
    """The .py paths docs/architecture.md's tree names under src/roadmap_cli/ (two spaces a level)."""
    text = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text[text.index("```\nsrc/roadmap_cli/\n") + 4 :]
    block = block[: block.index("```")]
    paths: set[str] = set()
    folders: list[str] = []  # the folder open at each depth
    for line in block.splitlines()[1:]:
        name = line.strip().split(" ")[0] if line.strip() else ""
        depth = (len(line) - len(line.lstrip(" "))) // 2
        if depth == 0:
            break  # back at the repository's top level (curriculum.yaml, labs/, ...)
        if not (name.endswith("/") or name.endswith(".py")):
            continue  # a description's second line
        del folders[depth - 1 :]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            paths.add("/".join([*folders, name]))
    return paths


def test_the_architecture_tree_matches_the_source_tree():
    actual = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    documented = documented_tree()
    assert sorted(actual - documented) == [], "modules docs/architecture.md does not name"
    assert sorted(documented - actual) == [], "docs/architecture.md names modules that do not exist"
