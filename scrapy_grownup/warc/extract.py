"""Archives for article extraction: ``grownup extract``'s WARC/ARC inputs, and its resuming.

``record_entries(source)`` streams one archive through ``reader.RecordReader`` (the reader of
the pre-training corpus, with the same skip reasons) as ``grownup extract``'s entries: one per
HTML record, ``(name, body, url, extra)``, its ``extra`` carrying the HTTP content type (for the
page's charset) and the JSON fields of its line (``path``: the archive, ``warc``: the record's
``WARC-Target-URI``, ``WARC-Date``, ``WARC-Record-ID``, offset and type); and one per skip,
``(name, (reason, detail), None, extra)``. One record body is in memory at a time.

``ExtractProgress`` is how an interrupted ``grownup extract -o FILE`` resumes: after every
batch written, ``FILE.progress.json`` records how many inputs (pages and archives, in the
order given) are done, the size of ``FILE`` then, and the counts so far. A rerun of the same
command (same inputs, same options) truncates ``FILE`` to that size and goes on from the first
input not done, so an archive it stopped in is read again from its start, its partial output
removed; an archive read to its end is not read again. A progress file of another command is
said to be so, and the run starts over. The file is removed when the run ends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Iterator

from scrapy_grownup.warc.reader import Candidate, RecordReader
from scrapy_grownup.warc.sources import PathSkip, Source

logger = logging.getLogger(__name__)

PROGRESS_SUFFIX = ".progress.json"
PROGRESS_FORMAT = "grownup-extract-progress/1"
# A guess of the pages of an archive by its size, for ``--jobs auto`` alone.
BYTES_PER_PAGE = 16_384


def record_entries(source: Source, max_bytes: int, counts: dict | None = None,
                   record_types: tuple[str, ...] = ("response", "resource")) -> Iterator[tuple]:
    """``grownup extract``'s entries of one archive, in record order (see the module's doc).
    ``counts`` (when given) gets ``archives`` and ``records`` added at the archive's end."""
    reader = RecordReader(source, max_bytes, record_types)
    for event in reader:
        if isinstance(event, Candidate):
            where = event.record_id or (f"offset {event.offset}" if event.offset is not None
                                        else event.url)
            yield (f"{source.location} [{where}]", event.body, event.url or None, {
                "content_type": event.content_type,
                "quiet": True,  # counted in the summary; a crawl's worth of lines is no log
                "fields": {"path": source.location, "warc": {
                    "target_uri": event.url or None, "date": event.date,
                    "record_id": event.record_id, "offset": event.offset,
                    "record_type": event.record_type}},
            })
        else:
            where = f" [offset {event.offset}]" if event.offset is not None else ""
            # the reader has logged damage itself; the other reasons are what archives hold
            yield (f"{source.location}{where}", (event.reason, event.detail or event.reason),
                   None, {"quiet": True})
    if counts is not None:
        counts["archives"] = counts.get("archives", 0) + 1
        counts["records"] = counts.get("records", 0) + reader.records


def path_skip_entry(skip: PathSkip) -> tuple:
    """The entry of a path that gave no input: a counted skip, logged as a warning."""
    return (skip.path, (skip.reason, skip.detail or skip.reason), None, None)


def estimated_pages(items: list) -> int:
    """Pages to expect from ``items`` (pages count one, archives by their size; an archive
    behind a URL as many as one batch could not hold): for ``--jobs auto``."""
    total = 0
    for item in items:
        if isinstance(item, Source):
            size = item.size()
            total += 1_000_000 if size is None else max(1, size // BYTES_PER_PAGE)
        elif not isinstance(item, PathSkip):
            total += 1
    return total


def item_key(item) -> str:
    """How an input is named in the progress file: its path, size and modification time
    (a file changed since is another input)."""
    if isinstance(item, PathSkip):
        return f"skip:{item.path}:{item.reason}"
    if isinstance(item, Source):
        location = item.location
    else:
        location = str(item)
    if location == "-" or location.startswith(("http://", "https://")):
        return location
    try:
        st = os.stat(location)
        return f"{Path(location).resolve()}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return location


class ExtractProgress:
    """The progress file of ``grownup extract -o FILE``; see the module's doc."""

    def __init__(self, output: str, items: list, options: dict):
        self.output = output
        self.path = Path(output + PROGRESS_SUFFIX)
        digest = hashlib.sha256("\n".join(item_key(i) for i in items).encode()).hexdigest()
        self.signature = {"inputs": digest, "count": len(items), "options": options}
        self.total = len(items)

    def load(self) -> dict | None:
        """The state to resume from (``done``, ``output_bytes``, ``counts``), or None to start
        over (logged when a progress file was there but cannot be used)."""
        if not self.path.is_file():
            return None
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("%s cannot be read (%s): starting over", self.path, exc)
            return None
        if not isinstance(state, dict) or state.get("format") != PROGRESS_FORMAT or \
                state.get("signature") != self.signature:
            logger.warning("%s is the progress of another command (other inputs or options): "
                           "starting over, %s is written anew", self.path, self.output)
            return None
        try:
            size = os.path.getsize(self.output)
        except OSError:
            size = -1
        if size < int(state.get("output_bytes", 0)):
            logger.warning("%s is shorter than %s says it was: starting over", self.output,
                           self.path)
            return None
        return state

    def save(self, done: int, output_bytes: int, counts: dict) -> None:
        state = {"format": PROGRESS_FORMAT, "signature": self.signature, "done": done,
                 "output_bytes": output_bytes, "counts": counts}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(tmp, self.path)

    def finish(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
