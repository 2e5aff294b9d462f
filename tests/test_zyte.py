"""``zyte_common_items.Article`` from the extractor through scrapy-poet: a real crawl of golden
pages served on loopback, with every other network access refused and recorded."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scrapy_poet", reason="scrapy-poet is not installed")
zyte_common_items = pytest.importorskip("zyte_common_items",
                                        reason="zyte-common-items is not installed")
Article = zyte_common_items.Article

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
PAGES = sorted(p.name for p in GOLDEN.glob("*.html"))
LOOPBACK = ("127.0.0.1", "::1", "localhost")


# -- the crawl, in a child process (a Twisted reactor starts once per process) --------------------

def _guard_network(log_path: str) -> None:
    """Refuse, and record, any host lookup or connection that is not to loopback."""
    import socket

    log = open(log_path, "a", encoding="utf-8")

    def refuse(what: str, target) -> None:
        log.write(f"{what} {target!r}\n")
        log.flush()
        raise OSError(f"test_zyte: no network but loopback ({what} {target!r})")

    real_getaddrinfo, real_connect, real_connect_ex = \
        socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex

    def getaddrinfo(host, *args, **kwargs):
        if host not in LOOPBACK and host is not None:
            refuse("getaddrinfo", host)
        return real_getaddrinfo(host, *args, **kwargs)

    def allowed(address) -> bool:
        return not isinstance(address, tuple) or address[0] in LOOPBACK

    def connect(self, address):
        if not allowed(address):
            refuse("connect", address)
        return real_connect(self, address)

    def connect_ex(self, address):
        if not allowed(address):
            refuse("connect", address)
        return real_connect_ex(self, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex


def main(config_path: str) -> int:
    config = json.loads(Path(config_path).read_text())
    _guard_network(config["network_log"])
    import scrapy
    from scrapy.crawler import CrawlerProcess

    class ArticleSpider(scrapy.Spider):
        name = "zyte_article"

        def parse(self, response, article: Article):  # the module's: a real annotation
            yield article

    settings = {
        "ADDONS": {"scrapy_poet.Addon": 300, "scrapy_grownup.Addon": 500},
        "FEEDS": {config["feed"]: {"format": "jsonlines", "overwrite": True}},
        "LOG_LEVEL": "INFO",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "GROWNUP_MODEL": "fast",
        "GROWNUP_WORKERS": 1,
    }
    process = CrawlerProcess(settings, install_root_handler=True)
    crawler = process.create_crawler(ArticleSpider)
    process.crawl(crawler, start_urls=config["urls"])
    process.start()
    stats = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
             for k, v in crawler.stats.get_stats().items()}
    Path(config["stats"]).write_text(json.dumps(stats, indent=1, sort_keys=True))
    return 0


# -- the test -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    """Every golden page and a PNG, crawled once; ``(base URL, items by URL, stats, network
    log)``."""
    from example_project.news_site import serve
    from tests.crawl_support import PNG, child_env

    tmp = tmp_path_factory.mktemp("zyte")
    site = tmp / "site"
    site.mkdir()
    for name in PAGES:
        (site / name).write_bytes((GOLDEN / name).read_bytes())
    (site / "image.png").write_bytes(PNG)
    server, base = serve(site)
    config = {"urls": [f"{base}/{name}" for name in PAGES + ["image.png"]],
              "feed": str(tmp / "items.jsonl"), "stats": str(tmp / "stats.json"),
              "network_log": str(tmp / "network.log")}
    (tmp / "config.json").write_text(json.dumps(config))
    # an empty tldextract cache, as on a fresh machine: the Public Suffix List would be
    # downloaded on first use, were it not kept offline (zyte._offline_suffix_list)
    env = {**child_env(), "TLDEXTRACT_CACHE": str(tmp / "tldextract")}
    try:
        done = subprocess.run([sys.executable, "-m", "tests.test_zyte", str(tmp / "config.json")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    items = [json.loads(line) for line in Path(config["feed"]).read_text().splitlines()]
    network = Path(config["network_log"])
    return (base, {item["url"]: item for item in items},
            json.loads(Path(config["stats"]).read_text()),
            network.read_text() if network.exists() else "", done.stderr)


def test_no_network_but_the_local_server(crawl):
    base, items, stats, network, _ = crawl
    assert network == ""  # no lookup nor connection but loopback: no Zyte API, no suffix list
    assert stats["downloader/request_count"] == len(PAGES) + 1
    assert all(url.startswith(base) for url in items)


def test_golden_pages_give_the_extractors_article(crawl):
    from scrapy_grownup.extractor import ArticleExtractor

    base, items, stats, _, _ = crawl
    extractor = ArticleExtractor.from_pretrained("fast")
    assert len(items) == len(PAGES) + 1
    for name in PAGES:
        url = f"{base}/{name}"
        item = items[url]
        article = extractor.extract((GOLDEN / name).read_bytes(), url=url,
                                    content_type="text/html")
        assert item["headline"] == (article.title or None), name
        assert item["articleBody"] == (article.text or None), name
        assert item["articleBodyHtml"] == (f"<article>\n\n{article.html}\n\n</article>"
                                           if article.html else None), name
        assert [a["name"] for a in item.get("authors") or []] == article.authors, name
        assert item.get("datePublished") == article.published, name
        assert item.get("dateModified") == article.date_modified, name
        assert item.get("canonicalUrl") == article.canonical_url, name
        assert item["metadata"]["probability"] == pytest.approx(article.confidence) \
            if article.confidence is not None else item["metadata"].get("probability") is None
        assert item["metadata"]["dateDownloaded"].endswith("Z"), name
    assert stats["grownup/zyte/articles"] == len(PAGES)


def test_the_media_page_fields(crawl):
    base, items, _, _, _ = crawl
    item = items[f"{base}/media_meta.html"]
    assert item["headline"] == "Night trains are back in Europe"
    assert item["description"].startswith("Sleeper trains return to a dozen routes")
    assert item["mainImage"] == {"url": "https://railweekly.example.net/media/night-train-cover.jpg"}
    assert {"url": "https://railweekly.example.net/media/couchette.jpg"} in item["images"]
    assert item["dateModified"] == "2025-06-03T18:45:00+02:00"
    assert item["inLanguage"] == "en"
    assert [author["name"] for author in item["authors"]] == ["Ines Ferreira"]
    assert "Sleeper trains are back on a dozen routes" in item["articleBody"]
    assert item["articleBodyHtml"].startswith("<article>\n\n")


def test_a_response_without_an_article(crawl):
    """A PNG: an Article with its URL and probability 0 (zyte-common-items' no_item_found)."""
    base, items, _, _, _ = crawl
    item = items[f"{base}/image.png"]
    assert item["metadata"]["probability"] == 0.0
    assert not item.get("headline") and not item.get("articleBody")


def test_scrapy_grownup_does_not_import_scrapy_poet():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, scrapy_grownup, scrapy_grownup.crawl.addon;"
         "print(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('scrapy_poet', 'web_poet', 'zyte_common_items')))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_addon_registers_the_provider_only_with_scrapy_poet():
    from scrapy.settings import Settings

    from scrapy_grownup.crawl.addon import Addon

    plain = Settings({"ADDONS": {"scrapy_grownup.Addon": 500}})
    Addon().update_settings(plain)
    assert not plain.getdict("SCRAPY_POET_PROVIDERS") and not plain.getlist("SCRAPY_POET_DISCOVER")
    poet = Settings({"ADDONS": {"scrapy_poet.Addon": 300, "scrapy_grownup.Addon": 500},
                     "SCRAPY_POET_DISCOVER": ["myproject.pages"]})
    Addon().update_settings(poet)
    assert "scrapy_grownup.zyte.GrownupArticleProvider" in poet.getdict("SCRAPY_POET_PROVIDERS")
    assert poet.getlist("SCRAPY_POET_DISCOVER") == ["myproject.pages", "scrapy_grownup.zyte"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
