"""Placeholder: this command group is being written (see docs/architecture.md)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
