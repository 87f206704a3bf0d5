"""Grader conftest of the fake lab (the engine loads this one, never the workspace's)."""
