"""Part 3: a real torch op. torch.ops.cppext.rms_norm exists with the right
schema, has CPU and Meta kernels, passes torch.library.opcheck, and refuses
bad inputs with a RuntimeError that says what is wrong (never a crash)."""

from __future__ import annotations

import pytest
import torch

import adapter
import build
from roadmap_cli import grading_kit as kit

SECTION = "Part 3: a real torch op"
SCHEMA = "cppext::rms_norm(Tensor x, Tensor weight, float eps) -> Tensor"


def test_registered_schema():
    facts = adapter.op_facts(build.extension())
    if facts["schema"] != SCHEMA:
        pytest.fail(f"torch.ops.cppext.rms_norm schema = {facts['schema']!r}, expected {SCHEMA!r} "
                    f"(README.md, section \"{SECTION}\")", pytrace=False)
    for key in ("cpu", "meta"):
        if not facts[key]:
            pytest.fail(f"no {key.upper()} kernel is registered for cppext::rms_norm (TORCH_LIBRARY_IMPL(cppext, "
                        f"{key.upper() if key == 'cpu' else 'Meta'}, m)) (README.md, section \"{SECTION}\")", pytrace=False)


# x of shape (5, 3, 16) laid out three ways: opcheck compares the Meta kernel's output (shape, dtype and
# strides) with the CPU kernel's, and only a non-contiguous x shows a Meta kernel that copies x's strides.
LAYOUTS = {
    "contiguous": lambda dtype: torch.randn(5, 3, 16).to(dtype),
    "transposed": lambda dtype: torch.randn(16, 3, 5).to(dtype).transpose(0, 2),
    "strided": lambda dtype: torch.randn(5, 3, 32).to(dtype)[..., ::2],  # .to() after the slice would copy it
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_opcheck(dtype, layout):
    x = LAYOUTS[layout](dtype)
    assert x.shape == (5, 3, 16) and x.is_contiguous() == (layout == "contiguous")
    w = torch.randn(16).to(dtype)
    problem = adapter.opcheck(build.extension(), x, w, 1e-6)
    if problem is not None:
        pytest.fail(f"torch.library.opcheck(cppext::rms_norm) on a {layout} x failed: {problem} (README.md, "
                    f"section \"{SECTION}\")", pytrace=False)


# (what, x, weight, eps, a word the message must contain)
BAD_INPUTS = [
    ("weight longer than a row", torch.randn(4, 8), torch.randn(9), 1e-6, "weight"),
    ("weight shorter than a row (an out-of-bounds read without a check)", torch.randn(3, 200_000), torch.randn(2), 1e-6, "weight"),
    ("2-D weight", torch.randn(4, 8), torch.randn(1, 8), 1e-6, "weight"),
    # As many elements as a row, so only the 1-D check can refuse it.
    ("2-D weight of x.size(-1) rows", torch.randn(4, 8), torch.randn(8, 1), 1e-6, "weight"),
    ("weight longer than a 1-D x", torch.randn(8), torch.randn(9), 1e-6, "weight"),
    ("0-d x", torch.tensor(1.0), torch.randn(1), 1e-6, "x"),
    ("x float32, weight float64", torch.randn(4, 8), torch.randn(8, dtype=torch.float64), 1e-6, "dtype"),
    ("x bfloat16, weight float32", torch.randn(4, 8).bfloat16(), torch.randn(8), 1e-6, "dtype"),
    ("negative eps", torch.randn(4, 8), torch.randn(8), -1.0, "eps"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda c: c[0].split(" (")[0].replace(" ", "-"))
def test_bad_input_raises_runtime_error(case):
    what, x, w, eps, word = case
    try:
        got = adapter.rms_norm_error(build.extension(), x, w, eps)
    except kit.LearnerCrashed as crash:
        pytest.fail(f"rms_norm with {what} crashed the process ({crash}); check the inputs with TORCH_CHECK first "
                    f"(README.md, section \"{SECTION}\")", pytrace=False)
    if got is None:
        pytest.fail(f"rms_norm with {what} returned a result; expected a RuntimeError from TORCH_CHECK "
                    f"(README.md, section \"{SECTION}\")", pytrace=False)
    kind, message = got
    if kind != "RuntimeError":
        pytest.fail(f"rms_norm with {what} raised {kind}, expected RuntimeError (README.md, section \"{SECTION}\")",
                    pytrace=False)
    if word not in message:
        pytest.fail(f"rms_norm with {what}: the message {message.strip()[:200]!r} does not mention {word!r} "
                    f"(README.md, section \"{SECTION}\")", pytrace=False)


def test_valid_edge_inputs_are_accepted():
    """Empty batches, one-element rows, 1-D x and eps = 0 are legal: no check may refuse them."""
    so = build.extension()
    for x, w, eps in ((torch.randn(0, 8), torch.randn(8), 1e-6), (torch.randn(3, 1), torch.randn(1), 1e-6),
                      (torch.randn(8), torch.randn(8), 1e-6), (torch.randn(3, 8), torch.randn(8), 0.0)):
        got = adapter.rms_norm_error(so, x, w, eps)
        if got is not None:
            pytest.fail(f"rms_norm(x of shape {tuple(x.shape)}, weight {tuple(w.shape)}, eps={eps}) raised {got[0]}: "
                        f"{got[1][:160]!r}; it is a valid input (README.md, section \"{SECTION}\")", pytrace=False)


# (what, x shape, weight shape): the Meta kernel must refuse what the CPU kernel refuses,
# or torch.compile traces a program that only fails when it runs.
BAD_META = [("weight longer than a row", (4, 8), (9,)), ("weight shorter than a row", (2, 3, 16), (15,)),
            ("2-D weight", (4, 8), (1, 8))]
META_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _meta_calls():
    """(what, x shape, weight shape, dtype, refused) from this grade's secret seed: the answers depend on the
    shapes, so only a kernel that looks at them gets them right."""
    import random

    rng = random.Random(kit.seeded("meta-kernel"))
    calls = []
    for _ in range(8):
        shape = tuple(rng.randint(1, 9) for _ in range(rng.randint(0, 2))) + (rng.randint(1, 64),)
        dtype, hidden = rng.choice(META_DTYPES), shape[-1]
        bad = rng.choice([None, None, (hidden + rng.randint(1, 5),), (max(1, hidden - rng.randint(1, 5)),),
                          (1, hidden)])
        if bad == (hidden,):
            bad = None
        calls.append((f"x {shape}, weight {bad or (hidden,)} {str(dtype).replace('torch.', '')}", shape,
                      bad or (hidden,), dtype, bad is not None))
    return calls


def test_meta_kernel():
    so = build.extension()
    got = adapter.meta_call(so, (5, 3, 16), (16,), torch.bfloat16, 1e-6)
    if got != ("ok", (5, 3, 16), torch.bfloat16, "meta"):
        pytest.fail(f"rms_norm on Meta tensors x (5, 3, 16), weight (16,) bfloat16 gave {got!r}, expected a Meta "
                    f"tensor of shape (5, 3, 16) and dtype bfloat16 (README.md, section \"{SECTION}\")", pytrace=False)
    for what, x_shape, w_shape in BAD_META:
        got = adapter.meta_call(so, x_shape, w_shape, torch.float32, 1e-6)
        if got[0] != "error" or got[1] != "RuntimeError" or "weight" not in got[2]:
            pytest.fail(f"rms_norm on Meta tensors with {what} (x {x_shape}, weight {w_shape}) gave {got!r}, expected "
                        f"a RuntimeError that mentions 'weight', as the CPU kernel raises (README.md, section "
                        f"\"{SECTION}\")", pytrace=False)
    for what, x_shape, w_shape, dtype, refused in _meta_calls():
        got = adapter.meta_call(so, x_shape, w_shape, dtype, 1e-6)
        right = got[:2] == ("error", "RuntimeError") and "weight" in got[2] if refused else \
            got == ("ok", x_shape, dtype, "meta")
        if not right:
            want = "a RuntimeError that mentions 'weight'" if refused else f"a Meta tensor of shape {x_shape}"
            pytest.fail(f"rms_norm on Meta tensors {what} gave {got!r}, expected {want} (README.md, section "
                        f"\"{SECTION}\")", pytrace=False)
