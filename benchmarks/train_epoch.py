"""Time of one training epoch of `fast`'s recipe (the model `grownup lab evaluate --protocol
site-cv` trains: S=4, no Transformer, mean readout, layout features, static encoder) on the
same Dragnet training pages, with the forward pass in float32 (the recipe) and autocast to
bfloat16 (`--precision bf16`), on one core. The rounds alternate between the two, each from
the same initial weights and seed; the minimum of three is reported. The pages' graphs are
built (and cached) once, outside the timing. Prints one JSON line.

    python benchmarks/train_epoch.py [PAGES]
"""
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import pin_single_core  # noqa: E402

PRECISIONS = ("fp32", "bf16")
RECIPE = {"num_layers": 4, "num_transformer_layers": 0, "readout": "mean"}


def main() -> None:
    pin_single_core()
    import torch

    torch.set_num_threads(1)
    from scrapy_grownup.graph.featurizer import feature_blocks
    from scrapy_grownup.model import GrownUpModel, ModelConfig
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder
    from scrapy_grownup.training.loop import AuxLabels, TrainConfig, train_epoch

    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    records = crosssite.load_records(["dragnet"], limit=limit)
    encoder = corpus_encoder("static")
    store, _keys = crosssite.training_store(records, encoder)
    indices = list(range(store.num_pages))
    config = ModelConfig.preset("small", encoder=encoder.name, text_dim=encoder.dim,
                                encoder_version=encoder.version,
                                input_blocks=feature_blocks(encoder.dim, True, False), **RECIPE)
    torch.manual_seed(0)
    initial = GrownUpModel(config).state_dict()
    best = {name: float("inf") for name in PRECISIONS}
    losses = {}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(3):
            for precision in PRECISIONS:
                model = GrownUpModel(config)
                model.load_state_dict(initial)
                cfg = TrainConfig(out=out, pos_weight=2.0, lr=2e-3, precision=precision)
                optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr,
                                              weight_decay=cfg.weight_decay)
                start = time.perf_counter()
                result = train_epoch(model, store, indices, AuxLabels.empty(store), cfg,
                                     optimizer, epoch=1)
                best[precision] = min(best[precision], time.perf_counter() - start)
                losses[precision] = round(result["content"], 4)
    nodes = sum(store.num_nodes(i) for i in indices)
    print(json.dumps({
        "benchmark": "train_epoch", "pages": len(indices), "nodes": nodes,
        **{f"{p}_ms_per_page": round(best[p] / len(indices) * 1000, 2) for p in PRECISIONS},
        "bf16_time_share": round(best["bf16"] / best["fp32"], 3),
        **{f"{p}_loss": losses[p] for p in PRECISIONS},
        "torch": torch.__version__, "threads": 1}))


if __name__ == "__main__":
    main()
