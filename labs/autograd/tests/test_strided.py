"""Part 4: random sequences of transpose / permute / indexing / view /
contiguous replayed on torch (the oracle) and on the learner's StridedTensor:
shape, stride, storage offset, is_contiguous, values, storage sharing, and
which views torch refuses, all exactly."""

from __future__ import annotations

import pytest
import torch

import adapter
import programs

SECTION = "Part 4: storage, strides and views"


def _factor(r, n: int) -> list[int]:
    dims, rest = [], n
    for p in (2, 3, 2, 5, 2):
        if rest % p == 0 and r.random() < 0.5:
            dims.append(p)
            rest //= p
    dims.append(rest)
    r.shuffle(dims)
    if r.random() < 0.3:
        dims.insert(r.randrange(len(dims) + 1), 1)
    if r.random() < 0.3:
        dims[r.randrange(len(dims))] = -1 if len(dims) > 1 else dims[0]
    return dims


def _random_steps(r, shape):
    t = torch.arange(float(torch.tensor(shape).prod())).reshape(shape)
    steps = []
    for _ in range(r.randint(2, 6)):
        kind = r.random() if t.dim() > 0 else r.uniform(0.65, 1.0)  # a 0-d tensor: only view/contiguous
        if kind < 0.2 and t.dim() > 1:
            a, b = r.sample(range(t.dim()), 2)
            a = a - t.dim() if r.random() < 0.3 else a
            steps.append(["transpose", [a, b]])
        elif kind < 0.35 and t.dim() > 1:
            perm = list(range(t.dim()))
            r.shuffle(perm)
            steps.append(["permute", perm])
        elif kind < 0.65:
            index = []
            for d in range(r.randint(1, t.dim())):
                size = t.shape[d]
                if r.random() < 0.25 and size > 0:
                    index.append(r.randrange(-size, size))
                else:
                    start = r.choice([None, r.randint(-size - 1, size + 1)])
                    stop = r.choice([None, r.randint(-size - 1, size + 1)])
                    index.append([start, stop, r.choice([None, 1, 2, 3])])
            steps.append(["index", index])
        elif kind < 0.9:
            steps.append(["view", _factor(r, t.numel()) if t.numel() else [0]])
        else:
            steps.append(["contiguous", None])
        t = _apply(t, steps[-1])
        if t is None:
            break
    return steps


def _apply(t, step):
    kind, arg = step
    try:
        if kind == "transpose":
            return t.transpose(*arg)
        if kind == "permute":
            return t.permute(*arg)
        if kind == "index":
            return t[tuple(slice(*a) if isinstance(a, list) else a for a in arg)]
        if kind == "view":
            return t.view(*arg)
        return t.contiguous()
    except (RuntimeError, IndexError, ValueError):
        return None


def _torch_facts(shape, steps):
    base = torch.arange(float(torch.tensor(shape).prod())).reshape(shape)
    t, facts = base, []
    for step in steps:
        nxt = _apply(t, step)
        if nxt is None:
            facts.append({"raised": True})
            break
        t = nxt
        facts.append({"shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset(),
                      "contiguous": t.is_contiguous(),
                      "shares": t.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(),
                      "values": t.tolist()})
    return facts


def _check(shape, steps, label, empty_strides=False):
    got, want = adapter.strided_replay(shape, steps), _torch_facts(shape, steps)
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"{label}: after step {i + 1} {steps[i]}"
        if "raised" in w or "raised" in g:
            assert ("raised" in w) == ("raised" in g), (
                f"{where}: torch {'refuses' if 'raised' in w else 'allows'} it, yours "
                f"{'refuses' if 'raised' in g else 'allows'} it (README.md, section \"{SECTION}\")")
            return
        for key in ("shape", "stride", "offset", "contiguous", "shares", "values"):
            if key == "stride" and 0 in w["shape"] and not empty_strides:
                continue  # the random walks leave empty strides out; EMPTY_VIEWS checks the view rule's
            assert g[key] == w[key], (f"{where}: {key} = {g[key]!r}, torch says {w[key]!r} "
                                      f"(README.md, section \"{SECTION}\")")
    assert len(got) == len(want), f"{label}: {len(got)} results for {len(want)} steps"


# Hand-picked sequences, one id per rule they prove (lab.yaml names them).
KNOWN = {
    "transpose-then-slice": ((2, 3, 4), [["transpose", [0, 2]], ["index", [[1, None, None], [None, None, 2]]]]),
    "view-of-transpose-refused": ((2, 3, 4), [["transpose", [0, 1]], ["view", [6, 4]]]),
    "contiguous-copy-then-infer": ((2, 3, 4), [["transpose", [1, 2]], ["contiguous", None], ["view", [-1]]]),
    "view-wrong-numel-refused": ((4, 6), [["index", [[None, None, 2]]], ["view", [2, 2, 6]]]),  # 12 elements, not 24
    "view-across-step-merges": ((4, 6), [["index", [[None, None, None], [None, None, 2]]], ["view", [12]]]),
    "permute-then-view": ((3, 1, 4), [["permute", [1, 2, 0]], ["view", [4, 3]]]),
    "size-one-dims": ((6,), [["view", [1, 6, 1]], ["transpose", [0, 2]], ["view", [6]]]),
    "int-index": ((2, 3), [["index", [1]], ["index", [-1]]]),
    "empty-slice": ((2, 3), [["index", [[5, 9, None]]]]),
    "permute-negative-dims": ((2, 3, 4), [["permute", [-1, 0, 1]]]),
    "transpose-negative-dim": ((2, 3, 4), [["transpose", [-1, 0]], ["view", [4, 6]]]),  # (4, 3, 2): refused
    "index-out-of-range": ((4, 6), [["index", [[0, 2, None]]], ["index", [2]]]),      # row 2 exists in storage
    "slice-step-rounds-up": ((7,), [["index", [[None, None, 3]]]]),                  # 0, 3, 6: 3 elements
    "slice-clamped": ((5, 2), [["index", [[-9, 99, 2]]], ["index", [[3, 1, None]]]]),
    "empty-transposed-is-contiguous": ((2, 3), [["index", [[5, 9, None]]], ["transpose", [0, 1]]]),
    "contiguous-of-contiguous-is-itself": ((3, 4), [["index", [[1, None, None]]], ["contiguous", None]]),
    "view-keeps-offset-and-chunks": ((4, 6), [["index", [[1, None, 2]]], ["view", [2, 3, 2]]]),
    "view-splits-row-chunk": ((2, 3, 4), [["index", [[None, None, None], [None, None, None], [1, 3, None]]],
                                          ["view", [3, 2, 2]]]),
    "zero-d-tensor": ((2, 3), [["index", [1, 2]], ["view", [1, 1]], ["contiguous", None]]),
    # torch's size-1 exception: a size-1 dimension never breaks a chunk, whatever its stride ((2, 1, 4) with
    # strides (4, 1, 1) views as (8)), and a new size-1 dimension takes the stride of what lies to its right.
    "size-one-dim-inside-a-chunk": ((2, 4), [["view", [2, 4, 1]], ["transpose", [1, 2]], ["view", [8]]]),
    "view-inserts-size-one": ((4, 6), [["index", [[None, None, 2]]], ["view", [2, 1, 6]]]),
    # A chunk grows while stride[d-1] == (its elements so far) x (its base stride): (2, 1, 3) with strides
    # (3, 15, 1) views as (6); with strides (15, 15, 1) it does not, though stride[0] == size[1] * stride[1].
    "size-one-odd-stride-merges": ((2, 1, 3), [["index", [[None, None, None], [0, 1, 5]]], ["view", [6]]]),
    "size-one-odd-stride-refused": ((2, 5, 3), [["index", [[None, None, None], [0, 1, 5]]], ["view", [6]]]),
}

# Views of an empty tensor, strides included: to its own shape it keeps its strides, to another shape it
# takes row-major strides (a size-0 dimension counting as 1); a -1 beside a 0 cannot be inferred.
EMPTY_VIEWS = {
    "same-shape-keeps-strides": ((2, 3), [["index", [[None, None, None], [0, 0, None]]], ["view", [2, 0]]]),
    "same-shape-of-transpose": ((2, 3), [["transpose", [0, 1]], ["index", [[None, None, None], [1, 1, None]]],
                                         ["view", [3, 0]]]),
    "other-shape-row-major": ((2, 3), [["index", [[None, None, None], [0, 0, None]]], ["view", [3, 0, 2]]]),
    "minus-one-beside-zero-refused": ((2, 3), [["index", [[0, 0, None]]], ["view", [-1, 0]]]),
    "zero-beside-minus-one-refused": ((2, 3), [["index", [[0, 0, None]]], ["view", [0, 3, -1]]]),
    "minus-one-alone-is-zero": ((2, 3), [["index", [[0, 0, None]]], ["view", [-1]], ["view", [4, -1]]]),
}


@pytest.mark.parametrize("name", list(EMPTY_VIEWS))
def test_empty_views(name):
    shape, steps = EMPTY_VIEWS[name]
    _check(shape, steps, f"{name} on shape {shape}", empty_strides=True)


@pytest.mark.parametrize("name", list(KNOWN))
def test_known_sequences(name):
    shape, steps = KNOWN[name]
    _check(shape, steps, f"{name} on shape {shape}")


def test_random_sequences():
    r = programs.rng("strided-random")
    for trial in range(80):
        shape = tuple(r.randint(1, 5) for _ in range(r.randint(1, 4)))
        _check(shape, _random_steps(r, shape), f"random #{trial} on shape {shape}")
