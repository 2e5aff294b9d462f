"""Crawl -> archive: ``WarcArchiveMiddleware`` writes every response into rotating WARC files.

Enable it in a crawl that should feed tomorrow's pre-training::

    GROWNUP_WARC_OUTPUT = "archive/"
    DOWNLOADER_MIDDLEWARES = {"scrapy_grownup.warc.archive.WarcArchiveMiddleware": 950}

At priority 950 (between the downloader and ``HttpCompressionMiddleware``) it sees each response
as it came off the wire: the body still content-encoded (gzip, br...), every status including
redirects and errors, before retries. Each response becomes a ``response`` record (``resource``
for non-HTTP schemes) preceded by its ``request`` record (``GROWNUP_WARC_OUTPUT_REQUESTS``).
Scrapy has already removed the transfer encoding, so a ``Transfer-Encoding`` header is stored
as ``X-Crawler-Transfer-Encoding`` (as warcprox and wpull do) to keep the record readable.

Files are gzip WARC/1.1, one gzip member per record, named
``<prefix>-<UTC time>-<serial>-<host>-<pid>.warc.gz``. A file is written as ``<name>.open``
and renamed when it passes ``GROWNUP_WARC_OUTPUT_MAX_BYTES`` or when the spider closes, so a
reader globbing ``*.warc.gz`` never sees a file that is still being written. Responses served
from Scrapy's HTTP cache (``HttpCacheMiddleware``, 900) do not reach this middleware.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import time
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import NotConfigured
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from scrapy_grownup.crawl.settings import check

logger = logging.getLogger(__name__)
STATS_PREFIX = "grownup/warc/archive"


def _headers(headers) -> list[tuple[str, str]]:
    out = []
    for name, values in headers.items():
        key = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        if key.lower() == "transfer-encoding":
            key = "X-Crawler-Transfer-Encoding"
        for value in values:
            out.append((key, value.decode("latin-1") if isinstance(value, bytes) else str(value)))
    return out


class RotatingWarcWriter:
    """Gzip WARC files in ``directory``, a new one past ``max_bytes``."""

    def __init__(self, directory: str | os.PathLike, prefix: str = "grownup",
                 max_bytes: int = 1_000_000_000, software: str = "scrapy-grownup"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.software = software
        self.serial = 0
        self.files: list[Path] = []
        self.records = 0
        self._handle = None
        self._writer: WARCWriter | None = None
        self._path: Path | None = None

    def _open(self) -> None:
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname())
        name = f"{self.prefix}-{stamp}-{self.serial:05d}-{host}-{os.getpid()}.warc.gz"
        self.serial += 1
        self._path = self.directory / name
        self._handle = open(self._path.with_name(name + ".open"), "wb")
        self._writer = WARCWriter(self._handle, gzip=True, warc_version="1.1")
        from scrapy_grownup import __version__

        info = self._writer.create_warcinfo_record(name, {
            "software": f"{self.software}/{__version__} (warcio)",
            "format": "WARC File Format 1.1",
            "hostname": socket.gethostname(),
        })
        self._writer.write_record(info)

    def write(self, records) -> None:
        """Write records (a request and its response) together, then rotate if needed."""
        if self._writer is None:
            self._open()
        for record in records:
            self._writer.write_record(record)
            self.records += 1
        if self._handle.tell() >= self.max_bytes:
            self.rotate()

    @property
    def writer(self) -> WARCWriter:
        if self._writer is None:
            self._open()
        return self._writer

    def rotate(self) -> Path | None:
        """Close the current file under its final name."""
        if self._handle is None:
            return None
        self._handle.close()
        os.replace(self._path.with_name(self._path.name + ".open"), self._path)
        self.files.append(self._path)
        path, self._handle, self._writer, self._path = self._path, None, None, None
        return path

    close = rotate


class WarcArchiveMiddleware:
    """Downloader middleware that archives each response of a crawl into rotating gzip WARC
    files, so that the pages can feed pre-training or be extracted again later.

    The add-on adds it at 950 when ``GROWNUP_WARC_OUTPUT`` is set; at that priority it sees
    each response as it came off the wire (see the module docstring). Settings:
    ``GROWNUP_WARC_OUTPUT`` (the directory; unset, the middleware is off),
    ``GROWNUP_WARC_OUTPUT_MAX_BYTES``, ``GROWNUP_WARC_OUTPUT_PREFIX`` and
    ``GROWNUP_WARC_OUTPUT_REQUESTS`` (docs/settings.md). An archiving failure is logged and
    counted, never raised into the crawl.
    """

    def __init__(self, writer: RotatingWarcWriter, requests: bool = True, stats=None):
        self.writer = writer
        self.requests = requests
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        directory = check(settings, "GROWNUP_WARC_OUTPUT")
        if not directory:
            raise NotConfigured("GROWNUP_WARC_OUTPUT is not set")
        writer = RotatingWarcWriter(
            directory,
            prefix=check(settings, "GROWNUP_WARC_OUTPUT_PREFIX"),
            max_bytes=check(settings, "GROWNUP_WARC_OUTPUT_MAX_BYTES"),
        )
        middleware = cls(writer, check(settings, "GROWNUP_WARC_OUTPUT_REQUESTS"), crawler.stats)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def process_response(self, request, response):
        try:
            self.writer.write(self.records(request, response))
        except Exception:  # noqa: BLE001 - archiving must never break the crawl
            logger.exception("could not archive %s", response.url)
            self._inc("errors")
        else:
            self._inc("responses")
            self._inc("bytes", len(response.body))
        return response

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"{STATS_PREFIX}/{key}", count)

    def records(self, request, response) -> list:
        writer = self.writer.writer
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        url = response.url
        if urlsplit(url).scheme not in ("http", "https"):
            content_type = response.headers.get(b"Content-Type")
            record = writer.create_warc_record(
                url, "resource", payload=io.BytesIO(response.body), length=len(response.body),
                warc_content_type=(content_type or b"application/octet-stream").decode(
                    "latin-1"),
                warc_headers_dict={"WARC-Date": date})
            return [record]
        reason = _reason(response.status)
        # HTTP/2 responses are stored with an HTTP/1.1 status line, which WARC readers expect.
        protocol = "HTTP/1.0" if getattr(response, "protocol", None) == "HTTP/1.0" else "HTTP/1.1"
        http_headers = StatusAndHeaders(f"{response.status} {reason}".strip(),
                                        _headers(response.headers), protocol=protocol)
        warc_headers = {"WARC-Date": date}
        ip = getattr(response, "ip_address", None)
        if ip is not None:
            warc_headers["WARC-IP-Address"] = str(ip)
        response_record = writer.create_warc_record(
            url, "response", payload=io.BytesIO(response.body), length=len(response.body),
            http_headers=http_headers, warc_headers_dict=warc_headers)
        if not self.requests:
            return [response_record]
        parts = urlsplit(request.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_headers = _headers(request.headers)
        if not any(k.lower() == "host" for k, _ in request_headers):
            request_headers.insert(0, ("Host", parts.netloc))
        request_record = writer.create_warc_record(
            request.url, "request", payload=io.BytesIO(request.body), length=len(request.body),
            http_headers=StatusAndHeaders(f"{request.method} {target} HTTP/1.1",
                                          request_headers, is_http_request=True),
            warc_headers_dict={
                "WARC-Date": date,
                "WARC-Concurrent-To": response_record.rec_headers.get_header("WARC-Record-ID"),
            })
        return [request_record, response_record]

    def spider_closed(self, spider=None, reason=None) -> None:
        path = self.writer.close()
        if path is not None:
            logger.info("archived %d records into %d WARC files in %s", self.writer.records,
                        len(self.writer.files), self.writer.directory)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
