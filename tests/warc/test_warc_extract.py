"""``grownup extract`` over WARC/ARC archives: the articles of the pages an archive holds, every
record an article or a counted skip, damage among good archives, --jobs, resuming, and every
path given ending as input or a counted skip (issues 53 and 55)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from scrapy_grownup.cli.main import main
from scrapy_grownup.warc.synthetic import write_warc
from tests.warc_support import (HOSTILE, damaged_copies, dragnet_pages, hostile_paths,
                                served_folder, warc_fixtures)

PAGES = 20


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, bytes]]:
    return dragnet_pages(PAGES)


@pytest.fixture(scope="module")
def fixtures() -> Path:
    return warc_fixtures()


def _urls(n: int) -> list[str]:
    return [f"http://site{i % 3}.example/news/{i:02d}.html" for i in range(n)]


def _crawl(tmp_path: Path, pages, name: str = "crawl.warc.gz", **kwargs) -> Path:
    return write_warc(tmp_path / name, [(url, html, "text/html") for url, (_, html)
                                        in zip(_urls(len(pages)), pages)], noise=True, **kwargs)


def _run(capsys, *argv) -> tuple[int, list[dict], dict]:
    """``grownup extract`` in this process: exit code, JSON lines, summary."""
    out = Path(argv[argv.index("-o") + 1])
    code = main(["extract", *argv])
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] \
        if out.exists() else []
    return code, lines, json.loads(err.strip().splitlines()[-1])


def _same_article(a: dict, b: dict) -> None:
    for key, value in a.items():
        if key in ("path", "warc"):
            continue
        if isinstance(value, float):
            assert b[key] == pytest.approx(value, abs=1e-4), key  # batch composition
        else:
            assert b[key] == value, key


# -- the pages of an archive are the pages of the files -------------------------------------------
def test_archive_gives_the_articles_of_the_html_files(tmp_path, pages, capsys):
    archive = _crawl(tmp_path, pages)
    code, lines, summary = _run(capsys, str(archive), "--model", "fast", "--jobs", "1",
                                "--batch-pages", "8", "-o", str(tmp_path / "warc.jsonl"))
    assert code == 0
    # every record is an article or a counted skip: per page a request, the response, a
    # redirect and its request, a CSS response and its request, a revisit; and the warcinfo
    records = 1 + PAGES * 7
    assert summary["records"] == records and summary["archives"] == 1
    assert summary["read"] == summary["extracted"] + sum(summary["skipped"].values()) == records
    assert summary["skipped"] == {"http_301": PAGES, "not_html": PAGES, "request": 3 * PAGES,
                                  "revisit": PAGES, "warcinfo": 1}
    assert summary["extracted"] == PAGES == len(lines)
    # the same pages as files, extracted with the URLs they were archived under
    html_dir = tmp_path / "html"
    html_dir.mkdir()
    for i, (line, url, (_, html)) in enumerate(zip(lines, _urls(PAGES), pages)):
        assert line["url"] == url and line["path"] == str(archive.resolve())
        warc = line["warc"]
        assert warc["target_uri"] == url and warc["record_id"].startswith("urn:uuid:")
        assert warc["date"] and warc["record_type"] == "response" and warc["offset"] > 0
        page = html_dir / f"{i:02d}.html"
        page.write_bytes(html)
        code, (alone,), _ = _run(capsys, str(page), "--url", url, "--model", "fast",
                                 "--jobs", "1", "-o", str(tmp_path / "one.jsonl"))
        assert code == 0 and alone["text"] == line["text"], url
        _same_article(alone, line)
    assert len({line["warc"]["record_id"] for line in lines}) == PAGES


def test_archives_are_known_by_content_not_name(tmp_path, pages, capsys):
    """A WARC called ``.dat`` (in a directory or named), an ARC, a whole-file gzip: archives;
    a gzipped page called ``.html.gz``: a page."""
    inputs = tmp_path / "in"
    plain = write_warc(tmp_path / "p.warc", [(u, h, "text/html") for u, (_, h)
                                             in zip(_urls(3), pages)], gzip=False)
    inputs.mkdir()
    shutil.copy(plain, inputs / "crawl.dat")
    (inputs / "whole.bin").write_bytes(gzip.compress(plain.read_bytes()))
    (inputs / "page.html.gz").write_bytes(gzip.compress(pages[5][1]))
    (inputs / "notes.txt").write_text("not an input: left out")
    code, lines, summary = _run(capsys, str(inputs), "--model", "fast", "--jobs", "1",
                                "-o", str(tmp_path / "o.jsonl"))
    assert code == 0 and summary["archives"] == 2 and summary["extracted"] == 7
    assert [Path(line["path"]).name for line in lines] == \
        ["crawl.dat"] * 3 + ["page.html.gz"] + ["whole.bin"] * 3
    assert "warc" not in lines[3]
    code, lines, summary = _run(capsys, str(inputs / "crawl.dat"), "--model", "fast",
                                "--jobs", "1", "-o", str(tmp_path / "o2.jsonl"))
    assert summary["archives"] == 1 and len(lines) == 3


# -- damage among good archives ---------------------------------------------------------------------
def test_broken_archives_among_good_ones_are_counted_skips(tmp_path, pages, fixtures, capsys):
    inputs = tmp_path / "in"
    good = _crawl(inputs, pages[:8], name="a-good.warc.gz")
    damaged_copies(good, inputs)  # b-cut.warc.gz, truncated mid-record; c-garbled.warc.gz
    for name in ("resiliparse_testdata/clipped.warc.gz", "warcio_testdata/example-trunc.warc",
                 "warcio_testdata/example-wrong-chunks.warc.gz", "warcio_testdata/bad.arc",
                 "warcio_testdata/example-bad-non-chunked.warc.gz"):
        shutil.copy(fixtures / name, inputs / Path(name).name)
    (inputs / "d-empty.warc.gz").write_bytes(b"")
    (inputs / "e-noise.warc.gz").write_bytes(os.urandom(5000))
    code, lines, summary = _run(capsys, str(inputs), "--model", "fast", "--jobs", "1",
                                "-o", str(tmp_path / "o.jsonl"))
    assert code == 0
    skipped = summary["skipped"]
    for reason in ("malformed_record", "empty_file", "no_http_headers"):
        assert skipped.get(reason), (reason, skipped)
    # the cut and the garbled copy, clipped.warc.gz and the wrong chunks
    assert skipped["truncated_record"] + skipped.get("truncated_file", 0) >= 4, skipped
    assert skipped.get("corrupt", 0) + skipped.get("no_records", 0) >= 1  # the noise
    assert summary["read"] == summary["extracted"] + sum(skipped.values())
    assert summary["archives"] == 10
    # every page of the good archive is out, and the intact ones of the damaged copies
    urls = Counter(line["url"] for line in lines if line["path"].endswith("a-good.warc.gz"))
    assert sorted(urls) == sorted(_urls(8))
    damaged = [line for line in lines if "cut" in line["path"] or "garbled" in line["path"]]
    assert 0 < len(damaged) < 16
    assert {line["url"] for line in damaged} <= set(_urls(8))


def test_every_path_given_is_input_or_a_counted_skip(tmp_path, pages, caplog, capsys):
    """Issue 55: zero-byte archives, a directory named like an archive, link loops and
    dangling links are counted, logged skips, named or met in a directory."""
    inputs = tmp_path / "in"
    _crawl(inputs, pages[:2], name="good.warc.gz")
    expected = hostile_paths(inputs)
    caplog.set_level(logging.WARNING)
    code, lines, summary = _run(capsys, str(inputs), "--model", "fast", "--jobs", "1",
                                "-o", str(tmp_path / "o.jsonl"))
    assert code == 0 and len(lines) == 2
    # link_loop twice: the looping link and the directory linked inside itself
    assert {reason: summary["skipped"].get(reason) for reason in expected} == expected
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for name in HOSTILE:
        assert name in logged, name
    # each named alone (next to a good archive): the same reasons
    for name, reason in (("zero.warc.gz", "empty_file"), ("dir.warc.gz", "empty_directory"),
                         ("dangling.warc", "dangling_link"), ("loop.warc.gz", "link_loop"),
                         ("pipe.warc", "not_a_file")):
        code, _, summary = _run(capsys, str(inputs / "good.warc.gz"), str(inputs / name),
                                "--model", "fast", "--jobs", "1", "-o", str(tmp_path / "n.jsonl"))
        assert code == 0 and summary["skipped"].get(reason) == 1, (name, summary)


def test_the_corpus_counts_the_same_path_skips(tmp_path, pages):
    """``grownup warc`` reads paths as ``grownup extract`` does: the same skips, counted."""
    import asyncio
    import dataclasses

    from scrapy_grownup.warc.settings import WarcSettings
    from scrapy_grownup.warc.sources import expand_inputs
    from scrapy_grownup.warc.writer import CorpusWriter

    inputs = tmp_path / "in"
    _crawl(inputs, pages[:2], name="good.warc.gz")
    expected = hostile_paths(inputs, fifo=False)
    writer = CorpusWriter(tmp_path / "corpus", dataclasses.replace(
        WarcSettings.from_settings(None), workers=0, shard_pages=4))

    async def read():  # what WarcSpider.start does
        found = expand_inputs([str(inputs), str(tmp_path / "nothing-here")])
        for skip in found.skipped:
            writer.path_skipped(skip)
        for source in found.sources:
            async for _ in writer.read(source):
                pass

    try:
        asyncio.run(read())
    finally:
        writer.close()
    totals = writer.totals
    assert totals["pages"] == 2
    for reason, count in (expected + Counter({"missing_path": 1})).items():
        assert totals[f"skipped/{reason}"] == count, (reason, totals)


# -- processes, streaming, progress ------------------------------------------------------------
def test_jobs_give_what_one_process_gives(tmp_path, pages, fixtures, capsys):
    inputs = tmp_path / "in"
    _crawl(inputs, pages[:10], name="a.warc.gz")
    shutil.copy(fixtures / "resiliparse_testdata" / "clipped.warc.gz", inputs / "b.warc.gz")
    shutil.copy(fixtures / "pywb_sample_archive" / "warcs" / "iana.warc.gz", inputs)
    results = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}.jsonl"
        assert main(["extract", str(inputs), "--model", "fast", "--jobs", jobs,
                     "--batch-pages", "3", "-o", str(out)]) == 0
        summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
        results[jobs] = ([json.loads(line) for line in out.read_text().splitlines()], summary)
    (one, s1), (two, s2) = results["1"], results["2"]
    assert s1 == s2 and s1["extracted"] == 10 + 16
    assert [line["warc"]["record_id"] for line in one] == \
        [line["warc"]["record_id"] for line in two]
    for a, b in zip(one, two):
        assert a["text"] == b["text"]
        _same_article(a, b)


def test_records_are_streamed_not_loaded(tmp_path, pages):
    """The first batch goes out before the archive has been read to its end."""
    import argparse

    from scrapy_grownup.cli.main import _input_chunks, _inputs, _Run

    archive = _crawl(tmp_path, pages)
    inputs = _inputs([str(archive)])
    run = _Run(inputs, None, None, True)
    args = argparse.Namespace(batch_pages=4, url=None)
    chunks = _input_chunks(inputs, args, run)
    first, done, owners = next(chunks)
    assert sum(not isinstance(entry[1], tuple) for entry in first) == 4 and done == 0
    assert owners == [0] * len(first)
    assert run.item_counts[0] == {}  # counted when the archive ends
    rest = list(chunks)
    assert rest[-1][1] == 1 and run.item_counts[0]["records"] == 1 + PAGES * 7


def test_log_lines_every_n_records_off_a_terminal(tmp_path, pages, caplog, capsys):
    archive = _crawl(tmp_path, pages[:6])
    caplog.set_level(logging.INFO, logger="scrapy_grownup.cli.main")
    assert main(["extract", str(archive), "--model", "fast", "--jobs", "1", "--batch-pages",
                 "2", "--log-every", "10", "-o", str(tmp_path / "o.jsonl")]) == 0
    lines = [r.getMessage() for r in caplog.records if "pages/s" in r.getMessage()]
    assert len(lines) >= 3 and "read (pages and records)" in lines[0], lines


# -- stopped and run again -----------------------------------------------------------------------
def test_a_stopped_run_resumes_at_the_archive_it_stopped_in(tmp_path, pages, caplog, capsys,
                                                            monkeypatch):
    import scrapy_grownup.cli.main as cli

    inputs = tmp_path / "in"
    for k in range(3):
        _crawl(inputs, pages[k * 5:(k + 1) * 5], name=f"{k}.warc.gz")
    argv = ["extract", str(inputs), "--model", "fast", "--jobs", "1", "--batch-pages", "2"]
    fresh = tmp_path / "fresh.jsonl"
    assert main(argv + ["-o", str(fresh)]) == 0
    expected = json.loads(capsys.readouterr().err.strip().splitlines()[-1])

    out = tmp_path / "out.jsonl"
    real = cli.chunk_results
    calls = []

    def stopping(*args, **kwargs):  # Ctrl-C in the second archive
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "chunk_results", stopping)
    assert main(argv + ["-o", str(out)]) == 130
    monkeypatch.setattr(cli, "chunk_results", real)
    progress = Path(str(out) + ".progress.json")
    state = json.loads(progress.read_text())
    assert state["done"] == 1  # the first archive was finished
    assert out.stat().st_size > state["output_bytes"]  # and some of the second written
    capsys.readouterr()

    caplog.set_level(logging.INFO, logger="scrapy_grownup.cli.main")
    assert main(argv + ["-o", str(out)]) == 0
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert any("resuming" in r.getMessage() and "1 of 3 inputs" in r.getMessage()
               for r in caplog.records)
    assert summary.pop("resumed_after") == 1 and summary == expected
    # no line twice, none lost (scores may differ in their last bits: other batches)
    resumed = [json.loads(line) for line in out.read_text().splitlines()]
    whole = [json.loads(line) for line in fresh.read_text().splitlines()]
    assert [line["warc"] for line in resumed] == [line["warc"] for line in whole]
    for a, b in zip(whole, resumed):
        assert a["text"] == b["text"]
        _same_article(a, b)
    assert not progress.exists()

    # a progress file of another command is said to be so, and the run starts over
    caplog.clear()
    monkeypatch.setattr(cli, "chunk_results", stopping)
    calls.clear()
    assert main(argv + ["-o", str(out)]) == 130
    monkeypatch.setattr(cli, "chunk_results", real)
    assert main(argv + ["--format", "text", "-o", str(out)]) == 0
    assert any("starting over" in r.getMessage() for r in caplog.records)
    assert "resumed_after" not in json.loads(capsys.readouterr().err.strip().splitlines()[-1])


# -- a user's mistakes: one line --------------------------------------------------------------------
def test_user_errors_are_one_line(tmp_path, pages, capsys):
    archive = _crawl(tmp_path, pages[:1])
    for argv, words in (
            ([str(archive), "--url", "https://x.test/"], ("--url", "WARC-Target-URI")),
            ([str(tmp_path / "missing.warc.gz")], ("no such file",)),
            ([str(archive), "-o", str(tmp_path / "no-dir" / "o.jsonl")], ("cannot write",))):
        assert main(["extract", *argv, "--model", "fast"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("grownup extract: error: ") and all(w in err for w in words)
    (tmp_path / "link.warc").symlink_to(tmp_path / "gone")
    assert main(["extract", str(tmp_path / "link.warc"), "--model", "fast"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "dangling_link" in err, err


def test_an_archive_behind_a_url_is_read_as_it_downloads(tmp_path, pages, capsys):
    _crawl(tmp_path, pages[:3], name="r.warc.gz")
    with served_folder(tmp_path) as base:
        url = f"{base}/r.warc.gz"
        code, lines, summary = _run(capsys, url, "--model", "fast", "--jobs", "1",
                                    "-o", str(tmp_path / "o.jsonl"))
        assert code == 0 and summary["extracted"] == 3 and lines[0]["path"] == url
