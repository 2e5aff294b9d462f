"""``make demo``: serve the bundled sample news site locally, fetch every page, extract articles.

Writes ``articles.jsonl`` (one article per HTML page) and prints one summary line per page: the
graph the page became and the start of its article. The Scrapy add-on will turn this into a
real crawl; today the pages are fetched with urllib.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from example_project.news_site import serve, write_site


def main(output: str = "articles.jsonl") -> int:
    from scrapy_grownup import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_site(root)
        server, base = serve(root)
        try:
            urls = [f"{base}/{p.name}" for p in sorted(root.glob("*.html"))]
            fetched = []
            for url in urls:
                with urllib.request.urlopen(url, timeout=10) as response:
                    fetched.append((response.read(), url, response.headers["Content-Type"]))
        finally:
            server.shutdown()
    start = time.perf_counter()
    articles = extractor.extract_batch(fetched, errors="skip")
    elapsed = time.perf_counter() - start
    with open(output, "w", encoding="utf-8") as out:
        for article in articles:
            if article is None:
                continue
            out.write(json.dumps(article.to_dict(), ensure_ascii=False) + "\n")
            print(f"{article.url.rsplit('/', 1)[1]:<14} nodes={article.nodes:<4} "
                  f"content_nodes={article.content_nodes:<3} title={article.title[:45]!r} "
                  f"text={article.text[:60]!r}")
    extracted = sum(a is not None for a in articles)
    print(json.dumps({"pages": len(fetched), "articles": extracted, "output": output,
                      "model": extractor.name, "seconds": round(elapsed, 3)}), file=sys.stderr)
    return 0 if extracted == len(fetched) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
