"""The tracker: a learner's checkpoints and next actions (progress.py), the dashboard's data (status.py), and a
cohort's status and lab boards (cohort.py)."""
