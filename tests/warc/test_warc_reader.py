"""WARC/ARC reading: sources, record gating, and damaged archives (the shared fixtures included)."""

from __future__ import annotations

import gzip
import io
import random
from collections import Counter
from pathlib import Path

import pytest

from scrapy_grownup.warc.reader import Candidate, RecordReader
from scrapy_grownup.warc.sources import Source, expand, source_for, split_specs
from scrapy_grownup.warc.synthetic import write_warc
from tests.warc_support import (HOSTILE, PAGE, dragnet_pages, hostile_paths, response_record,
                                served_folder, warc_fixtures)


@pytest.fixture(scope="module")
def fixtures() -> Path:
    return warc_fixtures()


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, bytes]]:
    return dragnet_pages(6)


def read(path, **kwargs) -> tuple[Counter, RecordReader, list[Candidate]]:
    reader = RecordReader(path if isinstance(path, Source) else Source(str(path)), **kwargs)
    counts, found = Counter(), []
    for event in reader:
        if isinstance(event, Candidate):
            counts["PAGE"] += 1
            found.append(event)
        else:
            counts[event.reason] += 1
    return counts, reader, found


# -- every shared fixture ---------------------------------------------------------------------
def test_every_fixture_file_reads_without_crashing(fixtures):
    # The 10 MB L3S-GN1 WARC is read by its own test (test_warc_pairs.py).
    files = sorted(p for p in fixtures.rglob("*") if p.is_file() and "l3s_gn1" not in str(p))
    assert len(files) >= 40
    for path in files:
        counts, reader, _ = read(path)
        assert sum(counts.values()) >= 1, path  # every file gives pages or counted skips
        assert reader.failed is None, path


EXPECTED = {
    # file: (pages, {reason: count})
    "commoncrawl_whirlwind/whirlwind.warc.gz": (1, {"request": 1, "metadata": 1}),
    "commoncrawl_whirlwind/whirlwind.warc.wet.gz": (0, {"conversion": 1}),
    "pywb_sample_archive/warcs/iana.warc.gz": (16, {"revisit": 123, "request": 171,
                                                    "http_302": 4}),
    "pywb_sample_archive/warcs/example.arc.gz": (1, {}),
    "resiliparse_testdata/warcfile.warc.gz": (16, {"metadata": 16}),
    "resiliparse_testdata/clipped.warc.gz": (0, {"truncated_record": 1}),
    "resiliparse_testdata/block-sized-records.warc.gz": (0, {"other_record": 3}),
    "warcio_testdata/bad.arc": (0, {"no_http_headers": 3}),
    "warcio_testdata/example-trunc.warc": (1, {"malformed_record": 1}),
    # gzip members cut across records: the first record's member ends inside it (damage, as
    # read), then the members are read as one stream, which finds the request record after it
    "warcio_testdata/example-wrong-chunks.warc.gz": (0, {"truncated_record": 1, "request": 1,
                                                         "corrupt": 0}),
    # non-chunked gzip: warcio rejects it after one record; it is re-read as one stream
    "warcio_testdata/example-bad-non-chunked.warc.gz": (1, {"revisit": 1, "request": 2}),
    "warcio_testdata/example-bad.warc.gz.bad": (1, {"revisit": 1, "http_302": 1}),
    "warcio_testdata/post-test.warc.gz": (0, {"not_html": 3, "request": 3}),
    "warcio_testdata/example-resource.warc.gz": (1, {}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_counts(fixtures, name):
    pages, reasons = EXPECTED[name]
    counts, _, found = read(fixtures / name)
    assert counts["PAGE"] == pages
    for reason, count in reasons.items():
        assert counts[reason] == count, (reason, counts)
    for candidate in found:
        assert candidate.body and candidate.url.startswith(("http://", "https://"))


def test_non_archive_files_give_skips_only(fixtures):
    # warcio takes lines of text for ARC headers (ARC records have no magic number), so a text
    # file is a run of malformed records; a binary file is not an archive at all.
    for path in (fixtures / "README.txt", fixtures / "pywb_sample_archive" / "cdxj" /
                 "example.cdx.gz"):
        counts, _, _ = read(path)
        assert counts and "PAGE" not in counts
        assert set(counts) <= {"corrupt", "malformed_record", "no_http_headers",
                               "truncated_record", "other_record", "warcinfo"}, counts


# -- damage -------------------------------------------------------------------------------------
def test_truncated_and_garbled_archives_never_raise(fixtures):
    rng = random.Random(7)
    data_gz = (fixtures / "resiliparse_testdata" / "warcfile.warc.gz").read_bytes()
    data_plain = (fixtures / "pywb_sample_archive" / "warcs" / "example.warc").read_bytes()
    data_arc = (fixtures / "warcio_testdata" / "example.arc").read_bytes()
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        for name, data in (("a.warc.gz", data_gz), ("b.warc", data_plain), ("c.arc", data_arc)):
            for trial in range(12):
                cut = rng.randrange(len(data))
                if trial % 3 == 0:
                    blob = data[:cut]
                elif trial % 3 == 1:
                    blob = data[:cut] + bytes(rng.randrange(256) for _ in range(64)) + \
                        data[cut + 64:]
                else:
                    blob = data[:cut] + data[cut + rng.randrange(1, 3000):]
                path = Path(directory) / name
                path.write_bytes(blob)
                counts, reader, _ = read(path)  # must not raise
                assert reader.failed is None


def test_reading_resumes_after_a_corrupt_gzip_member(tmp_path, pages):
    path = write_warc(tmp_path / "x.warc.gz",
                      [(f"http://a.example/{i}.html", html, "text/html")
                       for i, (_, html) in enumerate(pages)], requests=False)
    data = path.read_bytes()
    # Find the gzip members and garble the middle of the third page's member.
    starts = [i for i in range(len(data) - 2) if data[i:i + 3] == b"\x1f\x8b\x08"]
    starts = [s for s in starts if _is_member(data, s)]
    assert len(starts) == len(pages) + 1  # warcinfo + one member per page
    target = starts[3]
    middle = (target + starts[4]) // 2
    damaged = data[:middle] + b"\x00" * 200 + data[middle + 200:]
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(damaged)
    counts, reader, found = read(bad)
    assert counts["PAGE"] == len(pages) - 1  # only the damaged record is lost
    assert counts["truncated_record"] + counts["corrupt"] + counts["corrupt_record"] >= 1
    urls = [c.url for c in found]
    assert urls[-1] == f"http://a.example/{len(pages) - 1}.html"


def _is_member(data: bytes, offset: int) -> bool:
    import zlib

    try:
        return zlib.decompressobj(31).decompress(data[offset:offset + 4096], 16) \
            .startswith(b"WARC/")
    except zlib.error:
        return False


def test_whole_file_gzip_is_read_completely(tmp_path, pages):
    plain = write_warc(tmp_path / "p.warc", [(f"http://a.example/{i}", html, "text/html")
                                             for i, (_, html) in enumerate(pages)], gzip=False)
    whole = tmp_path / "whole.warc.gz"
    whole.write_bytes(gzip.compress(plain.read_bytes()))
    counts, _, _ = read(whole)
    assert counts["PAGE"] == len(pages) and counts["request"] == len(pages)


# -- gating --------------------------------------------------------------------------------------
def test_html_gating_and_body_cap(tmp_path, pages):
    html = pages[0][1]
    records = [
        ("http://a.example/page.html", html, "text/html; charset=utf-8"),
        ("http://a.example/sniffed", html, "application/octet-stream"),  # generic: sniffed
        ("http://a.example/data.json", b'{"a": 1}', "application/json"),
        ("http://a.example/blob", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, ""),
    ]
    path = write_warc(tmp_path / "g.warc.gz", records, noise=True)
    counts, _, found = read(path)
    assert counts["PAGE"] == 2
    assert [c.url for c in found] == ["http://a.example/page.html", "http://a.example/sniffed"]
    assert counts["not_html"] == 2 + 4  # json, png, and one CSS response per record
    assert counts["http_301"] == 4 and counts["revisit"] == 4 and counts["request"] == 12
    counts, _, found = read(path, max_bytes=1000)
    assert all(len(c.body) == 1001 for c in found)  # parse_page cuts and flags it


def test_sources_expand_dirs_globs_and_urls(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("d/a.warc.gz", "d/sub/b.arc", "d/notes.txt", "d/c.warc"):
        (tmp_path / name).write_bytes(b"")
    sources, missing = expand([str(tmp_path / "d"), str(tmp_path / "d" / "*.warc*"),
                               str(tmp_path / "nothing*.warc"), "https://x.example/y.warc.gz"])
    names = [s.name for s in sources]
    assert names == ["a.warc.gz", "c.warc", "b.arc", "y.warc.gz"]  # no duplicates, stable
    assert missing == [str(tmp_path / "nothing*.warc")]
    assert sources[-1].is_url
    # An explicit file is taken whatever its name.
    assert [s.name for s in expand([str(tmp_path / "d" / "notes.txt")])[0]] == ["notes.txt"]
    assert split_specs("a.warc, b.warc\nc.warc") == ["a.warc", "b.warc", "c.warc"]
    assert split_specs(["a.warc,b.warc", "c.warc"]) == ["a.warc", "b.warc", "c.warc"]
    key = source_for(str(tmp_path / "d" / "a.warc.gz")).key
    assert key.startswith("a-") and key == Source(str(tmp_path / "d" / "a.warc.gz")).key
    assert source_for((tmp_path / "d" / "a.warc.gz").as_uri()).key == key


def test_unreadable_file_is_counted(tmp_path):
    counts, reader, _ = read(tmp_path / "missing.warc.gz")
    assert counts == Counter({"file_unreadable": 1}) and reader.failed


def test_http_source_streams(tmp_path, pages):
    write_warc(tmp_path / "r.warc.gz", [(f"http://a.example/{i}", html, "text/html")
                                        for i, (_, html) in enumerate(pages)])
    with served_folder(tmp_path) as base:
        counts, reader, _ = read(Source(f"{base}/r.warc.gz"))
        assert counts["PAGE"] == len(pages) and reader.failed is None
        counts, reader, _ = read(Source(f"{base}/absent.warc.gz"))
        assert counts == Counter({"file_unreadable": 1}) and reader.failed


def test_content_encoded_bodies_are_decoded(tmp_path, pages):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    html = pages[0][1]
    path = tmp_path / "enc.warc.gz"
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        body = gzip.compress(html)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"),
                                           ("Content-Encoding", "gzip")], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            "http://a.example/z", "response", payload=io.BytesIO(body), length=len(body),
            http_headers=http))
    counts, _, found = read(path)
    assert counts["PAGE"] == 1 and found[0].body == html


# -- hostile archives and paths (issue 15) -------------------------------------------------------
@pytest.mark.parametrize("length", [b"-5", b"junk", b"-100000"])
def test_whole_file_gzip_with_a_junk_content_length_is_damage(tmp_path, length):
    # warcio gives a negative offset for such a record; seeking to it raised OSError (Errno 22)
    # out of the reader, which ended the whole WARC run after this file.
    path = tmp_path / "junk.warc.gz"
    path.write_bytes(gzip.compress(response_record("http://a.example/1", PAGE, length) +
                                   response_record("http://a.example/2", PAGE)))
    counts, reader, _ = read(path)  # must not raise
    assert counts["corrupt"] == 1 and reader.errors and reader.failed is None


@pytest.mark.parametrize("length", [b"-5", b"junk", b"-100000"])
def test_whole_file_gzip_keeps_the_good_records_after_a_bad_length(tmp_path, length):
    """Issue 55, finding 3: the good records after a first record with a negative (or junk)
    Content-Length were lost when the file was gzipped whole, and kept when it was not. Both
    now give the same pages and the same skips."""
    data = response_record("http://a.example/1", PAGE, length) + b"".join(
        response_record(f"http://a.example/{i}", PAGE) for i in range(2, 6))
    plain, whole = tmp_path / "plain.warc", tmp_path / "whole.warc.gz"
    plain.write_bytes(data)
    whole.write_bytes(gzip.compress(data))
    (plain_counts, _, plain_pages), (whole_counts, reader, whole_pages) = read(plain), read(whole)
    assert whole_counts == plain_counts and whole_counts["PAGE"] == 4
    assert [c.url for c in whole_pages] == [c.url for c in plain_pages] == \
        [f"http://a.example/{i}" for i in range(2, 6)]
    assert whole_counts["corrupt"] == 1 and reader.errors and reader.failed is None
    # and with more bad records among the good ones
    data = b"".join(response_record(f"http://a.example/{i}", PAGE, b"-7" if i % 2 else None)
                    for i in range(8))
    plain.write_bytes(data)
    whole.write_bytes(gzip.compress(data))
    assert read(whole)[0] == read(plain)[0] and read(whole)[0]["PAGE"] == 4


def test_empty_and_recordless_archives_are_counted(tmp_path):
    """Issue 55: a zero-byte archive gave no event at all (no count, no warning)."""
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    counts, reader, _ = read(empty)
    assert counts == Counter({"empty_file": 1}) and reader.errors and reader.failed is None
    for data in (b"\r\n\r\n\n", b" ", b"\x00" * 10):  # bytes, and not one record
        blank = tmp_path / "blank.warc"
        blank.write_bytes(data)
        counts, _, _ = read(blank)
        assert sum(counts.values()) >= 1 and "PAGE" not in counts, data


def test_archives_are_known_by_their_first_bytes(fixtures, tmp_path):
    from scrapy_grownup.warc.sources import archive_format

    assert archive_format(fixtures / "warcio_testdata" / "example.warc.gz") == "warc"
    assert archive_format(fixtures / "warcio_testdata" / "example.warc") == "warc"
    assert archive_format(fixtures / "warcio_testdata" / "example.arc.gz") == "arc"
    assert archive_format(fixtures / "warcio_testdata" / "example.arc") == "arc"
    assert archive_format(fixtures / "resiliparse_testdata" / "clueweb-quirk.warc.gz") == "warc"
    whole = tmp_path / "whole.bin"
    whole.write_bytes(gzip.compress((fixtures / "warcio_testdata" / "example.warc").read_bytes()))
    assert archive_format(whole) == "warc"
    arc_body = (fixtures / "warcio_testdata" / "example.arc").read_bytes()
    headless = tmp_path / "headless.dat"  # an ARC without its filedesc:// version block
    headless.write_bytes(arc_body[arc_body.index(b"\nhttp") + 1:])
    assert archive_format(headless) == "arc"
    for name, data in (("page.html.gz", gzip.compress(PAGE)), ("page.warc", PAGE),
                       ("empty.warc", b""), ("noise.warc.gz", b"\x1f\x8b" + bytes(100))):
        (tmp_path / name).write_bytes(data)
        assert archive_format(tmp_path / name) is None, name
    assert archive_format(tmp_path) is None and archive_format(tmp_path / "gone") is None


def test_every_path_given_ends_as_an_archive_or_a_counted_skip(tmp_path):
    """Issue 55: zero-byte archives, a directory named dir.warc.gz, link loops and dangling
    links were passed over with no count and no warning."""
    from scrapy_grownup.warc.sources import PATH_SKIP_REASONS, PathSkip, expand_inputs

    d = tmp_path / "d"
    good = write_warc(d / "good.warc.gz", [("http://a.example/1", PAGE, "text/html")])
    hostile_paths(d)
    (d / "notes.txt").write_text("left out: not an archive, not named like one")
    (d / "crawl.dat").write_bytes(good.read_bytes())  # an archive by its content
    found = expand_inputs([str(d)])
    # zero.warc.gz is an archive still: its reader says empty_file
    assert [s.name for s in found.sources] == ["crawl.dat", "good.warc.gz", "zero.warc.gz"]
    reasons = sorted((Path(s.path).name, s.reason) for s in found.skipped)
    assert reasons == sorted((name, reason) for name, reason in HOSTILE.items()
                             if name != "zero.warc.gz")
    assert {s.reason for s in found.skipped} <= set(PATH_SKIP_REASONS)
    assert all(s.detail for s in found.skipped) and not found.missing
    # named one by one
    for name, reason in (("dir.warc.gz", "empty_directory"), ("dangling.warc", "dangling_link"),
                         ("loop.warc.gz", "link_loop"), ("pipe.warc", "not_a_file")):
        named = expand_inputs([str(d / name)])
        assert [s.reason for s in named.skipped] == [reason] and not named.sources, name
    named = expand_inputs([str(tmp_path / "nothing.warc"), str(tmp_path / "none*.warc")])
    assert [s.reason for s in named.skipped] == ["missing_path", "missing_path"]
    assert named.missing == [str(tmp_path / "nothing.warc"), str(tmp_path / "none*.warc")]
    assert isinstance(named.items[0], PathSkip)
    counts, _, _ = read(found.sources[2])
    assert counts == Counter({"empty_file": 1})


def test_only_regular_files_are_read_once(tmp_path):
    import os
    import threading

    good = write_warc(tmp_path / "d" / "good.warc.gz", [("http://a.example/1", PAGE,
                                                         "text/html")])
    (tmp_path / "d" / "link.warc.gz").symlink_to(good)
    (tmp_path / "elsewhere.warc.gz").symlink_to(good)
    fifo = tmp_path / "d" / "pipe.warc"
    os.mkfifo(fifo)
    # The FIFO is passed over and the linked archive is the same archive: one source.
    sources, missing = expand([str(tmp_path / "d"), str(tmp_path / "elsewhere.warc.gz"),
                               str(tmp_path / "d" / "*.warc*")])
    assert [s.location for s in sources] == [str(good.resolve())] and not missing
    assert source_for(str(tmp_path / "elsewhere.warc.gz")).key == sources[0].key
    assert expand([str(fifo)]) == ([], [str(fifo)])
    # Opening a FIFO directly fails at once instead of waiting for a writer forever.
    result: list = []
    thread = threading.Thread(target=lambda: result.append(read(Source(str(fifo)))),
                              daemon=True)
    thread.start()
    thread.join(10)
    assert result, "opening a FIFO blocked"
    counts, reader, _ = result[0]
    assert counts == Counter({"file_unreadable": 1}) and "regular file" in reader.failed
