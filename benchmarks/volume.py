"""A volume crawl with the add-on: thousands of ordinary pages, resident memory of every process.

A loopback HTTP server (its own process) serves ``--pages`` generated news pages (the sample
site's three layouts, each page with a paragraph and an element id of its own, so the string
caches see new strings all the way) and an index linking them all. One crawl with
``ADDONS = {"scrapy_grownup.Addon": 500}`` visits them. An extension inside the crawl samples the
resident set size (``VmRSS``) of the crawl's own process, of each featurization worker and of
the model process every ``--every`` seconds; "start" is the first sample after ``--warm``
items (the model loaded, the first batches done), "end" the last sample before the spider
closes. Prints one JSON line: pages, items, drops, pages/s, RSS start -> end, peak and median
by quarter of the run (MB) per process role, and the deepest model queue.

    python benchmarks/volume.py --pages 3000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from _common import crawl_index, served_site  # noqa: E402
sys.path.insert(0, str(ROOT))


def unique_note(i: int, page: str) -> str:
    """Story ``i`` with a paragraph and an element id of its own, so the string caches see new
    strings all the way."""
    own = (f'<p id="note-{i}">Reporting for story {i} was done by desk {i % 97} '
           f"on beat {i * 7919 % 10007}; corrections go to the editor of edition {i}.</p>")
    return page.replace("</main>", own + "</main>", 1)


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class RssSampler:
    """Scrapy extension: samples the RSS of the crawl, its workers and its model process."""

    def __init__(self, crawler):
        from scrapy import signals

        self.crawler = crawler
        settings = crawler.settings
        self.every = settings.getfloat("VOLUME_RSS_EVERY", 1.0)
        self.warm = settings.getint("VOLUME_WARM_ITEMS", 200)
        self.samples: list[dict] = []
        self.call = None
        crawler.signals.connect(self.start, signals.engine_started)
        crawler.signals.connect(self.stop, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def start(self):
        from twisted.internet import task

        self.call = task.LoopingCall(self.sample)
        self.call.start(self.every, now=False)

    def _pids(self) -> dict[str, list[int]]:
        runtime = getattr(self.crawler, "_grownup_runtime", None)
        out: dict[str, list[int]] = {"main": [os.getpid()], "worker": [], "model": []}
        if runtime is None:
            return out
        for role, pool in (("worker", runtime.pool.processes), ("model", runtime.model)):
            executor = getattr(pool, "_executor", None) if pool is not None else None
            out[role] = sorted((getattr(executor, "_processes", None) or {}).keys())
        return out

    def sample(self):
        stats = self.crawler.stats
        row = {"items": stats.get_value("grownup/items",
                                         stats.get_value("response_received_count", 0))}
        for role, pids in self._pids().items():
            values = [v for v in map(rss_mb, pids) if v is not None]
            row[role] = round(sum(values), 1) if values else None
        self.samples.append(row)

    def stop(self, spider, reason):
        if self.call is not None and self.call.running:
            self.call.stop()
        self.sample()  # the pools close after the pipeline, so this is still the crawl's end
        warm = [s for s in self.samples if s["items"] >= self.warm] or self.samples
        summary = {}
        for role in ("main", "worker", "model"):
            values = [s[role] for s in warm if s[role] is not None]
            if values:
                quarters = [sorted(part)[len(part) // 2] for part in
                            (values[len(values) * q // 4:len(values) * (q + 1) // 4] or values
                             for q in range(4))]
                summary[role] = {"start": values[0], "end": values[-1], "peak": max(values),
                                 "median_by_quarter": quarters}
        self.crawler.stats.set_value("volume/rss_mb", summary)
        self.crawler.stats.set_value("volume/samples", len(self.samples))


def child(config: dict) -> None:
    stats = crawl_index(config["start_url"], {
        "ADDONS": {} if config.get("plain") else {"scrapy_grownup.Addon": 500},
        "EXTENSIONS": {"benchmarks.volume.RssSampler": 0},
        **config["settings"]})
    Path(config["out"]).write_text(json.dumps({
        "seconds": stats["elapsed_time_seconds"],
        "pages": stats.get("downloader/response_status_count/200", 0),
        "items": stats.get("grownup/items", 0),
        "dropped": {k.split("/", 2)[2]: v for k, v in stats.items()
                    if k.startswith("grownup/dropped/")},
        "worker_restarts": stats.get("grownup/worker_restarts", 0),
        "model_restarts": stats.get("grownup/model_restarts", 0),
        "finish_reason": stats.get("finish_reason"),
        "queue_depth_max": stats.get("grownup/queue_depth_max"),
        "rss_mb": stats.get("volume/rss_mb"),
        "samples": stats.get("volume/samples"),
    }))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--model", default="fast")
    parser.add_argument("--workers", default="auto")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument("--warm", type=int, default=200, help="items before the start sample")
    parser.add_argument("--plain", action="store_true",
                        help="Scrapy alone (no add-on), to compare the crawl process's memory")
    parser.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                        help="another Scrapy or GROWNUP_* setting of the crawl (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0
    with served_site(args.pages, unique_note) as (tmp, start_url):
        out = tmp / "result.json"
        config = {"start_url": start_url, "out": str(out), "plain": args.plain,
                  "settings": {"GROWNUP_MODEL": args.model, "GROWNUP_WORKERS": args.workers,
                               "VOLUME_RSS_EVERY": args.every,
                               "VOLUME_WARM_ITEMS": args.warm,
                               **dict(item.split("=", 1) for item in args.set)}}
        env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
        subprocess.run([sys.executable, __file__, "--child", json.dumps(config)], check=True,
                       env=env, cwd=ROOT)
        result = json.loads(out.read_text())
    print(json.dumps({"benchmark": "volume", "plain": args.plain, "model": args.model,
                      "workers": args.workers,
                      **result,
                      "pages_per_s": round(result["pages"] / result["seconds"], 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
