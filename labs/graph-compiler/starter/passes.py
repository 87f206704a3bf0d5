"""Part 2: three classic graph passes on torch.fx graphs.

Each pass changes the GraphModule IN PLACE, keeps it valid (`gm.graph.lint()`
passes), calls `gm.recompile()` so `gm.forward` runs the new graph, and
returns the same `gm`. None of them may change what the graph computes.
Write them with the Graph API (`node.users`, `node.replace_all_uses_with`,
`graph.erase_node`, `graph.inserting_before`, `graph.get_attr`); calling
`Graph.eliminate_dead_code` is not allowed (it is the pass you write).
"""

from __future__ import annotations

import torch
import torch.fx as fx


def _input_nodes(node: fx.Node) -> list:
    """Every Node among node.args and node.kwargs (nested tuples/lists/dicts included)."""
    return list(node.all_input_nodes)


def fold_constants(gm: fx.GraphModule) -> fx.GraphModule:
    """Evaluate every subexpression that depends on no placeholder once, now, and store it as a buffer.

    A node is *constant* when it is a `get_attr`, or a pure call (`not node.is_impure()`) whose input
    nodes are all constant (a call with no input nodes at all, like `torch.ones(3)`, is constant).
    Every constant call node used by a non-constant node (or by the output) is evaluated and replaced by
    one new `get_attr` of a buffer named `_folded_0`, `_folded_1`, ... in graph order. Then every
    constant node left without users is erased.
    """
    raise NotImplementedError("fold_constants: see README.md, section \"Part 2: constant folding, DCE, CSE\"")


def eliminate_dead_code(gm: fx.GraphModule) -> fx.GraphModule:
    """Erase every node whose value nobody uses, until none is left: chains of dead nodes go too.
    Never erased: placeholders (they are the signature), the output, and impure nodes
    (`node.is_impure()`: random draws), even unused."""
    raise NotImplementedError("eliminate_dead_code: see README.md, section \"Part 2: constant folding, DCE, CSE\"")


def eliminate_common_subexpressions(gm: fx.GraphModule) -> fx.GraphModule:
    """Merge nodes that compute the same thing: same op, same target, same args and kwargs, where an
    argument node that was merged counts as the node it was merged into. The first one (in graph order)
    stays; later ones are replaced by it and erased. Never merged: placeholders, the output, impure nodes."""
    raise NotImplementedError("eliminate_common_subexpressions: see README.md, section \"Part 2: constant folding, DCE, CSE\"")
