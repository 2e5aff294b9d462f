"""Skipping a test whose data is not here: one short line that says what to set."""

import pytest

HOW = "set GROWNUP_DATA_DIR (or GROWNUP_ARCHIVE_DIR for the .tar.xz archives)"


def skip_missing_data(what: str, **kwargs) -> None:
    """Skip the running test with ``WHAT not available: set GROWNUP_DATA_DIR ...``."""
    __tracebackhide__ = True  # the skip is reported at the caller's line
    pytest.skip(f"{what} not available: {HOW}", **kwargs)
