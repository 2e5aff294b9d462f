"""Dataset loaders: helpers on synthetic bytes always; real data only when it is available."""

import io
import tarfile

import pytest

from scrapy_grownup.data import datasets as D
from scrapy_grownup.page.dom import parse_page
from tests.data_support import available, skip_missing_data


def need(name):
    if not available(name):
        skip_missing_data(f"dataset {name}")


# ------------------------------------------------------------------------------------------
# Helpers (no data needed)


def test_decode_text_handles_boms_utf8_and_cp1252():
    assert D.decode_text("caf\u00e9\r\nx".encode("utf-8")) == "caf\u00e9\nx"
    assert D.decode_text(b"\xef\xbb\xbfhello") == "hello"
    assert D.decode_text("\ufeffr\u00e9sum\u00e9\r\n".encode("utf-16-le")) == "r\u00e9sum\u00e9\n"
    assert D.decode_text(b"it\x92s \x93quoted\x94 \x85") == "it\u2019s \u201cquoted\u201d \u2026"
    assert D.decode_text(b"caf\xe9 \x81") == "caf\u00e9 \x81"  # undefined cp1252 byte
    # Mostly UTF-8 with a stray cp1252 byte: each part decoded as what it is.
    assert D.decode_text("caf\u00e9 na\u00efve".encode("utf-8") + b" it\x92s") == (
        "caf\u00e9 na\u00efve it\u2019s")


def test_strip_text_wrapper():
    raw = (b'<text id="http://example.com/a?b=1&amp;c=2" title="A &quot;T&quot;" '
           b'encoding="iso-8859-1">\n<html><body>x</body></html>\n</text>\n')
    html, attrs = D.strip_text_wrapper(raw)
    assert html == b"<html><body>x</body></html>\n"
    assert attrs == {"id": "http://example.com/a?b=1&c=2", "title": 'A "T"',
                     "encoding": "iso-8859-1"}
    assert D.strip_text_wrapper(b"<html></html>") == (b"<html></html>", {})


def test_holdout_split_is_deterministic_and_stable():
    ids = [f"{i:04d}" for i in range(1000)]
    train, hold = D.holdout_split(ids, 0.2, seed=1)
    assert (train, hold) == D.holdout_split(ids, 0.2, seed=1)
    assert sorted(train + hold) == ids and not set(train) & set(hold)
    assert 150 < len(hold) < 250
    # Removing ids never moves the others.
    sub_train, sub_hold = D.holdout_split(ids[::3], 0.2, seed=1)
    assert set(sub_hold) == set(hold) & set(ids[::3])
    assert D.holdout_split(ids, 0.2, seed=2)[1] != hold
    assert D.holdout_split(ids, 0.0)[1] == [] and D.holdout_split(ids, 1.0)[0] == []


def test_l3s_segments_nested_labels_and_invisible():
    html = (
        b"<html><head><title>x</title></head><body>"
        b'<span class="x-nc-sel0"><a>Menu</a></span>'
        b'<h1><span class="x-nc-sel1"><span class="x-nc-sel1">Big</span> news</span></h1>'
        b'<p><span class="x-nc-sel2">First par<span class="x-nc-sel2">agraph</span>.</span></p>'
        b'<p><span class="x-nc-sel2">Second.</span><style class="x-nc-invisible">.a{}</style>'
        b'<span class="x-nc-sel5">A comment</span></p>'
        b"</body></html>"
    )
    assert D.l3s_segments(html) == [
        (0, "Menu"), (1, "Big news"), (2, "First paragraph."), (2, "Second."), (5, "A comment"),
    ]


def test_ensure_unpacked_from_an_archive(tmp_path, monkeypatch):
    archive_dir = tmp_path / "archives"
    archive_dir.mkdir()
    with tarfile.open(archive_dir / "dragnet.tar.xz", "w:xz") as tar:
        data = b"hello"
        info = tarfile.TarInfo("dragnet/README.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    cache = tmp_path / "cache"
    monkeypatch.setenv("GROWNUP_DATA_DIR", str(cache))
    assert D.dataset_root() == cache
    target = D.ensure_unpacked("dragnet", archive_dir=archive_dir)
    assert target == cache / "dragnet"
    assert (target / "README.txt").read_bytes() == b"hello"
    assert [p.name for p in cache.iterdir()] == ["dragnet"]  # no temp directory left
    assert D.ensure_unpacked("dragnet", archive_dir=tmp_path / "nowhere") == target


def test_ensure_unpacked_missing_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GROWNUP_DATA_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GROWNUP_ARCHIVE_DIR", str(tmp_path / "empty"))
    with pytest.raises(D.DatasetNotAvailable, match="GROWNUP_DATA_DIR"):
        D.ensure_unpacked("cleaneval")
    with pytest.raises(KeyError):
        D.ensure_unpacked("no-such-dataset")


# ------------------------------------------------------------------------------------------
# Real data (skipped when not available)


def counts(name):
    out = {}
    for _, split in D.list_ids(name):
        out[split] = out.get(split, 0) + 1
    return out


def test_dragnet_split_counts_and_record():
    need("dragnet")
    assert counts("dragnet") == {"train": 966, "test": 415}
    assert D.list_ids("dragnet", "test")[0][1] == "test"
    rec = D.load_record("dragnet", "R76")
    assert rec.split == "train" and rec.dataset == "dragnet"
    assert rec.html.startswith(b"<") and b"Scoop.it" in rec.html
    assert "COMMENTS" not in rec.gold and rec.gold.split()[:2] == ["Keep", "Your"]
    assert rec.extra["comments"].startswith("Anne Mirtschin")


def test_cleaneval_split_counts_and_record():
    need("cleaneval")
    assert counts("cleaneval") == {"train": 58, "test": 681}
    rec = D.load("cleaneval", "train", ids=["1"])[0]
    assert rec.url == "http://1-las-vegas-real-estate.com/homes/sellers/list_today/"
    assert not rec.html.lstrip().startswith(b"<text") and not rec.html.rstrip().endswith(b"</text>")
    assert "URL:" not in rec.gold and "<p>" not in rec.gold and "<l>" not in rec.gold
    assert rec.gold.split()[:4] == ["If", "you", "feel", "it's"]
    assert rec.extra["declared_encoding"] == "unset"
    test = D.load("cleaneval", "test", limit=2)
    assert [r.split for r in test] == ["test", "test"]


def test_pagetype_records():
    need("pagetype")
    ids = D.list_ids("pagetype")
    assert len(ids) == 806 and {s for _, s in ids} == {"all"}
    rec = D.load("pagetype", limit=1)[0]
    assert rec.url.startswith("http") and rec.gold
    assert rec.extra["page_type"] in {"article", "forum", "service", "product", "documentation",
                                      "listing", "collection"}


def test_l3s_records():
    need("l3s_gn1")
    assert counts("l3s_gn1") == {"all": 621}
    rec = D.load_record("l3s_gn1", "01ccc7c5-a1d1-46e1-a5f7-43310df16575")
    assert rec.url.startswith("http://www.un.org/")
    headline = "No agreement reached on Kosovo\u2019s future status in Security Council"
    assert rec.extra["headline"] == headline  # the annotated copy has "Kosovo?s"
    assert rec.gold.startswith(rec.extra["headline"] + "\n")
    assert {label for label, _ in rec.extra["roles"]} <= set(D.L3S_LABELS)
    assert rec.extra["content_type"] == "text/html; charset=utf-8"


def test_cleanportaleval_records():
    need("cleanportaleval")
    assert counts("cleanportaleval") == {"test": 71}
    rec = D.load_record("cleanportaleval", "bbc.co.uk_news_01")
    assert rec.url == "http://bbc.co.uk/news/business-21302969"
    assert "&#" not in rec.gold and "BBC's" in rec.gold


@pytest.mark.parametrize("name", D.MODERN_DATASETS)
def test_modern_loader_reads_real_pages(name):
    if not available(name):
        skip_missing_data(f"dataset {name}")
    ids = D.list_ids(name)
    assert len(ids) >= 20 and all(split == "all" for _, split in ids)
    everything = D.load(name)
    recs = [r for r in everything if r.url][:3]
    assert len(recs) == 3 and sum(bool(r.url) for r in everything) >= 0.5 * len(ids)
    for r in recs:
        assert r.dataset == name and r.html.lstrip()[:1] == b"<" or b"<" in r.html[:2000]
        assert r.gold and len(r.gold.split()) > 5
        assert r.url is None or r.url.startswith("http")
        assert r.extra["silver"] == (name in D.SILVER_DATASETS)
        page = parse_page(r.html, url=r.url)
        assert page.num_nodes > 10
    if name == "wcxb_dev":
        assert {r.extra["page_type"] for r in D.load(name)} == {
            "article", "service", "product", "collection", "forum", "listing", "documentation"}
        assert isinstance(recs[0].extra["with"], list)
    if name.startswith("fundus"):
        assert all(r.extra["publisher"] for r in recs)
