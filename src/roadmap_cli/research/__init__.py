"""The research log: papers (arXiv/DOI ids, BibTeX), the other cadence items
(reproductions, experiments, benchmarks, reports, blog posts, open-source
projects, workshop papers, study hours), and the cadence itself: targets per
ISO week / month / quarter, streaks and a 52-week calendar.

Modules: ids (parsing), numbers (each learner's own paper and entry numbers,
the ids every command shows), periods (calendar maths, streaks), papers (log/edit),
papers_query (list/suggest, and the streamed read behind `paper list --json`),
bibtex (reader, bounded macros), latex (LaTeX <-> text), papers_transfer
(paper import/export), bulk (one-query duplicate index, batched inserts), entries
(other items), cadence (targets vs done), calendar (rendering data). Their rich
output for people is cli/research_render.py. Streaming JSON itself is `roadmap_cli.formats.jsonstream`.

This package's top level stays import-light: `roadmap status` calls
`cadence_summary` and must not pay for anything else.
"""

from __future__ import annotations

from datetime import date


def cadence_summary(store, curriculum, today: date) -> dict:
    """This ISO week's cadence for `roadmap status`.

    Returns {"week": "2026-W49", "start", "end",
             "kinds": {kind: {"done", "target"}} for every weekly target,
             "hours": {"done", "min", "max"}, "met": bool | None,
             "streak": current weekly streak (int)}.
    Two GROUP BY queries over the last weeks only (widened while the
    streak reaches back further); no rows are loaded one by one.
    """
    from roadmap_cli.research.cadence import cadence_summary as summary

    return summary(store, curriculum, today)


__all__ = ["cadence_summary"]
