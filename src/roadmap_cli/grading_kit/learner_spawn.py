"""Child processes of the learner process that run learner code (a lab's
server, say), under the same audit hook.

The learner process (`_learner_main.py`) refuses Python-level opens of the
reference solutions and writes to the installed grader with an audit hook;
a child it starts is a fresh interpreter without that hook. An adapter
that must run a learner *program* (`python server.py --port N`) builds its
command line with `learner_python(script, *args)` instead: the child
installs the learner process's hook (same forbidden paths), puts the
workspace first on `sys.path`, and runs the script as `__main__`. Resource
limits and the scrubbed environment are inherited anyway.

Outside the sandbox (a lab's tests run by hand) there is no hook to copy:
the child just runs the script.
"""

from __future__ import annotations

import base64
import json
import os
import sys

_ENTRY = "from roadmap_cli.grading_kit.learner_spawn import main; main()"


def learner_python(script: str, *args: str) -> list[str]:
    """argv for `python script args...` under the learner process's audit hook."""
    from roadmap_cli.grading_kit import _learner_main

    config = {
        "forbidden_read": list(_learner_main._config.get("forbidden_read", [])),
        "forbidden_write": list(_learner_main._config.get("forbidden_write", [])),
    }
    # Base64: the hook refuses any command line that names a solution folder, and the child's
    # own config (the forbidden paths) must not read as an attempt to open them.
    blob = base64.b64encode(json.dumps(config).encode()).decode()
    return [sys.executable, "-I", "-B", "-c", _ENTRY, blob, script, *args]


def main() -> None:
    import runpy

    from roadmap_cli.grading_kit import _learner_main

    config, script, args = json.loads(base64.b64decode(sys.argv[1])), sys.argv[2], sys.argv[3:]
    if config["forbidden_read"] or config["forbidden_write"]:
        _learner_main._install_audit_hook(config["forbidden_read"], config["forbidden_write"])
    # -I left the script's folder off sys.path: the workspace goes first, as in the learner process.
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
