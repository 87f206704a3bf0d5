"""Progress charts (`roadmap stats`) and the monthly/quarterly report (`roadmap report`).

    series.py        chart data from the store: burn-up vs the plan, hours per week,
                     grade score per attempt, the MiniGPT loss curve (plain dataclasses)
    loss_history.py  the MiniGPT workspace checkpoint's loss history, read without torch
    gather.py        everything one report period holds (checkpoints, labs, papers, ...)
    stats.py         `roadmap stats`: the charts over the last weeks, as text lines
    textchart.py     charts as plain text lines for the terminal (fits a given width)
    svg.py           the same charts as small, escaped, self-contained SVG
    render.py        Markdown and HTML from jinja2 templates (templates/), and writing
                     the files (never over an existing one without --force)

Nothing here imports torch: the loss history is unpickled with stubs.
"""
