"""Archives -> shards, markers, index, pairs and manifest; reruns, resume, loading back."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from scrapy_grownup.data.datasets import DatasetNotAvailable
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.encoders import get_encoder
from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.warc.corpus import load_corpus
from scrapy_grownup.warc.manifest import CorpusConfigError
from scrapy_grownup.warc.settings import WarcSettings
from scrapy_grownup.warc.shards import ShardBuilder, read_header
from scrapy_grownup.warc.sources import expand
from scrapy_grownup.warc.synthetic import fixture_dir, write_warc
from scrapy_grownup.warc.writer import CorpusWriter
from tests.data_support import skip_missing_data
from tests.warc_support import dragnet_pages


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, bytes]]:
    return dragnet_pages(9)


def settings(**changes) -> WarcSettings:
    values = {"workers": 0, "shard_pages": 3, **changes}
    return dataclasses.replace(WarcSettings.from_settings(None), **values)


def run(directory: Path, specs: list[str], **changes) -> tuple[CorpusWriter, list[dict]]:
    writer = CorpusWriter(directory, settings(**changes))
    items: list[dict] = []

    async def main():
        sources, missing = expand(specs)
        for spec in missing:
            writer.missing(spec)
        for source in sources:
            async for item in writer.read(source):
                items.append(item)

    try:
        asyncio.run(main())
        writer.finalize()
    finally:
        writer.close()
    return writer, items


def archives(tmp_path: Path, pages) -> Path:
    """Two sites spread over two archives, plus a broken page and the usual crawl noise."""
    inputs = tmp_path / "in"
    urls = [f"http://{'ab'[i % 2]}.example/news/{i % 3}/p{i}.html" for i in range(len(pages))]
    records = [(u, html, "text/html") for u, (_, html) in zip(urls, pages)]
    write_warc(inputs / "one.warc.gz", records[:5] + [
        ("http://a.example/empty.html", b"   ", "text/html"),
        ("http://a.example/image.html", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "text/html"),
    ], noise=True)
    write_warc(inputs / "two.warc", records[5:], gzip=False)
    return inputs


def test_corpus_end_to_end(tmp_path, pages):
    out = tmp_path / "out"
    writer, items = run(out, [str(archives(tmp_path, pages))])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pages"] == len(pages) == len(items)
    assert manifest["skipped"]["empty_page"] == 1 and manifest["skipped"]["not_html_body"] == 1
    assert manifest["skipped"]["http_301"] == 7 and manifest["skipped"]["revisit"] == 7
    assert manifest["skipped"]["request"] == 7 * 3 + 4
    assert manifest["html_records"] == len(pages) + 2
    assert manifest["encoder"] == "static" and manifest["feature_version"]
    assert manifest["files"] == {"read": 2, "failed": 0, "damaged": 0}
    # one.warc.gz: 7 HTML records in parts of 3 (3 + 3 + 1); two.warc: 4 (3 + 1)
    index = json.loads((out / "index.json").read_text())
    assert sum(s["pages"] for s in index["shards"]) == len(pages)
    assert manifest["shards"] == len(index["shards"]) == 4  # the all-failed part is not indexed
    assert all(p.suffix == ".safetensors" for p in (out / "shards").iterdir())
    assert manifest["pairs"] == index["pairs"]["count"] == 4 and manifest["sites"] == 2

    corpus = load_corpus(out)
    assert corpus.num_pages == len(pages) and corpus.verify() == []
    seen_urls = {}
    for shard, store in corpus.iter_shards(verify=True):
        header = read_header(shard.path)
        assert store.num_pages == shard.pages == len(header["urls"])
        assert store.meta["encoder"] == "static" and store.strings.shape[1] == 256
        for row, url in enumerate(header["urls"]):
            seen_urls[shard.first_page + row] = url
        batch = store.collate(range(store.num_pages))
        assert batch.x_text.shape[0] == int(store.page_ptr[-1])
        assert (batch.y == -1).all()
    from scrapy_grownup.warc.pairs import site_hash, site_key

    data = corpus.pairs()
    for (a, b), h in zip(data["pairs"].tolist(), data["site"].tolist()):
        assert site_hash(site_key(seen_urls[a])) == site_hash(site_key(seen_urls[b])) == h
        shard, row = corpus.locate(a)
        store = corpus.load_shard(shard)
        assert store.arrays["page_site"][row] == h
    batches = list(corpus.iter_pair_batches(3))
    assert sum(len(b["pairs"]) for b in batches) == 4

    # `grownup warc --finalize-only` rebuilds the same index from the markers.
    from scrapy_grownup.cli.main import main

    (out / "index.json").unlink()
    assert main(["warc", "--finalize-only", "--output", str(out)]) == 0
    assert json.loads((out / "index.json").read_text())["shards"] == index["shards"]
    assert main(["warc", "--finalize-only", "--output", str(out / "empty")]) == 1


def test_rerun_skips_finished_archives_and_resumes_parts(tmp_path, pages):
    inputs = archives(tmp_path, pages)
    out = tmp_path / "out"
    run(out, [str(inputs)])
    index = json.loads((out / "index.json").read_text())
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}

    writer, items = run(out, [str(inputs)])
    assert writer.totals["files_already_done"] == 2 and not items
    assert {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()} == stamps
    # (safetensors writes its metadata in no fixed order: the pairs file is compared by value)
    assert _without_pair_sha(json.loads((out / "index.json").read_text())) == \
        _without_pair_sha(index)

    # An interrupted run: the marker of one.warc.gz and its first shard are missing.
    marker = next(p for p in (out / "files").iterdir() if p.name.startswith("one-"))
    marker.unlink()
    # (its parts: 3 pages; 2 pages and the empty page; the PNG served as text/html, no page)
    last = sorted(p for p in (out / "shards").iterdir() if p.name.startswith("one-"))[0]
    before = GraphStore.load(last)
    last.unlink()
    writer, items = run(out, [str(inputs)])
    assert writer.totals["shards_resumed"] == 2 and writer.totals["shards"] == 1
    assert writer.totals["pages"] == len(items) == 3  # only the missing part was parsed
    after = GraphStore.load(last)
    assert after.ids == before.ids and after.meta == before.meta
    for name, array in before.arrays.items():
        np.testing.assert_array_equal(after.arrays[name], array)
    again = json.loads((out / "index.json").read_text())
    for entry in again["shards"] + index["shards"]:
        if entry["file"].endswith(last.name):
            entry.pop("sha256")
            entry.pop("bytes")
    assert _without_pair_sha(again) == _without_pair_sha(index)  # the same corpus again
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["skipped"]["empty_page"] == 1  # failures of resumed parts are kept

    # A shard deleted behind the corpus' back is reported, not indexed.
    last.unlink()
    manifest = writer.finalize()
    assert manifest["missing_shards"] == 1 and manifest["pages"] == len(pages) - 3
    assert load_corpus(out).verify() == []


def _without_pair_sha(index: dict) -> dict:
    return dict(index, pairs={k: v for k, v in index["pairs"].items() if k != "sha256"})


def test_other_settings_are_refused(tmp_path, pages):
    inputs = archives(tmp_path, pages)
    run(tmp_path / "out", [str(inputs)])
    with pytest.raises(CorpusConfigError, match="shard_pages"):
        run(tmp_path / "out", [str(inputs)], shard_pages=5)


def test_shard_builder_matches_graph_store_build(pages):
    structures = [parse_page(html, url=f"http://a.example/{i}") for i, (_, html) in
                  enumerate(pages[:3])]
    encoder = get_encoder("static")
    reference = GraphStore.build(structures, encoder, [f"id{i}" for i in range(3)])
    builder = ShardBuilder("/x.warc.gz", "x-key", 0)
    for i, page in enumerate(structures):
        builder.add(page, f"id{i}", f"http://a.example/{i}", i * 100)
    store = builder.build(encoder)
    for name, array in reference.arrays.items():
        np.testing.assert_array_equal(store.arrays[name], array, err_msg=name)
        assert store.arrays[name].dtype == array.dtype, name
    np.testing.assert_array_equal(store.strings, reference.strings)
    assert store.ids == reference.ids
    for key in ("format", "encoder", "encoder_version", "feature_version"):
        assert store.meta[key] == reference.meta[key]


def test_every_fixture_into_a_corpus(tmp_path):
    """All shared fixtures, broken ones included, give pages and counted skips, never a crash
    (the L3S-GN1 WARC has its own test in test_warc_pairs.py)."""
    try:
        root = fixture_dir()
    except DatasetNotAvailable:
        skip_missing_data("WARC fixtures")
    files = [str(p) for p in sorted(root.rglob("*")) if p.is_file()
             and "l3s_gn1" not in p.parts[-2]]
    writer, items = run(tmp_path / "out", files, shard_pages=64)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["files"]["read"] == len(files) and manifest["files"]["failed"] == 0
    assert manifest["pages"] == len(items) >= 70
    skipped = manifest["skipped"]
    for reason in ("request", "revisit", "metadata", "warcinfo", "conversion", "not_html",
                   "http_302", "truncated_record", "corrupt", "malformed_record",
                   "no_http_headers", "other_record"):
        assert skipped.get(reason, 0) >= 1, reason
    assert manifest["files"]["damaged"] >= 2
    assert manifest["records"] >= 500


def test_an_unexpected_error_in_one_archive_is_one_failed_file(tmp_path, monkeypatch):
    """Whatever one archive raises (here a reader bug), it is that archive's counted failure
    (no marker: a rerun tries it again) and the archives after it are read."""
    from example_project.news_site import article_page

    from scrapy_grownup.warc import writer as writer_module

    records = [(f"http://news.example/s{i}.html", article_page(i)[0].encode(), "text/html")
               for i in range(4)]
    first = write_warc(tmp_path / "in" / "a.warc.gz", records[:2])
    write_warc(tmp_path / "in" / "b.warc.gz", records[2:])

    class Reader(writer_module.RecordReader):
        def __iter__(self):
            if self.source.location == str(first.resolve()):
                raise RuntimeError("a bug in reading")
            return super().__iter__()

    monkeypatch.setattr(writer_module, "RecordReader", Reader)
    writer, items = run(tmp_path / "out", [str(tmp_path / "in")])
    assert len(items) == 2
    assert writer.totals["files_failed"] == 1 and writer.totals["files"] == 1
    assert [p.name.startswith("a-") for p in (tmp_path / "out" / "files").glob("*.failed.json")
            ] == [True]


def test_utf16_pages_declared_in_the_http_header_reach_the_corpus(tmp_path):
    """A UTF-16LE page without a BOM, ``charset=utf-16le`` in its HTTP header, was skipped as
    ``not_html_body`` (sniffed as binary before its charset was read)."""
    from example_project.news_site import article_page

    html = article_page(1)[0]
    write_warc(tmp_path / "in" / "wide.warc.gz", [
        ("http://news.example/wide.html", html.encode("utf-16-le"),
         "text/html; charset=utf-16le"),
        ("http://news.example/narrow.html", html.encode("utf-8"), "text/html")])
    writer, items = run(tmp_path / "out", [str(tmp_path / "in")])
    assert sorted(item["url"] for item in items) == ["http://news.example/narrow.html",
                                                     "http://news.example/wide.html"]
    assert not writer.totals["skipped/not_html_body"]


def test_stale_temporaries_of_a_shared_directory_need_an_hour(tmp_path):
    """Queue workers on other machines may share the directory, so there a dead-looking pid's
    temporary is stale only when untouched for ``min_age`` seconds."""
    import os
    import subprocess
    import sys

    from scrapy_grownup.warc.manifest import remove_stale_temporaries

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)
    (tmp_path / "shards").mkdir()
    fresh = tmp_path / "shards" / f".a.safetensors.tmp-{dead}"
    old = tmp_path / "shards" / f".b.safetensors.tmp-{dead}"
    fresh.write_bytes(b"x" * 10)
    old.write_bytes(b"y" * 20)
    os.utime(old, (0, os.path.getmtime(old) - 7200))
    assert remove_stale_temporaries(tmp_path, min_age=3600) == (1, 20)
    assert fresh.exists() and not old.exists()
    assert remove_stale_temporaries(tmp_path) == (1, 10) and not fresh.exists()
