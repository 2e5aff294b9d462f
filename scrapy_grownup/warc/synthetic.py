"""Building archives for tests, benchmarks and ``grownup lab dataset-warc``, and finding the shared
WARC fixtures.

``write_warc`` writes real pages (from the shared datasets) under chosen URLs, with the request
records, redirects, non-HTML responses and revisits a crawler's archive also holds.
``fixture_dir`` unpacks ``shared/data/warc.tar.xz`` into the dataset cache, like
``datasets.ensure_unpacked`` does for the labelled datasets.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Iterable

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter


def write_warc(path: str | Path, pages: Iterable[tuple[str, bytes, str]], gzip: bool = True,
               requests: bool = True, noise: bool = False) -> Path:
    """Write ``(url, body, content_type)`` pages as ``response`` records (status 200).

    ``noise`` adds, per page, a redirect, a CSS response and a revisit record, the way a real
    crawl interleaves them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=gzip, warc_version="1.0")
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "synthetic"}))
        for url, body, content_type in pages:
            _exchange(writer, url, 200, body, content_type, requests)
            if noise:
                _exchange(writer, url + "?redirect", 301, b"", "text/html", requests,
                          [("Location", url)])
                _exchange(writer, url.rsplit("/", 1)[0] + "/style.css", 200,
                          b"body { color: black }", "text/css", requests)
                writer.write_record(writer.create_revisit_record(
                    url, digest="sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                    refers_to_uri=url, refers_to_date="2024-01-01T00:00:00Z"))
    return path


def _exchange(writer: WARCWriter, url: str, status: int, body: bytes, content_type: str,
              requests: bool, extra: list[tuple[str, str]] | None = None) -> None:
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    http = StatusAndHeaders(f"{status} {'OK' if status == 200 else 'Moved'}",
                            headers + (extra or []), protocol="HTTP/1.1")
    response = writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                         length=len(body), http_headers=http)
    if requests:
        target = "/" + url.split("://", 1)[-1].split("/", 1)[-1]
        request = writer.create_warc_record(
            url, "request", payload=io.BytesIO(b""), length=0,
            http_headers=StatusAndHeaders(f"GET {target} HTTP/1.1", [("Host", "x")],
                                          is_http_request=True),
            warc_headers_dict={
                "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")})
        writer.write_record(request)
    writer.write_record(response)


def dataset_pages(limit: int | None = None, names: tuple[str, ...] = ("dragnet",)
                  ) -> list[tuple[str, bytes]]:
    """``(id, html)`` of real pages from the shared datasets, in a stable order (raises
    ``datasets.DatasetNotAvailable`` when a dataset is absent)."""
    from scrapy_grownup.data.datasets import iter_records

    out: list[tuple[str, bytes]] = []
    for name in names:
        for record in iter_records(name, limit=None if limit is None else limit - len(out)):
            out.append((f"{name}/{record.id}", record.html))
        if limit is not None and len(out) >= limit:
            break
    return out


def fixture_dir() -> Path:
    """The unpacked ``warc`` fixtures (real WARC/ARC files, some deliberately broken).

    Raises ``datasets.DatasetNotAvailable`` when neither the unpacked copy nor the archive
    ``shared/data/warc.tar.xz`` can be found.
    """
    from scrapy_grownup.data.datasets import DatasetNotAvailable, dataset_root

    root = dataset_root()
    target = root / "warc"
    if target.is_dir():
        return target
    candidates = []
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for directory in (start, *start.parents):
            candidates.append(directory / "shared" / "data" / "warc.tar.xz")
    archive = next((c for c in candidates if c.is_file()), None)
    if archive is None:
        raise DatasetNotAvailable("the WARC fixtures (shared/data/warc.tar.xz) are not here")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".warc-", dir=root))
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts
                if not parts or parts[0] != "warc" or ".." in parts:
                    raise ValueError(f"unexpected member {member.name!r} in {archive}")
            tar.extractall(tmp, filter="data")
        try:
            (tmp / "warc").rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
