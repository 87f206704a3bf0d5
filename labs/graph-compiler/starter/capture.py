"""Part 1: capture a model as a torch.fx graph and propagate shapes through it."""

from __future__ import annotations

import torch
import torch.fx as fx


def capture(model: torch.nn.Module) -> fx.GraphModule:
    """The model's forward as a GraphModule, by symbolic tracing: torch.fx runs forward once on Proxy
    objects and records every call as a node (submodules such as nn.Linear stay single call_module nodes)."""
    raise NotImplementedError("capture: see README.md, section \"Part 1: capture and shape propagation\"")


def propagate_shapes(gm: fx.GraphModule, *inputs) -> dict:
    """Run gm on real inputs node by node and record what every node produced.

    Returns {node.name: {"shape": ..., "dtype": ...}} for every node except the output, in graph order:
    a tensor gives shape = tuple of ints and dtype = str(tensor.dtype) ("torch.float32"); any other value
    (an int from x.size(0), say) gives shape None and dtype = type(value).__name__ ("int").
    Also stores the same two facts in node.meta["shape"] and node.meta["dtype"].
    """
    raise NotImplementedError("propagate_shapes: see README.md, section \"Part 1: capture and shape propagation\"")
