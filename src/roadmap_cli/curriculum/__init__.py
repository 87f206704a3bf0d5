"""The curriculum: pydantic models, the YAML loader with file:line:col errors,
and a cache of validated curricula (see docs/curriculum.md for the format).

    from roadmap_cli.curriculum import load_curriculum
    cur = load_curriculum(path, cache_dir=home / "cache")
    cur.stage("build-minigpt").checkpoints
"""

from roadmap_cli.curriculum.loader import CheckReport, check_curriculum, load_curriculum, validate_curriculum
from roadmap_cli.curriculum.models import (
    FORMAT_VERSION,
    Cadence,
    CadenceTarget,
    Checkpoint,
    Curriculum,
    FastTrack,
    HoursRange,
    LabPartRef,
    Level,
    Milestone,
    Phase,
    Plan,
    Reading,
    Resource,
    Section,
    Stage,
    Text,
    Topic,
)

__all__ = [
    "FORMAT_VERSION",
    "Cadence",
    "CadenceTarget",
    "CheckReport",
    "Checkpoint",
    "Curriculum",
    "FastTrack",
    "HoursRange",
    "LabPartRef",
    "Level",
    "Milestone",
    "Phase",
    "Plan",
    "Reading",
    "Resource",
    "Section",
    "Stage",
    "Text",
    "Topic",
    "check_curriculum",
    "load_curriculum",
    "validate_curriculum",
]
