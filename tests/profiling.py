"""What tests count instead of the clock: a loaded CI machine makes wall-time bounds flaky."""

from __future__ import annotations

import sys


def python_calls(fn, *args) -> int:
    """How many Python-level function calls ``fn(*args)`` makes (C functions not counted),
    run once before, so that what is compiled and cached on a first call is not counted."""
    fn(*args)
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return calls
