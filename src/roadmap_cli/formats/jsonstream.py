"""Writing big JSON documents as their rows are read, in constant memory.

`json.dumps` needs the whole document in memory, and with `indent` it falls
back to the pure-Python encoder (issue 13: `paper list --all --json` at
100,000 papers was 8x the start-up floor). Here a document is written piece
by piece: any list in it may be a `Rows` (an iterator), which is encoded a
batch at a time by the C encoder (`json.dumps` of BATCH rows, brackets
trimmed) and written straight out; an `EncodedRows` holds rows that are
already compact JSON text (SQLite's json_object() can make them in C).

The bytes are exactly those of `json.dumps(doc, ensure_ascii=False, ...)`
with every `Rows` replaced by the list it yields: compact is
`separators=(",", ":")` (one line, what `jq -c` prints), `indent=2` is the
layout `output.emit` prints. `tests/test_research_stream.py` checks both. Uses:

- `write_envelope`: the versioned `{"roadmap": 1, "command", "data"}` of
  `--json` output (`output.envelope`), e.g. `paper list --all --json`;
- `write_json`: any document, e.g. `roadmap export`, whose `portable.archive.dumps`
  is `json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True)`: the
  same bytes come from `write_json(out, data, indent=2, sort_keys=True)` with
  each table's list given as `Rows(iterator of row dicts)`.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import Any, Callable, Iterable, Optional, TextIO

BATCH = 1_000  # rows encoded per json.dumps call: enough to amortise the call, small enough to stay lean


class Rows:
    """A list that is produced while it is written: an iterator of plain JSON
    values (dicts, lists, str, int, float, bool, None; no `Rows` inside)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = iter(items)


class EncodedRows(Rows):
    """Rows that are already compact JSON texts (only for compact output)."""


def _has_rows(value: Any) -> bool:
    if isinstance(value, Rows):
        return True
    if isinstance(value, dict):
        return any(_has_rows(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_rows(v) for v in value)
    return False


class _Writer:
    def __init__(self, write: Callable[[str], Any], indent: Optional[int], sort_keys: bool) -> None:
        self.write, self.indent, self.sort_keys = write, indent, sort_keys
        # compact: json.dumps(separators=(",", ":")); indented: its defaults (",", ": ")
        self.key_sep = ":" if indent is None else ": "

    def newline(self, level: int) -> str:
        return "" if self.indent is None else "\n" + " " * (self.indent * level)

    def dumps(self, value: Any, level: int) -> str:
        text = json.dumps(
            value, ensure_ascii=False, indent=self.indent, sort_keys=self.sort_keys, separators=(",", self.key_sep)
        )
        # json.dumps indents from column 0; nested here, every line moves right.
        # (A newline inside a string is escaped as \n, so each "\n" is layout.)
        return text if self.indent is None or level == 0 else text.replace("\n", self.newline(level))

    def value(self, value: Any, level: int) -> None:
        if isinstance(value, Rows):
            self.rows(value, level)
        elif isinstance(value, dict) and _has_rows(value):
            self.object(value, level)
        elif isinstance(value, list) and _has_rows(value):
            self.small_list(value, level)
        else:
            self.write(self.dumps(value, level))

    def object(self, value: dict, level: int) -> None:
        if not value:
            self.write("{}")
            return
        keys = sorted(value) if self.sort_keys else list(value)
        for n, key in enumerate(keys):
            self.write(
                ("{" if n == 0 else ",")
                + self.newline(level + 1)
                + json.dumps(str(key), ensure_ascii=False)
                + self.key_sep
            )
            self.value(value[key], level + 1)
        self.write(self.newline(level) + "}")

    def small_list(self, value: list, level: int) -> None:
        """A small list that holds a `Rows` somewhere: item by item."""
        for n, item in enumerate(value):
            self.write(("[" if n == 0 else ",") + self.newline(level + 1))
            self.value(item, level + 1)
        self.write(self.newline(level) + "]")

    def rows(self, rows: Rows, level: int) -> None:
        encoded = isinstance(rows, EncodedRows)
        if encoded and self.indent is not None:
            raise ValueError("EncodedRows are compact JSON; they cannot be indented")
        first = True
        while True:
            batch = list(islice(rows.items, BATCH))
            if not batch:
                break
            if encoded:
                body = ",".join(batch)
            else:
                text = self.dumps(batch, level)
                # `[a,b]` or `[\n  a,\n  b\n]`: keep what lies between the brackets
                body = text[1:-1] if self.indent is None else text[1 : -(len(self.newline(level)) + 1)]
            self.write(("[" if first else ",") + body)
            first = False
        self.write("[]" if first else self.newline(level) + "]")


def write_json(out: TextIO, doc: Any, *, indent: Optional[int] = None, sort_keys: bool = False) -> None:
    """Write `doc` (which may hold `Rows`) and a final newline to `out`."""
    writer = _Writer(out.write, indent, sort_keys)
    writer.value(doc, 0)
    out.write("\n")


def write_envelope(out: TextIO, command: str, data: dict, *, pretty: bool = False) -> None:
    """The `--json` envelope of `output.emit`, streamed: `data` may hold `Rows`.

    Compact by default (one line: big lists are for programs); `pretty`
    gives the indented form `emit` prints, byte for byte.
    """
    from roadmap_cli.formats.output import JSON_SCHEMA_VERSION

    write_json(out, {"roadmap": JSON_SCHEMA_VERSION, "command": command, "data": data}, indent=2 if pretty else None)
