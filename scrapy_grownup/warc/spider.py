"""``grownup_warc``: the Scrapy spider that turns WARC/ARC archives into a pre-training corpus.

In a project (add ``"scrapy_grownup.warc.spider"`` to ``SPIDER_MODULES``)::

    scrapy crawl grownup_warc -a paths=crawl/*.warc.gz,more/ -a output=corpus/

and without one: ``grownup warc crawl/*.warc.gz more/ --output corpus/``. The archives are read
in the spider's ``start()`` (no request is downloaded), one after the other, each record
streamed; HTML pages are parsed in the ``FeaturizerPool`` worker processes, as in a live crawl.
Counters go to the crawler's stats under ``grownup/warc/`` (``records``, ``html_records``,
``pages``, ``skipped/<reason>``, ``files``, ``shards``...). When the spider closes, the corpus
is finalized: ``index.json``, ``pairs.safetensors`` and ``manifest.json`` (see
``scrapy_grownup.warc``).
"""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator

import scrapy
from scrapy import signals

from scrapy_grownup.errors import SettingsError
from scrapy_grownup.warc.settings import WarcSettings
from scrapy_grownup.warc.sources import expand_inputs, split_specs
from scrapy_grownup.warc.writer import CorpusWriter

logger = logging.getLogger(__name__)
STATS_PREFIX = "grownup/warc"


def require_asyncio_reactor() -> None:
    from scrapy.utils.reactor import is_asyncio_reactor_installed

    if not is_asyncio_reactor_installed():
        raise RuntimeError(
            "the WARC spider needs the asyncio reactor (TWISTED_REACTOR = "
            "'twisted.internet.asyncioreactor.AsyncioSelectorReactor', Scrapy's default)")


class WarcSpider(scrapy.Spider):
    """Reads ``paths`` (files, directories, globs, URLs) into the corpus at ``output``."""

    name = "grownup_warc"
    custom_settings = {
        # The article-extraction add-on, if the project enables it, has nothing to do here.
        "GROWNUP_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
    }

    def __init__(self, paths: Any = None, output: str | None = None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.paths_arg = paths
        self.output_arg = output
        self.writer: CorpusWriter | None = None

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        try:
            spider.warc_settings = WarcSettings.from_settings(settings)
        except SettingsError as exc:  # one error line, as the add-on stops a crawl
            from scrapy_grownup.crawl.addon import stop_crawl

            stop_crawl(exc)
        output = spider.output_arg or settings.get("GROWNUP_WARC_CORPUS_DIR")
        if not output:
            raise ValueError(f"{cls.name}: no output directory; pass -a output=DIR or set "
                             f"GROWNUP_WARC_CORPUS_DIR")
        spider.specs = split_specs(spider.paths_arg) or \
            split_specs(settings.getlist("GROWNUP_WARC_PATHS"))
        spider.check_inputs()
        spider.writer = CorpusWriter(output, spider.warc_settings, stats=spider._inc)
        crawler.signals.connect(spider._spider_closed, signal=signals.spider_closed)
        return spider

    def check_inputs(self) -> None:
        """Fail the start (``scrapy crawl`` exits 1) when there is nothing to read: no paths,
        or paths of which none exists. Some missing ones are counted skips instead."""
        if not self.specs:
            raise ValueError(f"{self.name}: no input; pass -a paths=FILE,DIR,GLOB or set "
                             f"GROWNUP_WARC_PATHS")
        found = expand_inputs(self.specs)
        self.sources, self.missing, self.path_skips = found.sources, found.missing, found.skipped
        if not self.sources:
            reasons = "; ".join(f"{skip.path}: {skip.reason}" for skip in self.path_skips)
            raise ValueError(f"{self.name}: no archive found ({reasons})")

    def _inc(self, key: str, count: int) -> None:
        self.crawler.stats.inc_value(f"{STATS_PREFIX}/{key}", count)

    async def start(self) -> AsyncIterator[Any]:
        require_asyncio_reactor()
        self.writer.open()
        for skip in self.path_skips:  # every path given ends as archives or counted skips
            self.writer.path_skipped(skip)
        for source in self.sources:
            async for item in self.writer.read(source):
                if self.warc_settings.items:
                    yield item

    def _spider_closed(self, spider, reason: str) -> None:
        if spider is not self or self.writer is None:
            return
        self.writer.close()
        if not self.warc_settings.finalize or self.writer.encoder is None:
            return
        try:
            manifest = self.writer.finalize()
        except Exception:  # noqa: BLE001 - logged; the shards and markers are on disk
            logger.exception("could not finalize the corpus at %s", self.writer.directory)
            return
        stats = self.crawler.stats
        for key in ("pages", "pairs", "shards"):
            stats.set_value(f"{STATS_PREFIX}/corpus/{key}", manifest[key])
        logger.info("corpus %s: %d pages in %d shards, %d pairs over %d sites; skipped: %s",
                    self.writer.directory, manifest["pages"], manifest["shards"],
                    manifest["pairs"], manifest["sites"], manifest["skipped"])
