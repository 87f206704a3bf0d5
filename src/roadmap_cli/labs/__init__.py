"""The lab model: lab.yaml (spec.py, and plan.py for the grade's fast path),
workspaces (workspace.py, the only gitpython user), starters (starter_build.py),
hints, attempt history and the state of each lab (service.py), and what this
machine can grade (device.py). See docs/labs.md.

Grading itself lives in roadmap_cli.grading, the authoring tools in
roadmap_cli.authoring. Nothing is imported here, so the grader process (which
imports labs.nodeids) stays cheap to start.
"""
