"""``grownup ensemble``: one model directory whose content score is the mean of several content
models' probabilities (the same recipe trained with other seeds).

Models of one recipe trained with other seeds err on different blocks of sites none of them
saw, so their mean probability is a better content score than any one of them ("Seed
ensembles" in the README). The first model stays whole (its genre and role heads, page-type
classifier and inference options); the others add their backbone and content head as
``GrownUpModel.members``. The block rescorer learns the errors of the scores it reads, so the
ensemble gets its own: ``grownup fit-rescorer --cv-dir A --cv-dir B ... --model OUT --out OUT``
with the members' fold models, in the same order.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from ..errors import GrownupError

# What a member must share with the first model to read the same batch the same way.
SHAPE_FIELDS = ("input_blocks", "encoder", "encoder_version", "feature_version", "hidden_size",
                "num_layers", "num_transformer_layers", "num_heads", "mlp_ratio",
                "transformer_activation", "prelim_sizes", "readout", "use_lstm",
                "shared_target_gate", "node_head_hidden")
# Files of the first model that stay valid in the ensemble: the page-type classifier reads the
# first model's own pooled inputs, which its members do not change.
KEPT_FILES = ("page_type.npz",)


def combine(model, members: list):
    """A ``GrownUpModel`` holding ``model`` whole and every member's backbone and content head
    (a member that is an ensemble itself brings all of its models)."""
    from ..model import GrownUpModel

    parts = []
    for i, member in enumerate(members, 1):
        differs = [name for name in SHAPE_FIELDS
                   if getattr(member.config, name) != getattr(model.config, name)]
        if differs:
            raise GrownupError(f"model {i + 1} differs from the first in {', '.join(differs)}: "
                               "an ensemble's models share one recipe")
        parts.append((member.backbone, member.node_head))
        parts.extend((m.backbone, m.node_head) for m in member.members)
    config = model.config.replace(content_members=len(model.members) + len(parts))
    out = GrownUpModel(config)
    # the first model's tensors, its own members included; the new members' slots stay empty
    out.load_state_dict(model.state_dict(), strict=False)
    for slot, (backbone, node_head) in zip(out.members[len(model.members):], parts):
        slot.backbone.load_state_dict(backbone.state_dict())
        slot.node_head.load_state_dict(node_head.state_dict())
    return out.eval()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="the first model: a shipped name or a directory; its heads, "
                                 "page-type classifier and options are the ensemble's")
    p.add_argument("member", nargs="+",
                   help="model directories of the same recipe (other seeds) to average with it")
    p.add_argument("--out", required=True, help="directory to write the ensemble to (new)")


def run(args) -> int:
    from ..extractor import model_document, resolve_model_dir
    from ..model import GrownUpModel

    source = resolve_model_dir(args.model)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise GrownupError(f"--out {out}: not empty (the ensemble goes to a new directory)")
    doc = model_document(source)
    model = GrownUpModel.from_pretrained(source)
    members = [GrownUpModel.from_pretrained(resolve_model_dir(m)) for m in args.member]
    ensemble = combine(model, members)
    metadata = dict(doc.get("metadata") or {})
    metadata["ensemble"] = {
        "models": [str(source)] + list(args.member),
        "weights_sha256": [doc.get("weights_sha256")]
        + [model_document(resolve_model_dir(m)).get("weights_sha256") for m in args.member]}
    ensemble.save_pretrained(out, fp16=doc.get("dtype") == "float16", metadata=metadata)
    kept = [name for name in KEPT_FILES if (source / name).is_file()]
    for name in kept:
        shutil.copy2(source / name, out / name)
    print(json.dumps({"ensemble": str(out), "models": 1 + ensemble.config.content_members,
                      "kept": kept}))
    print(f"fit its block rescorer on the members' fold models: grownup fit-rescorer "
          f"--cv-dir A --cv-dir B ... --model {out} --out {out}", file=sys.stderr)
    return 0
