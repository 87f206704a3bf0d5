"""Part 3: pattern fusion. A chain matmul -> add (bias) -> exact GELU becomes ONE node.

On a GPU a fused node is one kernel: the matmul's output tile gets its bias
and GELU while it is still in registers, instead of three kernels that each
write and re-read the whole activation. Here the fused node is a call of
`fused_linear_gelu`, which a backend would lower to such a kernel.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F


def fused_linear_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """gelu(x @ w + b), exact (erf) GELU. x: (..., K), w: (K, N), b: broadcastable to (..., N).
    Note w is (K, N) as in the matmul it replaces, not nn.Linear's (N, K)."""
    # BEGIN SOLUTION
    return F.gelu(torch.matmul(x, w) + b)
    # STARTER
    # raise NotImplementedError("fused_linear_gelu: see README.md, section \"Part 3: fusing matmul + bias + GELU\"")
    # END SOLUTION


def fuse_linear_gelu(gm: fx.GraphModule) -> fx.GraphModule:
    """Replace every chain  m = matmul(x, w);  a = add(m, b) or add(b, m);  g = gelu(a)  (exact GELU: no
    `approximate` or approximate="none"), where m's only user is a and a's only user is g, by one node
    call_function(fused_linear_gelu, (x, w, b)). Other chains are left alone. In place; lint, recompile,
    return gm."""
    # BEGIN SOLUTION
    graph = gm.graph
    for gelu in list(graph.nodes):
        if gelu.op != "call_function" or gelu.target is not F.gelu:
            continue
        if gelu.kwargs.get("approximate", "none") != "none" or len(gelu.args) != 1:
            continue
        add = gelu.args[0]
        if not (isinstance(add, fx.Node) and add.op == "call_function" and add.target is operator.add
                and len(add.users) == 1):
            continue
        # The bias may be either operand of the add (addition commutes).
        for mm, bias in ((add.args[0], add.args[1]), (add.args[1], add.args[0])):
            if isinstance(mm, fx.Node) and mm.op == "call_function" and mm.target is torch.matmul \
                    and len(mm.users) == 1:
                break
        else:
            continue
        x, w = mm.args
        # Insert at the gelu: x, w and bias all come before the add, hence before the gelu.
        with graph.inserting_before(gelu):
            fused = graph.call_function(fused_linear_gelu, (x, w, bias))
        gelu.replace_all_uses_with(fused)
        graph.erase_node(gelu)
        graph.erase_node(add)
        graph.erase_node(mm)
    graph.lint()
    gm.recompile()
    return gm
    # STARTER
    # raise NotImplementedError("fuse_linear_gelu: see README.md, section \"Part 3: fusing matmul + bias + GELU\"")
    # END SOLUTION
