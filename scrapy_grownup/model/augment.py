"""Training-time augmentation of the model inputs."""

from __future__ import annotations

from typing import Any

import torch


def random_flip_positions(batch: Any, generator: torch.Generator | None = None,
                          attr: str = "x_pos") -> Any:
    """Flip the sign of each Laplacian eigenvector column independently per graph.

    Eigenvectors are defined up to sign, so training sees both signs (GROWN+UP / reference:
    train only, never at inference). Replaces ``batch.<attr>`` with a new tensor (the old
    tensor is not modified) and returns ``batch``. ``generator`` must live on the CPU; the signs
    are drawn there and moved to the positions' device, so runs are reproducible on any device.
    """
    pos = getattr(batch, attr)
    vec = getattr(batch, "batch", None)
    num_graphs = getattr(batch, "num_graphs", None) if vec is not None else 1
    if num_graphs is None:
        num_graphs = int(vec.max()) + 1 if vec.numel() else 0
    signs = torch.randint(0, 2, (num_graphs, pos.shape[1]), generator=generator)
    signs = (signs * 2 - 1).to(device=pos.device, dtype=pos.dtype)
    per_node = signs[vec] if vec is not None else signs.expand(pos.shape[0], -1)
    setattr(batch, attr, pos * per_node)
    return batch


__all__ = ["random_flip_positions"]
