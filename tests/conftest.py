"""Hypothesis profiles. `make test` runs `HYPOTHESIS_PROFILE=ci` (set in the Makefile): the same examples every run, so a
landing never depends on the seed; a developer's run explores new random examples each time (the default)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
