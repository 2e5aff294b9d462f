"""Settings and the add-on in real crawls of a local HTTP server: a bad ``GROWNUP_*`` value
stops ``scrapy crawl`` before the spider opens (one error line, exit status 1, no request, no
model); ``GROWNUP_THRESHOLD`` / ``GROWNUP_REFINE`` / ``GROWNUP_RESCORER`` reach the model in both
model paths, and the
start-up log names the model loaded; ``with_article`` items survive the add-on being off and
``scrapy parse``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from example_project.news_site import article_page, index_page
from tests.crawl_support import ROOT, child_env, read_results, run_crawl

pytestmark = pytest.mark.slow
STORIES = 4
SHIPPED = ROOT / "scrapy_grownup" / "assets" / "models"


class CountingHandler(SimpleHTTPRequestHandler):
    """Serves the site and counts the requests it got."""

    hits = 0

    def do_GET(self):
        type(self).hits += 1
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    for i in range(STORIES):
        (root / f"story-{i}.html").write_text(article_page(i, variant=i % 3)[0], "utf-8")
    (root / "index.html").write_text(index_page(STORIES), "utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(CountingHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def scrapy_command(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``scrapy ARGS`` in the example project, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT / "example_project",
                          env=child_env(), capture_output=True, text=True, timeout=timeout)


# One bad value per setting, and what its error line must say about the allowed values.
BAD = {
    "GROWNUP_ENABLED": ("perhaps", "allowed: True or False"),
    "GROWNUP_MODEL": ("fats", "no such model; allowed: auto, default, fast, minilm"),
    "GROWNUP_DEVICE": ("gpu", "allowed: auto, cpu, cuda, cuda:N"),
    "GROWNUP_THRESHOLD": ("1.5", "allowed: a number between 0 and 1"),
    "GROWNUP_REFINE": ("maybe", "allowed: True, False"),
    "GROWNUP_RESCORER": ("sometimes", "allowed: True, False, or None"),
    "GROWNUP_BATCH_PAGES": ("0", "too small; allowed: a whole number >= 1"),
    "GROWNUP_BATCH_NODES": ("lots", "not a whole number; allowed: a whole number >= 1"),
    "GROWNUP_BATCH_WAIT_MS": ("soon", "allowed: a number of milliseconds >= 0"),
    "GROWNUP_BATCHES_IN_FLIGHT": ("0", "too small; allowed: a whole number >= 1"),
    "GROWNUP_QUEUE_SIZE": ("-4", "allowed: a whole number >= 1"),
    "GROWNUP_MODEL_PROCESS": ("sometimes", "allowed: auto, True or False"),
    "GROWNUP_MODEL_THREADS": ("2.5", "not a whole number; allowed: a whole number >= 1"),
    "GROWNUP_WORKERS": ("two", "not a whole number; allowed: a whole number >= 0, or 'auto'"),
    "GROWNUP_MAX_PENDING_PAGES": ("0", "allowed: a whole number >= 1"),
    "GROWNUP_MAX_PAGE_BYTES": ("5MB", "allowed: a whole number >= 1"),
    "GROWNUP_MAX_PAGE_NODES": ("0", "allowed: a whole number >= 1"),
    "GROWNUP_MAX_PAGE_DEPTH": ("deep", "allowed: a whole number >= 1"),
    "GROWNUP_PAGE_TIMEOUT": ("long", "not a number; allowed: a number of seconds > 0, or 0 "
                             "for no budget"),
    "GROWNUP_PAGE_TYPES": ("articles", "unknown page type 'articles'; allowed: a list of "
                           "article, collection, documentation, forum, listing, product, "
                           "service"),
    "GROWNUP_MIN_TEXT_LENGTH": ("-1", "allowed: a whole number >= 0"),
    "GROWNUP_MIN_CONFIDENCE": ("high", "not a number; allowed: a number between 0 and 1"),
    "GROWNUP_AUTO_ITEMS": ("always", "allowed: True or False"),
    "GROWNUP_OUTPUT_FORMAT": ("html", "unknown format; allowed: text, markdown"),
}


def test_every_setting_has_a_crawl_with_a_bad_value():
    from scrapy_grownup.crawl.settings import DEFAULTS

    assert set(BAD) == set(DEFAULTS)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_setting_stops_the_crawl_before_the_spider_opens(site, name):
    value, allowed = BAD[name]
    hits = CountingHandler.hits
    done = scrapy_command("crawl", "news", "-a", f"start_url={site[1]}/index.html",
                          "-s", f"{name}={value}", timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    errors = [line for line in output.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, output[-3000:]
    assert f"[scrapy_grownup.crawl.addon] ERROR: {name} = {value!r}: " in errors[0]
    assert allowed in errors[0], errors[0]
    assert "Traceback" not in output and "Spider opened" not in output, output[-3000:]
    assert "scrapy_grownup: model" not in output  # no model was loaded
    assert CountingHandler.hits == hits  # not one request


def crawl_with_log(tmp_path: Path, base: str, spider: str, settings: dict):
    """``run_crawl`` that also returns the crawl's log."""
    process = run_crawl(tmp_path, f"{base}/index.html", spider=spider, settings=settings,
                        background=True)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-4000:]
    stats, items = read_results(tmp_path / f"{spider}-items.jsonl",
                                tmp_path / f"{spider}-stats.json")
    return stats, items, output


@pytest.mark.parametrize("model_process", [True, False])
def test_threshold_refine_and_rescorer_reach_the_model_and_the_log_names_them(
        site, tmp_path, model_process):
    from scrapy_grownup import ArticleExtractor

    root, base = site
    stats, items, log = crawl_with_log(tmp_path, base, "index", {
        "GROWNUP_MODEL": "auto", "GROWNUP_THRESHOLD": 0.9, "GROWNUP_REFINE": True,
        "GROWNUP_RESCORER": False, "GROWNUP_MODEL_PROCESS": model_process})
    version = json.loads((SHIPPED / "fast" / "config.json").read_text())["weights_sha256"][:12]
    # the model auto picked on this CPU, its version, the device and the options in force
    assert (f"scrapy_grownup: model fast (version {version}; GROWNUP_MODEL = 'auto') on cpu, "
            f"threshold 0.9, refine on, "
            + ("in a model process" if model_process else "on a thread of the crawl")) in log
    stories = {item["url"].rsplit("/", 1)[1]: item for item in items if "/story-" in item["url"]}
    assert len(stories) == STORIES
    knob = ArticleExtractor.from_pretrained("fast", device="cpu", threshold=0.9, refine=True,
                                            rescore=False)
    plain = ArticleExtractor.from_pretrained("fast", device="cpu", rescore=False)
    knobbed = default = 0
    for name, item in stories.items():
        html = (root / name).read_bytes()
        assert item["text"] == knob.extract(html, url=item["url"]).text  # the same knobs
        assert item["model_version"] == version
        knobbed += len(item["text"])
        default += len(plain.extract(html, url=item["url"]).text)
    # a stricter cut keeps less overall (on a clean story the default keeps the same body)
    assert knobbed < default


def test_with_article_items_survive_the_addon_being_off(site, tmp_path):
    root, base = site
    stats, items, log = crawl_with_log(tmp_path, base, "own_items", {"GROWNUP_ENABLED": False})
    assert "No adapter found" not in log and "Traceback" not in log
    assert log.count("with_article(): the scrapy_grownup add-on did not see") == 1  # once
    assert not [key for key in stats if key.startswith("grownup/")]
    index = [item for item in items if item.get("kind") == "index"]
    stories = [item for item in items if "section" in item]
    assert len(index) == 1 and len(stories) == STORIES == stats["item_scraped_count"] - 1
    for item in stories:  # the spider's own items, as it made them: no article fields
        if item["section"] == "even":  # a dict
            assert item == {"section": "even", "title": "kept title"}
        else:  # a dataclass: its declared fields, unfilled
            assert item == {"section": "odd", "url": None, "title": None, "text": None}


@pytest.mark.parametrize("enabled", [True, False])
def test_scrapy_parse_prints_the_spiders_item(site, enabled):
    done = scrapy_command("parse", "--spider", "with_article",
                          "-s", "SPIDER_MODULES=tests.parse_spiders",
                          "-s", f"GROWNUP_ENABLED={enabled}", "-s", "GROWNUP_MODEL=fast",
                          "-s", "GROWNUP_WORKERS=0", "-s", "GROWNUP_MODEL_PROCESS=False",
                          f"{site[1]}/story-1.html")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "No adapter found" not in output and "Traceback" not in output, output[-3000:]
    assert "[{'kind': 'story', 'section': 'news'}]" in done.stdout, done.stdout
    assert ("the scrapy_grownup add-on did not see" in output) is not enabled


@pytest.mark.parametrize("name", ["GROWNUP_BATCHES_IN_FLIGHT", "GROWNUP_QUEUE_SIZE"])
def test_a_setting_that_no_longer_does_anything_warns_where_a_project_sets_it(name):
    """Still accepted (and checked), so existing projects start; setting it says it does
    nothing. Left unset, no warning."""
    import warnings

    from scrapy.exceptions import ScrapyDeprecationWarning
    from scrapy.settings import Settings

    from scrapy_grownup.crawl.settings import GrownupSettings

    with pytest.warns(ScrapyDeprecationWarning, match=name):
        GrownupSettings.from_settings(Settings({name: 4}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScrapyDeprecationWarning)
        GrownupSettings.from_settings(Settings({}))
