"""The ``GROWNUP_WARC_*`` settings of the WARC spider and the archiving middleware.

The featurization settings are the live crawl's (``GROWNUP_WORKERS``,
``GROWNUP_MAX_PENDING_PAGES``, ``GROWNUP_MAX_PAGE_*``, ``GROWNUP_PAGE_TIMEOUT``), so that a page
read from an archive is parsed exactly as it would have been when it was crawled.

Every value goes through the checks of the crawl's settings (``crawl.settings``: one spelling of
a boolean, whole numbers, seconds): junk is a ``SettingsError`` naming the setting and the value,
never a silent default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scrapy_grownup.crawl.settings import bad_value, boolean, check, non_negative, whole
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


def _paths(name: str, value) -> list[str]:
    """A list of paths, or one string of them separated by commas."""
    paths = str(value).split(",") if isinstance(value, (str, os.PathLike)) else value
    if not isinstance(paths, (list, tuple)) or \
            not all(isinstance(v, (str, os.PathLike)) for v in paths):
        raise bad_value(name, value, "not a list of paths",
                   "a list of files, directories, globs or http(s) URLs, or a comma-separated "
                   "string of them")
    return [str(v).strip() for v in paths if str(v).strip()]


def _directory(name: str, value) -> str | None:
    """``None``, or a directory path; an empty string (``-s GROWNUP_WARC_OUTPUT=``) unsets it."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise bad_value(name, value, "not a directory path", "None or a directory path")
    return str(value)


def _text(name: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_value(name, value, "not a non-empty string", "a non-empty string")
    return value.strip()


def _encoder(name: str, value) -> str:
    from scrapy_grownup.encoders import ENCODERS

    if not isinstance(value, str) or value.strip().lower() not in ENCODERS:
        raise bad_value(name, value, "unknown text encoder", ", ".join(ENCODERS))
    return value.strip().lower()


def _record_types(name: str, value) -> tuple[str, ...]:
    """A list of WARC record types, or one string of them separated by commas or spaces."""
    allowed = "a non-empty list of WARC record types, or a comma- or space-separated string"
    names = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(v, str) for v in names):
        raise bad_value(name, value, "not a list of record types", allowed)
    types = tuple(t.strip().lower() for t in names if t.strip())
    if not types:
        raise bad_value(name, value, "empty: no record could be a page", allowed)
    return types


# What each setting may hold; every name of ``WARC_DEFAULTS`` has one.
WARC_CHECKS = {
    "GROWNUP_WARC_PATHS": _paths,
    "GROWNUP_WARC_CORPUS_DIR": _directory,
    "GROWNUP_WARC_ENCODER": _encoder,
    "GROWNUP_WARC_SHARD_PAGES": whole(1),
    "GROWNUP_WARC_RECORD_TYPES": _record_types,
    "GROWNUP_WARC_PAIR_PARTITION_PAGES": whole(1),
    "GROWNUP_WARC_FINALIZE": boolean,
    "GROWNUP_WARC_ITEMS": boolean,
    "GROWNUP_WARC_LOG_EVERY": whole(0, " (0: no progress lines)"),
    "GROWNUP_WARC_REDIS_POLL": non_negative("a number of seconds > 0", zero=False),
    "GROWNUP_WARC_REDIS_IDLE_CLOSE": non_negative("a number of seconds >= 0 (0: never)"),
    "GROWNUP_WARC_REDIS_START_WAIT": non_negative("a number of seconds >= 0 (0: never)"),
    "GROWNUP_WARC_OUTPUT": _directory,
    "GROWNUP_WARC_OUTPUT_MAX_BYTES": whole(1),
    "GROWNUP_WARC_OUTPUT_PREFIX": _text,
    "GROWNUP_WARC_OUTPUT_REQUESTS": boolean,
}
assert set(WARC_CHECKS) == set(WARC_DEFAULTS)


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
        """Check and read the WARC spider's settings.

        The featurization values (workers, pending pages, page limits, device) are read by the
        live crawl's own ``GrownupSettings``, so a page from an archive is parsed as a crawled
        one would be.

        Args:
            settings (scrapy.settings.BaseSettings | dict | None): Scrapy settings, a plain
                dict, or None for the defaults.

        Returns:
            The checked values.

        Raises:
            SettingsError: a setting holds a value it cannot take (also a ``ValueError``); the
                message, one line, names the setting, its value and the values allowed.
        """
        from scrapy.settings import BaseSettings, Settings

        from scrapy_grownup.crawl.settings import GrownupSettings

        if not isinstance(settings, BaseSettings):
            settings = Settings(settings or {})
        live = GrownupSettings.from_settings(settings)
        values = {name: check(settings, name) for name in WARC_DEFAULTS}
        return cls(
            encoder=values["GROWNUP_WARC_ENCODER"],
            device=live.device,
            shard_pages=values["GROWNUP_WARC_SHARD_PAGES"],
            record_types=values["GROWNUP_WARC_RECORD_TYPES"],
            partition_pages=values["GROWNUP_WARC_PAIR_PARTITION_PAGES"],
            finalize=values["GROWNUP_WARC_FINALIZE"],
            items=values["GROWNUP_WARC_ITEMS"],
            log_every=values["GROWNUP_WARC_LOG_EVERY"],
            workers=live.workers,
            max_pending=live.max_pending_pages,
            limits=live.limits,
            redis_poll=values["GROWNUP_WARC_REDIS_POLL"],
            redis_idle_close=values["GROWNUP_WARC_REDIS_IDLE_CLOSE"],
            redis_start_wait=values["GROWNUP_WARC_REDIS_START_WAIT"],
            page_timeout=live.page_timeout,
        )
