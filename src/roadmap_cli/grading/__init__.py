"""The grading engine: `roadmap grade`, `roadmap watch` and `roadmap doctor`.

options.py declares grade's options once; prestart.py starts the grader before typer loads; precheck.py compiles the
workspace; runner.py runs pytest under the supervisor (_supervisor.py) with the
plugin (plugin.py) reporting over an authenticated channel (channel.py);
results.py turns its events into part results; grade.py records the attempt;
integrity.py and isolation.py keep what judges out of the learner's reach.
Imports flow down only: grading uses roadmap_cli.labs and grading_kit, never
the CLI or the authoring tools. Nothing is imported here (the grader process
loads grading.plugin and must start fast).
"""
