"""Part scheduler: waiting/running queues, max_num_seqs, max_num_batched_tokens,
preempt the newest running sequence (recompute) and resume it.

The learner's Scheduler runs over the learner's own BlockManager with a fake
model (the grader chooses every sampled token) in the learner's process; it
returns one plain-data record per step (adapter.run_scheduler). Here each step
is checked against the handout's rules (limits, FIFO, the newest preempted to
the front of waiting, no admission in a step that preempted, no leaks) and then
against the grader's reference scheduler (reference.RefScheduler), which catches
what the invariants allow: an exact fit refused, a request admitted past the
budget, the wrong sequence admitted."""

import random

import pytest
from roadmap_cli.grading_kit import seeded

import adapter
from reference import RefBlockManager, RefScheduler
from report import expect, require

CB = "Continuous batching"


def simulate(num_blocks, block_size, caching, max_num_seqs, budget, requests, arrivals, max_steps=2000):
    """The reference run of the same workload, in the same record format as adapter.run_scheduler."""
    bm = RefBlockManager(num_blocks, block_size, caching)
    sched = RefScheduler(max_num_seqs, budget, bm)
    seqs = [{"id": i, "prompt": list(p), "out": [], "max_tokens": m, "cached": 0} for i, (p, m, _) in enumerate(requests)]
    steps, added = [], 0
    while added < len(seqs) or sched.waiting or sched.running:
        step = len(steps)
        assert step < max_steps, "the reference scheduler made no progress (grader bug)"
        n_new = arrivals[step] if step < len(arrivals) else len(seqs)
        for seq in seqs[added:added + n_new]:
            sched.add(seq)
        added = min(len(seqs), added + n_new)
        record = {"before_running": [s["id"] for s in sched.running],
                  "before_waiting": [s["id"] for s in sched.waiting],
                  "free_before": len(bm.free)}
        out = sched.schedule()
        record.update(out)
        record["after_running"] = [s["id"] for s in sched.running]
        record["after_waiting"] = [s["id"] for s in sched.waiting]
        finished = []
        by_id = {s["id"]: s for s in seqs}
        for sid in out["decodes"] + out["prefills"]:
            seq = by_id[sid]
            if sched.postprocess(seq, requests[sid][2][len(seq["out"])]):
                finished.append(sid)
        record["finished"] = finished
        steps.append(record)
    return steps, len(bm.free)


def run_and_check(num_blocks, block_size, caching, max_num_seqs, budget, requests, arrivals):
    """Run the learner's scheduler, check every step, return (learner steps, reference steps)."""
    got = adapter.run_scheduler(num_blocks, block_size, caching, max_num_seqs, budget, requests, arrivals)
    want, free_end = simulate(num_blocks, block_size, caching, max_num_seqs, budget, requests, arrivals)
    setup = (f"{num_blocks} blocks of {block_size}, prefix caching {'on' if caching else 'off'}, "
             f"max_num_seqs {max_num_seqs}, max_num_batched_tokens {budget}")
    for i, step in enumerate(got["steps"]):
        if "prefills" not in step:
            break                                   # the learner raised inside this step
        _check_step(i, step, want, setup, max_num_seqs, budget, requests)
    require(got["error"] is None, f"the scheduler raised {got['error']} at step {len(got['steps']) - 1} ({setup})",
            CB)
    expect(f"number of steps to finish every request ({setup})", len(want), len(got["steps"]), CB)
    expect(f"free blocks after every request finished ({setup})", free_end, got["free_end"], CB,
           "a finished or preempted sequence must free its blocks")
    return got["steps"], want


def _check_step(i, got, want_steps, setup, max_num_seqs, budget, requests):
    want = want_steps[i] if i < len(want_steps) else None
    where = f"step {i} ({setup}; running before {got['before_running']}, waiting before {got['before_waiting']})"
    scheduled = got["decodes"] + got["prefills"]
    # Invariant 8: the limits.
    require(len(got["after_running"]) <= max_num_seqs and len(scheduled) <= max_num_seqs,
            f"{where}: {len(got['after_running'])} running / {len(scheduled)} scheduled, expected at most "
            f"max_num_seqs = {max_num_seqs}", CB)
    computed = len(got["decodes"]) + sum(got["lens"][s] - min(got["cached"][s], got["lens"][s] - 1)
                                         for s in got["prefills"])
    expect(f"{where}: num_batched_tokens (decodes + prefill tokens computed)", computed, got["num_batched_tokens"], CB)
    require(computed <= budget, f"{where}: {computed} tokens scheduled, expected at most max_num_batched_tokens = "
                                f"{budget}", CB)
    # Invariant 7: the newest running sequences are preempted, to the front of waiting.
    k = len(got["preempted"])
    if k:
        newest = got["before_running"][len(got["before_running"]) - k:]
        expect(f"{where}: preempted sequences (the newest running, as a set)", sorted(newest),
               sorted(got["preempted"]), CB, "preempt the newest running sequence not yet scheduled this step")
        expect(f"{where}: front of waiting after preemption (oldest preempted first)", newest,
               got["after_waiting"][:k], CB)
        expect(f"{where}: preempted sequences that still hold blocks", [], got["preempted_hold"], CB)
        waiting_state = {sid: ("WAITING", 0) for sid in got["preempted"]}
        expect(f"{where}: (status, num_cached_tokens) of each preempted sequence while it waits", waiting_state,
               got["preempted_state"], CB, "preemption sets it waiting with num_cached_tokens = 0")
        expect(f"{where}: prefills in a step that preempted", [], got["prefills"], CB,
               "nothing is admitted in a step that preempted")
    survivors = [s for s in got["before_running"] if s not in got["preempted"]]
    expect(f"{where}: decodes (every surviving running sequence, oldest first)", survivors, got["decodes"], CB)
    expect(f"{where}: prefills (FIFO from the front of waiting)", got["before_waiting"][:len(got["prefills"])],
           got["prefills"], CB)
    for s in scheduled:
        expect(f"{where}: block manager's num_tokens of scheduled sequence {s}", got["lens"][s], got["bm_tokens"][s],
               CB, "every scheduled token has a slot (decodes append the last sampled token)")
    if want is None:
        raise AssertionError(f"{where}: the scheduler is still working; the reference finished every request by "
                             f"this step (README.md, section \"{CB}\")")
    # The reference: exact admission decisions (budget boundaries, can_allocate, max_num_seqs).
    if got["prefills"] != want["prefills"]:
        n = 0
        while n < min(len(got["prefills"]), len(want["prefills"])) and got["prefills"][n] == want["prefills"][n]:
            n += 1
        remaining = budget - len(want["decodes"])
        for sid in want["prefills"][:n]:
            length = len(requests[sid][0]) + _outputs_so_far(sid, i, want_steps)
            remaining -= length - min(want["cached"][sid], length - 1)
        pivot = (want["prefills"] + got["prefills"] + [None])[n] if n < len(want["prefills"]) else \
            (got["prefills"] + [None])[n]
        detail = ""
        if pivot is not None:
            length = len(requests[pivot][0]) + _outputs_so_far(pivot, i, want_steps)
            detail = (f"; seq {pivot} has {length} tokens and {remaining} of the budget remain after "
                      f"{len(want['decodes'])} decode(s) and {n} earlier prefill(s), {want['free_before']} blocks "
                      f"were free before the step (a request that fits exactly is admitted; one token more is "
                      f"refused; max_num_seqs {max_num_seqs})")
        raise AssertionError(f"{where}: admitted {got['prefills']}, expected {want['prefills']}{detail} "
                             f"(README.md, section \"{CB}\", step 3)")
    expect(f"{where}: cached tokens of the prefills", {s: want["cached"][s] for s in want["prefills"]},
           {s: got["cached"][s] for s in got["prefills"]}, CB)
    expect(f"{where}: copy-on-write pairs", sorted(want["copies"]), sorted(got["copies"]), CB)
    expect(f"{where}: running after the step", want["after_running"], got["after_running"], CB)
    expect(f"{where}: waiting after the step", want["after_waiting"], got["after_waiting"], CB)
    expect(f"{where}: sequences finished by postprocess", want["finished"], got["finished"], CB,
           "a sequence finishes when it has max_tokens outputs")


def _outputs_so_far(seq_id, step, steps) -> int:
    """Outputs of seq_id before `step` that are still part of its token_ids (a preempted
    sequence keeps its outputs and recomputes them)."""
    return sum(1 for s in steps[:step] for sid in s["decodes"] + s["prefills"] if sid == seq_id)


def _tokens(n, value=7):
    return [value] * n


def test_exact_preemption_of_the_newest():
    """Three sequences fill a 6-block pool; when the oldest needs a block, the newest goes."""
    requests = [([10 * i + 1, 10 * i + 2, 10 * i + 3], 8, _tokens(8)) for i in range(3)]
    steps, _ = run_and_check(6, 2, False, 4, 64, requests, [3])
    expect("step 0 prefills", [0, 1, 2], steps[0]["prefills"], CB)
    expect("step 0 num_batched_tokens (three 3-token prompts)", 9, steps[0]["num_batched_tokens"], CB)
    expect("step 1 decodes", [0, 1, 2], steps[1]["decodes"], CB)
    expect("step 2 preempted (the newest running sequence)", [2], steps[2]["preempted"], CB)
    expect("step 2 decodes", [0, 1], steps[2]["decodes"], CB)
    expect("step 2 front of waiting", 2, steps[2]["after_waiting"][0], CB)


def test_preempted_sequence_forgets_its_cached_prefix():
    """The newest sequence shares a cached block with the oldest (prefix caching on), so it
    was admitted with num_cached_tokens = 2; preempted, it waits with 0 (and WAITING)."""
    requests = [([1, 2, 3], 8, _tokens(8)), ([11, 12, 13], 8, _tokens(8)), ([1, 2, 5], 8, _tokens(8))]
    steps, _ = run_and_check(6, 2, True, 4, 64, requests, [3])
    expect("step 0 cached tokens (the third prompt shares the block [1, 2] with the first)", {0: 0, 1: 0, 2: 2},
           steps[0]["cached"], CB)
    at = next(i for i, s in enumerate(steps) if s["preempted"])
    expect(f"step {at} preempted (the newest running sequence)", [2], steps[at]["preempted"], CB)
    expect(f"step {at}: (status, num_cached_tokens) of the preempted sequence while it waits", {2: ("WAITING", 0)},
           steps[at]["preempted_state"], CB, "preemption sets it waiting with num_cached_tokens = 0")


def test_preempted_sequence_goes_before_older_waiting_requests():
    """As above, with a 1-token request waiting since step 1 (no block was free): the
    preempted sequence goes to the front of waiting, ahead of it."""
    requests = [([10 * i + 1, 10 * i + 2, 10 * i + 3], 8, _tokens(8)) for i in range(3)] + [([99], 2, _tokens(2))]
    steps, _ = run_and_check(6, 2, False, 4, 64, requests, [3, 1])
    expect("step 1 prefills (no free block for the new request)", [], steps[1]["prefills"], CB)
    expect("step 2 preempted", [2], steps[2]["preempted"], CB)
    expect("step 2 waiting after preemption (the preempted sequence first)", [2, 3], steps[2]["after_waiting"], CB)


@pytest.mark.parametrize("limit", ["budget", "blocks"])
def test_head_of_line_request_that_does_not_fit_blocks_later_ones(limit):
    """FIFO admission: when waiting[0] does not fit (token budget, or free blocks), stop;
    a later request that would fit must not jump ahead of it."""
    if limit == "budget":       # budget 10, two decodes running: 8 left; the head needs 9, the next 2
        requests = [([1, 2], 3, _tokens(3)), ([3, 4], 3, _tokens(3)), (list(range(20, 29)), 1, _tokens(1)),
                    ([5, 6], 1, _tokens(1))]
        num_blocks, block_size, budget = 64, 4, 10
    else:                       # 6 blocks of 2, the first request holds 3: the head needs 4, the next 1
        requests = [([1, 2, 3, 4, 5], 4, _tokens(4)), (list(range(20, 27)), 1, _tokens(1)), ([5, 6], 1, _tokens(1))]
        num_blocks, block_size, budget = 6, 2, 20
    arrivals = [len(requests) - 2, 2]
    steps, _ = run_and_check(num_blocks, block_size, False, 8, budget, requests, arrivals)
    head, later = len(requests) - 2, len(requests) - 1
    order = [sid for step in steps for sid in step["prefills"]]      # admissions, in order
    require(order.index(head) < order.index(later),
            f"request {later} was admitted before the head of waiting (request {head}), which did not fit "
            f"({limit}); admissions in order: {order}. Admission is FIFO and stops at the first request that "
            f"does not fit", CB)


@pytest.mark.parametrize("max_num_seqs,budget,admitted", [(2, 64, [0, 1]), (4, 10, [0, 1]), (3, 12, [0, 1, 2]),
                                                          (4, 11, [0, 1])])
def test_limits_on_admission(max_num_seqs, budget, admitted):
    """max_num_seqs and max_num_batched_tokens at several values: 4-token prompts."""
    requests = [(list(range(1, 5)), 3, _tokens(3)) for _ in range(4)]
    steps, _ = run_and_check(64, 4, False, max_num_seqs, budget, requests, [4])
    expect(f"prefills of the first step (max_num_seqs {max_num_seqs}, budget {budget}, 4-token prompts)",
           admitted, steps[0]["prefills"], CB)


@pytest.mark.parametrize("prompt_len,admitted_at", [(8, 1), (9, 3)], ids=["exact-fit", "fit-plus-one"])
def test_budget_boundary_while_decodes_run(prompt_len, admitted_at):
    """Budget 10, two sequences decoding (2 tokens): an 8-token prompt fits exactly and
    is admitted next to the decodes; a 9-token prompt waits until they are done."""
    requests = [([1, 2], 3, _tokens(3)), ([3, 4], 3, _tokens(3)), (list(range(20, 20 + prompt_len)), 1, _tokens(1))]
    steps, _ = run_and_check(64, 4, False, 8, 10, requests, [2, 1])
    first = next(i for i, s in enumerate(steps) if 2 in s["prefills"])
    expect(f"step at which a {prompt_len}-token prompt is admitted (budget 10, two decodes running)", admitted_at,
           first, CB, "admit while len(token_ids) <= the remaining budget")


def test_fully_cached_prompt_costs_one_token():
    """A block-aligned prompt whose blocks are all cached still computes its last token:
    it costs 1 token of budget and reports every prompt token as cached."""
    prompt = list(range(1, 9))
    requests = [(prompt, 1, _tokens(1)), (prompt, 2, _tokens(2))]
    steps, _ = run_and_check(16, 4, True, 4, 16, requests, [1, 0, 1])
    second = next(s for s in steps if 1 in s["prefills"])
    expect("cached tokens of a fully cached 8-token prompt", 8, second["cached"][1], CB)
    expect("num_batched_tokens of that step (its last token is recomputed)", 1, second["num_batched_tokens"], CB)


def _random_workload(rng, *, block_size, budget, n_requests):
    """Prompts share a prefix. Stated probabilities: a request repeats an earlier prompt
    whole with p = 0.25 (fully cached, block-aligned when its length is); its prompt is
    "long" (prompt + max_tokens within 3 tokens of the budget, so that with a few decodes
    running it fits exactly or misses by one) with p = 0.3; sampled tokens come from a
    3-token pool with p = 0.5 (equal decode-filled blocks); 0-2 arrivals per step."""
    shared = [rng.randrange(50) for _ in range(3 * block_size)]
    requests = []
    for _ in range(n_requests):
        max_tokens = rng.randrange(1, min(12, budget // 2))
        roll = rng.random()
        if requests and roll < 0.25:
            prompt = list(rng.choice(requests)[0])
        elif roll < 0.55:
            length = budget - max_tokens - rng.randrange(0, 4)
            prompt = shared[:rng.randrange(0, len(shared))]
            prompt += [rng.randrange(50) for _ in range(max(1, length - len(prompt)))]
        else:
            prompt = shared[:rng.randrange(0, len(shared))] + [rng.randrange(50) for _ in range(rng.randrange(1, 8))]
        prompt = prompt[:max(1, budget - max_tokens)]
        pool = [1, 2, 3] if rng.random() < 0.5 else list(range(50))
        requests.append((prompt, max_tokens, [rng.choice(pool) for _ in range(max_tokens)]))
    arrivals = [rng.randrange(0, 3) for _ in range(4 * n_requests)]
    return requests, arrivals


@pytest.mark.parametrize("caching", [True, False], ids=["prefix-caching", "no-caching"])
def test_random_workloads_follow_the_handout(caching):
    rng = random.Random(seeded(f"sched-{caching}"))
    preemptions = exact_fits = refused_by_one = 0
    for _ in range(8):
        bs = rng.choice([1, 2, 3, 4])
        budget = rng.randrange(12, 30)                     # prompt + max_tokens <= budget (Scheduler.add)
        num_blocks = -(-budget // bs) + rng.randrange(0, 8 // bs + 2)
        max_num_seqs = rng.randrange(2, 7)
        requests, arrivals = _random_workload(rng, block_size=bs, budget=budget, n_requests=12)
        _, want = run_and_check(num_blocks, bs, caching, max_num_seqs, budget, requests, arrivals)
        for i, step in enumerate(want):
            preemptions += len(step["preempted"])
            remaining = budget - len(step["decodes"])
            for sid in step["prefills"]:
                length = len(requests[sid][0]) + _outputs_so_far(sid, i, want)
                exact_fits += length == remaining
                remaining -= length - min(step["cached"][sid], length - 1)
            waiting_left = [s for s in step["before_waiting"] if s not in step["prefills"]]
            if waiting_left and not step["preempted"] and len(step["after_running"]) < max_num_seqs:
                head = waiting_left[0]
                refused_by_one += len(requests[head][0]) + _outputs_so_far(head, i, want) == remaining + 1
    # The workloads must reach the cases they are meant to test (else the test is too weak).
    assert preemptions > 0, "the workloads were meant to force preemption (test is too weak)"
    # Budget boundaries are reached by chance here (printed, never a verdict: a right solution
    # must not fail on an unlucky seed); test_budget_boundary_while_decodes_run pins them exactly.
    print(f"budget boundaries reached: {exact_fits} exact fits, {refused_by_one} refusals by one token, "
          f"{preemptions} preemptions")
