"""``grownup_warc_redis``: the WARC spider fed by a scrapy-redis queue, for N machines.

Push archive paths (or http(s) URLs, or scrapy-redis JSON ``{"url": ...}``) to the Redis list
``<spider name>:start_urls`` (``REDIS_START_URLS_KEY``, or ``-a redis_key=...``) and start the
spider on as many machines as wanted, all writing into one corpus directory (a shared
filesystem) or each into its own (merge them by copying their ``shards/`` and ``files/`` into
one directory, then ``grownup warc --finalize-only --output DIR``)::

    grownup warc --redis redis://queue-host:6379 --push /data/cc/*.warc.gz
    grownup warc --redis redis://queue-host:6379 --output /shared/corpus   # on every machine

The connection comes from scrapy-redis (``REDIS_URL``, ``REDIS_HOST``, ``REDIS_PARAMS``...),
and so does the queue pop: ``RedisMixin.fetch_data`` with a batch of one, an atomic
``LRANGE``+``LTRIM`` (or ``SPOP`` with ``REDIS_START_URLS_AS_SET``), so each entry goes to
exactly one worker. A worker also claims each archive in the hash ``<key>:active`` (``HSETNX``)
while it reads it, so an archive pushed twice is still read once at a time, and adds it to the
set ``<key>:done`` when its marker is written; the corpus markers make a re-pushed finished
archive a no-op. Running workers are listed in the set ``<key>:workers``.

A worker stops when the queue has been empty for ``GROWNUP_WARC_REDIS_IDLE_CLOSE`` seconds after
its last archive (0: never), or after ``GROWNUP_WARC_REDIS_START_WAIT`` seconds if it never got
one. Each worker finalizes the corpus when it stops; the last one indexes everything.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, AsyncIterator

from scrapy_redis.spiders import RedisMixin
from scrapy_redis.utils import bytes_to_str

from scrapy_grownup.warc.manifest import is_done, worker_id
from scrapy_grownup.warc.sources import expand_inputs
from scrapy_grownup.warc.spider import WarcSpider, require_asyncio_reactor

logger = logging.getLogger(__name__)


def spec_from_data(data: bytes | str, encoding: str = "utf-8") -> str | None:
    """A queue entry: a path or URL, or JSON with ``url`` or ``path``."""
    text = bytes_to_str(data, encoding).strip()
    if text.startswith("{"):
        try:
            payload = json.loads(text)
        except ValueError:
            return None
        return (payload.get("url") or payload.get("path") or "").strip() or None
    return text or None


SHARED_STALE_SECONDS = 3600.0


class WarcRedisSpider(RedisMixin, WarcSpider):
    """``grownup_warc`` reading the archives named in a Redis list."""

    name = "grownup_warc_redis"
    redis_batch_size = 1  # one archive per pop: the others stay for the other workers

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.setup_redis(crawler)
        # Workers on other machines may share the directory: their temporaries' pids mean
        # nothing here, so only those untouched for an hour are taken for stale.
        spider.writer.stale_age = SHARED_STALE_SECONDS
        return spider

    def check_inputs(self) -> None:
        """The archives come from the queue, not from ``paths``."""

    def spider_idle(self):
        """RedisMixin keeps idle spiders open; here ``start()`` decides when the queue is done."""
        return None

    def keys(self) -> dict[str, str]:
        return {name: f"{self.redis_key}:{name}" for name in ("workers", "active", "done")}

    async def start(self) -> AsyncIterator[Any]:
        require_asyncio_reactor()
        self.writer.open()
        settings = self.warc_settings
        keys, me = self.keys(), worker_id()
        self.server.sadd(keys["workers"], me)
        logger.info("worker %s reading the queue %s", me, self.redis_key)
        read_any = False
        waiting_since = time.monotonic()
        try:
            while True:
                entries = self.fetch_data(self.redis_key, self.redis_batch_size)
                if not entries:
                    limit = settings.redis_idle_close if read_any else settings.redis_start_wait
                    if limit and time.monotonic() - waiting_since >= limit:
                        break
                    await asyncio.sleep(settings.redis_poll)
                    continue
                for data in entries:
                    spec = spec_from_data(data, self.redis_encoding)
                    if spec is None:
                        logger.warning("queue entry %r names no archive", data)
                        self._inc("skipped/bad_queue_entry", 1)
                        continue
                    found = expand_inputs([spec])
                    for skip in found.skipped:
                        self.writer.path_skipped(skip)
                    for source in found.sources:
                        async for item in self._read_claimed(source, keys, me):
                            yield item
                read_any = True
                waiting_since = time.monotonic()
        finally:
            self.server.srem(keys["workers"], me)

    async def _read_claimed(self, source, keys, me) -> AsyncIterator[Any]:
        if not self.server.hsetnx(keys["active"], source.location, me):
            logger.warning("%s is being read by %s; not read again", source.location,
                           self.server.hget(keys["active"], source.location))
            self._inc("files_claimed_elsewhere", 1)
            return
        try:
            async for item in self.writer.read(source):
                if self.warc_settings.items:
                    yield item
        finally:
            self.server.hdel(keys["active"], source.location)
        if is_done(self.writer.directory, source.key):
            self.server.sadd(keys["done"], source.location)


def push(server, key: str, specs: list[str]) -> int:
    """Queue archives for the workers: local paths are expanded (directories, globs) into
    absolute paths first; URLs are queued as they are. Returns how many entries were pushed."""
    found = expand_inputs(specs)
    for skip in found.skipped:
        logger.error("%s: not queued (%s): %s", skip.path, skip.reason, skip.detail)
    sources = found.sources
    if sources:
        server.rpush(key, *[source.location for source in sources])
    return len(sources)
