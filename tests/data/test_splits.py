"""Site keys and site-grouped splits (``data/splits.py``): a site is never on both sides of a
split."""

import pytest

from scrapy_grownup.data import datasets as D
from scrapy_grownup.data import splits


def record(dataset, id_, url=None, **extra):
    return D.PageRecord(dataset, id_, b"", "", url, "all", extra)


# ------------------------------------------------------------------------------------------
# Site keys and grouped splits


def test_registrable_domain():
    assert splits.registrable_domain("www.bbc.co.uk") == "bbc.co.uk"
    assert splits.registrable_domain("news.bbc.co.uk") == "bbc.co.uk"
    assert splits.registrable_domain("WWW.Example.COM.") == "example.com"
    assert splits.registrable_domain("blog.example.com") == "example.com"
    assert splits.registrable_domain("example.de") == "example.de"
    assert splits.registrable_domain("a.b.example.com.au") == "example.com.au"
    assert splits.registrable_domain("10.0.0.1") == "10.0.0.1"


def test_site_of_prefers_publisher_then_domain_then_page():
    assert splits.site_of(record("fundus", "x", "https://www.zeit.de/a", publisher="Zeit")) == \
        "publisher:zeit"
    assert splits.site_of(record("wcxb_dev", "1", "https://m.example.org/p")) == "example.org"
    assert splits.site_of(record("dragnet", "7")) == "dragnet/7"
    assert splits.site_of(record("wcxb_dev", "2", "http://[")) == "wcxb_dev/2"


def test_site_groups_join_sites_near_duplicates_and_urls():
    recs = [
        record("wcxb_dev", "1", "https://a.example.com/x"),
        record("pagetype", "9", "https://www.example.com/y"),   # same site, other set
        record("fundus", "t1", "https://taz.de/1", publisher="Taz",
               near_duplicates=["fundus/t2"]),
        record("fundus", "t2", "https://taz.de/2", publisher="TazArchive"),
        record("magic_html_article", "m", "https://other.net/z"),
        record("postlight_silver", "p", "https://other2.net/same/"),
        record("wcxb_dev", "3", "https://other2.net/same"),           # same URL
    ]
    g = splits.site_groups(recs)
    assert g[0] == g[1]
    assert g[2] == g[3]
    assert g[5] == g[6]
    assert len({g[0], g[2], g[4], g[5]}) == 4
    # the key does not depend on the order of the records
    assert splits.site_groups(recs[::-1])[::-1] == g


def test_site_folds_never_put_a_site_on_both_sides():
    recs = [record("wcxb_dev", str(i), f"https://www.site{i % 37}.org/page{i}")
            for i in range(400)]
    folds = splits.site_folds(recs, 5)
    assert set(folds) == {0, 1, 2, 3, 4}
    by_site = {}
    for r, f in zip(recs, folds):
        by_site.setdefault(splits.site_of(r), set()).add(f)
    assert all(len(fs) == 1 for fs in by_site.values())
    train, held = splits.grouped_holdout(recs, 0.3)
    assert not splits.sites(recs[i] for i in train) & splits.sites(recs[i] for i in held)
    assert sorted(train + held) == list(range(len(recs)))
    with pytest.raises(ValueError):
        splits.site_folds(recs, 1)
