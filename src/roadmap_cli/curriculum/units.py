"""Units of numeric quiz answers: what a learner may type, and how it converts.

The rule (README, "Quizzes and review"):
- A number with no unit is read in the question's unit.
- A unit of the same quantity is converted: for a question in bytes,
  "128 KiB", "131072 B" and "0.125 MiB" are the same answer.
- Decimal and binary prefixes differ: KB/MB/GB/TB are 1000^n bytes, KiB/MiB/
  GiB/TiB are 1024^n. "128 KB" is 2.3% off 128 KiB, outside the usual 1%
  tolerance, and the feedback says which prefix is which.
- A unit of another quantity ("ms" for a size) is a miss that says so.
- A question whose unit is not in the table below ("warps", "tokens", "x",
  "%") is a label: the answer may repeat the label or leave it out.
- A unit that cannot be read is refused, never scored: the quiz asks again
  (with --answers FILE the whole file is refused). Units are matched
  case-sensitively, and "cannot be read" means:
  * ambiguous by case: a byte unit written with a lower-case b or an odd-case
    prefix (kb, Kb, gb, Gb, mB, gib, KIB...) could be bits or bytes, decimal or
    binary; the message names the unit typed and the two it may have meant.
    Only "kB" (SI's lower-case k) is read, as KB;
  * other case variants of a known unit ("MS", "flops") and unknown words
    ("furlongs"; "threads" for a question counted in warps).
"""

from __future__ import annotations

import re
from typing import Optional

_BYTE_PREFIXES = {
    "": 1,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_SI = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}

# unit -> (quantity, factor to the quantity's base unit)
UNITS: dict[str, tuple[str, float]] = {}
for _p, _f in _BYTE_PREFIXES.items():
    UNITS[f"{_p}B"] = ("size in bytes", _f)
    UNITS[f"{_p}B/s"] = ("bandwidth", _f)
for _p, _f in _SI.items():
    UNITS[f"{_p}FLOP"] = ("floating-point operations", _f)
    UNITS[f"{_p}FLOPs"] = ("floating-point operations", _f)
    UNITS[f"{_p}FLOP/s"] = ("compute throughput", _f)
    UNITS[f"{_p}FLOPS"] = ("compute throughput", _f)
    UNITS[f"{_p}Hz"] = ("frequency", _f)
UNITS.update(
    {
        "ns": ("time", 1e-9),
        "us": ("time", 1e-6),
        "µs": ("time", 1e-6),
        "μs": ("time", 1e-6),
        "ms": ("time", 1e-3),
        "s": ("time", 1.0),
        "min": ("time", 60.0),
        "h": ("time", 3600.0),
    }
)
# SI writes kilo with a lower-case k: "kB" is read as KB (1000 bytes), never guessed from "kb".
UNITS.update(
    {
        "kB": UNITS["KB"],
        "kB/s": UNITS["KB/s"],
        "kHz": UNITS["KHz"],
        "kFLOP": UNITS["KFLOP"],
        "kFLOPs": UNITS["KFLOPs"],
        "kFLOP/s": UNITS["KFLOP/s"],
        "kFLOPS": UNITS["KFLOPS"],
    }
)
# A byte unit in any case: "gb", "Kb", "mB", "GIB" (b/B, then an optional /s).
_BYTEISH = re.compile(r"^([kmgtp])(i?)b(/s)?$", re.IGNORECASE)

LABEL_PATTERN = r"^[A-Za-z%][A-Za-z0-9%/ _-]{0,23}$|^$"
# a trailing unit: starts with a letter (never "e6" of "1e6"), µ or %
_ANSWER = re.compile(r"^\s*(?P<number>.*?)\s*(?P<unit>(?:(?![eE][-+]?\d)[A-Za-zµμ%×][A-Za-zµμ%/0-9]*)?)\s*$")


class UnitProblem(ValueError):
    """An answer's unit of another quantity than the question's: a miss."""


class UnreadableUnit(UnitProblem):
    """A unit that cannot be read (unknown, or ambiguous by case): the answer
    is refused and asked again, never scored."""


def unreadable(unit: str, to_unit: str) -> UnreadableUnit:
    """Why `unit` cannot be read, naming it (and what it may have meant)."""
    byteish = _BYTEISH.match(unit)
    if byteish:
        prefix, rate = byteish.group(1).upper(), byteish.group(3) or ""
        power = "KMGTP".index(prefix) + 1
        if byteish.group(2):  # "gib", "KIB": binary is clear, the b is not
            return UnreadableUnit(
                f"{unit!r} is not a unit the quiz reads (units are case-sensitive): "
                f"write {prefix}iB{rate} for {1024**power:,} bytes{rate}"
            )
        return UnreadableUnit(
            f"{unit!r} is ambiguous (bits or bytes? 1000- or 1024-based?): write "
            f"{prefix}B{rate} for {1000**power:,} bytes{rate} or "
            f"{prefix}iB{rate} for {1024**power:,}"
        )
    near = sorted(u for u in UNITS if u.lower() == unit.lower())
    if near:
        return UnreadableUnit(
            f"{unit!r} is not a unit the quiz reads (units are case-sensitive): did you mean {' or '.join(near)}?"
        )
    if to_unit not in UNITS:
        return UnreadableUnit(
            f"unknown unit {unit!r}: the answer is counted in {to_unit}; give a number, with or without {to_unit!r}"
        )
    return UnreadableUnit(f"unknown unit {unit!r}; the question asks for {to_unit}")


def is_known(unit: str) -> bool:
    return unit in UNITS


def valid_question_unit(unit: str) -> bool:
    """A question's unit must be a known unit or a short label."""
    return unit in UNITS or re.fullmatch(LABEL_PATTERN, unit) is not None


def split_answer(text: str) -> tuple[str, str]:
    """("2 * 64", "KiB") from "2 * 64 KiB": the number part and a trailing unit."""
    text = text.strip().replace(",", "").replace("_", "")
    match = _ANSWER.match(text)
    if match is None:  # pragma: no cover - the pattern matches any string
        return text, ""
    return match.group("number"), match.group("unit")


def convert(value: float, unit: str, to_unit: str) -> float:
    """`value` in `unit` expressed in `to_unit` (the question's unit).

    An empty `unit` means the question's. Raises UnitProblem when the two do
    not measure the same quantity, UnreadableUnit when `unit` cannot be read."""
    if not unit or unit == to_unit:
        return value
    if to_unit not in UNITS:  # a label unit: "32 warps" for a question in warps
        if unit.lower() == to_unit.lower() or (to_unit == "x" and unit in ("×", "X")):
            return value
        if unit in UNITS:
            raise UnitProblem(f"{unit!r} is a unit of {UNITS[unit][0]}, but the question counts {to_unit}")
        raise unreadable(unit, to_unit)
    if unit not in UNITS:
        raise unreadable(unit, to_unit)
    quantity, factor = UNITS[unit]
    want_quantity, want_factor = UNITS[to_unit]
    if quantity != want_quantity:
        raise UnitProblem(f"{unit!r} is a unit of {quantity}, but the question asks for a {want_quantity} ({to_unit})")
    return value * factor / want_factor


def prefix_hint(unit: str) -> Optional[str]:
    """A reminder when a decimal prefix was probably meant as binary, or the other way."""
    if unit in ("KB", "kB", "MB", "GB", "TB"):
        return f"{unit} is {1000 ** ('KMGT'.index(unit[0].upper()) + 1):,} bytes; {unit[0].upper()}iB is 1024-based"
    if unit in ("KiB", "MiB", "GiB", "TiB"):
        return f"{unit} is 1024-based; {unit[0]}B is 1000-based"
    return None
