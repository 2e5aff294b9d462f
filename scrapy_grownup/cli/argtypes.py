"""Value types for ``argparse`` options: a bad value is one line that says what was expected,
the same wording in ``grownup`` and in the training commands."""

from __future__ import annotations

import argparse


def fraction(text: str, one: bool = False) -> float:
    """``text`` as a number above 0 and below 1 (at most 1 where ``one``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0.0 < value <= 1.0 if one else 0.0 < value < 1.0):
        raise argparse.ArgumentTypeError(
            f"must be a number above 0 and at most 1, not {text!r}" if one else
            f"must be a number between 0 and 1, not {text!r}")
    return value


def probability(text: str) -> float:
    """A probability strictly between 0 and 1 (``--threshold``)."""
    return fraction(text)


def share(text: str) -> float:
    """A share above 0 and at most 1 (``--max-features``)."""
    return fraction(text, one=True)
