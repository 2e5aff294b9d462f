"""Same-website pairs: sites, URL sub-paths, streamed grouping, in-batch negatives."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from scrapy_grownup.data.datasets import DatasetNotAvailable
from scrapy_grownup.warc.pairs import (PairSpill, batch_negatives, build_pairs, match_site,
                                       read_pairs, site_hash, site_key, url_directory,
                                       write_pairs)
from tests.data_support import skip_missing_data


def test_site_key_and_directory():
    assert site_key("http://WWW.Example.com:8080/a/b.html") == "example.com"
    assert site_key("https://news.bbc.co.uk/2/hi/x.stm") == "news.bbc.co.uk"
    assert site_key("http://www.com/") == "www.com"  # not a www. prefix
    assert site_key("file:///tmp/x.html") is None and site_key("") is None
    assert site_key("http://[::1/") is None  # invalid URL: no site, no crash
    assert url_directory("http://a.example/news/2024/story.html?id=3") == ("news", "2024")
    assert url_directory("http://a.example/news/2024/") == ("news", "2024")
    assert url_directory("http://a.example/") == ()
    assert site_hash("example.com") == site_hash("example.com") != site_hash("example.org")
    assert site_hash(None) == 0


def test_match_site_prefers_deep_shared_directories():
    pages = [
        (0, "http://s/news/2024/a.html"), (1, "http://s/news/2024/b.html"),
        (2, "http://s/news/2023/c.html"), (3, "http://s/sport/d.html"),
        (4, "http://s/news/2023/e.html"), (5, "http://s/news/2024/f.html"),
        (6, "http://s/about.html"), (7, "http://s/news/2024/a.html#top"),  # same URL as 0
    ]
    pairs = match_site(pages)
    assert (0, 1, 2) in pairs and (2, 4, 2) in pairs  # same directory, depth 2
    # 5 is left over in news/2024 and climbs to news/, then to the root with 3 and 6.
    used = Counter(i for a, b, _ in pairs for i in (a, b))
    assert max(used.values()) == 1 and 7 not in used  # disjoint, repeats paired once
    assert len(pairs) == 7 // 2
    assert all(depth >= 0 for _, _, depth in pairs)


def test_spill_partitions_give_the_same_pairs(tmp_path):
    rng = np.random.default_rng(0)
    pages = [(i, f"http://site{rng.integers(40)}.example/d{rng.integers(3)}/p{i}.html")
             for i in range(2000)]
    one = build_pairs(pages, tmp_path / "one", len(pages), partition_pages=10_000)
    many = build_pairs(pages, tmp_path / "many", len(pages), partition_pages=100)
    key = lambda a: sorted(map(tuple, a["pairs"].tolist()))  # noqa: E731
    assert key(one) == key(many) and len(one["pairs"]) > 900
    assert int(one["sites"]) == int(many["sites"]) == 40
    assert not (tmp_path / "one").exists()  # spill files are removed
    site_of = {i: site_hash(site_key(u)) for i, u in pages}
    for (a, b), h in zip(one["pairs"].tolist(), one["site"].tolist()):
        assert site_of[a] == site_of[b] == h
    with PairSpill(tmp_path / "s", 10, 1) as spill:
        assert spill.partitions == 10


def test_pairs_file_round_trip(tmp_path):
    arrays = build_pairs([(0, "http://a/x/1"), (1, "http://a/x/2"), (2, "http://b/3")],
                         tmp_path / "spill", 3)
    path = write_pairs(tmp_path / "pairs.safetensors", arrays)
    back = read_pairs(path)
    assert back["pairs"].tolist() == [[0, 1]] and back["depth"].tolist() == [1]
    with pytest.raises(ValueError):
        from safetensors.numpy import save_file

        save_file({"x": np.zeros(1)}, str(tmp_path / "other.safetensors"))
        read_pairs(tmp_path / "other.safetensors")


def test_batch_negatives_label_by_site():
    site_a = np.array([1, 2, 3, 4, 5, 6])
    order, labels = batch_negatives(site_a, site_a.copy(), ratio=0.5)
    assert order.tolist() == [2, 1, 0, 3, 4, 5]
    assert labels.tolist() == [0, 1, 0, 1, 1, 1]  # the middle one was reversed onto itself
    same = np.array([7, 7, 7, 7])
    _, labels = batch_negatives(same, same)
    assert labels.tolist() == [1, 1, 1, 1]  # a same-site permutation stays positive


def test_l3s_gn1_warc_pages_and_pairs(tmp_path):
    """The one test that reads the 621-page L3S-GN1 WARC: real URLs of 407 news hosts."""
    from scrapy_grownup.warc.reader import Candidate, RecordReader
    from scrapy_grownup.warc.sources import Source
    from scrapy_grownup.warc.synthetic import fixture_dir

    try:
        path = fixture_dir() / "l3s_gn1_repackaged" / "L3S-GN1-repackaged.warc.gz"
    except DatasetNotAvailable:
        skip_missing_data("WARC fixtures")
    events = list(RecordReader(Source(str(path))))
    found = [e for e in events if isinstance(e, Candidate)]
    # Its pages are 'resource' records (stored pages, no HTTP), paired with 'conversion' ones.
    assert len(found) == 621 and len(events) == 1242
    assert {getattr(e, "reason", None) for e in events if e not in found} == {"conversion"}
    assert all(c.record_type == "resource" and c.record_id.startswith("urn:uuid:")
               for c in found)
    urls = [c.url for c in found]
    result = build_pairs(enumerate(urls), tmp_path / "spill", len(urls), partition_pages=100)
    by_site = defaultdict(set)
    for url in urls:
        by_site[site_key(url)].add(url.split("#")[0])
    assert len(result["pairs"]) == sum(len(u) // 2 for u in by_site.values())
    assert int(result["sites"]) == len(by_site) == 405  # 407 hosts, www. folded
    for a, b in result["pairs"].tolist():
        assert site_key(urls[a]) == site_key(urls[b])
    assert (result["depth"] > 0).mean() > 0.5  # most pairs share a URL sub-path
