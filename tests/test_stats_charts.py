"""`roadmap stats`: charts readable at 80 columns with labelled axes, `--json`
series, and the MiniGPT loss curve read from a real checkpoint without torch."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import zipfile
from datetime import date, timedelta
from pathlib import Path

from test_reports import previous_month, seed

from roadmap_cli.reports.textchart import TextSeries, bar_chart, line_chart


def test_stats_fit_80_columns_with_labelled_axes(run_cli, roadmap_home: Path):
    _, first, last = previous_month(date.today())
    seed(roadmap_home, first, last)
    result = run_cli("stats", "--width", "80")
    assert result.exit_code == 0, result
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = result.stdout
    for label in (
        "Burn-up",
        "checkpoints done",
        "date",
        "plan",
        "Study hours per week (target 10–15 h)",
        "ISO week / hours",
        "Grade score per attempt",
        "attempt number (per lab)",
        "score (% of gradable points)",
        "MiniGPT loss",
    ):
        assert label in text, label
    assert "flash-attention" in text  # the legend names the lab
    piped = run_cli("stats")  # not a terminal: 80 columns
    assert max(len(line) for line in piped.stdout.splitlines()) <= 80


def test_stats_json_gives_the_series(run_cli, roadmap_home: Path):
    _, first, last = previous_month(date.today())
    seed(roadmap_home, first, last)
    data = run_cli("stats", "--json", "--weeks", "20").json()["data"]
    assert set(data) == {"burnup", "hours", "grades", "loss", "part_attempts"}
    assert data["burnup"]["done"][-1] == 3 and data["burnup"]["total"] == 46
    assert len(data["burnup"]["days"]) == len(data["burnup"]["planned"]) == len(data["burnup"]["done"])
    assert len(data["hours"]["weeks"]) == 20 and data["hours"]["target_min"] == 10
    (fa,) = data["grades"]
    assert fa["lab_id"] == "flash-attention" and fa["points"] == [[1, 16.7], [2, 33.3], [3, 100.0]]
    assert data["loss"]["problem"].startswith("no minigpt workspace")


def test_text_charts_never_exceed_the_width():
    pts = [(i, (i * 7919) % 101 / 3) for i in range(500)]
    for width in (60, 80, 133):
        lines = line_chart(
            "t" * 200,
            [TextSeries("a" * 90, pts), TextSeries("b", pts[::-1], "·")],
            x_label="x" * 300,
            y_label="y" * 300,
            width=width,
            y_max=1e7,
        )
        assert max(len(line) for line in lines) <= width
        bars = bar_chart(
            "hours",
            [(f"2026-W{i:02d}", i * 3.5) for i in range(1, 40)],
            unit="h",
            width=width,
            target=(10, 15),
            axis_label="ISO week / hours",
        )
        assert max(len(line) for line in bars) <= width


def _checkpoint(path: Path, history: list, val_history: list) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    model = torch.nn.Linear(4, 4)
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": torch.optim.AdamW(model.parameters()).state_dict(),
            "iter_num": len(history),
            "model_config": {"n_layer": 1},
            "train_config": {"out_dir": "out"},
            "chars": list("ab"),
            "batch_rng": torch.Generator().get_state(),
            "history": history,
            "val_history": val_history,
        },
        path,
    )


def test_loss_curve_from_the_workspace_checkpoint_without_torch(run_cli, roadmap_home: Path, tmp_path: Path):
    from roadmap_cli.store import open_store

    workspace = tmp_path / "minigpt-ws"
    history = [{"iter": i, "loss": 4.2 - i / 100, "lr": 1e-3} for i in range(300)]
    val = [{"iter": i, "train": 4.0 - i / 100, "val": 4.1 - i / 120} for i in range(0, 301, 50)]
    _checkpoint(workspace / "out" / "ckpt.pt", history, val)
    roadmap_home.mkdir(parents=True)
    store = open_store(roadmap_home)
    with store.connection() as conn:
        conn.exec_driver_sql(
            "INSERT INTO lab_workspaces (lab_id, path, created_at, learner) VALUES (?, ?, ?, ?)",
            ("minigpt", str(workspace), "2026-01-01T00:00:00+00:00", store.learner),
        )
    store.engine.dispose()
    probe = (
        "import json, sys\nfrom roadmap_cli.reports.loss_history import read_checkpoint\n"
        f"h = read_checkpoint(__import__('pathlib').Path({str(workspace / 'out' / 'ckpt.pt')!r}))\n"
        "print(json.dumps({'train': h.train, 'val': h.val, 'problem': h.problem, "
        "'torch': 'torch' in sys.modules}))"
    )
    out = json.loads(
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120).stdout
    )
    assert out["torch"] is False and out["problem"] is None
    assert out["train"] == [[h["iter"], h["loss"]] for h in history]
    assert out["val"] == [[v["iter"], v["val"]] for v in val]
    result = run_cli("stats", "--width", "80")
    assert "MiniGPT loss" in result.stdout and "cross-entropy loss" in result.stdout and "iteration" in result.stdout
    assert str(workspace / "out" / "ckpt.pt")[:60] in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


class _Boom:
    def __reduce__(self):
        return (subprocess.call, (["touch", "/tmp/roadmap-pickle-ran"],))


def test_a_tampered_checkpoint_runs_nothing(tmp_path: Path):
    from roadmap_cli.reports.loss_history import read_checkpoint

    marker = Path("/tmp/roadmap-pickle-ran")
    marker.unlink(missing_ok=True)
    ckpt = tmp_path / "ckpt.pt"
    with zipfile.ZipFile(ckpt, "w") as archive:
        archive.writestr(
            "ckpt/data.pkl",
            pickle.dumps(
                {
                    "x": _Boom(),
                    "history": [
                        {"iter": 0, "loss": 1.0},
                        {"iter": 1, "loss": float("nan")},
                        {"iter": 2, "loss": float("inf")},
                        "junk",
                    ],
                }
            ),
        )
    history = read_checkpoint(ckpt)
    assert not marker.exists()
    assert history.train == [(0, 1.0)]  # NaN/inf (a diverged run) and junk rows are left out
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    assert "cannot read" in read_checkpoint(tmp_path / "junk.pt").problem


def test_loss_points_are_thinned(run_cli):
    from roadmap_cli.reports.loss_history import thin

    pts = [(i, 1.0 / (i + 1)) for i in range(5000)]
    out = thin(pts, 400)
    assert len(out) == 400 and out[0] == pts[0] and out[-1] == pts[-1]
    assert thin(pts[:10]) == pts[:10]


def test_burnup_without_start_date_has_no_plan(run_cli, roadmap_home: Path):
    run_cli("check", "s1-draw-transformer-block")
    data = run_cli("stats", "--json").json()["data"]["burnup"]
    assert data["start"] is None and data["planned"] == [None] * len(data["days"])
    assert data["done"][-1] == 1
    assert "--start-date" in run_cli("stats").stdout


def test_stats_and_report_import_no_torch(tmp_path: Path):
    from test_imports import PROBE

    last = date.today().replace(day=1) - timedelta(days=1)
    for args in (["stats"], ["report", "--month", f"{last.year}-{last.month:02d}"]):
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={"ROADMAP_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE")]
        assert line, proc.stderr[-2000:]
        probe = json.loads(line[-1][len("PROBE") :])
        assert probe["code"] in (0, None), proc.stderr[-2000:]
        heavy = [m for m in probe["heavy"] if m.split(".")[0] in ("torch", "triton", "numpy")]
        assert heavy == [], f"{args} imported {heavy[:10]}"


def test_bar_legend_states_how_the_weeks_stand_against_the_minimum():
    short = bar_chart("hours", [("2026-W49", 2.5)], unit="h", width=100, target=(10, 15))
    assert "minimum reached" not in "\n".join(short) and "✓" not in "\n".join(short)
    assert short[-1].strip() == "| target 10–15 h   2026-W49: 2.5 h, 7.5 h short of the minimum"
    mixed = bar_chart("hours", [("2026-W48", 11), ("2026-W49", 4)], unit="h", width=120, target=(10, 15))
    assert mixed[-1].strip() == "| target 10–15 h   ✓ = minimum reached   2026-W49: 4 h, 6 h short of the minimum"
    met = bar_chart("hours", [("2026-W49", 12)], unit="h", width=100, target=(10, 15))
    assert met[-1].strip().endswith("✓ = minimum reached   2026-W49: minimum reached")


def test_legends_wrap_instead_of_being_cut_at_the_chart_width():
    labs = [
        "minigpt",
        "autograd",
        "modern-llm",
        "paged-kv-cache",
        "cpp-extension",
        "cuda-matmul",
        "flash-attention",
        "graph-compiler",
        "serving-cluster",
    ]
    series = [TextSeries(lab, [(1, 10.0 * i), (2, 20.0)], marker="●·+x*o#@%"[i]) for i, lab in enumerate(labs)]
    lines = line_chart("scores", series, x_label="attempt", y_label="%", width=80)
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert all(f"{s.marker} {s.label}" in text for s in series)  # every lab named, none cut
    bars = bar_chart("hours", [("2026-W49", 2.5)], unit="h", width=60, target=(10, 15))
    assert all(len(line) <= 60 for line in bars) and "7.5 h short of the minimum" in "\n".join(bars)


def test_integer_counts_get_integer_ticks(run_cli, roadmap_home: Path):
    """The burn-up counts checkpoints: its axis reads whole numbers even where the plan line is fractional."""
    import re
    from datetime import date, timedelta

    from roadmap_cli.reports.textchart import TextSeries, line_chart

    lines = line_chart("t", [TextSeries("plan", [(0, 0.0), (10, 14.5)])], x_label="x", y_label="n", y_integer=True)
    assert lines[2].split()[0] == "15" and "14.5" not in "\n".join(lines)
    start = (date.today() - timedelta(weeks=12)).isoformat()
    assert run_cli("init", "--start-date", start).exit_code == 0
    out = run_cli("stats").stdout
    burnup = out[: out.index("Study hours")]
    ticks = re.findall(r"^\s*(\S+) [┤┼]", burnup, flags=re.M)
    assert ticks and all(t.isdigit() for t in ticks), ticks
