"""Where in the YAML file a problem is: map a `loc` path to line:col.

Only used on the error path (and by `curriculum validate`): composing the
node tree with marks costs about as much as parsing the file again, so the
happy path never does it.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional


def compose(text: str) -> Any:
    """The YAML node tree (with start marks) of `text`, through the bounded
    loader (roadmap_cli.formats.yamlsafe: size, depth, no aliases, no duplicate keys)."""
    from roadmap_cli.formats.yamlsafe import compose_bounded

    node, loader = compose_bounded(text)
    loader.dispose()
    return node


def _child(node: Any, part: Any) -> tuple[Optional[Any], Optional[Any]]:
    """(key node, value node) of `part` inside `node`, or (None, None)."""
    import yaml

    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == part:
                return key_node, value_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return None, node.value[part]
    return None, None


def locate(root: Any, loc: tuple, *, at_key: bool = False) -> tuple[int, int]:
    """1-based (line, column) of the node at `loc`.

    Walks as far as the path exists: a missing key points at the mapping that
    should hold it. With `at_key`, a final mapping key points at the key
    itself (for "unknown key" errors) rather than at its value.
    """
    if root is None:
        return 1, 1
    node = root
    for index, part in enumerate(loc):
        key_node, value_node = _child(node, part)
        if value_node is None:
            break
        if at_key and index == len(loc) - 1 and key_node is not None:
            node = key_node
            break
        node = value_node
    mark = node.start_mark
    return mark.line + 1, mark.column + 1


def duplicate_keys(root: Any) -> Iterator[tuple[int, int, str]]:
    """(line, col, key) for each key that repeats within one mapping.

    A safe loader silently keeps the last of two equal keys; a curriculum
    author almost always meant something else, so `validate` reports it.
    """
    import yaml

    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    if key_node.value in seen:
                        yield key_node.start_mark.line + 1, key_node.start_mark.column + 1, key_node.value
                    seen.add(key_node.value)
                stack.append(value_node)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
