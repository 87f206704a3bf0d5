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
    # BEGIN SOLUTION
    graph = gm.graph
    const: set = set()
    for node in graph.nodes:
        if node.op == "get_attr":
            const.add(node)
        elif node.op in ("call_function", "call_method") and not node.is_impure() \
                and all(n in const for n in _input_nodes(node)):
            const.add(node)
    # Values of the constant nodes, computed in graph order (inputs before users).
    values: dict = {}
    counter = 0
    for node in list(graph.nodes):
        if node not in const:
            continue
        args = fx.node.map_arg(node.args, lambda n: values[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: values[n])
        if node.op == "get_attr":
            values[node] = getattr(gm, node.target)
        elif node.op == "call_function":
            values[node] = node.target(*args, **kwargs)
        else:  # call_method: args[0] is the object
            values[node] = getattr(args[0], node.target)(*args[1:], **kwargs)
        # A constant call feeding something non-constant: the frontier of the constant region.
        if node.op != "get_attr" and any(u not in const for u in node.users):
            name = f"_folded_{counter}"
            counter += 1
            gm.register_buffer(name, values[node].detach().clone() if isinstance(values[node], torch.Tensor)
                               else torch.as_tensor(values[node]))
            with graph.inserting_before(node):
                new = graph.get_attr(name)
            # Every use moves to the buffer, constant users included: they now read `new`, so it needs a value.
            node.replace_all_uses_with(new)
            const.add(new)
            values[new] = values[node]
    # Erase the constant nodes nobody uses any more, users first (reverse order reaches whole chains).
    for node in reversed(list(graph.nodes)):
        if node in const and not node.users:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return gm
    # STARTER
    # raise NotImplementedError("fold_constants: see README.md, section \"Part 2: constant folding, DCE, CSE\"")
    # END SOLUTION


def eliminate_dead_code(gm: fx.GraphModule) -> fx.GraphModule:
    """Erase every node whose value nobody uses, until none is left: chains of dead nodes go too.
    Never erased: placeholders (they are the signature), the output, and impure nodes
    (`node.is_impure()`: random draws), even unused."""
    # BEGIN SOLUTION
    graph = gm.graph
    # Walking from the output backwards, a node's users are visited (and erased) before it: one sweep is a
    # fixpoint.
    for node in reversed(list(graph.nodes)):
        if node.op in ("placeholder", "output") or node.is_impure():
            continue
        if not node.users:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return gm
    # STARTER
    # raise NotImplementedError("eliminate_dead_code: see README.md, section \"Part 2: constant folding, DCE, CSE\"")
    # END SOLUTION


def eliminate_common_subexpressions(gm: fx.GraphModule) -> fx.GraphModule:
    """Merge nodes that compute the same thing: same op, same target, same args and kwargs, where an
    argument node that was merged counts as the node it was merged into. The first one (in graph order)
    stays; later ones are replaced by it and erased. Never merged: placeholders, the output, impure nodes."""
    # BEGIN SOLUTION
    graph = gm.graph
    seen: dict = {}
    for node in list(graph.nodes):
        if node.op in ("placeholder", "output") or node.is_impure():
            continue
        # node's args already point at the kept nodes (replace_all_uses_with rewrote them), so chains of
        # duplicates merge level by level in one pass. repr() of the args gives a hashable key that
        # tells a float 1.0 from an int 1 and keeps kwargs' names.
        key = (node.op, node.target, repr(node.args), repr(sorted(node.kwargs.items())))
        if key in seen:
            node.replace_all_uses_with(seen[key])
            graph.erase_node(node)
        else:
            seen[key] = node
    graph.lint()
    gm.recompile()
    return gm
    # STARTER
    # raise NotImplementedError("eliminate_common_subexpressions: see README.md, section \"Part 2: constant folding, DCE, CSE\"")
    # END SOLUTION
