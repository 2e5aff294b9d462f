"""``CorpusWriter``: archives in, shards and markers out; what the WARC spiders run.

For each archive: records stream out of ``RecordReader``; every HTML record goes to the
``FeaturizerPool`` (``parse_page`` in worker processes, exactly as the live crawl's
``FeaturizeMiddleware`` sends a response there), a bounded window of them in flight and
their results taken in record order; pages are packed into the shard of their part, and a part's
shard is embedded and written (in a thread, while reading goes on) as soon as the part is
complete. At the end of the archive its marker is written. Memory: one window of record bodies,
the shard being filled and at most one being written.

Reruns: an archive with a marker is skipped; in an archive without one, the parts whose shard
exists are not parsed again (their records are still read, to find where the next part starts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable

from scrapy_grownup.errors import EmptyPageError, GrownupError, NotHTMLError
from scrapy_grownup.crawl.workers import FeaturizerPool, PageTimeoutError, WorkerCrashedError
from scrapy_grownup.warc.manifest import (ensure_config, finalize, is_done, now, remove_stale_temporaries,
                       worker_id, write_failure, write_marker)
from scrapy_grownup.warc.pairs import site_key
from scrapy_grownup.warc.reader import Candidate, RecordReader, Skip
from scrapy_grownup.warc.settings import WarcSettings
from scrapy_grownup.warc.shards import SHARD_DIR, ShardBuilder, ShardInfo, shard_info, shard_name
from scrapy_grownup.warc.sources import Source

logger = logging.getLogger(__name__)


@dataclass
class _Entry:
    url: str
    page_id: str
    offset: int | None
    part: int
    task: "asyncio.Future"


@dataclass
class _FileState:
    source: Source
    skipped: Counter = field(default_factory=Counter)
    shards: dict[int, ShardInfo] = field(default_factory=dict)
    resumed: set[int] = field(default_factory=set)
    builder: ShardBuilder | None = None
    flushing: "asyncio.Task | None" = None
    candidates: int = 0
    pages: int = 0


def release_memory() -> None:
    """Give freed heap memory back to the system (glibc ``malloc_trim``).

    Building a shard allocates large transient buffers in several threads (the tokenizer's
    thread pool, the safetensors serializer); glibc keeps the freed space in per-thread arenas,
    so without a trim the resident size ratchets up shard after shard although nothing is
    retained. A no-op where glibc is not the allocator.
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


class CorpusWriter:
    """Featurizes archives into a corpus directory; see the module docstring."""

    def __init__(self, directory: str | Path, settings: WarcSettings | None = None,
                 stats: Callable[[str, int], None] | None = None,
                 pool: FeaturizerPool | None = None):
        self.directory = Path(directory)
        self.settings = settings or WarcSettings.from_settings(None)
        self._stats = stats
        self.pool = pool
        self.encoder = None
        self.totals: Counter[str] = Counter()
        self.started = time.perf_counter()
        self._lock: asyncio.Lock | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._last_log = 0
        # How old a dead process's temporary must be before ``open`` removes it: 0 for a
        # directory this run has to itself; queue workers sharing one set an hour.
        self.stale_age = 0.0

    # -- lifecycle ------------------------------------------------------------------------------
    def open(self) -> None:
        """Load the encoder and claim (or check) the directory's configuration."""
        from scrapy_grownup.encoders import get_encoder
        from scrapy_grownup.graph.featurizer import FEATURE_VERSION

        s = self.settings
        kwargs = {"device": s.device} if s.device else {}
        encoder = get_encoder(s.encoder, **kwargs)
        ensure_config(self.directory, {
            "encoder": encoder.name, "encoder_version": encoder.version,
            "text_dim": int(encoder.dim), "feature_version": FEATURE_VERSION,
            "shard_pages": s.shard_pages,
            "limits": {"max_bytes": s.limits.max_bytes, "max_nodes": s.limits.max_nodes,
                       "max_depth": s.limits.max_depth},
            "record_types": list(s.record_types),
        })
        (self.directory / SHARD_DIR).mkdir(parents=True, exist_ok=True)
        removed, freed = remove_stale_temporaries(self.directory, self.stale_age)
        if removed:
            self.inc("stale_temporaries_removed", removed)
            logger.warning("%s: removed %d temporary files (%.1f MB) left by an interrupted "
                           "run", self.directory, removed, freed / 1e6)
        self.encoder = encoder  # set last: a writer whose directory was refused stays unopened
        if self.pool is None:
            self.pool = FeaturizerPool(s.workers, s.limits, s.max_pending,
                                       page_timeout=s.page_timeout)

    def _shard_thread(self) -> ThreadPoolExecutor:
        # One dedicated thread: shards are written one at a time, and a single thread keeps
        # the allocator from spreading buffers over many per-thread arenas.
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="grownup-shard")
        return self._executor

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def finalize(self) -> dict:
        return finalize(self.directory, self.settings.partition_pages)

    def inc(self, key: str, count: int = 1) -> None:
        self.totals[key] += count
        if self._stats is not None:
            self._stats(key, count)

    # -- one archive ----------------------------------------------------------------------------
    async def read(self, source: Source) -> AsyncIterator[dict]:
        """Featurize one archive; yields one small dict per page written."""
        if self.encoder is None:
            self.open()
        if is_done(self.directory, source.key):
            logger.info("%s: already in the corpus (files/%s.json), skipped", source.location,
                        source.key)
            self.inc("files_already_done")
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        state = _FileState(source)
        reader = RecordReader(source, self.settings.limits.max_bytes,
                              self.settings.record_types)
        window = max(2, min(self.settings.max_pending, 4 * max(1, self.settings.workers)))
        pending: deque[_Entry] = deque()
        start = time.perf_counter()
        logger.info("reading %s", source.location)
        try:
            for n, event in enumerate(reader):
                if n % 64 == 63:
                    await asyncio.sleep(0)  # let finished parses and heartbeats through
                if isinstance(event, Skip):
                    self._skip(state, event.reason)
                    continue
                entry = self._submit(state, event)
                if entry is not None:
                    pending.append(entry)
                while pending and (len(pending) >= window or pending[0].task.done()):
                    item = await self._complete(state, pending.popleft())
                    if item is not None:
                        yield item
                self._progress()
            while pending:
                item = await self._complete(state, pending.popleft())
                if item is not None:
                    yield item
            if state.builder is not None:
                await self._flush(state)
            if state.flushing is not None:
                await state.flushing
        except BaseException as exc:
            for entry in pending:
                entry.task.cancel()
            if state.flushing is not None and not state.flushing.done():
                await asyncio.shield(state.flushing)  # a started shard is finished, not torn
            if not isinstance(exc, Exception):
                raise  # cancelled, interrupted, closed: not this archive's fault
            # A failure no archive should cause: this archive is one counted failure (no
            # marker, so a rerun tries it again) and the next archive is still read.
            logger.exception("%s: reading failed", source.location)
            reader.failed = reader.failed or \
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            self._finish(state, reader, time.perf_counter() - start)
            return
        self.inc("records", reader.records)
        self._finish(state, reader, time.perf_counter() - start)

    def _skip(self, state: _FileState, reason: str) -> None:
        state.skipped[reason] += 1
        self.inc(f"skipped/{reason}")

    def _submit(self, state: _FileState, record: Candidate) -> _Entry | None:
        part = state.candidates // self.settings.shard_pages
        index = state.candidates
        state.candidates += 1
        self.inc("html_records")
        if part in state.resumed:
            return None
        if part not in state.shards:
            existing = self.directory / SHARD_DIR / shard_name(state.source.key, part)
            if existing.is_file():  # finished by an earlier, interrupted run
                info = state.shards[part] = shard_info(existing)
                state.resumed.add(part)
                state.skipped.update(info.failures)
                self.inc("shards_resumed")
                self.inc("pages_resumed", info.pages)
                return None
        page_id = record.record_id or (f"{state.source.key}@{record.offset}"
                                       if record.offset is not None
                                       else f"{state.source.key}#{index}")
        task = asyncio.ensure_future(
            self.pool.structure(record.body, record.url or None, record.content_type))
        return _Entry(record.url, page_id, record.offset, part, task)

    async def _complete(self, state: _FileState, entry: _Entry) -> dict | None:
        page, reason = None, None
        try:
            page = (await entry.task).page
        except WorkerCrashedError:
            reason = "worker_crashed"
        except PageTimeoutError:
            reason = "timeout"
        except EmptyPageError:
            reason = "empty_page"
        except NotHTMLError:
            reason = "not_html_body"
        except GrownupError:
            reason = "parse_error"
        except Exception as exc:  # noqa: BLE001 - one bad page never stops the archive
            logger.warning("%s: parsing %s failed: %s: %s", state.source.location, entry.url,
                           type(exc).__name__, exc)
            reason = "parse_error"
        if state.builder is None or state.builder.part != entry.part:
            if state.builder is not None:
                await self._flush(state)
            state.builder = ShardBuilder(state.source.location, state.source.key, entry.part)
        if page is None:
            state.builder.fail(reason)
            self._skip(state, reason)
            return None
        state.builder.add(page, entry.page_id, entry.url, entry.offset)
        state.pages += 1
        self.inc("pages")
        return {"url": entry.url, "page_id": entry.page_id, "site": site_key(entry.url),
                "nodes": page.num_nodes, "source": state.source.location,
                "shard": shard_name(state.source.key, entry.part)}

    async def _flush(self, state: _FileState) -> None:
        """Write the current builder's shard in a thread; at most one write in flight."""
        builder, state.builder = state.builder, None
        if state.flushing is not None:
            await state.flushing

        async def write() -> None:
            loop = asyncio.get_running_loop()
            async with self._lock:  # one encoder call at a time in this process
                store = await loop.run_in_executor(self._shard_thread(), builder.build,
                                                   self.encoder)
                info = await loop.run_in_executor(self._shard_thread(), builder.save, store,
                                                  self.directory / SHARD_DIR)
            state.shards[builder.part] = info
            self.inc("shards")
            await loop.run_in_executor(self._shard_thread(), release_memory)

        state.flushing = asyncio.ensure_future(write())

    def _finish(self, state: _FileState, reader: RecordReader, seconds: float) -> None:
        source = state.source
        shards = [state.shards[p].to_dict() for p in sorted(state.shards)]
        pages = sum(s["pages"] for s in shards)
        record = {
            "source": source.location, "key": source.key, "records": reader.records,
            "candidates": state.candidates, "pages": pages,
            "skipped": dict(sorted(state.skipped.items())), "shards": shards,
            "errors": reader.errors, "worker": worker_id(), "seconds": round(seconds, 3),
            "finished": now(),
        }
        if reader.failed is not None:
            record["error"] = reader.failed
            write_failure(self.directory, source.key, record)
            self.inc("files_failed")
            logger.error("%s could not be read (%s); it will be tried again on the next run",
                         source.location, reader.failed)
            return
        write_marker(self.directory, source.key, record)
        self.inc("files")
        if reader.errors:
            self.inc("files_damaged")
        logger.info("%s: %d records, %d HTML, %d pages, %d shards in %.1f s%s",
                    source.location, reader.records, state.candidates, pages, len(shards),
                    seconds, f" ({len(reader.errors)} damaged regions skipped)"
                    if reader.errors else "")

    def missing(self, spec: str) -> None:
        """A path or glob that matched no file: counted in this run's stats, not in the corpus
        (a mistyped path is not a property of the data)."""
        logger.error("no archive found at %s", spec)
        self.inc("skipped/missing_path")

    def path_skipped(self, skip) -> None:
        """A path that gave no archive (``sources.PathSkip``: a missing path, a dangling link,
        a link loop, a FIFO, an empty directory...): counted in this run's stats by its reason
        and logged, not in the corpus (it is not a property of the data)."""
        if skip.reason == "missing_path":
            logger.error("no archive found at %s", skip.path)
        else:
            logger.warning("%s: skipped (%s): %s", skip.path, skip.reason, skip.detail)
        self.inc(f"skipped/{skip.reason}")

    def _progress(self) -> None:
        every = self.settings.log_every
        done = self.totals["html_records"]
        if every and done - self._last_log >= every:
            self._last_log = done
            elapsed = max(time.perf_counter() - self.started, 1e-9)
            logger.info("%d HTML records, %d pages featurized (%.1f pages/s)", done,
                        self.totals["pages"], self.totals["pages"] / elapsed)
