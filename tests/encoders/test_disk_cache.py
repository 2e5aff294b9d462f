"""The on-disk embedding cache: chunks written while encoding, resumed after an interruption."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scrapy_grownup.encoders.disk_cache import DiskEmbeddingCache, default_cache_dir

from test_encoders import CountingEncoder

WORDS = [f"string number {i}" for i in range(23)]


class Interrupted(Exception):
    pass


def test_vectors_survive_a_new_process(tmp_path):
    first = CountingEncoder()
    first.use_disk_cache(tmp_path, chunk_size=5)
    expected = first.encode(WORDS + ["", "  string number 3  "])
    assert len(list(tmp_path.glob("chunk-*.npy"))) == 5  # 23 strings, 5 per chunk

    second = CountingEncoder()  # a fresh encoder: empty memory cache, same folder
    second.use_disk_cache(tmp_path, chunk_size=5)
    np.testing.assert_array_equal(second.encode(WORDS + ["", "  string number 3  "]), expected)
    assert second.calls == []  # nothing reached the model
    assert not expected[23].any()  # blank strings stay zero and are not stored


def test_an_interrupted_build_resumes_where_it_stopped(tmp_path):
    class Failing(CountingEncoder):
        def _encode_uncached(self, texts):
            if len(self.calls) == 2:
                raise Interrupted
            return super()._encode_uncached(texts)

    failing = Failing()
    failing.use_disk_cache(tmp_path, chunk_size=4)
    with pytest.raises(Interrupted):
        failing.encode(WORDS)
    assert len(list(tmp_path.glob("chunk-*.npy"))) == 2  # the two chunks done before it broke

    resumed = CountingEncoder()
    resumed.use_disk_cache(tmp_path, chunk_size=4)
    out = resumed.encode(WORDS)
    assert sorted(resumed.seen) == sorted(WORDS[8:])  # only what the first run had not written
    np.testing.assert_array_equal(out, CountingEncoder().encode(WORDS))


def test_a_half_written_chunk_is_ignored(tmp_path):
    cache = DiskEmbeddingCache(tmp_path, dim=4, chunk_size=8)
    cache.append(["a", "b"], np.ones((2, 4)))
    # a crash between the strings file and the vectors file leaves a .json alone
    (tmp_path / "chunk-000001.json").write_text(json.dumps(["c"]))
    (tmp_path / "chunk-000001.npy.part").write_bytes(b"\x93NUMPY")
    reopened = DiskEmbeddingCache(tmp_path, dim=4)
    assert len(reopened) == 2 and "a" in reopened and "c" not in reopened
    reopened.append(["c"], np.full((1, 4), 3.0))  # takes the next free number, overwrites nothing
    again = DiskEmbeddingCache(tmp_path, dim=4)
    vectors, missing = again.lookup(["c", "a", "zzz"])
    assert missing == [2]
    np.testing.assert_array_equal(vectors[0], np.full(4, 3.0, dtype=np.float32))
    np.testing.assert_array_equal(vectors[1], np.ones(4, dtype=np.float32))


def test_a_chunk_of_another_width_is_an_error(tmp_path):
    DiskEmbeddingCache(tmp_path, dim=4).append(["a"], np.ones((1, 4)))
    wrong = DiskEmbeddingCache(tmp_path, dim=8)  # chunks are read on first use
    with pytest.raises(ValueError, match="does not match"):
        wrong.lookup(["a"])
    with pytest.raises(ValueError, match="expected"):
        DiskEmbeddingCache(tmp_path, dim=4).append(["a", "b"], np.ones((1, 4)))


def test_default_folder_names_encoder_and_version(tmp_path, monkeypatch):
    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path))
    assert default_cache_dir("minilm", "abc123") == tmp_path / "embeddings" / "minilm-abc123"
    encoder = CountingEncoder()
    cache = encoder.use_disk_cache()
    assert cache.directory == tmp_path / "embeddings" / "counting-test"
    assert encoder.use_disk_cache() is cache  # attaching twice keeps the one cache
