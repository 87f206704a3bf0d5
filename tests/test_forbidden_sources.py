"""What no learner process may open, in a wheel install too: every packaged copy's references, tests and kernels,
never a lab's data/ (newcomer walk, issue 36: a wheel's labs root is `roadmap_cli/_data/labs`, and forbidding the
whole `_data` voided every minigpt grade, whose learner code reads the lab's corpus there)."""

from __future__ import annotations

from pathlib import Path


def test_a_packaged_copy_hides_references_and_tests_but_not_lab_data(tmp_path: Path, monkeypatch) -> None:
    from roadmap_cli.grading import isolation
    from roadmap_cli.grading_kit import oswall
    from roadmap_cli.labs.spec import find_lab

    data = tmp_path / "site-packages" / "roadmap_cli" / "_data"
    for sub in ("labs/minigpt/solution", "labs/minigpt/tests", "labs/minigpt/data", "kernels/triton"):
        (data / sub).mkdir(parents=True)
    monkeypatch.setattr(oswall, "runtime_hides", lambda: [str(data)])
    forbidden = isolation.forbidden_sources(find_lab("minigpt"))
    for sub in ("labs/minigpt/solution", "labs/minigpt/tests", "kernels"):
        assert str(data / sub) in forbidden, sub
    corpus = str(data / "labs" / "minigpt" / "data" / "shakespeare_small.txt")
    assert not any(corpus == f or corpus.startswith(f.rstrip("/") + "/") for f in forbidden)
