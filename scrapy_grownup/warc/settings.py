"""The ``GROWNUP_WARC_*`` settings of the WARC spider and the archiving middleware.

The featurization settings are the live crawl's (``GROWNUP_WORKERS``,
``GROWNUP_MAX_PENDING_PAGES``, ``GROWNUP_MAX_PAGE_*``, ``GROWNUP_PAGE_TIMEOUT``), so that a page
read from an archive is parsed exactly as it would have been when it was crawled.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_grownup.page.limits import PageLimits

WARC_DEFAULTS: dict[str, object] = {
    # WARC spider: input and output
    "GROWNUP_WARC_PATHS": [],  # files, directories, globs or http(s) URLs (or -a paths=...)
    "GROWNUP_WARC_CORPUS_DIR": None,  # output directory (or -a output=...)
    "GROWNUP_WARC_ENCODER": "static",  # text encoder of the stored embeddings
    "GROWNUP_WARC_SHARD_PAGES": 256,  # HTML records per shard (a shard is also the resume unit)
    "GROWNUP_WARC_RECORD_TYPES": ["response", "resource"],
    "GROWNUP_WARC_PAIR_PARTITION_PAGES": 100_000,  # pages per spill partition when pairing
    "GROWNUP_WARC_FINALIZE": True,  # write index.json, pairs and manifest.json at close
    "GROWNUP_WARC_ITEMS": False,  # also yield one small item per page (for FEEDS)
    "GROWNUP_WARC_LOG_EVERY": 1000,  # records between progress log lines (0: never)
    # Scale-out on scrapy-redis (spider ``grownup_warc_redis``)
    "GROWNUP_WARC_REDIS_POLL": 0.5,  # seconds between polls of an empty queue
    "GROWNUP_WARC_REDIS_IDLE_CLOSE": 30.0,  # close after the queue was empty this long (0: never)
    "GROWNUP_WARC_REDIS_START_WAIT": 300.0,  # how long a worker that has read nothing waits
    # Crawl -> archive: WarcArchiveMiddleware
    "GROWNUP_WARC_OUTPUT": None,  # directory of rotating WARC files; unset: middleware is off
    "GROWNUP_WARC_OUTPUT_MAX_BYTES": 1_000_000_000,
    "GROWNUP_WARC_OUTPUT_PREFIX": "grownup",
    "GROWNUP_WARC_OUTPUT_REQUESTS": True,  # also write the request records
}


def _get(settings, name):
    value = settings.get(name)
    return WARC_DEFAULTS[name] if value is None else value


@dataclass(frozen=True)
class WarcSettings:
    """Typed view of the settings the WARC spider reads from one crawler."""

    encoder: str
    device: str | None
    shard_pages: int
    record_types: tuple[str, ...]
    partition_pages: int
    finalize: bool
    items: bool
    log_every: int
    workers: int
    max_pending: int
    limits: PageLimits
    redis_poll: float
    redis_idle_close: float
    redis_start_wait: float
    page_timeout: float | None = None

    @classmethod
    def from_settings(cls, settings=None) -> "WarcSettings":
        """From Scrapy settings (or a plain dict, or None for the defaults). The featurization
        values (workers, pending pages, page limits, device) are read by the live crawl's own
        ``GrownupSettings``, so both read them identically."""
        from scrapy.settings import BaseSettings, Settings

        from scrapy_grownup.crawl.settings import GrownupSettings

        if not isinstance(settings, BaseSettings):
            settings = Settings(settings or {})
        live = GrownupSettings.from_settings(settings)

        def number(name, kind):
            value = settings.get(name)
            return kind(WARC_DEFAULTS[name] if value is None else value)

        types = _get(settings, "GROWNUP_WARC_RECORD_TYPES")
        if isinstance(types, str):
            types = [t for t in types.replace(",", " ").split() if t]
        values = cls(
            encoder=str(_get(settings, "GROWNUP_WARC_ENCODER")),
            device=live.device,
            shard_pages=number("GROWNUP_WARC_SHARD_PAGES", int),
            record_types=tuple(str(t).strip().lower() for t in types),
            partition_pages=number("GROWNUP_WARC_PAIR_PARTITION_PAGES", int),
            finalize=_bool(_get(settings, "GROWNUP_WARC_FINALIZE")),
            items=_bool(_get(settings, "GROWNUP_WARC_ITEMS")),
            log_every=number("GROWNUP_WARC_LOG_EVERY", int),
            workers=live.workers,
            max_pending=live.max_pending_pages,
            limits=live.limits,
            redis_poll=number("GROWNUP_WARC_REDIS_POLL", float),
            redis_idle_close=number("GROWNUP_WARC_REDIS_IDLE_CLOSE", float),
            redis_start_wait=number("GROWNUP_WARC_REDIS_START_WAIT", float),
            page_timeout=live.page_timeout,
        )
        if values.shard_pages < 1:
            raise ValueError("GROWNUP_WARC_SHARD_PAGES must be >= 1")
        if values.partition_pages < 1:
            raise ValueError("GROWNUP_WARC_PAIR_PARTITION_PAGES must be >= 1")
        if not values.record_types:
            raise ValueError("GROWNUP_WARC_RECORD_TYPES is empty: no record could be a page")
        return values


def _bool(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
