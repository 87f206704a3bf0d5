"""The report as Markdown or HTML (jinja2 templates in templates/), its charts
as SVG, and writing it all without overwriting anything unless asked.

Escaping is the default, not something a template must remember:
- HTML: jinja2 autoescape; charts are inserted as Markup because svg.py
  escapes every text it draws. A Content-Security-Policy forbids scripts
  and network loads in the file as a second line of defence.
- Markdown: every `{{ value }}` goes through `md_escape` (the environment's
  `finalize`), so a title like `<script>` or `*bold*` prints as typed;
  links are built by the `link` filter (http(s)/file URLs only, percent-encoded).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Optional

from roadmap_cli.errors import UserError
from roadmap_cli.reports import svg
from roadmap_cli.reports.gather import Report

TEMPLATES = Path(__file__).parent / "templates"
CHART_NAMES = ("burnup", "hours", "calendar", "grades", "loss")
_MD_SPECIAL = set("\\`*_[]<>#|!~&")


def md_escape(value) -> str:
    """Text for Markdown (GitHub flavour): special characters backslash-escaped,
    line breaks flattened (a value sits in a table cell or a list item)."""
    from markupsafe import Markup

    if value is None:
        return ""
    if isinstance(value, Markup):
        return str(value)
    text = " ".join(str(value).split())
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def _md_link(text, url: Optional[str]):
    from markupsafe import Markup

    if not url:
        return Markup(md_escape(text))
    encoded = "".join(f"%{ord(c):02X}" if c in "()<> \"'" else c for c in url)
    return Markup(f"[{md_escape(text)}]({encoded})")


def _env(kind: str, cache_dir: Optional[Path] = None):
    """The jinja2 environment for `kind`; with `cache_dir` compiled templates are
    kept there (compiling both templates costs about as much as the queries)."""
    import jinja2

    options = dict(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(cache_dir),
    )
    if kind == "html":
        env = jinja2.Environment(autoescape=True, **options)
    else:
        env = jinja2.Environment(autoescape=False, finalize=md_escape, **options)
        env.filters["link"] = _md_link
    env.filters["num"] = lambda v: "" if v is None else f"{v:g}"
    env.filters["pct"] = lambda a, b: f"{100 * a / b:.0f}%" if b else "–"
    return env


def _bytecode_cache(cache_dir: Optional[Path]):
    if cache_dir is None:
        return None
    import jinja2

    folder = cache_dir / "templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile every time
    return jinja2.FileSystemBytecodeCache(str(folder))


def _day(x: float) -> str:
    return date.fromordinal(int(round(x))).isoformat()


def chart_svgs(report: Report) -> dict[str, str]:
    """Each chart of the report as an SVG document, by name."""
    c = report.charts
    burn = c.burnup
    days = [date.fromisoformat(d).toordinal() for d in burn.days]
    series = [svg.SvgSeries("done", list(zip(days, burn.done)), svg.PALETTE[0])]
    if burn.start:
        series.append(svg.SvgSeries("plan", list(zip(days, burn.planned)), svg.PALETTE[1], dashed=True))
    charts = {
        "burnup": svg.line_chart(
            f"Burn-up: checkpoints done vs the plan (of {burn.total})",
            series,
            x_label="date",
            y_label="checkpoints done",
            x_format=_day,
            y_min=0,
            y_integer=True,
        ),
        "hours": svg.bar_chart(
            "Study hours per week",
            [(w.week, w.hours) for w in c.hours.weeks],
            unit="h",
            y_label="hours",
            target=(c.hours.target_min, c.hours.target_max) if c.hours.target_min is not None else None,
        ),
        "calendar": svg.calendar(f"Cadence calendar {report.label}", report.calendar),
        "grades": svg.line_chart(
            "Grade score per attempt",
            [
                svg.SvgSeries(g.lab_id, g.points, svg.PALETTE[(i + 2) % len(svg.PALETTE)])
                for i, g in enumerate(c.grades)
            ],
            x_label="whole attempt number (per lab)",
            y_label="score (% of gradable points)",
            y_min=0,
            empty="no whole grade attempt yet",
        ),
        "loss": svg.line_chart(
            "MiniGPT loss",
            [svg.SvgSeries("train", c.loss.train, svg.PALETTE[0]), svg.SvgSeries("val", c.loss.val, svg.PALETTE[2])],
            x_label="iteration",
            y_label="cross-entropy loss",
            empty=c.loss.problem or "no loss history yet",
        ),
    }
    return {name: charts[name] for name in CHART_NAMES}


def render_html(report: Report, cache_dir: Optional[Path] = None) -> str:
    from markupsafe import Markup

    charts = {name: Markup(text) for name, text in chart_svgs(report).items()}
    return _env("html", cache_dir).get_template("report.html.j2").render(r=report, charts=charts)


def render_markdown(
    report: Report, chart_files: Optional[dict[str, str]] = None, cache_dir: Optional[Path] = None
) -> str:
    """Markdown; `chart_files` maps chart names to the SVG files beside it
    (relative names), None when printing to stdout (no charts then)."""
    return _env("md", cache_dir).get_template("report.md.j2").render(r=report, chart_files=chart_files)


@dataclass
class Written:
    path: str
    format: str
    charts: list[str]


def chart_paths(out: Path) -> dict[str, Path]:
    """report-2026-11.md -> report-2026-11-burnup.svg, ... beside it."""
    return {name: out.with_name(f"{out.stem}-{name}.svg") for name in CHART_NAMES}


def write_report(report: Report, fmt: str, out: Path, *, force: bool, cache_dir: Optional[Path] = None) -> Written:
    """Write the report (and, for Markdown, its SVG charts beside it).

    Every target is checked before anything is written: without `force` an
    existing file is refused and nothing changes.
    """
    if out.is_dir():
        raise UserError(f"{out} is a folder: give a file name, e.g. {out / f'report-{report.label}.{fmt}'}")
    if not out.parent.is_dir():
        raise UserError(f"folder {out.parent} does not exist")
    svgs = chart_paths(out) if fmt == "md" else {}
    targets = [out, *svgs.values()]
    existing = [str(p) for p in targets if p.exists() or p.is_symlink()]
    if existing and not force:
        raise UserError(
            f"{existing[0]} exists: not overwritten (--force to replace"
            + (f"; {len(existing)} files would be)" if len(existing) > 1 else ")")
        )
    if fmt == "md":
        charts = chart_svgs(report)
        text = render_markdown(report, {name: path.name for name, path in svgs.items()}, cache_dir)
        for name, path in svgs.items():
            _write(path, charts[name])
    else:
        text = render_html(report, cache_dir)
    _write(out, text)
    return Written(str(out), fmt, [str(p) for p in svgs.values()])


def _write(path: Path, text: str) -> None:
    """Through a temporary file and a rename: never half a file, and a symlink
    at the target is replaced, not followed."""
    import os

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
