"""The only door from the grader to the learner's code (workspace modules
collectives, ddp, zero, pipeline).

The distributed parts run on p gloo ranks: `run_ranks` (learner side) forks
p processes from the learner process (so they inherit its sandbox), joins them
into a gloo group over loopback, runs one job per rank and sends back plain
data. Every rank talks through a `Comm`: point-to-point messages that never
block on send and are COUNTED here, and, for parts 2-4, given collectives
backed by torch.distributed. The counts, the event logs and the outputs come
back as data; the tests compare them with what the grader works out itself.
"""

from __future__ import annotations

from roadmap_cli import grading_kit as kit

learner_side = kit.learner_side

# torch.distributed calls a ring must not make: part 1 is written from comm.send/comm.recv.
_FORBIDDEN = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
              "broadcast", "reduce", "all_to_all", "all_to_all_single", "gather", "scatter", "send", "recv",
              "isend", "irecv", "batch_isend_irecv", "barrier")


def _m(name: str):
    return kit.learner_module(name)


class Comm:
    """One rank's communicator. `log` records what went through it, in order:
    ("send", dst, nbytes), ("recv", src, nbytes), ("all_reduce", nbytes),
    ("broadcast", src, nbytes), and whatever the job adds (("ready", i) ...)."""

    def __init__(self, rank: int, world_size: int):
        import torch.distributed as dist

        self.rank, self.world_size = rank, world_size
        self.log: list[tuple] = []
        self._dist = {name: getattr(dist, name) for name in ("isend", "recv", "all_reduce", "broadcast")}
        self._sends: list = []

    def _peer(self, peer, what: str) -> int:
        peer = int(peer)
        if not 0 <= peer < self.world_size or peer == self.rank:
            raise ValueError(f"comm.{what}: rank {self.rank} of {self.world_size} cannot talk to rank {peer}")
        return peer

    def send(self, tensor, dst):
        dst = self._peer(dst, "send")
        buf = tensor.detach().contiguous().clone()   # the caller may reuse its tensor at once
        self.log.append(("send", dst, buf.numel() * buf.element_size()))
        self._sends.append((self._dist["isend"](buf, dst), buf))

    def recv(self, tensor, src):
        src = self._peer(src, "recv")
        self._dist["recv"](tensor, src)
        self.log.append(("recv", src, tensor.numel() * tensor.element_size()))
        return tensor

    # ---- given collectives (parts 2-4)
    def broadcast(self, tensor, src):
        self.log.append(("broadcast", int(src), tensor.numel() * tensor.element_size()))
        self._dist["broadcast"](tensor, int(src))
        return tensor

    def all_reduce(self, tensor):
        self.log.append(("all_reduce", tensor.numel() * tensor.element_size()))
        return self._dist["all_reduce"](tensor, async_op=True)

    def reduce_scatter(self, tensor):
        flat = tensor.detach().reshape(-1).clone()
        self._dist["all_reduce"](flat)
        return flat.tensor_split(self.world_size)[self.rank].clone()

    def all_gather(self, chunk, numel):
        import torch

        full = torch.zeros(int(numel), dtype=chunk.dtype)
        mine = full.tensor_split(self.world_size)[self.rank]
        if mine.numel() != chunk.numel():
            raise ValueError(f"comm.all_gather: rank {self.rank} holds {chunk.numel()} elements, its chunk of "
                             f"{numel} over {self.world_size} ranks has {mine.numel()} (torch.tensor_split)")
        mine.copy_(chunk.detach().reshape(-1))
        self._dist["all_reduce"](full)   # the other chunks are zeros: exact
        return full

    def _flush(self):
        for work, _ in self._sends:
            work.wait()
        self._sends.clear()


def _np(value):
    """Tensors -> numpy (a torch tensor through a multiprocessing queue is a shared-memory handle that
    dies with the rank), recursively."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("__tensor__", value.detach().clone().numpy())
    if isinstance(value, (list, tuple)):
        return type(value)(_np(v) for v in value)
    if isinstance(value, dict):
        return {k: _np(v) for k, v in value.items()}
    return value


def _torch(value):
    import torch

    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__tensor__":
        return torch.from_numpy(value[1])
    if isinstance(value, (list, tuple)):
        return type(value)(_torch(v) for v in value)
    if isinstance(value, dict):
        return {k: _torch(v) for k, v in value.items()}
    return value


def _rank_main(rank: int, world_size: int, port: int, job: str, payload, queue) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=15))
        comm = Comm(rank, world_size)
        out = _JOBS[job](comm, payload)
        comm._flush()
        queue.put((rank, _np(out), None))
    except BaseException as exc:  # noqa: BLE001 - reported as data
        queue.put((rank, None, f"{type(exc).__name__}: {exc}"))


@learner_side(timeout_s=120)
def run_ranks(job: str, world_size: int, payload) -> dict:
    """Run `job` on `world_size` forked gloo ranks. Returns {rank: {"out", "error"}}."""
    for _ in range(2):
        results = _run_ranks_once(job, world_size, payload)
        # The free port was taken between choosing it and rank 0 binding it: not the learner's fault, run again.
        if not any("ddress already in use" in (res["error"] or "") for res in results.values()):
            break
    return results


def _run_ranks_once(job: str, world_size: int, payload) -> dict:
    import multiprocessing as mp
    import queue as queue_mod
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, world_size, port, job, payload, q), daemon=True)
             for r in range(world_size)]
    for p in procs:
        p.start()
    results: dict = {}
    try:
        for _ in range(world_size):
            rank, out, error = q.get(timeout=60)
            results[int(rank)] = {"out": _torch(out), "error": error}
    except queue_mod.Empty:
        pass
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    for r in range(world_size):
        results.setdefault(r, {"out": None, "error": "this rank never answered (waiting on a message that "
                                                     "was never sent?)"})
    return results


# ---------------------------------------------------------------- part 1: ring collectives


def _job_ring(comm, cases):
    import torch.distributed as dist

    col = _m("collectives")
    results = []
    for case in cases:
        x = case["inputs"][comm.rank].clone()
        before = x.clone()
        start = len(comm.log)
        saved = {name: getattr(dist, name) for name in _FORBIDDEN if hasattr(dist, name)}

        def refuse(*_a, name="", **_k):
            raise RuntimeError(f"torch.distributed.{name} called inside {case['op']}: part 1's collectives are "
                               "written from comm.send/comm.recv (README.md, section \"Part 1: ring collectives\")")
        for name in saved:
            setattr(dist, name, lambda *a, _n=name, **k: refuse(*a, name=_n, **k))
        try:
            if case["op"] == "all_reduce":
                storage = x.data_ptr()   # in place: the same tensor on the same storage (not a rebound .data)
                out = col.ring_all_reduce(comm, x)
                res = {"out": out.clone(), "same_object": out is x, "same_storage": x.data_ptr() == storage,
                       "input_after": x.clone()}
            elif case["op"] == "reduce_scatter":
                out = col.ring_reduce_scatter(comm, x)
                res = {"out": out.clone(), "input_after": x.clone()}
            else:
                out = col.ring_all_gather(comm, x, case["numel"])
                res = {"out": out.clone(), "input_after": x.clone()}
        finally:
            for name, fn in saved.items():
                setattr(dist, name, fn)
        comm._flush()
        res["log"] = comm.log[start:]
        res["input_before"] = before
        # torch.distributed's own collective on the same input, for comparison
        if case["op"] == "all_reduce":
            ref = before.clone()
            dist.all_reduce(ref)
        elif case["op"] == "reduce_scatter":
            ref = comm.reduce_scatter(before)
        else:
            ref = comm.all_gather(before, case["numel"])
        res["torch"] = ref
        results.append(res)
    return results


# ---------------------------------------------------------------- part 2: DDP


def _mlp(sizes, dtype):
    import torch

    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(a, b, dtype=dtype))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def _scaled_mlp(sizes, dtype):
    """An MLP times a learned per-output scale that is registered FIRST but used LAST: its gradient is ready
    before every other one, yet it sits in the last bucket (reverse order), so buckets become ready out of order."""
    import torch

    class ScaledMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(sizes[-1], dtype=dtype))
            self.body = _mlp(sizes, dtype)

        def forward(self, x):
            return self.body(x) * self.scale

    return ScaledMLP()


def _job_ddp(comm, payload):
    import torch

    model = _scaled_mlp(payload["sizes"], torch.float64)
    with torch.no_grad():
        for p, w in zip(model.parameters(), payload["init"][comm.rank]):
            p.copy_(w)
    params = list(model.parameters())
    # Registered before the learner's hooks, so each one fires first: ("ready", i) precedes any launch it causes.
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: comm.log.append(("ready", i)))
    ddp = _m("ddp").BucketedDDP(model, comm, payload["cap_bytes"])
    after_init = [p.detach().clone() for p in params]
    iterations = []
    for x, y in payload["batches"][comm.rank]:
        for p in params:
            p.grad = None
        start = len(comm.log)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        comm.log.append(("backward-done",))
        # finish() copies into the .grad tensors backward made: the same objects on the same storage after it.
        before = [(p.grad, None if p.grad is None else p.grad.data_ptr()) for p in params]
        ddp.finish()
        grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
        kept = [{"same_object": p.grad is g, "same_storage": p.grad is not None and p.grad.data_ptr() == ptr}
                for p, (g, ptr) in zip(params, before)]
        del before
        iterations.append({"log": comm.log[start:], "grads": grads, "grads_kept": kept})
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p -= payload["lr"] * p.grad
    return {"after_init": after_init, "iterations": iterations}


@learner_side(timeout_s=30)
def assign_buckets(sizes_bytes: list[int], cap_bytes: int):
    return [[int(i) for i in b] for b in _m("ddp").assign_buckets(list(sizes_bytes), cap_bytes)]


# ---------------------------------------------------------------- part 3: ZeRO-1


def _tensors_in(obj, depth=0):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors_in(v, depth + 1)
    elif depth < 3 and isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors_in(v, depth + 1)


def _job_zero(comm, payload):
    import torch

    model = _mlp(payload["sizes"], torch.float64)
    with torch.no_grad():
        for p, w in zip(model.parameters(), payload["weights"]):
            p.copy_(w)
    params = list(model.parameters())
    opt = _m("zero").ZeroAdamW(model.parameters(), comm, **payload["hyper"])
    steps = []
    for x, y in payload["batches"][comm.rank]:
        for p in params:
            p.grad = None
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        # Every tensor the optimizer keeps, besides the parameters themselves (by identity).
        ids = {id(p) for p in params}
        kept, storage = {}, {}
        for name, value in vars(opt).items():
            for t in _tensors_in(value):
                if id(t) not in ids and t.numel() > 1:
                    kept.setdefault(name, []).append(int(t.numel()))
                if id(t) not in ids:   # a small view of a large buffer keeps the whole buffer alive
                    storage.setdefault(name, []).append(int(t.untyped_storage().nbytes()))
        steps.append({"params": torch.cat([p.detach().reshape(-1) for p in params]).clone(),
                      "exp_avg": opt.exp_avg.detach().clone(), "exp_avg_sq": opt.exp_avg_sq.detach().clone(),
                      "shard": tuple(int(v) for v in opt.shard), "kept": kept,
                      "storage": storage})
    return steps


# ---------------------------------------------------------------- part 4: 1F1B


@learner_side(timeout_s=30)
def schedules(cases: list[tuple[int, int]]):
    """For each (p, m): the learner's per-stage orders, timeline, and the bubble fraction of that timeline."""
    pl = _m("pipeline")
    out = []
    for p, m in cases:
        orders = [[(str(k), int(i)) for k, i in pl.one_f_one_b(p, m, s)] for s in range(p)]
        events = [(int(s), int(i), str(k), int(t)) for s, i, k, t in pl.timeline(p, m)]
        out.append({"orders": orders, "timeline": events, "bubble": float(pl.bubble_fraction(events, p))})
    return out


@learner_side(timeout_s=30)
def bubble_of(events: list, num_stages: int) -> float:
    return float(_m("pipeline").bubble_fraction([tuple(e) for e in events], num_stages))


def _job_pipeline(comm, payload):
    import gc
    import weakref

    import torch

    s = comm.rank
    stage = _mlp(payload["stage_sizes"][s], torch.float64)
    with torch.no_grad():
        for p, w in zip(stage.parameters(), payload["weights"][s]):
            p.copy_(w)
    trace: list[tuple[str, int]] = []
    counts = {"F": 0, "B": 0}
    peak = [0]
    # What the stage really holds, not what the F/B order implies: weak references to each forward's
    # output and (unless it is one of the grader's own inputs) its input. Counted when a backward's
    # gradient arrives, when the learner's locals already name that micro-batch, not a finished one.
    alive: list[list] = []
    held = [0]
    given = {id(t) for t in (payload["inputs"] or [])} if s == 0 else set()

    class Recorded(torch.nn.Module):
        """The learner's stage: forward logs ("F", k) for its k-th call, the gradient reaching
        its output logs ("B", k) for the k-th backward; peak = most forwards not yet backwarded."""

        def __init__(self):
            super().__init__()
            self.inner = stage

        def forward(self, x):
            trace.append(("F", counts["F"]))
            counts["F"] += 1
            peak[0] = max(peak[0], counts["F"] - counts["B"])
            out = self.inner(x)
            tracked = [weakref.ref(out)] + ([] if id(x) in given else [weakref.ref(x)])
            alive.append(tracked)

            def on_grad(grad):
                trace.append(("B", counts["B"]))
                counts["B"] += 1
                gc.collect()   # garbage waiting for the cycle collector is not held
                held[0] = max(held[0], sum(any(r() is not None for r in rs) for rs in alive))

            if out.requires_grad:
                out.register_hook(on_grad)
            return out

    m = payload["m"]
    p = comm.world_size
    loss = _m("pipeline").run_1f1b(Recorded(), comm, m, payload["inputs"] if s == 0 else None,
                                   payload["targets"] if s == p - 1 else None,
                                   tuple(payload["activation_shape"]), torch.float64)
    return {"trace": trace, "peak": peak[0], "held": held[0], "loss": None if loss is None else float(loss),
            "grads": [None if q.grad is None else q.grad.detach().clone() for q in stage.parameters()],
            "sends": [e for e in comm.log if e[0] == "send"]}


_JOBS = {"ring": _job_ring, "ddp": _job_ddp, "zero": _job_zero, "pipeline": _job_pipeline}
