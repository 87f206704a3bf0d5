"""The shipped curriculum.yaml against the three seeds: nothing silently missing.

The seed strings below are copied from the seed documents (001: the 10-stage
roadmap; 000: the full-stack path; 002: the 28-month plan), so a checkpoint
that is dropped, reordered or reworded fails here.
"""

from __future__ import annotations

import re

import pytest

from roadmap_cli.curriculum import load_curriculum
from roadmap_cli.paths import default_curriculum_path

# Seed 001, section "Checkpoint" of each stage, in order.
SEED_CHECKPOINTS = {
    1: [
        "能向非 AI 从业者解释 Transformer",
        "能画出 Transformer Block",
        "能解释 Query / Key / Value",
        "能解释 Attention 的工作流程",
        "能解释为什么 Transformer 取代 RNN",
        "能看懂 Transformer 论文结构图",
    ],
    2: [
        "独立实现 Tokenizer",
        "独立实现 Self-Attention",
        "独立实现 Transformer Block",
        "独立实现 MiniGPT",
        "完成一次训练",
        "模型能够生成可读文本",
    ],
    3: [
        "能解释 loss.backward()",
        "能解释 Autograd 工作流程",
        "能看懂 nn.Linear 源码",
        "能看懂 nn.MultiHeadAttention 源码",
        "能追踪 Tensor 的生命周期",
    ],
    4: ["能解释 RoPE", "能解释 KV Cache", "能解释 GQA", "能解释 MoE", "能解释 Speculative Decoding"],
    5: [
        "看懂 vLLM 整体架构",
        "理解 Continuous Batching",
        "理解 PagedAttention",
        "理解 Prefix Cache",
        "能分析 TPS 下降原因",
        "能分析 TTFT 过高原因",
    ],
    6: ["能阅读现代 C++ 项目", "能阅读 vLLM C++ 扩展代码", "能阅读 TensorRT-LLM 部分源码"],
    7: ["理解 CUDA 编程模型", "实现 Vector Add", "实现 Matrix Multiply", "能编写简单 CUDA Kernel"],
    8: ["能解释 Warp", "能解释 Occupancy", "能解释 Shared Memory", "能分析 Kernel 性能瓶颈"],
    9: ["能解释 FlashAttention 核心思想", "能解释 IO Bottleneck", "能读懂 FlashAttention 论文"],
    10: ["能设计推理服务架构", "能分析线上性能问题", "能设计多 GPU 推理方案", "能设计生产级 LLM 平台"],
}
SEED_GOALS = {
    1: "彻底理解 Transformer 工作原理",
    2: "从零实现最小可运行 GPT",
    3: "理解框架内部机制",
    4: "理解 GPT 之后的重要演进",
    5: "读懂 vLLM 核心设计",
    6: "获得阅读推理框架源码的能力",
    7: "进入 GPU 编程领域",
    8: "理解 GPU 为什么快",
    9: "理解现代 Attention 优化技术",
    10: "成为 AI Infra / LLM Systems Engineer",
}
# The lab parts that prove build checkpoints (shared with the lab authors).
BUILD_PROOFS = {
    "s2-implement-tokenizer": {("minigpt", "tokenizer")},
    "s2-implement-self-attention": {("minigpt", "attention")},
    "s2-implement-transformer-block": {("minigpt", "model")},
    "s2-implement-minigpt": {("minigpt", "model")},
    "s2-complete-training-run": {("minigpt", "training")},
    "s2-generate-readable-text": {("minigpt", "generation")},
    "s3-explain-loss-backward": {("autograd", "tensor-engine")},
    "s3-explain-autograd-workflow": {("autograd", "scalar-engine")},
    "s3-read-nn-linear-source": {("autograd", "read-the-source")},
    "s3-read-nn-multiheadattention-source": {("autograd", "read-the-source")},
    "s3-trace-tensor-lifecycle": {("autograd", "storage-and-views")},
    "s4-explain-rope": {("modern-llm", "rope")},
    "s4-explain-kv-cache": {("modern-llm", "kv-cache")},
    "s4-explain-gqa": {("modern-llm", "gqa")},
    "s4-explain-moe": {("modern-llm", "moe")},
    "s4-explain-speculative-decoding": {("modern-llm", "speculative")},
    "s5-understand-continuous-batching": {("paged-kv-cache", "scheduler")},
    "s5-understand-pagedattention": {("paged-kv-cache", "paged-attention")},
    "s5-understand-prefix-cache": {("paged-kv-cache", "block-manager")},
    "s6-read-modern-cpp-projects": {
        ("cpp-extension", "raii"),
        ("cpp-extension", "templates"),
        ("cpp-extension", "torch-op"),
    },
    "s6-read-vllm-cpp-extensions": {("cpp-extension", "reading-vllm")},
    "s7-implement-vector-add": {("cuda-matmul", "vector-add"), ("cuda-matmul", "cuda-vector-add")},
    "s7-implement-matrix-multiply": {("cuda-matmul", "matmul")},
    "s7-write-simple-cuda-kernel": {("cuda-matmul", "cuda-matmul")},
    "s8-explain-warp": {("gpu-architecture", "divergence")},
    "s8-explain-occupancy": {("gpu-architecture", "occupancy")},
    "s8-explain-shared-memory": {("gpu-architecture", "bank-conflicts")},
    "s8-analyze-kernel-bottlenecks": {("gpu-architecture", "roofline")},
    "s9-explain-flashattention-core-idea": {("flash-attention", "tiled-torch")},
    "s9-explain-io-bottleneck": {("flash-attention", "io-analysis")},
    "s10-design-inference-service": {("llm-serving", "server"), ("llm-serving", "load-test")},
    "s10-analyze-production-performance": {("llm-serving", "load-test")},
    "s10-design-multi-gpu-inference": {("llm-serving", "tensor-parallel"), ("llm-serving", "capacity")},
    "s10-design-production-llm-platform": {
        ("llm-serving", p) for p in ("server", "load-test", "tensor-parallel", "quantization", "capacity")
    },
}
# Papers the seeds name (or that the brief requires), with their arXiv ids.
REQUIRED_ARXIV = {
    "1706.03762",
    "2205.14135",
    "2307.08691",
    "2407.08608",
    "2309.06180",
    "1909.08053",
    "1910.02054",
    "2210.17323",
    "2306.00978",
    "2211.10438",
    "2203.15556",
    "2211.17192",
    "2305.18290",
    "1707.06347",
    "2402.03300",
    "2104.09864",
    "2305.13245",
    "1911.02150",
    "2101.03961",
    "2312.07104",
}


@pytest.fixture(scope="module")
def cur():
    return load_curriculum(default_curriculum_path())


def test_counts_match_the_seeds(cur):
    assert cur.format_version == 1
    assert [s.number for s in cur.stages] == list(range(1, 11))
    assert len(cur.all_checkpoints()) == 46
    assert len(cur.milestones) == 3
    assert len(cur.levels) == 5
    assert [len(p.phases) for p in cur.plans] == [6, 4]


def test_every_seed_checkpoint_is_there_in_order(cur):
    for stage in cur.stages:
        assert [c.text.zh for c in stage.checkpoints] == SEED_CHECKPOINTS[stage.number], stage.id
        assert stage.goal.zh == SEED_GOALS[stage.number]


def test_checkpoint_ids_are_unique_kebab_case_and_prefixed_by_their_stage(cur):
    ids = [c.id for c in cur.all_checkpoints()]
    assert len(ids) == len(set(ids))
    for stage in cur.stages:
        for c in stage.checkpoints:
            assert re.fullmatch(rf"s{stage.number}(-[a-z0-9]+)+", c.id), c.id
            assert c.kind in ("explain", "build")


def test_build_checkpoints_are_exactly_the_lab_proved_ones(cur):
    builds = {c.id: {(r.lab, r.part) for r in c.proved_by} for c in cur.all_checkpoints() if c.kind == "build"}
    assert builds == BUILD_PROOFS
    assert all(not c.proved_by for c in cur.all_checkpoints() if c.kind == "explain")
    assert cur.checkpoint("s7-understand-cuda-programming-model").kind == "explain"
    assert cur.checkpoint("s9-read-flashattention-paper").kind == "explain"


def _texts(value):
    """Every Text inside a model, recursively."""
    from pydantic import BaseModel

    from roadmap_cli.curriculum import Text

    if isinstance(value, Text):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _texts(getattr(value, name))


def test_every_text_has_both_languages_and_seed_text_stays_chinese(cur):
    texts = list(_texts(cur))
    assert len(texts) > 400
    assert all(t.zh.strip() and t.en.strip() for t in texts)
    # English renderings are English: no CJK characters leak into `en`.
    assert not [t.en for t in texts if re.search(r"[\u4e00-\u9fff]", t.en)]
    assert cur.checkpoint("s1-draw-transformer-block").text.get("zh") == "能画出 Transformer Block"


def test_topics_and_terms_of_stage_1(cur):
    topics = {t.title.en: [x.en for x in t.terms] for t in cur.stage(1).topics}
    assert topics["Tokenization"] == ["Token", "Vocabulary", "BPE", "SentencePiece"]
    assert topics["Self-Attention"] == ["Query", "Key", "Value", "Attention Score", "Softmax"]
    assert len(topics) == 7
    assert "softmax(Q @ K.T)" in cur.stage(1).topics[2].formula
    assert [r.reading for r in cur.stage(1).resources] == [
        "build-llm-from-scratch",
        "illustrated-transformer",
        "attention-is-all-you-need",
    ]


def test_milestones_and_final_goal(cur):
    assert [m.stages for m in cur.milestones] == [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    assert [len(m.abilities) for m in cur.milestones] == [3, 3, 3]
    assert cur.milestone(2).note.zh == "这是 AI Infra 岗位的重要分水岭。"
    assert "LLM Systems Engineer" in cur.final_goal.zh


def test_planned_weeks_fill_the_first_year(cur):
    assert cur.total_planned_weeks == 52
    assert all(s.planned_weeks >= 1 for s in cur.stages)


def test_cadence_targets(cur):
    targets = {(t.period, t.kind): t.count for t in cur.cadence.targets}
    assert targets == {
        ("week", "paper"): 5,
        ("week", "reproduction"): 1,
        ("month", "experiment"): 1,
        ("month", "benchmark"): 1,
        ("month", "report"): 1,
        ("quarter", "oss"): 1,
        ("quarter", "blog"): 1,
        ("quarter", "workshop-paper"): 1,
    }
    assert (cur.cadence.weekly_hours.min, cur.cadence.weekly_hours.max) == (10, 15)
    assert cur.cadence_target("week", "paper").count == 5


def test_levels(cur):
    assert [lv.title.en for lv in cur.levels] == [
        "LLM User",
        "LLM Engineer",
        "LLM Infra Engineer",
        "Algorithm-System Engineer",
        "Foundation Model Researcher",
    ]


def test_seed_000_phases(cur):
    plan = cur.plan("fullstack-researcher")
    spans = [(p.start_month, p.end_month) for p in plan.phases]
    assert spans == [(0, 12), (12, 24), (24, 36), (36, 48), (48, 60), (None, None)]
    items = {i.en for p in plan.phases for s in p.sections for i in s.items}
    for name in (
        "CANN",
        "MindSpore",
        "Ascend Operator Development",
        "Supervised Fine-tuning",
        "PPO",
        "DPO",
        "IPO",
        "KTO",
        "GRPO",
        "GSPO",
        "DAPO",
        "Chinchilla Scaling Law",
        "ZeRO",
        "Tool Use",
        "Test Time Compute",
    ):
        assert name in items, name
    assert "全栈 AI Researcher" in plan.final_goal.zh
    assert plan.phases[0].stages == list(range(1, 11))


def test_seed_002_phases_fast_track_hours_prerequisites(cur):
    plan = cur.plan("infra-28-months")
    assert plan.total_months == 28
    assert [(p.start_month, p.end_month) for p in plan.phases] == [(1, 6), (7, 14), (15, 22), (23, 28)]
    assert plan.fast_track.months == 6
    assert (plan.weekly_hours.min, plan.weekly_hours.max) == (10, 15)
    assert len(plan.prerequisites) == 3
    assert all(p.project is not None for p in plan.phases)


def test_reading_list_ids_are_well_formed_unique_and_tied_to_stages(cur):
    arxiv = [r.arxiv for r in cur.reading_list if r.arxiv]
    assert all(re.fullmatch(r"\d{4}\.\d{4,5}", a) for a in arxiv)
    assert len(arxiv) == len(set(arxiv))
    assert len({r.id for r in cur.reading_list}) == len(cur.reading_list)
    numbers = {s.number for s in cur.stages}
    assert all(r.stage in numbers for r in cur.reading_list)
    assert REQUIRED_ARXIV <= set(arxiv)
    orca = next(r for r in cur.reading_list if r.id == "orca")
    assert orca.arxiv is None and orca.url.startswith("https://www.usenix.org/")
    # Every entry can be found: an arXiv id or a URL (books may have neither).
    assert all(r.arxiv or r.url for r in cur.reading_list if r.kind != "book")


def test_the_shipped_file_validates_without_errors():
    from roadmap_cli.curriculum import check_curriculum

    report = check_curriculum(default_curriculum_path())
    assert report.errors == []
    # Warnings only ever concern labs that are not written yet.
    assert all("lab" in w for w in report.warnings)
