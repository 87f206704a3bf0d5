"""Benchmark: `paper import FILE.bib` vs bibtexparser 2 parsing the same file.

Issue 13 asks for the whole import (parse, LaTeX -> text, validation,
duplicate check against the log, insert, commit) to cost at most 1.5x what
bibtexparser 2 takes just to *parse* the file (`bibtexparser.parse_string`,
its default middleware), at 5,000 and 50,000 entries, with the cost linear
in the number of entries. The bench generates the files itself (realistic
entries: nested braces, accents, `@string` macros with `#`, quoted values,
arXiv eprints, DOIs, URLs, abstracts on a third of them) and, for each size,
alternates in one process:

  bibtexparser   bibtexparser.parse_string(text)
  our parse      roadmap_cli.research.bibtex.parse_bibtex(text)
  our import     roadmap_cli.research.papers_transfer.import_bibtex(...) into a fresh store

timing CPU seconds (this box is shared; CPU time is what the code costs, wall
time is printed too). It prints medians, the ratios to bibtexparser, and the
cost per entry relative to the smallest size (linear: ~1.0), and exits 1 when
an import at 5,000 or 50,000 entries is over 1.5x.

    python bench/bench_bibtex.py [--runs 3] [--sizes 1000,5000,50000]

bibtexparser is a dev dependency (`pip install -e ".[dev]"`); the import
itself does not use it: our reader was measured faster (the "our parse" line).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

BUDGET = 1.5
BUDGETED_SIZES = (5_000, 50_000)
TOPICS = ["attention", "kernels", "serving", "kv-cache", "moe", "quantization", "scheduling", "triton"]
SURNAMES = [
    'M{\\"u}ller',
    "Dao",
    "Kwon",
    "Vaswani",
    "Shazeer",
    "Fu",
    "R{\\'e}",
    "Zhang",
    "{\\O}stergaard",
    "Stra{\\ss}er",
]
ABSTRACT = (
    "We study how {GPU} memory traffic limits attention at long context. "
    "Tiling the softmax over blocks of keys keeps the working set in {SRAM}; "
    "the result is exact, uses $O(N)$ memory and is 2--4$\\times$ faster. "
) * 3


def make_bib(n: int, seed: int = 7) -> str:
    """`n` entries in the styles real .bib files mix (three entry kinds in turn)."""
    rng = random.Random(seed)
    out = [
        '@string{neurips = "Advances in Neural Information Processing Systems"}',
        "@string{icml = {International Conference on Machine Learning}}",
        "",
    ]
    for i in range(n):
        topic = rng.choice(TOPICS)
        authors = " and ".join(f"{rng.choice(SURNAMES)}, {chr(65 + k)}." for k in range(1 + i % 4))
        kind = i % 3
        lines = [
            f"@{('article', 'inproceedings', 'misc')[kind]}{{key{i},",
            f'  title = {{{{{topic.title()}}}-{i}: Fast {{\\"u}}ber Attention for {{LLM}} Serving, part {i}}},',
            f"  author = {{{authors}}},",
            f"  year = {2015 + i % 10},",
        ]
        if kind == 0:
            lines += [
                f"  doi = {{10.1145/{3600000 + i}.{i}}},",
                "  journal = {Journal of Systems},",
                f"  pages = {{{i}--{i + 12}}},",
            ]
        elif kind == 1:
            lines += [
                '  booktitle = neurips # " 30",',
                "  month = dec,",
                f'  url = "https://example.org/papers/{i}.pdf",',
            ]
        else:
            lines += [
                f"  eprint = {{{15 + i % 10:02d}{1 + i % 12:02d}.{i:05d}}},",
                "  archivePrefix = {arXiv},",
                "  primaryClass = {cs.LG},",
            ]
        if i % 3 == 0:
            lines.append(f"  abstract = {{{ABSTRACT}}},")
        lines += [f"  keywords = {{{topic}; llm}}", "}", ""]
        out.append("\n".join(lines))
    return "\n".join(out)


def cpu_and_wall(fn) -> tuple[float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="1000,5000,50000")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import bibtexparser
    except ImportError:
        sys.exit('bibtexparser 2 is needed for the baseline: pip install -e ".[dev]"')
    from roadmap_cli.research.bibtex import parse_bibtex
    from roadmap_cli.research.papers_transfer import import_bibtex
    from roadmap_cli.store import open_store

    # Warm up: the first import pays for loading the table classes and SQLAlchemy's statement caches.
    warm = open_store(Path(tempfile.mkdtemp(prefix="roadmap-bench-bib-")))
    import_bibtex(warm, make_bib(20), source="warm.bib", today=date.today())
    warm.engine.dispose()
    print(f"bibtexparser {bibtexparser.__version__}; CPU seconds, median of {args.runs} alternating runs")
    sizes = [int(s) for s in args.sizes.split(",")]
    per_entry_base: dict[str, float] = {}
    over = False
    for n in sizes:
        text = make_bib(n)
        checked = parse_bibtex(text)[0]
        assert len(checked) == n and len(bibtexparser.parse_string(text).entries) == n
        times: dict[str, list[tuple[float, float]]] = {"bibtexparser": [], "our parse": [], "our import": []}
        for _ in range(args.runs):
            store = open_store(Path(tempfile.mkdtemp(prefix="roadmap-bench-bib-")))
            times["bibtexparser"].append(cpu_and_wall(lambda: bibtexparser.parse_string(text)))
            times["our parse"].append(cpu_and_wall(lambda: parse_bibtex(text, source="bench.bib")))
            result = {}
            times["our import"].append(
                cpu_and_wall(lambda: result.update(import_bibtex(store, text, source="bench.bib", today=date.today())))
            )
            assert len(result["imported"]) == n and not result["problems"], result["problems"][:3]
            store.engine.dispose()
        base = statistics.median(cpu for cpu, _ in times["bibtexparser"])
        print(f"\n{n:,} entries ({len(text) / 1e6:.1f} MB)")
        for name, samples in times.items():
            cpu = statistics.median(c for c, _ in samples)
            wall = statistics.median(w for _, w in samples)
            per_entry = cpu / n
            per_entry_base.setdefault(name, per_entry)
            verdict = ""
            if name == "our import" and n in BUDGETED_SIZES:
                ok = cpu / base <= BUDGET
                over |= not ok
                verdict = f"  (budget {BUDGET}x) -> {'OK' if ok else 'OVER BUDGET'}"
            print(
                f"  {name:<13} {cpu:7.3f} CPU-s  (wall {wall:7.3f} s)  ratio {cpu / base:5.2f}"
                f"  per entry {per_entry * 1e6:6.1f} us = {per_entry / per_entry_base[name]:.2f}x the {sizes[0]:,}-entry cost"
                f"{verdict}"
            )
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
