"""``make demo``: crawl the bundled sample news site with Scrapy and the scrapy_grownup add-on.

Serves the generated site on loopback, runs the example project's plain ``CrawlSpider`` with
``ADDONS = {"scrapy_grownup.Addon": 500}``, and writes one article per HTML page to
``articles.jsonl`` through ``FEEDS``. Prints a line per article (its page type and score; no
type where the score is below the classifier's reliable range) and the add-on's stats.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

from example_project.news_site import serve, write_site


def crawl(start_url: str, output: str, **settings) -> dict:
    """Run the news spider over ``start_url``; returns the crawl's stats."""
    os.environ["SCRAPY_SETTINGS_MODULE"] = "example_project.news.settings"
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings

    project = get_project_settings()
    project.set("FEEDS", {output: {"format": "jsonlines", "overwrite": True}})
    project.set("LOG_LEVEL", "WARNING")
    for name, value in settings.items():
        project.set(name, value)
    process = CrawlerProcess(project)
    crawler = process.create_crawler("news")
    process.crawl(crawler, start_url=start_url)
    process.start()
    return crawler.stats.get_stats()


def main(output: str = "articles.jsonl") -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stories = write_site(root)
        server, base = serve(root)
        try:
            stats = crawl(f"{base}/index.html", output)
        finally:
            server.shutdown()
    items = [json.loads(line) for line in Path(output).read_text(encoding="utf-8").splitlines()]
    for item in items:
        score = item.get("page_type_score")
        kind = f"{item.get('page_type')}" + (f" ({score:.2f})" if score is not None else "")
        print(f"{item['url'].rsplit('/', 1)[1]:<14} {kind:<16} title={item['title'][:45]!r} "
              f"text={item['text'][:50]!r}")
    grownup = {k: v for k, v in sorted(stats.items()) if k.startswith("grownup/")}
    story_urls = {f"{base}/{p.name}" for p in stories}
    story_types = Counter(str(item.get("page_type")) for item in items
                          if item["url"] in story_urls)
    print(json.dumps({"output": output, "items": len(items),
                      "story_page_types": dict(sorted(story_types.items())), **grownup}),
          file=sys.stderr)
    missing = story_urls - {item["url"] for item in items}
    if missing:
        print(f"missing articles: {sorted(missing)}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
