"""Pages grouped into model batches by a node budget: serving and training batch alike."""

from __future__ import annotations

from collections.abc import Sequence


def node_budget_batches(sizes: Sequence[int], max_nodes: int, order: Sequence[int] | None = None,
                        max_pages: int | None = None) -> list[list[int]]:
    """Group page indices (in ``order``) into batches of at most ``max_nodes`` nodes.

    A page larger than the budget forms a batch on its own rather than being dropped.
    """
    order = list(range(len(sizes))) if order is None else list(order)
    batches, current, total = [], [], 0
    for i in order:
        size = int(sizes[i])
        full = max_pages is not None and len(current) >= max_pages
        if current and (total + size > max_nodes or full):
            batches.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        batches.append(current)
    return batches
