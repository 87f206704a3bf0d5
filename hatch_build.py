"""Build hook: the wheel carries `roadmap_cli/_manifest.json`, the sha256 of
every file a grade's verdict depends on (src/roadmap_cli/grading/manifest.py
says which, and checks them before every grade). Editable installs get none:
there the expected hashes come from git."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ROOT = Path(__file__).resolve().parent


def _manifest_module():
    # Loaded from its file: importing the roadmap_cli package would need its dependencies in the build env.
    path = ROOT / "src" / "roadmap_cli" / "grading" / "manifest.py"
    spec = importlib.util.spec_from_file_location("_roadmap_manifest", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


class ManifestHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        manifest = _manifest_module().build(ROOT / "labs", ROOT / "src" / "roadmap_cli")
        self._tmp = tempfile.mkdtemp(prefix="roadmap-manifest-")
        target = Path(self._tmp) / "_manifest.json"
        target.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        build_data["force_include"][str(target)] = "roadmap_cli/_manifest.json"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)
