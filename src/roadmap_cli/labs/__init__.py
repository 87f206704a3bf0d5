"""Labs: the spec (`lab.yaml`), workspaces, the grading runner and its pytest
plugin, attempts and checkpoints, `dev check` and `doctor`. See docs/labs.md.

Nothing is imported here, so `roadmap_cli.labs.plugin` stays cheap to load in
the grader process.
"""
