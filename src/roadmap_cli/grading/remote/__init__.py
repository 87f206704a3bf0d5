"""`roadmap grade --on NAME` and `roadmap remote ...`: grading on a machine reached over ssh.

near.py is this side of a grade, far.py what runs there; session.py the ssh sessions between them,
wheel.py this install sent as a wheel; agent.py and daemon.py the far side's agents; registry.py the
remotes themselves (remotes.json in the data home).
"""
