"""Streaming WARC/ARC reading with warcio: HTML candidates out, everything else counted.

``RecordReader(source)`` iterates one archive (``.warc``, ``.warc.gz``, ``.arc``, ``.arc.gz``,
local or http(s)) record by record and yields either a ``Candidate`` (an HTML page to featurize)
or a ``Skip`` with a reason. Memory is constant: one record body at a time, capped at
``max_bytes + 1`` bytes (``parse_page`` then cuts and flags the page exactly as it would a live
response of that size); the rest of a record is drained without being kept.

Which records are pages, as for a live crawl (``FeaturizeMiddleware``): record type in
``record_types`` (``response``, and ``resource`` for archives of stored pages such as
L3S-GN1), HTTP status 200 for responses, and ``decoding.is_html`` on the HTTP content type or,
when it is missing or generic, on the sniffed body. Skip reasons:

- record types: ``request``, ``revisit``, ``metadata``, ``warcinfo``, ``conversion``,
  ``continuation``, ``other_record``;
- ``http_<status>`` (not 200), ``no_http_headers``, ``no_http_status``, ``not_html``;
- damage: ``truncated_record`` (the body ends before its declared length), ``corrupt_record``
  (the body cannot be read or decoded), ``malformed_record`` (a record not followed by the blank
  lines its length implies: a wrong Content-Length), ``corrupt`` (the archive could not be parsed
  at some offset; reading resumes at the next gzip member or ``WARC/`` header when the file is
  seekable), ``truncated_file`` (the archive ends inside a record), ``file_unreadable`` (cannot
  be opened or fetched);
- nothing in it: ``empty_file`` (zero bytes), ``no_records`` (bytes, but not one record).

Every archive thus ends as records read or at least one counted skip.

A whole-file gzip ("non-chunked": one gzip member holding every record, which warcio rejects
after the first record, or fails on in other words when a record's Content-Length is wrong) is
read again as one decompressed stream, so such files are read completely instead of failing;
its damaged regions are passed over as in a plain file (reading resumes at the next ``WARC/``
line of the decompressed stream), so the same bytes gzipped whole or not give the same pages.

The skip reasons of the paths themselves (before any archive is opened: ``missing_path``,
``dangling_link``, ``link_loop``, ``not_a_file``, ``unreadable_path``, ``empty_directory``) are
``sources.PATH_SKIP_REASONS``. ``grownup warc`` (the pre-training corpus), ``grownup extract``
and the datatrove steps (``scrapy_grownup.datatrove``) all read archives with this reader and
count with these reasons.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from warcio.archiveiterator import ArchiveIterator

from scrapy_grownup.page.decoding import GENERIC_TYPES, HTML_TYPES, is_html
from scrapy_grownup.warc.sources import Source

logger = logging.getLogger(__name__)

_TYPE_REASONS = {"request", "revisit", "metadata", "warcinfo", "conversion", "continuation",
                 "response", "resource"}
_GZIP_MAGIC = b"\x1f\x8b\x08"
_WARC_MAGIC = b"WARC/1."
_SCAN_BLOCK = 1 << 20
_DAMAGE = ("truncated_record", "corrupt_record")
MAX_RESYNCS = 10_000


@dataclass
class Candidate:
    """An HTML record, ready for ``parse_page``."""

    url: str
    body: bytes
    content_type: str | None
    record_id: str | None
    offset: int | None
    date: str | None
    record_type: str


@dataclass
class Skip:
    """A record (or a region of the file) that gives no page, and why."""

    reason: str
    offset: int | None = None
    detail: str = ""


class _Iterator(ArchiveIterator):
    """warcio's iterator, recording bad record boundaries instead of printing them.

    ``_consume_blanklines`` mirrors warcio 1.7/1.8 except that a record not followed by a blank
    line (its Content-Length was wrong) is appended to ``boundary_errors`` rather than written to
    stderr.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.boundary_errors: list[int] = []

    def _consume_blanklines(self):
        empty_size = 0
        first_line = True
        while True:
            line = self.reader.readline()
            if len(line) == 0:
                return None, empty_size
            stripped = line.rstrip()
            if len(stripped) == 0 or first_line:
                empty_size += len(line)
                if len(stripped) != 0:
                    self.boundary_errors.append(
                        self.fh.tell() - self.reader.rem_length() - empty_size)
                    self.err_count += 1
                first_line = False
                continue
            return line, empty_size


class RecordReader:
    """Iterate one WARC/ARC archive as ``Candidate`` (an HTML page) and ``Skip`` events.

    It never raises on bad data: a damaged region is skipped and reading goes on, so one bad
    record never costs the rest of an archive. ``grownup extract``, the corpus writer and
    ``scrapy_grownup.datatrove`` all read archives through it, so they agree page for page.

    Args:
        source: the archive (``warc.sources.Source``: a path or an http(s) URL).
        max_bytes: a page's body is cut to this many bytes, as the page limits cut it.
        record_types: the WARC record types that can be pages.

    Attributes:
        records: records parsed, after iteration.
        failed: a message when the archive could not be opened or fetched at all (nothing of
            it was read; a rerun should try again), else ``None``.
        errors: messages of the damaged regions that were skipped.
    """

    def __init__(self, source: Source, max_bytes: int = 5_000_000,
                 record_types: tuple[str, ...] = ("response", "resource")):
        self.source = source
        self.max_bytes = max_bytes
        self.record_types = tuple(record_types)
        self.records = 0
        self.failed: str | None = None
        self.errors: list[str] = []

    # -- iteration ------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Candidate | Skip]:
        try:
            raw = self.source.open()
        except (OSError, ValueError) as exc:
            self.failed = f"{type(exc).__name__}: {exc}"
            logger.error("cannot open %s: %s", self.source.location, self.failed)
            yield Skip("file_unreadable", None, self.failed)
            return
        events = 0
        try:
            for event in self._iterate(raw):
                events += 1
                yield event
            if not events:
                # Nothing at all came out: an empty file, or bytes without a single record.
                # Either is said, so that every archive ends as records or counted skips.
                size = self.source.size()
                reason = "empty_file" if size == 0 else "no_records"
                detail = "the file is empty" if size == 0 else "no WARC/ARC record in it"
                self.errors.append(f"{reason}: {detail}")
                logger.warning("%s: %s, nothing read", self.source.location, detail)
                yield Skip(reason, None, detail)
        except Exception as exc:  # noqa: BLE001 - the last guard: one archive, one skip
            # Whatever bad data does to warcio, gzip or a seek, the rest of this archive is
            # given up and counted as damage; the next archive is still read.
            message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            self.errors.append(f"corrupt, reading stopped: {message}")
            logger.warning("%s: reading stopped (%s)", self.source.location, message)
            yield Skip("corrupt", None, message)
        finally:
            try:
                raw.close()
            except Exception:  # noqa: BLE001 - closing a broken stream must not mask anything
                pass

    def _iterate(self, raw: BinaryIO) -> Iterator[Candidate | Skip]:
        seekable = _seekable(raw)
        start = raw.tell() if seekable else 0
        # reading the file again as one decompressed stream; ``start`` and the resync points
        # are then positions in that stream, not in the file
        gzipped_whole = False
        skip_records = 0  # records already emitted before switching to that mode
        resyncs = 0
        while True:
            if gzipped_whole:
                raw.seek(0)
                stream = gzip.GzipFile(fileobj=raw, mode="rb")
                if start:
                    stream.seek(start)
            else:
                if seekable:
                    raw.seek(start)
                stream = raw
            iterator = _Iterator(stream, arc2warc=True)
            offset = None
            position = start  # where the current record starts in ``stream``
            damaged_at = None  # position of a damaged record that ended the iteration
            try:
                for record in iterator:
                    if iterator.offset is not None and iterator.offset >= 0:
                        position = iterator.offset
                    offset = None if gzipped_whole else iterator.offset
                    damaged_at = None
                    yield from self._boundary_events(iterator)
                    if skip_records:
                        skip_records -= 1
                        continue
                    self.records += 1
                    for event in self._record_events(record, offset):
                        if isinstance(event, Skip) and event.reason in _DAMAGE:
                            damaged_at = position
                        yield event
                yield from self._boundary_events(iterator)
                # A broken gzip member reads as a short record followed by a silent end of
                # file: look for intact records after it before believing that end.
                if damaged_at is None or not seekable or resyncs >= MAX_RESYNCS:
                    return
                resync = _safe_sync_point(stream, damaged_at + 1)
                if resync is None:
                    return
                resyncs += 1
                self.errors.append(f"damaged record at {damaged_at}, resumed at {resync}")
                logger.info("%s: resuming at %s %d after the damaged record at %d",
                            self.source.location, "decompressed position" if gzipped_whole
                            else "offset", resync, damaged_at)
                start = resync
                continue
            except Exception as exc:  # noqa: BLE001 - warcio, zlib, gzip and OSError all occur
                error_offset = getattr(iterator, "offset", offset)
                if error_offset is not None and error_offset < 0:
                    # warcio's offset goes negative when a record of a whole-file gzip has a
                    # junk or negative Content-Length: it is not a position in the file.
                    error_offset = None
                message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                if isinstance(exc, OSError) and self.source.is_url and not _is_data_error(exc):
                    # The network failed, not the data: nothing is marked as read.
                    self.failed = message
                    logger.error("%s: reading stopped (%s)", self.source.location, message)
                    yield Skip("file_unreadable", error_offset, message)
                    return
                if not gzipped_whole and seekable and (
                        "non-chunked gzip" in str(exc) or _is_whole_file_gzip(raw)):
                    # One gzip stream, not one member per record. warcio says so after the
                    # first record ("non-chunked gzip"), or, where a record's Content-Length
                    # is wrong, fails on the bytes after it with another error: either way the
                    # file is read again as one decompressed stream, whose damaged regions
                    # are then passed over as in a plain file.
                    logger.warning("%s is one gzip stream, not one member per record; "
                                   "reading it again as a single stream", self.source.location)
                    if "non-chunked gzip" not in str(exc):  # damage, not only a way to gzip
                        self.errors.append(f"gzip members not at record boundaries ({message}):"
                                           f" read again as one stream")
                    gzipped_whole, skip_records, start = True, self.records, 0
                    self.records = 0
                    continue
                truncated = _is_truncation(exc)
                reason = "truncated_file" if truncated else "corrupt"
                where = (f"decompressed position {error_offset}" if gzipped_whole
                         else f"offset {error_offset}")
                self.errors.append(f"{reason} at {where}: {message}")
                logger.warning("%s: %s at %s (%s)", self.source.location, reason, where, message)
                yield Skip(reason, None if gzipped_whole else error_offset, message)
                if truncated or not seekable or resyncs >= MAX_RESYNCS:
                    return
                if gzipped_whole and _is_data_error(exc):
                    return  # one broken deflate stream: nothing after it can be decompressed
                resync = _safe_sync_point(stream, max(error_offset or 0, position, start) + 1)
                if resync is None:
                    return
                resyncs += 1
                skip_records = 0  # the records after the damage were not read before
                logger.info("%s: resuming at %s %d", self.source.location,
                            "decompressed position" if gzipped_whole else "offset", resync)
                start = resync

    def _boundary_events(self, iterator: _Iterator) -> Iterator[Skip]:
        while iterator.boundary_errors:
            offset = iterator.boundary_errors.pop(0)
            logger.warning("%s: record before offset %d is not followed by a blank line "
                           "(wrong Content-Length?)", self.source.location, offset)
            yield Skip("malformed_record", offset)

    # -- one record -----------------------------------------------------------------------------
    def _record_events(self, record, offset: int | None) -> Iterator[Candidate | Skip]:
        rtype = (record.rec_type or "").lower()
        if rtype not in self.record_types:
            yield Skip(rtype if rtype in _TYPE_REASONS else "other_record", offset)
            return
        headers = record.rec_headers
        http = record.http_headers
        if rtype == "response":
            if http is None or not http.statusline:
                yield Skip("no_http_headers", offset)
                return
            status = (http.get_statuscode() or "").strip()
            if status != "200":
                yield Skip(f"http_{status}" if status.isdigit() else "no_http_status", offset)
                return
            content_type = http.get_header("Content-Type")
        else:
            content_type = (http.get_header("Content-Type") if http is not None
                            else headers.get_header("Content-Type"))
        mime = (content_type or "").split(";", 1)[0].strip().lower()
        if mime not in HTML_TYPES and mime not in GENERIC_TYPES:
            yield Skip("not_html", offset)  # declared non-HTML: the body is not even read
            return
        try:
            body, truncated = self._read_body(record)
        except Exception as exc:  # noqa: BLE001 - decompression and de-chunking errors
            logger.warning("%s: unreadable record at offset %s (%s: %s)",
                           self.source.location, offset, type(exc).__name__, exc)
            yield Skip("corrupt_record", offset, f"{type(exc).__name__}: {exc}")
            return
        if truncated:
            logger.warning("%s: record at offset %s ends before its declared length",
                           self.source.location, offset)
            yield Skip("truncated_record", offset)
            return
        if not is_html(content_type, body):
            yield Skip("not_html", offset)
            return
        yield Candidate(
            url=headers.get_header("WARC-Target-URI") or "",
            body=body,
            content_type=content_type,
            record_id=(headers.get_header("WARC-Record-ID") or "").strip("<> ") or None,
            offset=offset,
            date=headers.get_header("WARC-Date"),
            record_type=rtype,
        )

    def _read_body(self, record) -> tuple[bytes, bool]:
        """The payload (decoded transfer and content encodings), at most ``max_bytes + 1``.

        Returns ``(body, truncated)``: ``truncated`` when the record's block ends before the
        length its header declares (a cut archive), which is damage, not a size cap.
        """
        stream = record.content_stream()
        want = self.max_bytes + 1
        chunks, size = [], 0
        while size < want:
            chunk = stream.read(min(1 << 16, want - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        raw = record.raw_stream
        while raw.read(1 << 16):
            pass
        return b"".join(chunks), getattr(raw, "limit", 0) > 0


def _seekable(raw) -> bool:
    try:
        return bool(raw.seekable()) and raw.tell() >= 0
    except (AttributeError, OSError, ValueError):
        return False


def _is_truncation(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, EOFError) or "ended before" in text or "end-of-stream" in text \
        or "incomplete" in text


def _is_data_error(exc: BaseException) -> bool:
    return isinstance(exc, (zlib.error, EOFError, gzip.BadGzipFile))


def _safe_sync_point(stream: BinaryIO, position: int) -> int | None:
    """``_find_sync_point``, None where the stream itself fails (a broken gzip stream)."""
    try:
        return _find_sync_point(stream, position)
    except Exception as exc:  # noqa: BLE001 - zlib, gzip, OSError: no place to resume
        logger.debug("no place to resume after %d: %s: %s", position, type(exc).__name__, exc)
        return None


def _is_whole_file_gzip(raw: BinaryIO) -> bool:
    """A gzip file to read as one stream: it starts with a gzip member and no later member
    begins with a record (one member holding every record, or members cut across records)."""
    try:
        raw.seek(0)
        if raw.read(3) != _GZIP_MAGIC:
            return False
        return _find_sync_point(raw, 1) is None
    except Exception:  # noqa: BLE001 - an unreadable file is not one to read again
        return False


def _find_sync_point(raw: BinaryIO, position: int) -> int | None:
    """Offset of the next record start after ``position``: a gzip member that decompresses to
    a WARC/ARC header, or (plain files) a ``WARC/1.x`` line. None when there is none."""
    raw.seek(0)
    gzipped = raw.read(3) == _GZIP_MAGIC
    magic = _GZIP_MAGIC if gzipped else _WARC_MAGIC
    pos = max(0, position)
    while True:
        raw.seek(pos)
        block = raw.read(_SCAN_BLOCK + len(magic))
        if len(block) < len(magic):
            return None
        index = block.find(magic)
        while index >= 0:
            candidate = pos + index
            if gzipped and _gzip_member_is_record(raw, candidate):
                return candidate
            if not gzipped and (candidate == 0 or _preceded_by_newline(raw, candidate)):
                return candidate
            index = block.find(magic, index + 1)
        pos += _SCAN_BLOCK


def _gzip_member_is_record(raw: BinaryIO, offset: int) -> bool:
    raw.seek(offset)
    data = raw.read(4096)
    try:
        head = zlib.decompressobj(31).decompress(data, 64)
    except zlib.error:
        return False
    return head.startswith(b"WARC/") or head[:1].isalnum() and b" " in head.split(b"\n", 1)[0]


def _preceded_by_newline(raw: BinaryIO, offset: int) -> bool:
    raw.seek(offset - 1)
    return raw.read(1) == b"\n"
