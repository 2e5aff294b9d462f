"""grownup lab dataset-warc: a pre-training corpus never holds a page of a site the measurement
tests on (by site group and by host), on hand-made records and on the real datasets."""

from __future__ import annotations

import pytest
from warcio.archiveiterator import ArchiveIterator

from scrapy_grownup.data import datasets as D
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.training.crosssite import EVAL_DATASETS, LEAVE_OUT
from scrapy_grownup.training.dataset_warc import (corpus_pages, held_out_pages,
                                                  write_dataset_warc)
from scrapy_grownup.warc.pairs import site_key
from tests.data_support import skip_missing_data


def record(dataset, id_, url=None, **extra):
    return D.PageRecord(dataset, id_, b"<p>x</p>", "", url, "all", extra)


def test_pages_of_a_test_site_group_or_host_never_go_in():
    test = [record("fundus", "1", "https://www.zeitung.de/politik/a", publisher="Zeitung"),
            record("fundus", "2", "https://news.blog.test/b")]
    pages = [
        record("wcxb_dev", "a", "https://m.zeitung.de/sport/c"),        # same domain
        record("pagetype", "b", "https://www.zeitung.de/politik/a/"),   # same URL
        record("l3s_gn1", "c", "https://other.example/d", near_duplicates=["fundus/1"]),
        record("wcxb_dev", "d", "https://kept.example/e"),
        record("wcxb_dev", "e", None),                                  # no site to check
        record("pagetype", "f", "https://kept.example/e"),              # written once
        record("fundus", "1", "https://www.zeitung.de/politik/a", publisher="Zeitung"),
        record("wcxb_dev", "g", "https://blog.test/h"),                 # same domain as test 2
    ]
    kept, left_out = corpus_pages(pages, test)
    assert [(r.dataset, r.id) for r in kept] == [("wcxb_dev", "d")]
    assert left_out == {"test_site": 5, "no_url": 1, "same_url": 1}
    everything, nothing_out = corpus_pages(pages[3:6], [])
    assert len(everything) == 1 and nothing_out == {"no_url": 1, "same_url": 1}


def test_a_test_host_whose_group_differs_still_goes(monkeypatch):
    # site groups join by registrable domain; the host check is what grownup lab evaluate --init
    # compares, so a page on a test host goes even if grouping ever kept them apart
    from scrapy_grownup.training import dataset_warc

    monkeypatch.setattr(dataset_warc, "site_groups",
                        lambda records: [f"g{i}" for i in range(len(records))])
    test = [record("fundus", "1", "https://www.zeitung.de/a")]
    kept, left_out = corpus_pages([record("wcxb_dev", "a", "https://zeitung.de/b"),
                                   record("wcxb_dev", "b", "https://kept.example/")], test)
    assert [r.id for r in kept] == ["b"] and left_out == {"test_host": 1}


def test_bad_choices_are_one_clear_error(tmp_path):
    with pytest.raises(GrownupError, match="not both"):
        held_out_pages(hold="fundus", fold=1)
    with pytest.raises(GrownupError, match="numbered 0 to 4"):
        held_out_pages(fold=5)
    with pytest.raises(GrownupError, match="no URLs to archive"):
        write_dataset_warc(tmp_path / "x.warc.gz", ["dragnet"])


def _available(*names):
    try:
        for name in names:
            D.ensure_unpacked(name)
    except D.DatasetNotAvailable:
        return False
    return True


def test_the_corpus_without_fundus_holds_none_of_its_sites(tmp_path):
    needed = ("wcxb_dev", "fundus", "fundus_history", "magic_html_article",
              "magic_html_forum", "dragnet", "cleaneval")
    if not _available(*needed):
        skip_missing_data("modern datasets")
    out = tmp_path / "no-fundus.warc.gz"
    result = write_dataset_warc(out, ["fundus", "fundus_history", "wcxb_dev"], hold="fundus",
                                limit=40)
    test_hosts = {site_key(r.url) for r in held_out_pages(hold="fundus")}
    assert result["test_pages"] == len(D.load("fundus")) + len(D.load("fundus_history"))
    urls = []
    with open(out, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response":
                urls.append(rec.rec_headers.get_header("WARC-Target-URI"))
                assert rec.content_stream().read()  # the page's own bytes
    assert len(urls) == result["pages"] == result["by_dataset"]["wcxb_dev"] > 0
    assert set(result["by_dataset"]) == {"wcxb_dev"}
    assert not {site_key(u) for u in urls} & test_hosts
    assert result["left_out"]["test_site"] >= 80  # all 80 fundus pages asked for
    assert LEAVE_OUT["fundus"] == ("fundus", "fundus_history")


def test_a_misspelt_held_out_set_is_refused_before_anything_trains(capsys):
    """``grownup lab evaluate --protocol leave-out --hold fundsu`` would otherwise train a model on
    every page and test it on none."""
    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training.crosssite import held_out_datasets

    assert held_out_datasets("fundus", EVAL_DATASETS) == ("fundus", "fundus_history")
    assert held_out_datasets("wcxb_dev,fundus", EVAL_DATASETS) == ("wcxb_dev", "fundus")
    with pytest.raises(GrownupError, match="fundsu not among the evaluated sets"):
        held_out_datasets("fundsu", EVAL_DATASETS)
    with pytest.raises(GrownupError, match="no dataset"):
        held_out_datasets(",", EVAL_DATASETS)
    assert main(["lab", "evaluate", "--protocol", "leave-out", "--hold", "fundsu",
                 "--out", "unused"]) == 2
    err = capsys.readouterr().err
    assert "fundsu not among the evaluated sets" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
