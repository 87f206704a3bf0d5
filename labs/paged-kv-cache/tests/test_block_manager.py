"""Part block-manager: allocate / append / fork (refcounts, copy-on-write) /
free, prefix caching with chained hashes, least-recently-freed eviction.

Exact cases first (each names what it proves; the adversarial ones from issue 10:
identical partial blocks, prefix hits on blocks filled by decoding, a fully
cached block-aligned prompt, copy-on-write of a shared last block, freeing in
different orders, an evicted duplicate that must not drop the newer block's
entry), then seeded random traces with every invariant checked after every
operation (invariants.py). Each script runs in the learner's process in one
call; the checks run here on the recorded states."""

import random

import pytest
from roadmap_cli.grading_kit import seeded

from invariants import Checked
from report import expect

API, COW, PREFIX, EVICT = ("The block manager API", "Reference counts and copy-on-write", "Prefix caching",
                           "Eviction")


def checked(num_blocks, block_size, caching=True):
    return Checked(num_blocks, block_size, caching)


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 16])
def test_blocks_per_length(block_size):
    """Invariant 4: ceil(L / block_size) blocks, a new one exactly when L % block_size == 1
    (block sizes need not be powers of two here)."""
    c = checked(64, block_size, caching=False)
    c.allocate(0, [1])
    for t in range(2, 3 * block_size + 3):
        c.append(0, t)
    c.allocate(1, list(range(100, 100 + 2 * block_size)))
    c.allocate(2, list(range(200, 200 + 2 * block_size + 1)))
    c.free_all()
    c.run()


def test_can_allocate_and_can_append_at_the_boundary():
    """can_allocate is ceil(L / block_size) <= free blocks (an exact fit is True, one
    token more is False); can_append needs a free block when the last block is full
    *or* partial and shared (copy-on-write), and none for an unshared partial one."""
    c = checked(5, 2, caching=False)
    c.allocate(0, [1, 2, 3])                    # blocks 0, 1 (block 1 partial); 3 free
    c.can_allocate([5, 6, 7, 8, 9, 10])         # exactly 3 blocks: True
    c.can_allocate([5, 6, 7, 8, 9, 10, 11])     # 4 blocks: False
    c.allocate(1, [5, 6, 7, 8, 9, 10])          # 0 free
    c.can_append(0)                             # partial, unshared: True without a free block
    c.fork(0, 2)                                # block 1 (partial) now shared
    c.can_append(2)                             # copy-on-write needs a block: False
    c.can_append(1)                             # full last block: False
    c.free_all()
    c.run()                                     # the replay checks every can_* answer


def test_no_hits_after_the_first_miss():
    """Block 0's prefix [1, 2] lost its hash entry (the newer duplicate that held it was
    evicted) while block 1's entry for [1, 2, 3, 4] survives: a request for [1, 2, 3, 4]
    misses its first block, and after the first miss nothing is a hit."""
    c = checked(4, 2)
    c.allocate(0, [1, 2, 3, 4])                 # blocks 0, 1: prefixes [1, 2] and [1, 2, 3, 4]
    c.allocate(1, [1])                          # block 2
    c.append(1, 2)                              # block 2 fills with [1, 2]: the newest registration
    c.free(1)                                   # free list [3, 2]
    c.allocate(2, [9, 9, 9, 9])                 # takes 3, 2: evicting 2 drops the [1, 2] entry
    c.free(2)
    again = c.allocate(3, [1, 2, 3, 4])
    c.free_all()
    c.run()
    expect("cached tokens for [1, 2, 3, 4] when its first block misses", 0, c.result(again), PREFIX,
           "at the first miss, stop looking: a hit must continue a run of hits from block 0")


def test_fork_shares_blocks_and_copies_on_write():
    c = checked(8, 4, caching=False)
    c.allocate(0, [1, 2, 3, 4, 5, 6])           # blocks [0, 1]; block 1 holds 2 of 4 tokens
    forked = c.fork(0, 1)                       # both hold [0, 1]: ref_count 2 each
    cow = c.append(1, 7)                        # writing into shared block 1: copy-on-write into block 2
    inplace = c.append(0, 8)                    # block 1 is no longer shared: written in place
    freed = c.free(1)
    c.free_all()
    c.run()
    expect("ref_count of blocks 0, 1 after fork(0 -> 1)", [2, 2], c.state(forked)["ref"][:2], COW)
    expect("copy returned by append into a shared partial block", (1, 2), c.result(cow), COW)
    expect("block tables of (seq 0, seq 1) after copy-on-write", ([0, 1], [0, 2]),
           (c.table(0, cow), c.table(1, cow)), COW)
    expect("ref_count of blocks 0, 1, 2 after copy-on-write", [2, 1, 1], c.state(cow)["ref"][:3], COW)
    expect("block table of seq 0 after appending into its now unshared block", [0, 1], c.table(0, inplace), COW)
    expect("ref_count of blocks 0 and 2 after freeing the child", [1, 0],
           [c.state(freed)["ref"][0], c.state(freed)["ref"][2]], COW)


def test_copy_on_write_of_a_shared_full_last_block_takes_a_fresh_block():
    """A fork at a block boundary: the last block is shared but full, so append takes
    a new block and copies nothing; the shared block keeps both references."""
    c = checked(8, 4, caching=False)
    c.allocate(0, [1, 2, 3, 4, 5, 6, 7, 8])
    c.fork(0, 1)
    first = c.append(1, 9)
    second = c.append(0, 9)
    c.free_all()
    c.run()
    expect("append result when the shared last block is full", None, c.result(first), COW)
    expect("block table of seq 1 after that append", [0, 1, 2], c.table(1, first), COW)
    expect("ref_count of block 1 (full, still shared)", 2, c.state(second)["ref"][1], COW)
    expect("block table of seq 0 after its own append", [0, 1, 3], c.table(0, second), COW)


def test_three_way_fork_copies_on_write_one_reference_at_a_time():
    c = checked(8, 2, caching=False)
    c.allocate(0, [1, 2, 3])
    c.fork(0, 1)
    c.fork(1, 2)                                # a fork of a fork: block 1 has ref_count 3
    a = c.append(2, 4)
    b = c.append(0, 4)
    d = c.append(1, 4)                          # the last holder writes in place
    c.free_all()
    c.run()
    expect("copy for the first of three holders", (1, 2), c.result(a), COW)
    expect("copy for the second of three holders", (1, 3), c.result(b), COW)
    expect("copy for the last holder (no longer shared)", None, c.result(d), COW)


@pytest.mark.parametrize("order", ["parent-first", "children-first", "middle-first"])
def test_freeing_forks_in_any_order_keeps_the_others(order):
    """A forked sequence's free decrements the shared blocks' refcounts; blocks
    return to the free list (tail-first) only when their last holder frees them."""
    c = checked(8, 2, caching=False)
    c.allocate(0, [1, 2, 3, 4, 5])
    c.fork(0, 1)
    c.fork(0, 2)
    c.append(1, 6)                              # seq 1 copies block 2 on write
    sequence = {"parent-first": [0, 1, 2], "children-first": [2, 1, 0], "middle-first": [1, 0, 2]}[order]
    for seq in sequence:
        c.free(seq)
    c.free_all()
    c.run()


def test_ten_shared_tokens_block_size_4_gives_2_hits():
    """The handout's example (Prefix caching): only the 2 full shared blocks hit."""
    c = checked(16, 4)
    shared = list(range(1, 11))                                  # 10 tokens
    c.allocate(0, shared + [50, 51, 52, 53, 54])
    second = c.allocate(1, shared + [60, 61, 62])
    c.free_all()
    c.run()
    expect("cached tokens for a request sharing 10 tokens (block_size 4)", 8, c.result(second), PREFIX)
    expect("seq 1's first two blocks", c.table(0, second)[:2], c.table(1, second)[:2], PREFIX)


def test_identical_partial_blocks_are_never_shared():
    """Two prompts with the same 6 tokens: the full block hits, the identical partial
    block does not (it has no hash), and neither gets one until it is full."""
    c = checked(16, 4)
    c.allocate(0, [1, 2, 3, 4, 5, 6])
    second = c.allocate(1, [1, 2, 3, 4, 5, 6])
    third = c.allocate(2, [1, 2, 3, 4, 5, 6, 7])
    c.free_all()
    c.run()
    expect("cached tokens for an identical 6-token prompt", 4, c.result(second), PREFIX,
           "the partial block is never hashed or shared")
    expect("cached tokens for a 7-token prompt sharing a partial block", 4, c.result(third), PREFIX)
    expect("hash of the partial block of seq 0", False, c.state(third)["hashed"][c.table(0, third)[1]], PREFIX)


def test_prefix_hits_on_blocks_filled_by_decoding():
    """Blocks that become full through append are registered; when two sequences
    fill equal blocks, the newest registration wins, and a later request hits it."""
    c = checked(16, 2)
    c.allocate(0, [1, 2, 3])                    # block 1 partial
    c.allocate(1, [1, 2, 3])                    # hits block 0; its own partial block
    c.append(0, 4)                              # seq 0's block 1 fills: prefix [1, 2, 3, 4]
    c.append(1, 4)                              # seq 1's fills with the same prefix: newest wins
    hit = c.allocate(2, [1, 2, 3, 4, 5])
    c.append(2, 6)                              # decoded into a full block...
    again = c.allocate(3, [1, 2, 3, 4, 5, 6])   # ...which a block-aligned prompt hits entirely
    c.free_all()
    c.run()
    expect("cached tokens for [1, 2, 3, 4, 5]", 4, c.result(hit), PREFIX)
    expect("block for the prefix [1, 2, 3, 4] (the newest registration)", c.table(1, hit)[1],
           c.table(2, hit)[1], PREFIX)
    expect("cached tokens for a fully cached block-aligned prompt", 6, c.result(again), PREFIX,
           "every block of the prompt is cached; allocate returns hits x block_size")
    expect("block table of the fully cached prompt", c.table(2, again), c.table(3, again), PREFIX)


def test_evicting_an_older_duplicate_keeps_the_newer_entry():
    """Blocks 0 and 1 both hold prefix [1, 2] (filled by decoding; block 1 registered
    last). Evicting block 0 must not delete the hash entry that points at block 1."""
    c = checked(5, 2)
    c.allocate(0, [1])
    c.allocate(1, [1])
    c.append(0, 2)
    c.append(1, 2)
    c.free(0)
    c.free(1)                                   # free list [2, 3, 4, 0, 1]
    c.allocate(2, [9, 9, 9, 9, 9, 9, 9])        # takes 2, 3, 4 and evicts block 0
    hit = c.allocate(3, [1, 2])
    c.free_all()
    c.run()
    expect("cached tokens for [1, 2] after the older duplicate was evicted", 2, c.result(hit), EVICT,
           "only delete the hash entry if it still points at the evicted block")


def test_equal_block_after_a_different_prefix_is_not_a_hit():
    """Hashes chain the parent: block [5,6,7,8] after [1,2,3,4] is not block [5,6,7,8] after [9,9,9,9]."""
    c = checked(16, 4)
    c.allocate(0, [1, 2, 3, 4, 20, 21, 22, 23])
    c.allocate(1, [9, 9, 9, 9, 5, 6, 7, 8])
    third = c.allocate(2, [1, 2, 3, 4, 5, 6, 7, 8, 30])
    c.free_all()
    c.run()
    expect("cached tokens when only the first block's prefix matches", 4, c.result(third), PREFIX,
           "a block's hash chains its parent's hash")


def test_prefix_caching_off_never_hits():
    c = checked(16, 4, caching=False)
    c.allocate(0, [1, 2, 3, 4, 5, 6, 7, 8])
    second = c.allocate(1, [1, 2, 3, 4, 5, 6, 7, 8])
    c.free_all()
    c.run()
    expect("cached tokens with enable_prefix_caching=False", 0, c.result(second), PREFIX)


def test_exact_eviction_order():
    """Invariant 6: freed blocks join the back tail-first; the front is evicted first."""
    c = checked(6, 2)
    c.allocate(0, [1, 2, 3, 4])                 # blocks [0, 1]
    c.allocate(1, [5, 6, 7, 8])                 # blocks [2, 3]
    f0 = c.free(0)
    f1 = c.free(1)
    a2 = c.allocate(2, [40, 41, 42, 43, 44, 45])  # takes 4, 5 and evicts block 1 (end of seq 0)
    a3 = c.allocate(3, [1, 2, 3, 4])            # block 0 (start of seq 0) is still cached
    a4 = c.allocate(4, [5, 6])                  # block 2 was freed last: still cached
    c.free_all()
    c.run()
    expect("free list after freeing seq 0", [4, 5, 1, 0], c.state(f0)["free"], EVICT)
    expect("free list after freeing seq 1", [4, 5, 1, 0, 3, 2], c.state(f1)["free"], EVICT)
    expect("block table of seq 2", [4, 5, 1], c.table(2, a2), EVICT)
    expect("cached tokens for [1, 2, 3, 4]", 2, c.result(a3), EVICT)
    expect("block table of seq 3 (hit on 0, then the front of the free list)", [0, 3], c.table(3, a3), EVICT)
    expect("cached tokens for [5, 6]", 2, c.result(a4), EVICT)


def test_recompute_after_free_hits_its_own_blocks():
    c = checked(8, 2)
    c.allocate(0, [1, 2, 3, 4, 5])
    for t in (6, 7, 8):
        c.append(0, t)
    c.free(0)
    again = c.allocate(0, list(range(1, 9)))
    c.free_all()
    c.run()
    expect("cached tokens when a preempted sequence is recomputed", 8, c.result(again), PREFIX,
           "blocks filled by appends are hashed too")


def _random_trace(rng: random.Random, num_blocks: int, block_size: int, caching: bool, steps: int) -> Checked:
    """A random script. Stated probabilities of the adversarial cases (issue 10):
    - an allocate copies a live or paused sequence's tokens whole with p = 0.25
      (prefix hits on blocks filled by decoding; a fully cached prompt when aligned),
      and cut to a random non-aligned length with p = 0.15 (identical partial blocks);
    - an appended token comes from a 2-token pool with p = 0.4, so forks and copies
      fill equal blocks (duplicate hashes: the newest registration must win);
    - forks are 1/8 of the operations, frees happen in random order, and resumed
      sequences recompute their own prefix."""
    c = checked(num_blocks, block_size, caching)
    # Prompts are built from a few block-sized pieces so requests share prefixes
    # (and share blocks after *different* prefixes); appended tokens are fresh ids.
    pieces = [[rng.randrange(1000) for _ in range(block_size)] for _ in range(4)]
    fresh = iter(range(10_000, 10_000_000))
    next_id = iter(range(1_000_000))
    paused: dict[int, list[int]] = {}           # preempted sequences waiting to be recomputed
    for _ in range(steps):
        live = c.live()
        op = rng.choices(["allocate", "append", "fork", "free", "preempt", "resume"], [3, 8, 2, 2, 1, 1])[0]
        if op == "allocate":
            known = [c.ref.tokens[s] for s in live] + list(paused.values())
            roll = rng.random()
            if known and roll < 0.25:
                tokens = list(rng.choice(known))
            elif known and roll < 0.40:
                source = rng.choice(known)
                tokens = source[:rng.randrange(1, len(source) + 1)]
                if len(tokens) % block_size == 0 and len(tokens) > 1:
                    tokens = tokens[:-1]
            else:
                tokens = [t for _ in range(rng.randrange(0, 4)) for t in rng.choice(pieces)]
                tokens += [next(fresh) for _ in range(rng.randrange(0 if tokens else 1, block_size + 2))]
            if c.can_allocate(tokens):
                c.allocate(next(next_id), tokens)
        elif op == "append" and live:
            seq = rng.choice(live)
            if c.can_append(seq):
                c.append(seq, rng.choice([7, 8]) if rng.random() < 0.4 else next(fresh))
        elif op == "fork" and live:
            c.fork(rng.choice(live), next(next_id))
        elif op == "free" and live:
            c.free(rng.choice(live))
        elif op == "preempt" and live:
            seq = rng.choice(live)
            paused[seq] = list(c.ref.tokens[seq])
            c.free(seq)
        elif op == "resume" and paused:
            seq = rng.choice(sorted(paused))
            if c.can_allocate(paused[seq]):
                c.allocate(seq, paused.pop(seq))
    c.free_all()
    return c


@pytest.mark.parametrize("block_size", [1, 2, 3, 4])
@pytest.mark.parametrize("caching", [True, False], ids=["prefix-caching", "no-caching"])
def test_random_traces_keep_every_invariant(block_size, caching):
    rng = random.Random(seeded(f"block-trace-{block_size}-{caching}"))
    for _ in range(6):
        _random_trace(rng, num_blocks=rng.randrange(6, 24), block_size=block_size, caching=caching, steps=150).run()
