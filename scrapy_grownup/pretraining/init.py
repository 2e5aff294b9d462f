"""Starting a model from a saved one: ``grownup train --init DIR``.

The backbone is loaded whole or not at all: a backbone of another shape (preset, overrides,
encoder, feature version) is an error that says what differs. Heads are loaded when the saved
model has them with the same shapes and they were trained; the content head of a pre-trained
model was never trained (``metadata["untrained_heads"]``), so a fine-tune from it starts that
head from its own seed exactly as a run from scratch does.
"""

from __future__ import annotations

import logging
import os

from scrapy_grownup.errors import ModelLoadError

logger = logging.getLogger(__name__)
HEADS = ("node_head", "page_type_head", "role_head")


def load_pretrained(model, directory: str | os.PathLike) -> dict:
    """Load the backbone (and the trained, same-shape heads) of the model saved in
    ``directory`` into ``model`` (a ``GrownUpModel``). Returns what was loaded and skipped."""
    from scrapy_grownup.model import GrownUpModel
    from scrapy_grownup.model.config import model_tensor_name

    saved_config, doc = GrownUpModel.read_config(directory)
    mine = model.config
    problems = []
    for name in ("encoder", "encoder_version", "feature_version"):
        theirs, ours = getattr(saved_config, name), getattr(mine, name)
        if theirs is not None and ours is not None and str(theirs) != str(ours):
            problems.append(f"{name} {theirs!r} != {ours!r}")
    if list(saved_config.input_blocks) != list(mine.input_blocks):
        problems.append(f"input blocks {saved_config.input_blocks} != {mine.input_blocks}")
    if problems:
        raise ModelLoadError(f"{directory}: cannot initialise from this model: "
                             + "; ".join(problems))
    saved = GrownUpModel.from_pretrained(directory)
    ours_state = model.backbone.state_dict()
    theirs_state = saved.backbone.state_dict()
    differ = sorted(set(ours_state) ^ set(theirs_state)) + sorted(
        f"{k} {tuple(theirs_state[k].shape)} != {tuple(v.shape)}"
        for k, v in ours_state.items() if k in theirs_state and theirs_state[k].shape != v.shape)
    if differ:
        sizes = ", ".join(f"{f}={getattr(saved_config, f)}/{getattr(mine, f)}" for f in
                          ("hidden_size", "num_layers", "num_transformer_layers", "prelim_sizes",
                           "use_lstm", "shared_target_gate")
                          if getattr(saved_config, f) != getattr(mine, f))
        raise ModelLoadError(
            f"{directory}: its backbone does not fit the model being trained ({sizes or 'see'}"
            f" saved/new; {len(differ)} tensors differ, e.g. {differ[:3]}); use the preset and "
            f"model overrides it was pre-trained with")
    model.backbone.load_state_dict(theirs_state)
    untrained = {model_tensor_name(name)
                 for name in (doc.get("metadata") or {}).get("untrained_heads") or []}
    loaded, skipped = [], []
    for name in HEADS:
        ours_head, theirs_head = getattr(model, name, None), getattr(saved, name, None)
        if ours_head is None:
            continue
        if theirs_head is None or name in untrained:
            skipped.append(name)
            continue
        a, b = ours_head.state_dict(), theirs_head.state_dict()
        if set(a) != set(b) or any(a[k].shape != b[k].shape for k in a):
            skipped.append(name)
            continue
        ours_head.load_state_dict(b)
        loaded.append(name)
    logger.info("initialised from %s: backbone (%d tensors)%s%s", directory, len(theirs_state),
                f", heads {loaded}" if loaded else "",
                f"; heads left as initialised: {skipped}" if skipped else "")
    return {"backbone_tensors": len(theirs_state), "heads_loaded": loaded,
            "heads_skipped": skipped}


__all__ = ["load_pretrained"]
