"""The rule for tests that need the compiled decoder (`native/`): skipped only on a machine without cargo, where it
cannot be built and the project runs on the pure-Python decoder alone; anywhere else its absence is a failure that
says how to build it."""

from __future__ import annotations

import shutil

import pytest

from replay.kafka import native


def require_compiled_decoder(what: str = "the compiled decoder") -> None:
    """Skip or fail the calling test, as the module docstring says, unless the extension is installed."""
    if native.installed():
        return
    if native.IMPORT_ERROR and "not installed" in native.IMPORT_ERROR and shutil.which("cargo") is None:
        pytest.skip(f"cargo is not on this machine, so {what} cannot be built; the pure-Python decoder is used")
    pytest.fail(f"the compiled decoder is not installed ({native.IMPORT_ERROR}); build it with: "
                f"{native.BUILD_COMMAND}, or run `make setup`")
