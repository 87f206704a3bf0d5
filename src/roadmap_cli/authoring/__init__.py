"""Tools for lab authors: `roadmap dev check` (devcheck.py), `roadmap dev
mutate` (mutate.py with its mutators mutants.py, mutants_cpp.py + cpp_tokens.py,
its coverage and rows), and the starter marker behind `dev build-starter`
(starter_mark.py; the starter/solution views themselves are the lab model's,
labs/starter_build.py). Authoring sits above grading: it grades workspaces
through roadmap_cli.grading.runner, and nothing below imports it.
"""
