"""Torch's intra-op thread count for the extractor's model calls: set for a call, then restored.

The models are small and run page batches of a few thousand nodes: an intra-op thread pool
mostly waits for its threads there, and on a machine whose other cores are busy (a crawl, other
processes) torch's default of one thread per core made extraction several times slower. So
``ArticleExtractor`` runs its model calls on ``threads`` torch threads, one by default.

``torch.set_num_threads`` is not something a library should call behind a user's back, so
``torch_threads`` sets the count only while an extractor call runs and then puts back the value
the calling thread had. What ``torch.set_num_threads`` changes (measured with torch 2.13's
OpenMP build): the OpenMP thread count of the calling Python thread, the count that Python
threads which have not used torch yet start with, and MKL's process-wide count. So torch work
on other threads that already ran torch keeps its own count, except MKL BLAS calls that run at
the same moment as an extractor call; after the call, the calling thread is back where it was.
``threads=None`` leaves torch's setting alone.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

DEFAULT_THREADS = 1


def check_threads(threads) -> int | None:
    """``threads`` as an ``int >= 1``, or ``None`` (leave torch's setting alone); else
    ``ValueError``."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number >= 1 or None, not {threads!r}")
    return threads


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block on ``threads`` torch intra-op threads, then restore the calling thread's
    previous count; ``None`` changes nothing."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


_CONTROLLER = None


@contextlib.contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Run the block with numpy's BLAS on ``threads`` threads (the numpy runtime's
    ``torch_threads``), then restore the previous count; ``None`` changes nothing."""
    global _CONTROLLER
    if threads is None:
        yield
        return
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=threads, user_api="blas"):
        yield
