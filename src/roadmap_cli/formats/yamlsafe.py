"""The one YAML loader: bounded, so no input can hang or exhaust the machine.

Every YAML file roadmap reads (the curriculum, each lab.yaml, a third-party
lab's spec) goes through `load_yaml`. It refuses, with `file:line:col`:

- a document over MAX_BYTES (checked on the length, before any parsing);
- nesting deeper than MAX_DEPTH mappings/sequences (a 10,000-deep `[[[[...`
  would otherwise blow the recursive constructor's stack);
- any anchor or alias (`&a`, `*a`): none of roadmap's formats needs them,
  and nine nested aliases ("billion laughs") expand a 1 KB file into
  gigabytes of Python objects;
- duplicate keys in a mapping (a plain YAML loader silently keeps the last
  one; `curriculum validate` and `init --use-curriculum` must agree);
- tags outside the safe set (`!!python/...`), as yaml.SafeLoader does.

How: libyaml (or the pure-Python parser) is a streaming *event* parser, so we
build the node tree ourselves from events with an explicit stack (no
recursion), checking the limits as each event arrives. Refusal therefore
comes after reading at most the first offending token: time and memory are
bounded by the accepted size, never by what the document would expand to.
Then the safe constructor turns the (small, alias-free, shallow) node tree
into Python objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

MAX_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 64


@dataclass
class YamlProblem(Exception):
    """Why a document was refused; `line`/`col` are 1-based."""

    line: int
    col: int
    message: str
    more: tuple = ()  # further (line, col, message) of the same kind (duplicate keys)

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.message}"

    def lines(self, path: Path | str) -> list[str]:
        first = [f"{path}:{self.line}:{self.col}: {self.message}"]
        return first + [f"{path}:{line}:{col}: {msg}" for line, col, msg in self.more]


def _loader_class():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _pos(mark) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _syntax_problem(exc) -> YamlProblem:
    """A yaml.MarkedYAMLError as a problem at its line:col."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line, col = _pos(mark)
    problem, context = getattr(exc, "problem", None), getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    what = problem or context or "invalid YAML"
    if problem and context and context_mark and context_mark is not mark:
        cl, cc = _pos(context_mark)
        what += f" ({context} at {cl}:{cc})"
    return YamlProblem(line, col, f"YAML syntax error: {what}")


def compose_bounded(text: str | bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH):
    """(root node or None, loader) of the single document in `text`, within the limits.

    Raises YamlProblem. The loader is returned so the caller can construct
    Python objects from the node with the same (safe) constructor."""
    import yaml

    # len(str) <= its UTF-8 size: a huge text is refused without encoding a copy.
    size = len(text)
    if size <= max_bytes and isinstance(text, str) and not text.isascii():
        size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise YamlProblem(1, 1, f"the file is {size / 1e6:.1f} MB; YAML files are limited to {max_bytes / 1e6:.0f} MB")
    loader = _loader_class()(text)
    try:
        return _compose(loader, max_depth), loader
    except yaml.MarkedYAMLError as exc:
        loader.dispose()
        raise _syntax_problem(exc) from None
    except yaml.YAMLError as exc:
        loader.dispose()
        raise YamlProblem(1, 1, f"YAML error: {exc}") from None


def _compose(loader, max_depth: int):
    """Events -> nodes with an explicit stack; limits checked per event."""
    from yaml import events, nodes

    root = None
    # Each open collection: [node, duplicate-key bookkeeping (mappings), pending key node]
    stack: list[list] = []
    duplicates: list[tuple[int, int, str]] = []
    documents = 0

    def attach(node) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        parent = stack[-1]
        if isinstance(parent[0], nodes.SequenceNode):
            parent[0].value.append(node)
        elif parent[2] is None:  # a key
            if isinstance(node, nodes.ScalarNode):
                seen = parent[1]
                if node.value in seen:
                    line, col = _pos(node.start_mark)
                    duplicates.append((line, col, f"duplicate key {node.value!r} (YAML would keep only the last one)"))
                seen.add(node.value)
            parent[2] = node
        else:
            parent[0].value.append((parent[2], node))
            parent[2] = None

    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, events.AliasEvent) or getattr(event, "anchor", None):
            line, col = _pos(event.start_mark)
            raise YamlProblem(line, col, "YAML anchors and aliases (&name, *name) are not allowed in roadmap files")
        if isinstance(event, events.DocumentStartEvent):
            documents += 1
            if documents > 1:
                line, col = _pos(event.start_mark)
                raise YamlProblem(line, col, "expected a single YAML document, found a second one")
        elif isinstance(event, events.ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = loader.resolve(nodes.ScalarNode, event.value, event.implicit)
            attach(nodes.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style))
        elif isinstance(event, (events.SequenceStartEvent, events.MappingStartEvent)):
            if len(stack) >= max_depth:
                line, col = _pos(event.start_mark)
                raise YamlProblem(line, col, f"nesting deeper than {max_depth} levels is not allowed")
            is_seq = isinstance(event, events.SequenceStartEvent)
            tag = event.tag
            if tag is None or tag == "!":
                tag = loader.resolve(nodes.SequenceNode if is_seq else nodes.MappingNode, None, event.implicit)
            node_class = nodes.SequenceNode if is_seq else nodes.MappingNode
            node = node_class(tag, [], event.start_mark, None, flow_style=event.flow_style)
            stack.append([node, set(), None])
        elif isinstance(event, (events.SequenceEndEvent, events.MappingEndEvent)):
            node = stack.pop()[0]
            node.end_mark = event.end_mark
            attach(node)
        # StreamStart/End, DocumentEnd: nothing to build
    if duplicates:
        first, *more = duplicates
        raise YamlProblem(*first, more=tuple(more))
    return root


def construct(loader, node) -> Any:
    """Python objects from a bounded node tree (safe tags only)."""
    import yaml

    if node is None:
        return None
    try:
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_problem(exc) from None
    finally:
        loader.dispose()


def load_with_nodes(text: str | bytes, **limits) -> tuple[Any, Optional[Any]]:
    """(data, root node with positions) of `text`; raises YamlProblem."""
    node, loader = compose_bounded(text, **limits)
    return construct(loader, node), node


def load_yaml(text: str | bytes, **limits) -> Any:
    """The data of `text` (one bounded YAML document); raises YamlProblem."""
    return load_with_nodes(text, **limits)[0]


def check_file_size(path: Path, max_bytes: int = MAX_BYTES) -> None:
    """Refuse an oversized file from its size alone (it is never read)."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # the caller's read reports it
    if size > max_bytes:
        raise YamlProblem(1, 1, f"the file is {size / 1e6:.1f} MB; YAML files are limited to {max_bytes / 1e6:.0f} MB")


def load_yaml_file(path: Path, **limits) -> Any:
    """Read and load `path`; raises YamlProblem (also for an oversized or unreadable file).

    The size is checked with stat before reading, so a 50 MB file is never
    read into memory."""
    path = Path(path)
    check_file_size(path, limits.get("max_bytes", MAX_BYTES))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise YamlProblem(1, 1, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise YamlProblem(1, 1, f"the file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return load_yaml(text, **limits)
