"""Lines for the end of the run's output (seeds and counts a passing run should still show).

A module of its own, not the conftest: pytest imports `tests/conftest.py` under another name than
`tests.conftest`, so a key defined there and imported by a test module would be a second, different key."""

from __future__ import annotations

import pytest

SUMMARY = pytest.StashKey[list[list[str]]]()


def add_summary(config: pytest.Config, section: str, line: str) -> None:
    """A line for the end of the run's output under `section` (the seeds and counts a run should show even when it
    passes). Under xdist the worker hands its lines to the controller, which prints them."""
    config.stash.setdefault(SUMMARY, []).append([section, line])
