"""Part 5: read what torch.compile's front end (TorchDynamo) captured, with a backend of your own.

torch.compile(fn, backend=b) hands b every FX graph Dynamo captures, as a GraphModule plus example
inputs, and runs whatever callable b returns in its place. A backend that records the graph and
returns gm.forward changes nothing about the results and compiles nothing (no Inductor, no C++).
"""

from __future__ import annotations

import torch
import torch.fx as fx


def op_names(gm: fx.GraphModule) -> list:
    """The compute nodes of gm in graph order, as names: call_function -> target.__name__
    ("matmul", "relu", "gt"), call_method -> the method's name ("cos", "sum"), call_module -> the
    submodule's class name. Placeholders, get_attr and the output are not listed."""
    raise NotImplementedError("op_names: see README.md, section \"Part 5: reading what torch.compile captured\"")


def compile_facts(fn, first_args: tuple, second_args: tuple) -> dict:
    """Compile fn with a recording backend, call it on first_args, then on second_args.

    Returns {"graphs_first": [...], "graphs_second": [...], "out_first": ..., "out_second": ...}:
    for each call, one entry per graph Dynamo handed the backend DURING that call, in order, each
    {"ops": op_names(gm), "inputs": number of placeholder nodes}; and the compiled function's outputs.
    Starts with torch._dynamo.reset() so graphs cached by earlier compiles cannot hide any.
    """
    raise NotImplementedError("compile_facts: see README.md, section \"Part 5: reading what torch.compile captured\"")
