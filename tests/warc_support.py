"""Broken WARC archives and hostile input paths, shared by the WARC tests (``test_warc_reader``,
``test_warc_extract``, ``test_warc_spider``): one writer of each kind of damage, so that the
reader, ``grownup extract`` and the corpus are tested on the same bytes."""

from __future__ import annotations

import os
import threading
from collections import Counter
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path



class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def served_folder(folder: Path):
    """``folder`` served over HTTP on loopback, quietly; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


PAGE = b"<html><body><p>A page of a story, long enough to read.</p></body></html>"


def response_record(url: str, body: bytes, length: bytes | None = None) -> bytes:
    """One uncompressed WARC ``response`` record of an HTML page; ``length`` replaces its
    ``Content-Length`` (``b"-5"``, ``b"junk"``: the damage warcio seeks a negative offset on)."""
    payload = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
    declared = length if length is not None else str(len(payload)).encode()
    return (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: " + url.encode() +
            b"\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: " +
            declared + b"\r\n\r\n" + payload + b"\r\n\r\n")


def damaged_copies(archive: Path, directory: Path) -> tuple[Path, Path]:
    """Two damaged copies of ``archive`` in ``directory``: ``b-cut.warc.gz``, cut in half
    (truncated mid-record), and ``c-garbled.warc.gz``, 300 zero bytes a third of the way in."""
    data = archive.read_bytes()
    cut = directory / "b-cut.warc.gz"
    cut.write_bytes(data[: len(data) // 2])
    garbled = bytearray(data)
    garbled[len(data) // 3: len(data) // 3 + 300] = b"\x00" * 300
    garbled_path = directory / "c-garbled.warc.gz"
    garbled_path.write_bytes(bytes(garbled))
    return cut, garbled_path


# What each entry ``hostile_paths`` makes is, once the paths are expanded: a skip reason, or
# ``empty_file`` from the reader of a zero-byte archive (an archive still, by its name).
HOSTILE = {"zero.warc.gz": "empty_file", "dir.warc.gz": "empty_directory",
           "dangling.warc": "dangling_link", "loop.warc.gz": "link_loop",
           "back": "link_loop", "pipe.warc": "not_a_file"}


def hostile_paths(directory: Path, fifo: bool = True) -> Counter:
    """In ``directory``: a zero-byte archive, an empty directory named like an archive, a
    dangling link, a link to itself, a subdirectory ``sub`` whose link ``back`` leads to
    ``directory`` (a directory inside itself) and, with ``fifo``, a FIFO named like an
    archive (the ``HOSTILE`` names). Returns the skips they give, counted by reason."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "zero.warc.gz").write_bytes(b"")
    (directory / "dir.warc.gz").mkdir()
    (directory / "dangling.warc").symlink_to(directory.parent / "gone.warc")
    (directory / "loop.warc.gz").symlink_to(directory / "loop.warc.gz")
    (directory / "sub").mkdir()
    (directory / "sub" / "back").symlink_to(directory)
    if fifo:
        os.mkfifo(directory / "pipe.warc")
    return Counter(reason for name, reason in HOSTILE.items() if fifo or name != "pipe.warc")


def dragnet_pages(count: int) -> list[tuple[str, bytes]]:
    """``count`` Dragnet pages to write synthetic archives from; the test is skipped, naming
    what to set, where the dataset is not there."""
    from scrapy_grownup.data.datasets import DatasetNotAvailable
    from scrapy_grownup.warc.synthetic import dataset_pages
    from tests.data_support import skip_missing_data

    try:
        return dataset_pages(count)
    except DatasetNotAvailable:
        skip_missing_data("dragnet pages")


def warc_fixtures() -> Path:
    """The folder of real WARC fixture files; the test is skipped where it is not there."""
    from scrapy_grownup.data.datasets import DatasetNotAvailable
    from scrapy_grownup.warc.synthetic import fixture_dir
    from tests.data_support import skip_missing_data

    try:
        return fixture_dir()
    except DatasetNotAvailable:
        skip_missing_data("WARC fixtures")
