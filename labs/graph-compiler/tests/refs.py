"""The grader's references (grader process only: never learner-side): random graph specs drawn from
the secret seed, reference passes (written independently of the solution), expected node tables."""

from __future__ import annotations

import operator
import random

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F

from roadmap_cli import grading_kit as kit

import graphs


def rng(name: str) -> random.Random:
    return random.Random(kit.seeded(f"graph-compiler-{name}"))


def gen(r: random.Random) -> torch.Generator:
    return torch.Generator().manual_seed(r.randrange(1 << 62))


# ---------------------------------------------------------------- random graphs (specs, see graphs.py)


class SpecBuilder:
    def __init__(self, r: random.Random):
        self.r, self.g = r, gen(r)
        self.inputs, self.attrs, self.nodes, self.i = [], {}, [], 0

    def inp(self, name, shape, dtype=torch.float32):
        self.inputs.append([name, list(shape), dtype])
        return name

    def attr(self, shape):
        name = f"c{len(self.attrs)}"
        self.attrs[name] = torch.randn(*shape, generator=self.g)
        self.nodes.append([name, "get_attr", name, [], {}])
        return name

    def call(self, target, *args, op="call_function", **kwargs):
        name = f"n{self.i}"
        self.i += 1
        self.nodes.append([name, op, target, [f"%{a}" if isinstance(a, str) else a for a in args],
                           {k: (f"%{v}" if isinstance(v, str) and k != "approximate" else v)
                            for k, v in kwargs.items()}])
        return name

    def spec(self, outputs):
        return {"inputs": self.inputs, "attrs": self.attrs, "nodes": self.nodes, "output": list(outputs)}


UNARY = ["relu", "neg", "sin"]
BINARY = ["add", "sub", "mul"]


def passes_spec(r: random.Random) -> dict:
    """A random graph for part 2 with everything the passes must handle: constant chains (folding), calls
    with no node inputs (torch.ones: constant),
    dead chains and an unused input (DCE), duplicated chains and kwargs twins (CSE), random draws, used
    and unused, with and without node inputs (impure nodes)."""
    b = SpecBuilder(r)
    B, D = r.choice([1, 2, 3, 5]), r.choice([1, 3, 4, 6])
    x = b.inp("x", [B, D])
    b.inp("u", [D])                   # an input nothing uses: DCE keeps it
    c0, c1 = b.attr([D]), b.attr([D, D])
    # A constant chain: every node depends on attributes only.
    k = b.call("mul", c0, r.choice([2.0, 0.5, -1.5]))
    for _ in range(r.randint(1, 3)):
        k = b.call(r.choice(UNARY), k) if r.random() < 0.5 else b.call("add", k, c0)
    k = b.call(r.choice(UNARY), k, op="call_method")   # a method call is constant too: `c.relu()`
    b.attr([D])                       # an attribute nothing uses: DCE erases it (only impure nodes stay)
    k2 = b.call("matmul", c0, c1)   # (D,) @ (D, D) -> (D,)
    live = [x]
    h = b.call("add", x, k)
    live.append(h)
    c2 = b.attr([D])                  # an attribute defined after non-constant nodes
    h = b.call("mul", h, b.call("sin", c2))
    live.append(h)
    h = b.call("add", h, c2)          # a plain attribute used by a live node: it stays itself, never a _folded_i
    live.append(h)
    # Calls with no input nodes at all are constant (torch.ones((D,))): one a live node reads directly, one
    # feeding a constant chain (only the chain's last node is folded then, and the ones call is erased).
    h = b.call("sub", h, b.call("ones", [D]))
    live.append(h)
    h = b.call("mul", h, b.call("add", b.call("ones", [D]), c2))
    live.append(h)
    # Duplicated chains: the second copy repeats the first node for node (CSE merges level by level).
    src = r.choice(live)
    first = b.call("relu", src)
    first2 = b.call("mul", first, k2)
    dup = b.call("relu", src)
    dup2 = b.call("mul", dup, k2)
    h = b.call("add", first2, dup2)
    live.append(h)
    # Method-call twins merge as function twins do; a method and the function of the same name do not.
    m1, m2, m3 = (b.call("neg", h, op="call_method"), b.call("neg", h, op="call_method"), b.call("neg", h))
    h = b.call("add", b.call("mul", m1, m2), m3)
    live.append(h)
    # kwargs twins: same function and args, different kwargs -> different values, never merged.
    g1 = b.call("gelu", h)
    g2 = b.call("gelu", h, approximate="tanh")
    h = b.call("sub", g1, g2)
    live.append(h)
    # Random draws: rand_like twins (never merged), rand with constant args (never folded), one unused.
    noise = b.call("rand_like", h)
    noise2 = b.call("rand_like", h)
    shape_draw = b.call("rand", [D])
    h = b.call("add", b.call("mul", h, noise), b.call("sub", noise2, shape_draw))
    b.call("rand_like", x)            # an unused draw: impure, DCE keeps it
    live.append(h)
    # Dead chains of 1-3 nodes, some hanging off constants.
    for _ in range(r.randint(1, 3)):
        d = r.choice(live + [k2])
        for _ in range(r.randint(1, 3)):
            d = b.call(r.choice(BINARY), d, r.choice(live)) if r.random() < 0.5 else b.call(r.choice(UNARY), d)
    for _ in range(r.randint(1, 3)):
        a, c = r.choice(live), r.choice(live)
        h = b.call(r.choice(BINARY), a, c)
        live.append(h)
    outs = [h] + ([r.choice(live[1:-1])] if r.random() < 0.5 else []) + ([k] if r.random() < 0.5 else [])
    return b.spec(outs)


def fusion_spec(r: random.Random, force: list | None = None) -> dict:
    """A chain of layers x -> matmul(., W) -> add bias -> gelu, each layer one of the patterns below
    (`force` lists patterns that must appear), with dims that change layer to layer (W is (K, N), K != N)."""
    patterns = ["plain", "bias-first", "explicit-none", "tanh", "mm-two-users", "add-two-users", "sub",
                "bias-after-mm", "relu"]
    chosen = list(force or []) + [r.choice(patterns) for _ in range(r.randint(1, 3))]
    r.shuffle(chosen)
    b = SpecBuilder(r)
    dims = [r.choice([2, 3, 5])] + [r.choice([2, 3, 4, 6, 7]) for _ in chosen]
    lead = [r.choice([1, 2, 3])] + ([r.choice([1, 4])] if r.random() < 0.4 else [])
    h = b.inp("x", lead + [dims[0]])
    side = []
    for i, pat in enumerate(chosen):
        w = b.attr([dims[i], dims[i + 1]])
        bias = None if pat == "bias-after-mm" else b.attr([dims[i + 1]])
        mm = b.call("matmul", h, w)
        if bias is None:
            bias = b.attr([dims[i + 1]])
        if pat == "mm-two-users":
            side.append(b.call("relu", mm))
        a = b.call("sub" if pat == "sub" else "add", *((bias, mm) if pat == "bias-first" else (mm, bias)))
        if pat == "add-two-users":
            side.append(b.call("neg", a))
        if pat == "tanh":
            h = b.call("gelu", a, approximate="tanh")
        elif pat == "relu":             # another activation: not this fusion's pattern
            h = b.call("relu", a)
        elif pat == "explicit-none":
            h = b.call("gelu", a, approximate="none")
        else:
            h = b.call("gelu", a)
    return b.spec([h] + side)


# ---------------------------------------------------------------- reference passes (on grader-built graphs)


def _constant_nodes(graph) -> set:
    const = set()
    for n in graph.nodes:
        if n.op == "get_attr" or (n.op in ("call_function", "call_method") and not n.is_impure()
                                  and all(a in const for a in n.all_input_nodes)):
            const.add(n)
    return const


def ref_fold(gm):
    """Reference folding: frontier constant calls -> get_attr `_folded_i`; then dead constants erased."""
    const = _constant_nodes(gm.graph)
    frontier = [n for n in gm.graph.nodes if n in const and n.op != "get_attr"
                and any(u not in const for u in n.users)]
    env = {}
    for n in gm.graph.nodes:
        if n in const:
            if n.op == "get_attr":
                env[n] = getattr(gm, n.target)
            else:
                a = fx.node.map_arg(n.args, env.__getitem__)
                kw = fx.node.map_arg(n.kwargs, env.__getitem__)
                env[n] = n.target(*a, **kw) if n.op == "call_function" else getattr(a[0], n.target)(*a[1:], **kw)
    for i, n in enumerate(frontier):
        gm.register_buffer(f"_folded_{i}", env[n])
        with gm.graph.inserting_before(n):
            new = gm.graph.get_attr(f"_folded_{i}")
        n.replace_all_uses_with(new)
    changed = True
    while changed:
        changed = False
        for n in list(gm.graph.nodes):
            if n in const and not n.users:
                gm.graph.erase_node(n)
                changed = True
    gm.recompile()
    return gm, [f"_folded_{i}" for i in range(len(frontier))]


def ref_dce(gm):
    changed = True
    while changed:
        changed = False
        for n in list(gm.graph.nodes):
            if n.op not in ("placeholder", "output") and not n.is_impure() and not n.users:
                gm.graph.erase_node(n)
                changed = True
    gm.recompile()
    return gm


def _freeze(v):
    if isinstance(v, fx.Node):
        return ("node", v.name)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, _freeze(x)) for k, x in v.items())))
    return (type(v).__name__, repr(v))


def ref_cse(gm):
    kept = {}
    for n in list(gm.graph.nodes):
        if n.op in ("placeholder", "output") or n.is_impure():
            continue
        key = (n.op, n.target, _freeze(n.args), _freeze(n.kwargs))
        if key in kept:
            n.replace_all_uses_with(kept[key])
            gm.graph.erase_node(n)
        else:
            kept[key] = n
    gm.recompile()
    return gm


def ref_fusion_table(spec) -> list:
    """The node table fusion must produce, worked out on the spec: a matched chain's three rows become
    one ["call_function", "fused_linear_gelu"] row at the gelu's place."""
    gm = graphs.build(spec)
    drop, fused_at = set(), set()
    for g in gm.graph.nodes:
        if g.op != "call_function" or g.target is not F.gelu or g.kwargs.get("approximate", "none") != "none":
            continue
        a = g.args[0]
        if a.op != "call_function" or a.target is not operator.add or len(a.users) != 1:
            continue
        mms = [m for m in a.args if isinstance(m, fx.Node) and m.op == "call_function"
               and m.target is torch.matmul and len(m.users) == 1]
        if mms:
            drop |= {a, mms[0]}
            fused_at.add(g)
    table = []
    for n in gm.graph.nodes:
        if n in drop:
            continue
        table.append(["call_function", "fused_linear_gelu"] if n in fused_at else [n.op, graphs.target_name(n, gm)])
    return table


def run_graph(gm, inputs, seed):
    torch.manual_seed(seed)
    return list(gm(*inputs))


def fail(msg: str, section: str):
    pytest.fail(f"{msg} (README.md, section \"{section}\")")


def close(got, want, what: str, section: str, tol: float = 1e-5) -> None:
    """got vs want: same shape and dtype, |got - want| <= tol * (1 + |want|) elementwise (fp64)."""
    want = want.detach()
    if not isinstance(got, torch.Tensor):
        fail(f"{what}: got a {type(got).__name__}, expected a tensor of shape {tuple(want.shape)}", section)
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        fail(f"{what}: shape {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}", section)
    err = (got.double() - want.double()).abs()
    bound = tol * (1 + want.double().abs())
    if not bool((err <= bound).all()) or bool(torch.isnan(got).any()) != bool(torch.isnan(want).any()):
        fail(f"{what}: max |diff| {float(err.max()):.3g} (tolerance {tol:g} relative), got {got.flatten()[:6].tolist()}, "
             f"expected {want.flatten()[:6].tolist()}", section)
