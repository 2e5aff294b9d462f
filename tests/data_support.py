"""Skipping a test whose data is not here: one short line that says what to set."""

import pytest

from scrapy_grownup.data import datasets as D

HOW = "set GROWNUP_DATA_DIR (or GROWNUP_ARCHIVE_DIR for the .tar.xz archives)"


def skip_missing_data(what: str, **kwargs) -> None:
    """Skip the running test with ``WHAT not available: set GROWNUP_DATA_DIR ...``."""
    __tracebackhide__ = True  # the skip is reported at the caller's line
    pytest.skip(f"{what} not available: {HOW}", **kwargs)


def available(name: str) -> bool:
    """Whether dataset ``name`` is here (unpacked, or unpacked now from its archive)."""
    try:
        D.ensure_unpacked(name)
    except D.DatasetNotAvailable:
        return False
    return True
