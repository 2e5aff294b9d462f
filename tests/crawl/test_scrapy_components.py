"""The add-on's parts without a crawl: settings, add-on, OOM splits, worker pool, items."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from pathlib import Path

import attr
import pytest
import scrapy
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from scrapy_grownup.crawl.addon import PRIORITIES, Addon
from scrapy_grownup.output.article import Article
from scrapy_grownup.page.decoding import is_html
from scrapy_grownup.errors import ModelError, NotHTMLError, SettingsError
from scrapy_grownup.crawl.items import ArticleItem, article_fields, article_values, fill_item
from scrapy_grownup.crawl.model_process import run_split_on_oom
from scrapy_grownup.crawl.settings import CHECKS, DEFAULTS, GrownupSettings
from scrapy_grownup.crawl.workers import FeaturizerPool, WorkerCrashedError
from tests.crawl_support import crashing_parse

README = Path(__file__).resolve().parents[2] / "docs" / "settings.md"  # the settings reference
PAGE = b"<html><body><h1>Title</h1><p>Some text of a page.</p></body></html>"
STORY = (b"<html lang=en><head><title>A story</title></head><body><nav><a href=/>Home</a>"
         b"<a href=/news>News</a></nav><main><article><h1>A story</h1><p>Its first paragraph, "
         b"long enough to read as prose.</p><p>And a second one after it.</p></article></main>"
         b"<footer>Contact us</footer></body></html>")


# -- settings and add-on -------------------------------------------------------------------------
def test_addon_registers_components_and_defaults():
    settings = Settings({"GROWNUP_WORKERS": 5})
    Addon().update_settings(settings)
    for setting, (component, priority) in PRIORITIES.items():
        assert settings.getdict(setting)[component] == priority
    assert settings.getint("GROWNUP_WORKERS") == 5  # the project's value wins
    assert settings.get("GROWNUP_BATCH_PAGES") == DEFAULTS["GROWNUP_BATCH_PAGES"]


def test_addon_adds_the_warc_archive_only_when_asked(tmp_path):
    from scrapy_grownup.crawl.addon import WARC_ARCHIVE_PRIORITY
    from scrapy_grownup.warc.archive import WarcArchiveMiddleware

    plain = Settings()
    Addon().update_settings(plain)
    assert WarcArchiveMiddleware not in plain.getdict("DOWNLOADER_MIDDLEWARES")
    archiving = Settings({"GROWNUP_WARC_OUTPUT": str(tmp_path)})
    Addon().update_settings(archiving)
    assert archiving.getdict("DOWNLOADER_MIDDLEWARES")[WarcArchiveMiddleware] == \
        WARC_ARCHIVE_PRIORITY


def test_addon_checks_the_archive_settings_at_start(tmp_path):
    """The archive middleware's settings are checked with the others, before the crawl starts:
    a junk boolean was read by Scrapy's getbool only when the middleware was built."""
    with pytest.raises(SettingsError, match="^GROWNUP_WARC_OUTPUT_REQUESTS = 'perhaps': not a "
                                            "boolean"):
        Addon().update_settings(Settings({"GROWNUP_WARC_OUTPUT": str(tmp_path),
                                          "GROWNUP_WARC_OUTPUT_REQUESTS": "perhaps"}))
    with pytest.raises(SettingsError, match="GROWNUP_WARC_OUTPUT_MAX_BYTES"):
        Addon().update_settings(Settings({"GROWNUP_WARC_OUTPUT": str(tmp_path),
                                          "GROWNUP_WARC_OUTPUT_MAX_BYTES": "1GB"}))


def test_addon_skips_itself_when_disabled():
    with pytest.raises(NotConfigured):
        Addon().update_settings(Settings({"GROWNUP_ENABLED": False}))


def test_settings_are_validated():
    assert GrownupSettings.from_settings(Settings()).device is None  # "auto"
    parsed = GrownupSettings.from_settings(Settings({"GROWNUP_PAGE_TYPES": "article, forum"}))
    assert parsed.page_types == {"article", "forum"}
    with pytest.raises(ValueError, match="GROWNUP_OUTPUT_FORMAT"):
        GrownupSettings.from_settings(Settings({"GROWNUP_OUTPUT_FORMAT": "html"}))
    with pytest.raises(ValueError, match="GROWNUP_BATCH_PAGES"):
        GrownupSettings.from_settings(Settings({"GROWNUP_BATCH_PAGES": 0}))


# Per setting, values it may not hold (a crawl per setting: tests/crawl/test_settings_crawl.py).
INVALID = {
    "GROWNUP_ENABLED": ["perhaps", 2],
    "GROWNUP_MODEL": ["fats", "", "/"],
    "GROWNUP_DEVICE": ["gpu", "cuda:x"],
    "GROWNUP_THRESHOLD": ["high", 0, 1.5, -0.1, True],
    "GROWNUP_REFINE": ["maybe", 3],
    "GROWNUP_RESCORER": ["sometimes", 2],
    "GROWNUP_BATCH_PAGES": [0, "many", 2.5],
    "GROWNUP_BATCH_NODES": [0, "lots"],
    "GROWNUP_BATCH_WAIT_MS": ["soon", -1],
    "GROWNUP_BATCHES_IN_FLIGHT": [0, "two", 1.5],
    "GROWNUP_QUEUE_SIZE": [0, "1.5"],
    "GROWNUP_MODEL_PROCESS": ["sometimes"],
    "GROWNUP_MODEL_THREADS": [0, "2.5", "two"],
    "GROWNUP_WORKERS": ["two", -1, 1.5, "several"],
    "GROWNUP_MAX_PENDING_PAGES": [0, "x"],
    "GROWNUP_MAX_PAGE_BYTES": [0, "5MB"],
    "GROWNUP_MAX_PAGE_NODES": [0, -5],
    "GROWNUP_MAX_PAGE_DEPTH": [0, "deep"],
    "GROWNUP_PAGE_TIMEOUT": ["long", -1, "nan", True],
    "GROWNUP_PAGE_TYPES": ["articles", ["article", "blog"], 3],
    "GROWNUP_MIN_TEXT_LENGTH": [-1, "short"],
    "GROWNUP_MIN_CONFIDENCE": ["high", 1.5, -0.1, True, "nan"],
    "GROWNUP_AUTO_ITEMS": ["always"],
    "GROWNUP_OUTPUT_FORMAT": ["html", "Markdown", "json"],
}


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in INVALID.items() for v in vs])
def test_every_bad_value_is_one_line_naming_the_setting_and_the_allowed_values(name, value):
    with pytest.raises(SettingsError) as info:
        GrownupSettings.from_settings(Settings({name: value}))
    message = str(info.value)
    assert message.startswith(f"{name} = {value!r}: ") and "; allowed: " in message
    assert "\n" not in message


def test_every_setting_has_a_check_and_bad_values_in_the_tests():
    assert set(CHECKS) == set(DEFAULTS) == set(INVALID)


def test_good_values_parse():
    parsed = GrownupSettings.from_settings(Settings({
        "GROWNUP_THRESHOLD": "0.3", "GROWNUP_REFINE": "true", "GROWNUP_WORKERS": "0",
        "GROWNUP_MODEL": "default", "GROWNUP_DEVICE": "CUDA:1", "GROWNUP_ENABLED": "1",
        "GROWNUP_BATCH_PAGES": "8", "GROWNUP_PAGE_TYPES": ["article"],
        "GROWNUP_MODEL_THREADS": 2.0}))
    assert (parsed.threshold, parsed.refine, parsed.workers, parsed.device) == (0.3, True, 0,
                                                                              "cuda:1")
    assert parsed.batch_pages == 8 and parsed.model_threads == 2
    defaults = GrownupSettings.from_settings(Settings())
    assert defaults.threshold is None and defaults.refine is None  # the model's own
    assert defaults.rescorer is None
    assert GrownupSettings.from_settings(Settings({"GROWNUP_RESCORER": "false"})).rescorer \
        is False
    assert GrownupSettings.from_settings(Settings({"GROWNUP_MODEL": str(
        Path(__file__).resolve().parents[2] / "scrapy_grownup/assets/models/fast")})).model


def test_page_types_need_a_model_with_a_page_type_head(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"config": {"num_genres": 0}}))
    with pytest.raises(SettingsError, match="has no page-type head"):
        GrownupSettings.from_settings(Settings({"GROWNUP_MODEL": str(model),
                                                "GROWNUP_PAGE_TYPES": ["article"]}))


def test_addon_stops_a_bad_crawl_with_the_settings_error(caplog):
    with pytest.raises(SettingsError, match="GROWNUP_PAGE_TYPES = 'articles'") as info:
        Addon().update_settings(Settings({"GROWNUP_PAGE_TYPES": "articles"}))
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [str(info.value)] and "unknown page type 'articles'" in errors[0]

    async def in_a_task():  # what scrapy crawl runs it in: SystemExit(1), nothing to print
        Addon().update_settings(Settings({"GROWNUP_WORKERS": "two"}))

    with pytest.raises(SystemExit) as info:
        asyncio.run(in_a_task())
    assert info.value.code == 1


def test_a_disabled_addon_ignores_its_other_settings():
    with pytest.raises(NotConfigured):
        Addon().update_settings(Settings({"GROWNUP_ENABLED": "False", "GROWNUP_MODEL": "x"}))
    with pytest.raises(SettingsError, match="GROWNUP_ENABLED"):
        Addon().update_settings(Settings({"GROWNUP_ENABLED": "nope"}))


def test_unknown_grownup_names_are_a_warning_with_the_nearest_name(caplog):
    Addon().update_settings(Settings({"GROWNUP_WORKER": 2, "GROWNUP_WARC_ITEMS": True}))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["GROWNUP_WORKER (did you mean GROWNUP_WORKERS?) is not a "
                        "scrapy_grownup setting; it is ignored"]


def test_example_project_settings_are_the_defaults():
    from example_project.news import settings as example

    values = {name: getattr(example, name) for name in dir(example)
              if name.startswith("GROWNUP_")}
    assert values and all(values[name] == DEFAULTS[name] for name in values), values


def test_with_article_returns_the_item_and_warns_once_where_the_addon_is_off(caplog):
    from scrapy.http import HtmlResponse, Request

    from scrapy_grownup.crawl import middlewares

    middlewares._warned_inactive = False
    items = [{"n": i} for i in range(3)]
    for item in items:
        response = HtmlResponse("http://x.test/", body=b"<p>x</p>",
                                request=Request("http://x.test/"))
        assert middlewares.with_article(item, response) is item
    assert caplog.text.count("with_article(): the scrapy_grownup add-on did not see") == 1


def test_readme_documents_every_setting_with_its_default():
    text = README.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(GROWNUP_[A-Z_]+)` \| `([^`]*)` \|", text, re.M))
    assert set(DEFAULTS) <= set(rows), set(DEFAULTS) - set(rows)
    for name, default in DEFAULTS.items():
        assert rows[name] == repr(default), (name, rows[name])


# -- model batches (the model server's batching: tests/crawl/test_model_server.py) -----------------
class OutOfMemoryError(RuntimeError):
    """Named like torch's, which is how ``run_split_on_oom`` recognises it."""


def test_out_of_memory_halves_the_batch_and_a_bad_page_fails_alone():
    seen = []

    def infer(pages):
        seen.append(len(pages))
        if len(pages) > 2:
            raise OutOfMemoryError("CUDA out of memory")
        if "bad" in pages:
            raise ValueError("broken page")
        return [Article(url=p, title="", text=p) for p in pages]

    results, splits = run_split_on_oom(infer, ["a", "b", "bad", "d", "e", "f"])
    assert splits == 3
    assert [getattr(r, "url", None) for r in results] == ["a", "b", None, "d", "e", "f"]
    assert isinstance(results[2], ModelError) and "broken page" in str(results[2])
    assert max(seen[1:]) <= 3


# -- worker pool ---------------------------------------------------------------------------------
def test_pool_parses_pages_and_reports_bad_ones():
    async def main():
        pool = FeaturizerPool(workers=1, max_pending=2)
        try:
            good = await pool.structure(PAGE, "http://a/", "text/html")
            with pytest.raises(NotHTMLError):
                await pool.structure(b"\x89PNG\r\n\x1a\n" + bytes(64), "http://b/", None)
            return good
        finally:
            pool.close()

    parsed = asyncio.run(main())
    assert parsed.page.num_nodes >= 4 and parsed.parse_seconds > 0


def test_a_parsed_page_crosses_the_crawls_process_as_the_bytes_its_worker_made():
    """The crawl's process only passes a worker's page on to the model process: pickled again
    there it is the same bytes, never unpickled, and the page comes back whole where read."""
    import pickle

    import numpy as np

    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.crawl.workers import ParsedPage

    page = parse_page(STORY, url="http://a/story.html")
    page.layout, page.signals  # computed in the worker: they travel with the page
    in_reactor = pickle.loads(pickle.dumps(ParsedPage(page, 0.25)))
    assert in_reactor.num_nodes == page.num_nodes and in_reactor.parse_seconds == 0.25
    to_model = pickle.dumps(in_reactor)
    assert in_reactor._page is None  # passed on without being unpickled
    at_model = pickle.loads(to_model).page
    assert at_model.tags == page.tags and at_model.seg_text == page.seg_text
    assert np.array_equal(at_model.parent, page.parent)
    assert {"layout", "signals"} <= set(vars(at_model))  # not computed again at the model
    assert np.array_equal(at_model.layout, page.layout)
    assert np.array_equal(at_model.signals, page.signals)


@pytest.mark.parametrize("derive", [(), ("layout", "signals")])
def test_workers_compute_the_page_features_the_model_reads(derive):
    from scrapy_grownup.page.dom import parse_page

    async def main():
        pool = FeaturizerPool(workers=1, max_pending=2)
        pool.derive = derive
        try:
            return await pool.structure(STORY, "http://a/story.html", "text/html")
        finally:
            pool.close()

    page = asyncio.run(main()).page
    assert set(derive) == {"layout", "signals"} & set(vars(page))
    here = parse_page(STORY, url="http://a/story.html")
    assert all((getattr(page, name) == getattr(here, name)).all() for name in derive)


def test_a_page_feature_that_fails_in_the_worker_is_left_to_the_model(monkeypatch):
    """The worker computes page features only to spare the model's process: one that fails
    there does not fail the page; the model's process computes it again and, if it fails
    there too, fails that page alone (``test_page_isolation``)."""
    import scrapy_grownup.graph.layout as layout
    from scrapy_grownup.crawl.workers import parse_in_worker

    def broken(page):
        raise IndexError("a page the layout features cannot read")

    monkeypatch.setattr(layout, "layout_features", broken)
    parsed = parse_in_worker(STORY, "http://a/story.html", "text/html", None,
                             derive=("layout", "signals"))
    assert "layout" not in vars(parsed.page) and "signals" in vars(parsed.page)


def test_dead_worker_is_restarted_and_its_page_retried_once(tmp_path):
    async def main():
        pool = FeaturizerPool(workers=1, parse=crashing_parse)
        try:
            retried = await pool.structure(PAGE, f"crash-once:{tmp_path / 'marker'}")
            with pytest.raises(WorkerCrashedError):
                await pool.structure(PAGE, "crash-always:")
            after = await pool.structure(PAGE, "http://fine/")
            return retried, after, pool.restarts
        finally:
            pool.close()

    retried, after, restarts = asyncio.run(main())
    assert retried.page.num_nodes == after.page.num_nodes
    assert restarts == 3  # once for crash-once, twice for crash-always


def test_a_dead_worker_costs_no_other_workers_page(tmp_path):
    """One worker dies on a page while the other parses a slow one: only the dead worker's
    page is tried again, on a new worker; the other worker's page runs once."""
    runs = tmp_path / "runs"

    async def main():
        pool = FeaturizerPool(workers=2, parse=crashing_parse)
        try:
            await asyncio.gather(*(pool.structure(PAGE, "http://warm/") for _ in range(4)))
            slow = await pool.submit(PAGE, f"count-slow:{runs}")
            await asyncio.sleep(0.3)
            retried = await pool.structure(PAGE, f"crash-once:{tmp_path / 'marker'}")
            return await slow, retried, pool.restarts
        finally:
            pool.close()

    slow, retried, restarts = asyncio.run(main())
    assert slow.page.num_nodes == retried.page.num_nodes
    assert runs.read_text() == "run\n" and restarts == 1


@pytest.mark.parametrize("workers", [1, 0])
def test_a_page_over_its_time_budget_is_a_timeout_and_the_pool_goes_on(workers):
    """A page that hangs the parser costs that page (``PageTimeoutError``), never the pages
    queued behind it. In a worker process the page's own alarm ends a Python-level hang at
    the budget; a hang no signal reaches (here: the alarm blocked) is ended by killing the
    worker at the budget + max(2 s, budget); on a thread (``workers=0``) that thread is
    abandoned and the queued pages move to a new one."""
    from tests.crawl_support import hanging_parse

    from scrapy_grownup.crawl.workers import PageTimeoutError

    urls = ["ok:1", "hang-python:", "ok:2", "hang-blocked:", "ok:3", "ok:4"] if workers \
        else ["ok:1", "sleep:8", "ok:2", "ok:3"]
    # 2.5 s, not less: a worker restarted after a kill parses its first page cold (imports
    # included), which on a loaded 2-core machine took over 1 s

    async def main():
        pool = FeaturizerPool(workers=workers, max_pending=8, parse=hanging_parse,
                              page_timeout=2.5)
        try:
            await pool.structure(PAGE, "ok:warm-up")
            start = time.perf_counter()
            tasks = [await pool.submit(PAGE, url) for url in urls]
            results = await asyncio.gather(*tasks, return_exceptions=True)
            return results, time.perf_counter() - start, pool.restarts
        finally:
            pool.close()

    results, seconds, restarts = asyncio.run(main())
    outcome = {url: type(r).__name__ for url, r in zip(urls, results)}
    bad = {u for u in urls if not u.startswith("ok:")}
    assert outcome == {u: "PageTimeoutError" if u in bad else "ParsedPage" for u in urls}
    if workers:
        assert "GROWNUP_PAGE_TIMEOUT" in str(results[1])  # the worker's own alarm, at 2.5 s
        assert "the worker was stopped" in str(results[3])  # killed at 2.5 + 2.5 s
        assert restarts == 1 and seconds < 20, seconds
    else:
        assert restarts == 1 and seconds < 7.5, seconds  # not the 8 s of the sleeping page


# -- items ---------------------------------------------------------------------------------------
ARTICLE = Article(url="http://a/", title="T", text="Body", page_type="article", model="fast")


@dataclasses.dataclass
class DataclassItem:
    section: str = ""
    title: str | None = None
    text: str | None = None


@attr.s(auto_attribs=True)
class AttrsItem:
    title: str | None = None
    text: str | None = None


class ScrapyItem(scrapy.Item):
    title = scrapy.Field()
    text = scrapy.Field()


def test_article_item_declares_the_article_fields_in_order():
    """``ArticleItem`` lists its fields by hand (a class statement, so the docs can read it):
    they must stay the fields the add-on fills, in the feed's order."""
    assert list(ArticleItem.fields) == article_fields()
    item = ArticleItem(title="T", text="x" * 1000)
    assert repr(item).startswith("ArticleItem(") and len(repr(item)) < 400


@pytest.mark.parametrize("make", [dict, DataclassItem, AttrsItem, ScrapyItem, ArticleItem])
def test_article_fields_fill_every_item_type(make):
    item = make()
    missing = fill_item(item, article_values(ARTICLE))
    from itemadapter import ItemAdapter

    adapter = ItemAdapter(item)
    assert adapter["title"] == "T" and adapter["text"] == "Body"
    if make in (dict, ArticleItem):
        assert not missing and adapter["page_type"] == "article"
    else:
        assert "page_type" in missing


def test_users_values_stay_and_markdown_can_fill_text():
    item = {"title": "mine", "section": "x"}
    fill_item(item, article_values(dataclasses.replace(ARTICLE), text_field="text"))
    assert item["title"] == "mine" and item["section"] == "x" and item["text"] == "Body"
    assert "nodes" not in item and set(item) <= set(article_fields()) | {"section"}


def test_markdown_output_carries_the_markdown_once():
    article = dataclasses.replace(ARTICLE, text="Body", markdown="# T\n\nBody")
    values = article_values(article, text_field="markdown")
    assert values["text"] == "# T\n\nBody" and "markdown" not in values
    item = ArticleItem()
    fill_item(item, values)
    assert item["text"] == "# T\n\nBody" and "markdown" not in item
    plain = article_values(article)  # text: the plain text, and the Markdown beside it
    assert plain["text"] == "Body" and plain["markdown"] == "# T\n\nBody"


@pytest.mark.parametrize("content_type,body,expected", [
    ("text/html; charset=utf-8", b"anything", True),
    ("application/xhtml+xml", b"<html/>", True),
    (None, b"<!DOCTYPE html><html>", True),
    ("application/octet-stream", b"  <html><body>", True),
    ("text/plain", b"just words", False),
    ("image/png", b"<html>", False),
    ("application/json", b'{"html": 1}', False),
])
def test_is_html(content_type, body, expected):
    assert is_html(content_type, body) is expected
