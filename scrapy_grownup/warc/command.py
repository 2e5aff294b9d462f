"""``grownup warc``: run the WARC spider without a Scrapy project.

    grownup warc PATH... --output DIR              read archives into a corpus
    grownup warc --redis URL --output DIR          be one worker of a scrapy-redis queue
    grownup warc --redis URL --push PATH...        queue archives for the workers
    grownup warc --finalize-only --output DIR      rebuild index, pairs and manifest

Exit code: 0 when the corpus holds pages, 1 when nothing could be read (no HTML page in any
archive, every archive unreadable), 2 on a usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from scrapy_grownup.crawl.settings import check
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.warc.settings import WARC_DEFAULTS, WarcSettings

logger = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help=".warc/.warc.gz/.arc/.arc.gz files, directories, "
                                            "globs or http(s) URLs")
    p.add_argument("-o", "--output", help="corpus directory (created; reruns resume)")
    p.add_argument("--encoder", default=None, choices=["static", "minilm"],
                   help=f"text encoder (default {WARC_DEFAULTS['GROWNUP_WARC_ENCODER']})")
    p.add_argument("--workers", type=int, default=None,
                   help="featurization worker processes (GROWNUP_WORKERS; 0 = in a thread)")
    p.add_argument("--shard-pages", type=int, default=None,
                   help=f"HTML records per shard "
                        f"(default {WARC_DEFAULTS['GROWNUP_WARC_SHARD_PAGES']})")
    p.add_argument("--redis", metavar="URL", default=None,
                   help="scrapy-redis queue (REDIS_URL): consume it, or fill it with --push")
    p.add_argument("--redis-key", default=None,
                   help="queue key (default grownup_warc_redis:start_urls)")
    p.add_argument("--push", action="store_true", help="push PATHs to the --redis queue and exit")
    p.add_argument("--finalize-only", action="store_true",
                   help="only rebuild index.json, pairs and manifest.json of --output")
    p.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                   help="any Scrapy or GROWNUP_* setting (repeatable)")


def run(args) -> int:
    if args.push:
        return _push(args)
    if not args.output:
        print("grownup warc: --output DIR is required", file=sys.stderr)
        return 2
    if args.finalize_only:
        from scrapy_grownup.warc.manifest import finalize

        manifest = finalize(args.output, check(_settings(args),
                                               "GROWNUP_WARC_PAIR_PARTITION_PAGES"))
        _summary(manifest, args.output)
        return 0 if manifest["pages"] else 1
    if not args.paths and not args.redis:
        print("grownup warc: give archive PATHs, or --redis URL to read a queue",
              file=sys.stderr)
        return 2
    return _crawl(args)


def _settings(args) -> dict:
    settings: dict = {
        "LOG_LEVEL": logging.getLevelName(logging.getLogger().level),
        "LOG_INSTALL_ROOT_HANDLER": False,  # ``grownup`` has configured logging already
        "REMOTE_CONTROL_ENABLED": False,  # no listening port for a batch job
        "GROWNUP_WARC_CORPUS_DIR": args.output,
    }
    if args.encoder:
        settings["GROWNUP_WARC_ENCODER"] = args.encoder
    if args.workers is not None:
        settings["GROWNUP_WORKERS"] = args.workers
    if args.shard_pages is not None:
        settings["GROWNUP_WARC_SHARD_PAGES"] = args.shard_pages
    if args.redis:
        settings["REDIS_URL"] = args.redis
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            raise GrownupError(f"-s expects NAME=VALUE, not {item!r}")
        settings[name.strip()] = value
    return settings


def _crawl(args) -> int:
    from scrapy.crawler import CrawlerProcess

    settings = _settings(args)
    WarcSettings.from_settings(settings)  # a bad setting: one error line, before any crawl
    if args.redis:
        try:
            from scrapy_grownup.warc.scaleout import WarcRedisSpider as spider_class
        except ImportError as exc:
            print(f"grownup warc --redis needs scrapy-redis ({exc})", file=sys.stderr)
            return 2
    else:
        from scrapy_grownup.warc.spider import WarcSpider as spider_class
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider_class)
    kwargs = {"output": args.output}
    if args.paths:
        kwargs["paths"] = list(args.paths)
    if args.redis_key:
        kwargs["redis_key"] = args.redis_key
    process.crawl(crawler, **kwargs)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    pages = stats.get("grownup/warc/corpus/pages")
    if pages is None:
        print(json.dumps({"output": args.output, "error": "the corpus was not written; see the "
                          "log above", "finish_reason": stats.get("finish_reason")}),
              file=sys.stderr)
        return 2
    from pathlib import Path

    from scrapy_grownup.warc.manifest import MANIFEST_FILE, read_json

    _summary(read_json(Path(args.output) / MANIFEST_FILE), args.output,
             {k.rsplit("/", 1)[-1]: v for k, v in stats.items()
              if k.startswith("grownup/warc/") and k.count("/") == 2})
    return 0 if pages else 1


def _summary(manifest: dict, output: str, run: dict | None = None) -> None:
    line = {"output": output, "pages": manifest["pages"], "pairs": manifest["pairs"],
            "shards": manifest["shards"], "sites": manifest.get("sites"),
            "skipped": manifest["skipped"], "encoder": manifest.get("encoder")}
    if run is not None:
        line["this_run"] = run
    print(json.dumps(line), file=sys.stderr)


def _push(args) -> int:
    if not args.redis:
        print("grownup warc --push needs --redis URL", file=sys.stderr)
        return 2
    from scrapy.settings import Settings
    from scrapy_redis import connection

    from scrapy_grownup.warc.scaleout import push

    settings = Settings({"REDIS_URL": args.redis})
    server = connection.from_settings(settings)
    key = args.redis_key or "grownup_warc_redis:start_urls"
    count = push(server, key, list(args.paths))
    print(json.dumps({"pushed": count, "key": key, "queued": server.llen(key)}))
    return 0 if count else 1
