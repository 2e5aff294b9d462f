"""Per-page pooling and padding of a batch's node rows, in torch alone.

What the backbone needs of torch_geometric (``global_mean_pool``, ``global_max_pool``,
``to_dense_batch``; ``tests/model/test_model.py`` checks these against them): written here so that
serving a model never imports torch_geometric, whose import costs a process about 3 s of CPU
and 110 MB (it loads its datasets, its LLM tools with ``transformers``, and ``torch._dynamo``).
Training still builds its batches with torch_geometric's ``Data`` and ``Batch``.

``batch`` is the batch vector (page of each node row, sorted, as ``Batch`` makes it).
"""

from __future__ import annotations

import torch
from torch import Tensor


def mean_pool(x: Tensor, batch: Tensor, size: int) -> Tensor:
    """``[size, D]`` mean of each page's rows (0 for a page without rows)."""
    total = x.new_zeros(size, x.shape[1]).index_add_(0, batch, x)
    count = torch.bincount(batch, minlength=size).clamp_(min=1).to(x.dtype)
    return total / count.unsqueeze(1)


def max_pool(x: Tensor, batch: Tensor, size: int) -> Tensor:
    """``[size, D]`` element-wise maximum of each page's rows (0 for a page without rows)."""
    index = batch.unsqueeze(1).expand_as(x)
    return x.new_zeros(size, x.shape[1]).scatter_reduce(0, index, x, reduce="amax",
                                                        include_self=False)


def dense_batch(x: Tensor, batch: Tensor, size: int, length: int) -> tuple[Tensor, Tensor]:
    """``(dense [size, length, D], mask [size, length])``: each page's rows in order, padded
    with zeros; ``mask`` marks the real rows. Rows past ``length`` of a page are left out."""
    count = torch.bincount(batch, minlength=size)
    start = torch.cumsum(count, 0) - count
    position = torch.arange(batch.numel(), device=x.device) - start[batch]
    inside = position < length
    if not bool(inside.all()):
        x, batch, position = x[inside], batch[inside], position[inside]
    dense = x.new_zeros(size, length, x.shape[1]).index_put((batch, position), x)
    mask = torch.zeros(size, length, dtype=torch.bool, device=x.device)
    mask[batch, position] = True
    return dense, mask
