"""The static encoder's runtime (``encoders.static.StaticEncoder``) against model2vec's
``StaticModel`` running the same shipped table and tokenizer, on the strings of real pages, one
core. Prints one JSON line per runtime.

    python benchmarks/static_encoder.py [--pages 200]

Strings: what ``Featurizer.graphs`` hands the encoder for the first ``--pages`` wcxb_dev (dev
split) pages, i.e. every node's text, class words and id words, stripped and cut to
``max_chars`` as ``TextEncoder.encode_indexed`` does, blank ones left out and deduplicated per
page (what reaches ``_encode_uncached`` with a cold string cache).

Runtimes, one encoder call per page:

- ``grownup``: ``StaticEncoder(cache_size=0)._encode_uncached`` (its word -> token-id table
  carries over from page to page, as in a crawl; ``cold_s`` is the first pass of a new encoder).
- ``model2vec``: ``StaticModel(vectors, tokenizer, normalize=True, max_length=None)`` over the
  same float32 table (``max_length=None``: its default of 512 tokens truncates, ours does not),
  ``encode(..., use_multiprocessing=False)``. ``model2vec (float16 table)`` loads the table as
  shipped (float16) through ``StaticModel.from_pretrained`` of a copy saved by
  ``save_pretrained``; ``model2vec (max_length 512)`` keeps its default truncation.

Figures: ``cold_s`` / ``warm_s`` seconds for all pages (warm: best of two more passes),
``max_abs_diff`` against ours over every string and ``strings_over_1e-4`` (strings whose vector
differs by more), ``load_ms`` (encoder from the files on disk), ``import_ms`` (a fresh
interpreter importing the runtime, the interpreter's own start subtracted), ``installed_kb``
(the runtime's package, and the packages it adds to a plain install).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import pin_single_core

pin_single_core()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SKIP_MESSAGE = ("model2vec is not installed: its runtime is skipped "
                "(pip install model2vec to compare)")


def page_strings(pages: int, max_chars: int) -> list[list[str]]:
    from scrapy_grownup.data import datasets
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.errors import GrownupError

    out = []
    for record in datasets.iter_records("wcxb_dev"):
        try:
            page = parse_page(record.html, url=record.url,
                              content_type=record.extra.get("content_type"))
        except GrownupError:
            continue
        keys = {}
        for raw in (*page.node_text, *page.class_words, *page.id_words):
            key = raw.strip()
            if key:
                keys.setdefault(key[:max_chars].rstrip() if len(key) > max_chars else key)
        out.append(list(keys))
        if len(out) == pages:
            break
    return out


def import_ms(module: str, repeats: int = 3) -> float:
    """Milliseconds a fresh interpreter takes to import ``module`` (its own start excluded)."""
    def best(code: str) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    return round(1000 * (best(f"import {module}") - best("pass")), 1)


def installed_kb(*packages: str) -> int:
    import importlib.util

    total = 0
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            continue
        origin = Path(spec.origin)
        root = origin.parent if origin.name == "__init__.py" else origin
        files = root.rglob("*") if root.is_dir() else [root]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total // 1024


def timed_passes(encode, texts: list[list[str]]) -> tuple[float, float, list]:
    """``(cold seconds, warm seconds, vectors of the last pass)``: one call per page."""
    passes, vectors = [], []
    for _ in range(3):
        start = time.perf_counter()
        vectors = [encode(strings) for strings in texts]
        passes.append(time.perf_counter() - start)
    return passes[0], min(passes[1:]), vectors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()

    import numpy as np

    from scrapy_grownup.encoders.base import DEFAULT_MAX_CHARS
    from scrapy_grownup.encoders.static import StaticEncoder, default_asset_dir

    texts = page_strings(args.pages, DEFAULT_MAX_CHARS)
    strings = sum(map(len, texts))

    start = time.perf_counter()
    ours = StaticEncoder(cache_size=0)
    load = 1000 * (time.perf_counter() - start)
    cold, warm, reference = timed_passes(ours._encode_uncached, texts)
    print(json.dumps({"benchmark": "static_encoder", "runtime": "grownup", "pages": len(texts),
                      "strings": strings, "cold_s": round(cold, 3), "warm_s": round(warm, 3),
                      "load_ms": round(load, 1),
                      "import_ms": import_ms("scrapy_grownup.encoders.static"),
                      "installed_kb": installed_kb("scrapy_grownup.encoders")}), flush=True)

    try:
        from model2vec import StaticModel
    except ImportError:
        print(SKIP_MESSAGE, file=sys.stderr)
        return

    def compare(vectors) -> dict:
        diff = np.concatenate([np.abs(a - b).max(axis=1) for a, b in zip(vectors, reference)])
        return {"max_abs_diff": float(diff.max()), "strings_over_1e-4": int((diff > 1e-4).sum())}

    # The float32 table and the tokenizer our loader checked, handed to model2vec as they are.
    table = ours._vectors
    start = time.perf_counter()
    same = StaticModel(table, ours.tokenizer, normalize=True, max_length=None)
    build = 1000 * (time.perf_counter() - start)
    common = {"import_ms": import_ms("model2vec"),
              "installed_kb": installed_kb("model2vec", "joblib")}  # joblib: new to a plain install
    with tempfile.TemporaryDirectory() as tmp:
        try:  # our asset directory as it is (embeddings.safetensors, not model.safetensors)
            StaticModel.from_pretrained(str(default_asset_dir()))
            reads_ours = "yes"
        except Exception as exc:  # noqa: BLE001
            reads_ours = f"no: {type(exc).__name__}"
        half = StaticModel(table.astype(np.float16), ours.tokenizer, normalize=True,
                           max_length=None)
        half.save_pretrained(tmp)
        start = time.perf_counter()
        half = StaticModel.from_pretrained(tmp, normalize=True, max_length=None)
        half_load = 1000 * (time.perf_counter() - start)
        shutil.rmtree(tmp, ignore_errors=True)
    arms = {"model2vec": (same, {"max_length": None}, {"load_ms": round(build, 1)}),
            "model2vec (float16 table)": (half, {"max_length": None},
                                          {"load_ms": round(half_load, 1)}),
            "model2vec (max_length 512)": (same, {"max_length": 512}, {})}
    for name, (model, options, extra) in arms.items():
        def encode(batch, model=model, options=options):
            return np.asarray(model.encode(batch, use_multiprocessing=False, batch_size=1024,
                                           **options), dtype=np.float32)

        cold, warm, vectors = timed_passes(encode, texts)
        print(json.dumps({"benchmark": "static_encoder", "runtime": name, "pages": len(texts),
                          "strings": strings, "cold_s": round(cold, 3), "warm_s": round(warm, 3),
                          **extra, **compare(vectors), **common,
                          "reads_our_asset_dir": reads_ours}), flush=True)


if __name__ == "__main__":
    main()
