"""Part 1: RAII and ownership. The grader's block_pool_test.cpp is compiled
with the learner's block_pool.h under AddressSanitizer + LeakSanitizer (once
per grade) and run on scripts of pool operations chosen from this grade's
secret seed.

Nothing the binary says about itself decides anything: the learner's code is
linked into it and could print any line. The binary only reports what each
operation did (ids, counts, which exception, contents, offsets, which address
a block is), and the grader's model of README.md, Part 1 (the `Pools` class
below) decides. LeakSanitizer must report exactly the leak the binary makes on
purpose at the very end (a size from the secret seed), which shows the leak
check ran over the whole run and found none of the pool's. The two properties
a run cannot show (copying deleted, moves noexcept) are the compiler's
verdict on a probe of `static_assert`s over the header, and a header whose
macros rename anything the grader's code uses (`#define noexcept`, `#define
static_assert(...)`, `#define BlockPool Other`) is refused before any case."""

from __future__ import annotations

import random
import re
import subprocess

import pytest

import build
from roadmap_cli import grading_kit as kit
from roadmap_cli.grading_kit import cpp_build

SECTION = "Part 1: RAII and ownership"
CASES = ["allocate_order", "free_reuse_lifo", "blocks_are_disjoint", "bad_free_throws", "data_checks_range",
         "move_construct", "move_assign", "self_move_assign", "copy_is_deleted", "moves_are_noexcept",
         "rejected_calls_change_nothing", "many_pools"]
SCRIPTS_PER_CASE = 3


def _fail(message: str) -> None:
    pytest.fail(f"{message} (README.md, section \"{SECTION}\")", pytrace=False)


# ------------------------------------------------------------------ the model


class Pool:
    """One BlockPool as README.md, Part 1 describes it."""

    def __init__(self, num_blocks: int, block_bytes: int, storage):
        self.n, self.b, self.storage = num_blocks, block_bytes, storage
        self.free_list = list(range(num_blocks - 1, -1, -1))  # pop() hands out 0, 1, 2, ... first
        self.in_use = [False] * num_blocks
        self.contents: dict[int, int] = {}

    @classmethod
    def moved_from(cls) -> "Pool":
        return cls(0, 0, None)  # owns nothing (its block_bytes() is not specified: never asked)


class Pools:
    """The grader's side of block_pool_test.cpp's script (its header comment lists the operations)."""

    def __init__(self):
        self.pools: list[Pool] = []
        self.selected = 0
        self.addresses: list = []  # (storage, block id) in order of first report

    @property
    def pool(self) -> Pool:
        return self.pools[self.selected]

    def run(self, op: str) -> str:
        kind, rest = op[0], op[1:]
        arg = int(rest.split(":")[0]) if rest else 0
        value = int(rest.split(":")[1]) if ":" in rest else 0
        if kind == "P":
            self.pools.append(Pool(arg, value, object()))
            self.selected = len(self.pools) - 1
            return str(self.selected)
        if kind == "s":
            self.selected = arg
            return "ok"
        p = self.pool
        if kind == "a":
            if not p.free_list:
                return "-1"
            got = p.free_list.pop()
            p.in_use[got] = True
            return str(got)
        if kind in "nNB":
            return str({"n": len(p.free_list), "N": p.n, "B": p.b}[kind])
        if kind == "m":
            self.pools.append(p)
            self.pools[self.selected] = Pool.moved_from()
            return str(len(self.pools) - 1)
        if kind == "M":
            if arg != self.selected:
                self.pools[arg] = p
                self.pools[self.selected] = Pool.moved_from()
            return "ok"
        if kind == "S":
            return "ok"
        if not 0 <= arg < p.n:
            return "range"
        if kind == "f":
            if not p.in_use[arg]:
                return "invalid"
            p.in_use[arg] = False
            p.free_list.append(arg)
            return "ok"
        if kind == "w":
            p.contents[arg] = value
            return "ok"
        if kind == "r":
            return "1" if p.contents.get(arg) == value else "0"
        if kind == "d":
            return str(arg * p.b)
        if kind == "@":
            key = (p.storage, arg)
            if key not in self.addresses:
                self.addresses.append(key)
            return str(self.addresses.index(key))
        raise ValueError(f"unknown op {op!r}")


def expected(ops: list[str]) -> list[str]:
    model = Pools()
    return [model.run(op) for op in ops]


def _describe(op: str) -> str:
    kind, rest = op[0], op[1:]
    arg = rest.split(":")[0]
    return {"P": f"BlockPool({arg}, {rest.split(':')[-1]})", "s": f"taking pool {arg}", "a": "allocate()",
            "n": "num_free()", "N": "num_blocks()", "B": "block_bytes()", "f": f"free({arg})",
            "w": f"writing block {arg}", "r": f"reading block {arg} back", "d": f"data({arg}) - data(0)",
            "@": f"which address data({arg}) is", "m": "BlockPool moved(std::move(pool))",
            "M": f"pools[{arg}] = std::move(pool)", "S": "pool = std::move(pool)"}[kind]


# ------------------------------------------------------------ the scripts
#
# One generator per case: the operations that show its property, with sizes, orders and values from the
# secret seed. A generator drives its own model to pick ids that make sense (a block in use, one free).


class _Script:
    def __init__(self, rng: random.Random):
        self.rng, self.ops, self.model = rng, [], Pools()

    def do(self, *ops: str) -> str:
        got = ""
        for op in ops:
            self.ops.append(op)
            got = self.model.run(op)
        return got

    def sizes(self, lo: int = 3, hi: int = 12) -> tuple[int, int]:
        return self.rng.randint(lo, hi), 8 * self.rng.randint(1, 9)

    def in_use(self) -> list[int]:
        return [i for i, used in enumerate(self.model.pool.in_use) if used]

    def values(self, k: int) -> list[int]:
        return self.rng.sample(range(1, 256), k)

    def bad_ids(self, n: int) -> list[int]:
        return [-1, n, -self.rng.randint(2, 1000), n + self.rng.randint(1, 1000)]


def _allocate_order(s: _Script) -> None:
    n, b = s.sizes()
    s.do(f"P{n}:{b}", "N", "B", "n")
    for _ in range(n + 1):
        s.do("a", "n")
    s.do("a", f"P0:{b}", "N", "n", "a")


def _free_reuse_lifo(s: _Script) -> None:
    n, b = s.sizes(4)
    s.do(f"P{n}:{b}", *["a"] * n)
    for _ in range(3):
        used = s.in_use()
        for block in s.rng.sample(used, s.rng.randint(1, len(used))):
            s.do(f"f{block}")
        s.do("n")
        for _ in range(s.rng.randint(1, len(s.model.pool.free_list) + 1)):
            s.do("a")


def _blocks_are_disjoint(s: _Script) -> None:
    n, b = s.sizes(2, 10)
    s.do(f"P{n}:{b}", *["a"] * n)
    values = s.values(n)
    for block in s.rng.sample(range(n), n):
        s.do(f"w{block}:{values[block]}")
    for block in s.rng.sample(range(n), n):
        s.do(f"r{block}:{values[block]}", f"r{block}:{values[(block + 1) % n]}", f"d{block}", f"@{block}")


def _bad_free_throws(s: _Script) -> None:
    n, b = s.sizes(3)
    s.do(f"P{n}:{b}", *["a"] * s.rng.randint(1, n - 1))
    for _ in range(s.rng.randint(12, 20)):
        used, free = s.in_use(), [i for i in range(n) if i not in s.in_use()]
        roll = s.rng.random()
        if roll < 0.3 and used:
            s.do(f"f{s.rng.choice(used)}")  # frees: the next one of this block is a double free
        elif roll < 0.6 and free:
            s.do(f"f{s.rng.choice(free)}")  # not in use: std::invalid_argument
        elif roll < 0.8:
            s.do(f"f{s.rng.choice(s.bad_ids(n))}")  # std::out_of_range
        else:
            s.do("a")
        s.do("n")


def _data_checks_range(s: _Script) -> None:
    n, b = s.sizes(2)
    s.do(f"P{n}:{b}")
    for block in s.rng.sample(range(n), n):
        s.do(f"d{block}")
    for bad in s.bad_ids(n):
        s.do(f"d{bad}", f"w{bad}:{s.rng.randint(1, 255)}", f"r{bad}:0", f"@{bad}")
    s.do("n")


def _fill_some(s: _Script, k: int) -> dict[int, int]:
    """k allocations, each block filled with its own value and its address noted: {block: value}."""
    values = {}
    for value in s.values(k):
        block = int(s.do("a"))
        s.do(f"w{block}:{value}", f"@{block}")
        values[block] = value
    return values


def _check_holds(s: _Script, values: dict[int, int]) -> None:
    for block, value in values.items():
        s.do(f"r{block}:{value}", f"@{block}")


def _move_construct(s: _Script) -> None:
    n, b = s.sizes(3)
    source = int(s.do(f"P{n}:{b}"))
    values = _fill_some(s, s.rng.randint(1, n - 1))
    moved = int(s.do("m"))
    s.do(f"s{moved}", "N", "B", "n")
    _check_holds(s, values)  # the same storage (the same addresses), contents kept
    s.do("a", "n")  # continues where the source stopped
    s.do(f"s{source}", "N", "n", "a", "f0", "d0", "w0:1")  # the moved-from pool owns nothing
    again = int(s.do("m"))  # moving a moved-from pool gives another empty one
    s.do(f"s{again}", "N", "n", "a")


def _move_assign(s: _Script) -> None:
    (n1, b1), (n2, b2), (n3, b3) = s.sizes(2), s.sizes(3), s.sizes(1)  # n2 >= 3: its storage outweighs its bookkeeping
    source = int(s.do(f"P{n1}:{b1}"))
    values = _fill_some(s, s.rng.randint(1, n1))
    target = int(s.do(f"P{n2}:{b2}"))
    _fill_some(s, s.rng.randint(0, n2))  # the target's old storage: LeakSanitizer sees it if not released
    s.do(f"s{source}", f"M{target}", f"s{target}", "N", "B", "n")
    _check_holds(s, values)
    s.do("a", "n")
    s.do(f"s{source}", "N", "n", "a")  # moved-from: empty
    fresh = int(s.do(f"P{n3}:{b3}"))
    s.do(f"s{fresh}", f"M{source}", f"s{source}", "N", "B", "n", "a")  # a moved-from pool takes a new one
    s.do(f"s{fresh}", "N", "n", "a")


def _self_move_assign(s: _Script) -> None:
    n, b = s.sizes(2)
    s.do(f"P{n}:{b}")
    values = _fill_some(s, s.rng.randint(1, n))
    for _ in range(s.rng.randint(1, 3)):
        s.do("S", "N", "B", "n")
        _check_holds(s, values)
    s.do("a", "n")
    source = s.model.selected
    moved = int(s.do("m"))
    s.do(f"s{source}", "S", "N", "n", "a", f"s{moved}", "N", "n")  # self-move of a moved-from pool: still empty


def _rejected_calls_change_nothing(s: _Script) -> None:
    n, b = s.sizes(4)
    s.do(f"P{n}:{b}", *["a"] * s.rng.randint(2, n - 1))
    for block in s.rng.sample(s.in_use(), s.rng.randint(1, len(s.in_use()) - 1)):
        s.do(f"f{block}")
    for _ in range(s.rng.randint(8, 16)):
        free = [i for i in range(n) if i not in s.in_use()]
        bad = s.rng.choice([f"f{s.rng.choice(free)}", f"f{s.rng.choice(s.bad_ids(n))}",
                            f"d{s.rng.choice(s.bad_ids(n))}", f"w{s.rng.choice(s.bad_ids(n))}:7"])
        s.do(bad, "n")
    while s.do("a") != "-1":  # the free list's order shows that nothing changed
        pass
    for block in s.rng.sample(s.in_use(), len(s.in_use())):
        s.do(f"f{block}")
    s.do("n")


def _many_pools(s: _Script) -> None:
    count = s.rng.randint(12, 30)
    values = s.values(count)
    for i in range(count):  # the vector of pools grows: earlier pools are moved each time
        n, b = s.rng.randint(1, 6), 8 * s.rng.randint(1, 8)
        s.do(f"P{n}:{b}", "a", f"w0:{values[i]}", "@0")
    for i in s.rng.sample(range(count), count):
        s.do(f"s{i}", "N", "B", "n", f"r0:{values[i]}", "@0")
    s.do(f"P0:{8 * s.rng.randint(1, 8)}", "N", "n", "a")  # a pool of 0 blocks has nothing to hand out


SCRIPTS = {"allocate_order": _allocate_order, "free_reuse_lifo": _free_reuse_lifo,
           "blocks_are_disjoint": _blocks_are_disjoint, "bad_free_throws": _bad_free_throws,
           "data_checks_range": _data_checks_range, "move_construct": _move_construct, "move_assign": _move_assign,
           "self_move_assign": _self_move_assign, "rejected_calls_change_nothing": _rejected_calls_change_nothing,
           "many_pools": _many_pools}

# The properties a run cannot show, as the compiler's verdict: (condition, what it means when it fails).
# Compiler built-ins, not std:: traits, so a specialisation in the header cannot answer for them.
PROBES = {
    "copy_is_deleted": [
        ("!__is_constructible(BlockPool, const BlockPool&)", "BlockPool can be copied from a const BlockPool&: "
                                                            "delete the copy constructor"),
        ("!__is_constructible(BlockPool, BlockPool&)", "BlockPool can be copied from a BlockPool&: delete every "
                                                      "copy constructor"),
        ("!__is_assignable(BlockPool&, const BlockPool&)", "BlockPool is copy-assignable: delete the copy "
                                                          "assignment"),
        ("!__is_assignable(BlockPool&, BlockPool&)", "BlockPool is copy-assignable from a BlockPool&: delete "
                                                    "every copy assignment"),
    ],
    "moves_are_noexcept": [
        ("__is_nothrow_constructible(BlockPool, BlockPool&&)", "the move constructor is not noexcept (std::vector "
                                                               "only moves noexcept types)"),
        ("__is_nothrow_assignable(BlockPool&, BlockPool&&)", "the move assignment is not noexcept"),
    ],
}
assert set(SCRIPTS) | set(PROBES) == set(CASES)


# ------------------------------------------------------------ the checks

KEYWORDS = set("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
decltype default delete do double dynamic_cast else enum explicit export extern false final float for friend goto
if import inline int long module mutable namespace new noexcept not not_eq nullptr operator or or_eq override
private protected public register reinterpret_cast requires return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned using
virtual void volatile wchar_t while xor xor_eq""".split())

# Comments, string and character literals: the words in them are not code.
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _grader_names() -> set[str]:
    """Every name the grader's own code (block_pool_test.cpp and the probes) spells, and the keywords."""
    code = _NOT_CODE.sub(" ", build.TEST_MAIN.read_text())
    code += " ".join(cond for checks in PROBES.values() for cond, _ in checks)
    return KEYWORDS | set(re.findall(r"[A-Za-z_]\w*", code))


def _require_honest_macros() -> None:
    """A macro in block_pool.h applies to everything after it: `#define noexcept`, `#define static_assert(...)`
    or `#define BlockPool OtherClass` would change what the grader's code means. Refused before any case."""
    changed, error = build.header_macros()
    if error is not None:
        _fail(f"block_pool.h does not compile:\n{error}")
    clash = sorted(changed & _grader_names())
    if clash:
        _fail(f"block_pool.h defines, changes or removes the macro{'s' if len(clash) > 1 else ''} "
              f"{', '.join(f'`{m}`' for m in clash[:5])}: a keyword or a name the grader's code uses (a header's "
              f"macros would change what the grader's code means); remove {'them' if len(clash) > 1 else 'it'}")


def _leaks(output: str) -> list[tuple[int, str, bool]]:
    """(bytes, where: the first allocation frame in block_pool.h, else the first outside the sanitizer, is it
    the grader's canary) per leak LeakSanitizer reported."""
    found = []
    for block in re.split(r"\n(?=(?:Direct|Indirect) leak of )", output)[1:]:
        size = int(re.match(r"(?:Direct|Indirect) leak of (\d+) byte", block).group(1))
        frames = re.findall(r"#\d+ 0x[0-9a-f]+ in (.*?) (\S+?):(\d+)", block.split("\n\n")[0])
        mine = [f for f in frames if f[1].endswith("block_pool.h")]
        program = [f for f in frames if "libsanitizer" not in f[1] and "asan_" not in f[1]]
        where = (mine or program or frames or [("?", "?", "?")])[0]
        canary = bool(program) and program[0][0].endswith("leak_canary") and block.startswith("Direct")
        found.append((size, f"{where[1].rsplit('/', 1)[-1]}:{where[2]} (in {where[0]})", canary))
    return found


def _run(binary, ops: list[str], canary: int, what: str, symbolize: bool) -> subprocess.CompletedProcess:
    try:
        return cpp_build.run_binary(binary, [str(canary), *ops], symbolize=symbolize)
    except subprocess.TimeoutExpired:
        _fail(f"block_pool_test ({what}) ran past 60 s")


# After the script: the bytes still on the heap once every pool is destroyed (the model's 0), then END.
_TAIL = ["0", "END"]


def _as_required(proc: subprocess.CompletedProcess, want: list[str], canary: int) -> bool:
    """Every line the model's, nothing left on the heap, then END, no memory error, and LeakSanitizer reporting exactly the canary."""
    return (proc.stdout.splitlines()[:len(want) + 2] == want + _TAIL and proc.returncode == 87
            and "ERROR: AddressSanitizer" not in proc.stderr and "Suppressions used" not in proc.stderr
            and [leak[0] for leak in _leaks(proc.stderr)] == [canary]
            and f"SUMMARY: AddressSanitizer: {canary} byte(s) leaked in 1 allocation(s)." in proc.stderr)


def _run_script(binary, ops: list[str], canary: int, what: str) -> None:
    """Run one script; fail at the first line that differs from the model, a memory error, any leak but the
    canary, or a run that did not reach the end with the leak check. Run without symbolizing first (the
    canary's report would cost ~0.7 s to symbolize); a run that is not as required runs again with file:line
    in its reports, for the message."""
    want = expected(ops)
    if _as_required(_run(binary, ops, canary, what, symbolize=False), want, canary):
        return
    proc = _run(binary, ops, canary, what, symbolize=True)
    out = proc.stdout + "\n" + proc.stderr
    got = proc.stdout.splitlines()
    for i, (op, w, g) in enumerate(zip(ops, want, got)):
        if w != g:
            shown = " ".join(ops[max(0, i - 12):i])
            if op.startswith("M") and g == "kept":
                _fail(f"{what}: {_describe(op)} did not release the target's old storage (the heap did not shrink "
                      f"by its num_blocks() * block_bytes() bytes; operation {i + 1} of the script; the operations "
                      f"before it: {'... ' if i > 12 else ''}{shown or 'none'})")
            _fail(f"{what}: {_describe(op)} gave {g!r}, expected {w!r} (operation {i + 1} of the script; the "
                  f"operations before it: {'... ' if i > 12 else ''}{shown or 'none'})")
    if "ERROR: AddressSanitizer" in out:
        _fail(f"{what}: {cpp_build.sanitizer_summary(out, 'block_pool.h')}")
    ended = got[len(ops) + 1:len(ops) + 2] == ["END"]
    if ended and got[len(ops)] != "0":
        _fail(f"{what}: {got[len(ops)]} byte(s) allocated while the script ran were still on the heap after every "
              f"pool was destroyed (a pool's storage must be released exactly once, when the pool that owns it "
              f"dies: kept in a global, it is never freed but LeakSanitizer does not call it a leak)")
    if got[:len(ops) + 2] != want + _TAIL:
        stop = len(got[:len(ops)])
        _fail(f"{what}: the test binary stopped after {stop} of {len(ops)} operations "
              f"(exit status {proc.returncode}): {out.strip()[-300:]}")
    leaks = _leaks(proc.stderr)
    mine = [leak for leak in leaks if not leak[2]]
    if mine:
        size, where, _ = mine[0]
        _fail(f"{what}: LeakSanitizer: {size} byte(s) leaked, allocated at {where} (every pool's storage must be "
              f"released exactly once)")
    summary = f"SUMMARY: AddressSanitizer: {canary} byte(s) leaked in 1 allocation(s)."
    only_the_canary = len(leaks) == 1 and leaks[0][0] == canary
    if not only_the_canary or summary not in proc.stderr or "Suppressions used" in proc.stderr \
            or proc.returncode != 87:
        _fail(f"{what}: the test binary did not end with the leak check the grader requires (exit status "
              f"{proc.returncode}; LeakSanitizer must report only the grader's own {canary}-byte leak): was the "
              f"process ended early, or the leak check switched off?")


@pytest.mark.parametrize("case", CASES)
def test_block_pool(case):
    _require_honest_macros()
    if case in PROBES:
        error = build.probe(case, PROBES[case])
        if error is not None:
            reason = re.search(r'static assertion failed: (.*)', error)
            _fail(f"{case}: {reason.group(1).strip() if reason else error}")
        return
    binary = build.asan_tests()
    for i in range(SCRIPTS_PER_CASE):
        rng = random.Random(kit.seeded(f"block_pool:{case}:{i}"))
        script = _Script(rng)
        SCRIPTS[case](script)
        _run_script(binary, script.ops, rng.randint(1000, 60000), f"block_pool_test {case} (script {i + 1})")


def _random_script(rng) -> list[str]:
    """A random run: allocations, frees (some double, some out of range), writes and reads, moves."""
    num_blocks, block_bytes = rng.randint(3, 12), rng.choice([8, 24, 40, 64])
    ops, written = [f"P{num_blocks}:{block_bytes}"], []
    for _ in range(rng.randint(40, 80)):
        roll = rng.random()
        block = rng.randint(-2, num_blocks + 1)
        if roll < 0.3:
            ops.append("a")
        elif roll < 0.5:
            ops.append(f"f{block}")
        elif roll < 0.6:
            ops.append("n")
        elif roll < 0.8:
            ops.append(f"w{block}:{rng.randint(1, 255)}")
            written.append(ops[-1])
        elif roll < 0.98 and written:
            ops.append("r" + rng.choice(written)[1:])  # the value last written there, or an older one
        else:
            moved = len([op for op in ops if op == "m" or op.startswith("P")])
            ops += ["m", "N", "n", f"s{moved}"]  # the source reports itself empty, then work goes on in the new one
    return ops


def test_block_pool_script():
    """The pool driven by random scripts from this grade's secret seed, every
    operation mixed with every other; the grader's model decides."""
    _require_honest_macros()
    binary = build.asan_tests()
    rng = random.Random(kit.seeded("block_pool_script"))
    for i in range(5):
        _run_script(binary, _random_script(rng), rng.randint(1000, 60000), f"block_pool_test random script {i + 1}")


def test_no_raw_new_or_delete():
    """"No `new`/`delete` in your code": the storage is owned by a
    std::unique_ptr, so no path can leak it or free it twice. ASan only sees
    the paths the cases run; this reads the source (`= delete` is allowed)."""
    # Blank out what is not code but keep its newlines, so line numbers stay right.
    code = _NOT_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), (kit.workspace() / "block_pool.h").read_text())
    code = re.sub(r"=\s*delete\b", " ", code)
    found = [(code.count("\n", 0, m.start()) + 1, m.group(0)) for m in re.finditer(r"\b(?:new|delete)\b", code)]
    if found:
        where = ", ".join(f"`{word}` on line {line}" for line, word in found[:3])
        _fail(f"block_pool.h uses {where} (README.md says no new/delete: own the storage with "
              f"std::unique_ptr<std::byte[]> and std::make_unique)")
