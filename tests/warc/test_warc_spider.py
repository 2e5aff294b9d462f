"""The Scrapy side: ``grownup warc``, ``scrapy crawl grownup_warc``, and crawl -> WARC -> corpus."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scrapy_grownup.data.datasets import DatasetNotAvailable
from scrapy_grownup.warc.reader import Candidate, RecordReader
from scrapy_grownup.warc.sources import Source
from scrapy_grownup.warc.synthetic import dataset_pages, write_warc
from tests.crawl_support import child_env
from tests.warc_support import dragnet_pages, response_record
from tests.data_support import skip_missing_data

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, bytes]]:
    return dragnet_pages(6)


def grownup(*args, cwd=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scrapy_grownup.cli.main", "warc", *map(str, args)],
                          capture_output=True, text=True, env=child_env(), cwd=cwd, timeout=timeout)


@pytest.mark.slow
def test_cli_exit_codes(tmp_path, pages):
    empty = write_warc(tmp_path / "css.warc.gz", [("http://a.example/s.css", b"p {}", "text/css")])
    result = grownup(empty, "--output", tmp_path / "none", "--workers", "0")
    assert result.returncode == 1, result.stderr[-2000:]  # nothing was read
    summary = json.loads(result.stderr.strip().splitlines()[-1])
    assert summary["pages"] == 0 and summary["skipped"] == {"not_html": 1, "request": 1,
                                                            "warcinfo": 1}
    assert grownup("--output", tmp_path / "x").returncode == 2  # no input
    assert grownup(tmp_path / "nothing.warc").returncode == 2  # no --output


@pytest.mark.slow
def scrapy_crawl_warc(tmp_path, *args) -> subprocess.CompletedProcess:
    """``scrapy crawl grownup_warc ARGS`` in a project that registers the spider through
    SPIDER_MODULES."""
    project = tmp_path / "project"
    (project / "warcproj").mkdir(parents=True, exist_ok=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = warcproj.settings\n")
    (project / "warcproj" / "__init__.py").write_text("")
    modules = ["scrapy_grownup.warc.spider"]
    if importlib.util.find_spec("scrapy_redis") is not None:
        modules.append("scrapy_grownup.warc.scaleout")
    (project / "warcproj" / "settings.py").write_text(f"SPIDER_MODULES = {modules!r}\n" +
                                                      textwrap.dedent("""
        REMOTE_CONTROL_ENABLED = False
        LOG_LEVEL = "INFO"
        GROWNUP_WORKERS = 1
        GROWNUP_WARC_SHARD_PAGES = 16
    """))
    environment = child_env()
    environment["PYTHONPATH"] += os.pathsep + str(project)
    return subprocess.run([sys.executable, "-m", "scrapy", "crawl", "grownup_warc", *args],
                          cwd=project, capture_output=True, text=True, env=environment,
                          timeout=300)


def test_scrapy_crawl_in_a_project(tmp_path, pages):
    """``scrapy crawl grownup_warc -a paths=... -a output=...``: featurization in a worker
    process, pages as 'resource' records."""
    try:
        many = dataset_pages(40)
    except DatasetNotAvailable:
        skip_missing_data("dragnet pages")
    sliced = tmp_path / "stored-pages.warc.gz"
    _write_resources(sliced, [(f"http://news{i % 5}.example/2012/{i % 3}/a{i}.html", html)
                              for i, (_, html) in enumerate(many)])
    out = tmp_path / "corpus"
    result = scrapy_crawl_warc(tmp_path, "-a", f"paths={sliced}", "-a", f"output={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pages"] == 40 and manifest["shards"] == 3
    assert "'grownup/warc/pages': 40" in result.stderr
    assert "'grownup/warc/corpus/pairs'" in result.stderr


@pytest.mark.slow
def test_scrapy_crawl_with_nothing_to_read_fails(tmp_path):
    """No paths, or only paths that do not exist: the crawl does not start and exits 1."""
    out = tmp_path / "corpus"
    for args, message in ((["-a", f"output={out}"], "no input"),
                          (["-a", f"paths={tmp_path / 'nothing*.warc.gz'}", "-a",
                            f"output={out}"], "no archive found")):
        result = scrapy_crawl_warc(tmp_path, *args)
        assert result.returncode == 1, result.stderr[-3000:]
        assert message in result.stderr
        assert not (out / "manifest.json").exists()


def _write_resources(path: Path, pages: list[tuple[str, bytes]]) -> None:
    import io

    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for url, body in pages:
            writer.write_record(writer.create_warc_record(
                url, "resource", payload=io.BytesIO(body), length=len(body),
                warc_content_type="text/html"))


CRAWL = """
import sys
from pathlib import Path

import scrapy
from scrapy.crawler import CrawlerProcess

from example_project.news_site import serve, write_site

root, archive = Path(sys.argv[1]), sys.argv[2]
write_site(root)
server, base = serve(root)


class NewsCrawl(scrapy.Spider):
    name = "news_roundtrip"
    start_urls = [base + "/index.html"]

    def parse(self, response):
        yield from response.follow_all(css="a", callback=self.parse)


process = CrawlerProcess({
    "GROWNUP_WARC_OUTPUT": archive,
    "GROWNUP_WARC_OUTPUT_MAX_BYTES": 20000,
    "DOWNLOADER_MIDDLEWARES": {"scrapy_grownup.warc.archive.WarcArchiveMiddleware": 950},
    "LOG_LEVEL": "WARNING", "REMOTE_CONTROL_ENABLED": False, "TELNETCONSOLE_ENABLED": False,
})
crawler = process.create_crawler(NewsCrawl)
process.crawl(crawler)
process.start()
server.shutdown()
print(crawler.stats.get_value("grownup/warc/archive/responses"))
"""


@pytest.mark.slow
def test_crawl_archive_pretrain_round_trip(tmp_path):
    """A live crawl archives its responses; the WARC spider turns the archive into a corpus."""
    site, archive, out = tmp_path / "site", tmp_path / "archive", tmp_path / "corpus"
    script = tmp_path / "crawl.py"
    script.write_text(CRAWL)
    result = subprocess.run([sys.executable, str(script), str(site), str(archive)],
                            capture_output=True, text=True, env=child_env(), timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    responses = int(result.stdout.strip().splitlines()[-1])
    html_files = sorted(site.glob("*.html"))
    assert responses > len(html_files)  # pages and the 404s of the missing section pages
    warcs = sorted(archive.iterdir())
    assert len(warcs) > 1 and all(p.name.endswith(".warc.gz") for p in warcs)  # rotated, closed

    counts: dict[str, int] = {}
    urls = []
    for path in warcs:
        for event in RecordReader(Source(str(path))):
            reason = "PAGE" if isinstance(event, Candidate) else event.reason
            counts[reason] = counts.get(reason, 0) + 1
            if reason == "PAGE":
                urls.append(event.url)
    # The start URL is fetched twice (start requests are not deduplicated): two captures.
    assert len(set(urls)) == len(html_files) and counts["request"] == responses

    result = grownup(archive, "--output", out, "--workers", "1", "--shard-pages", "8")
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pages"] == len(urls)  # every capture is a page...
    assert manifest["skipped"]["http_404"] >= 1 and manifest["skipped"]["request"] == responses
    # ...and pairs take each URL once.
    assert manifest["sites"] == 1 and manifest["pairs"] == len(html_files) // 2
    index = json.loads((out / "index.json").read_text())
    assert sum(s["pages"] for s in index["shards"]) == len(urls)

    # Rerun: finished archives are skipped, the corpus is unchanged.
    again = grownup(archive, "--output", out, "--workers", "0", "--shard-pages", "8")
    assert again.returncode == 0
    assert json.loads(again.stderr.strip().splitlines()[-1])["this_run"] == {
        "files_already_done": len(warcs)}


def test_archive_middleware_records(tmp_path):
    from scrapy.http import HtmlResponse, Request, Response

    from scrapy_grownup.warc.archive import RotatingWarcWriter, WarcArchiveMiddleware

    writer = RotatingWarcWriter(tmp_path, prefix="t", max_bytes=10_000_000)
    middleware = WarcArchiveMiddleware(writer)
    html = b"<html><head><title>T</title></head><body><p>Hello archive</p></body></html>"
    request = Request("https://a.example/x?y=1", headers={"User-Agent": "test"})
    compressed = HtmlResponse(
        request.url, status=200, body=gzip.compress(html), request=request,
        headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip",
                 "Transfer-Encoding": "chunked"})
    assert middleware.process_response(request, compressed) is compressed
    missing = Response("https://a.example/404", status=404, body=b"no", request=request)
    middleware.process_response(request, missing)
    local = Response("file:///tmp/page.html", body=html,
                     headers={"Content-Type": "text/html"})
    middleware.process_response(Request("file:///tmp/page.html"), local)
    assert list(tmp_path.glob("*.open"))
    middleware.spider_closed()
    files = list(tmp_path.glob("t-*.warc.gz"))
    assert len(files) == 1 and not list(tmp_path.glob("*.open"))

    from warcio.archiveiterator import ArchiveIterator

    with open(files[0], "rb") as handle:
        records = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"),
                    r.http_headers.get_header("X-Crawler-Transfer-Encoding")
                    if r.http_headers else None) for r in ArchiveIterator(handle)]
    assert [r[0] for r in records] == ["warcinfo", "request", "response", "request",
                                       "response", "resource"]
    assert records[2][2] == "chunked"
    events = list(RecordReader(Source(str(files[0]))))
    found = [e for e in events if isinstance(e, Candidate)]
    assert [c.url for c in found] == ["https://a.example/x?y=1", "file:///tmp/page.html"]
    assert found[0].body == html  # stored content-encoded, read back decoded
    assert any(getattr(e, "reason", "") == "http_404" for e in events)


def test_archive_rotation(tmp_path):
    from scrapy.http import HtmlResponse, Request

    from scrapy_grownup.warc.archive import RotatingWarcWriter, WarcArchiveMiddleware

    middleware = WarcArchiveMiddleware(RotatingWarcWriter(tmp_path, max_bytes=2_000),
                                       requests=False)
    for i in range(10):
        request = Request(f"http://a.example/{i}")
        body = os.urandom(1500)  # incompressible: each response fills most of a file
        middleware.process_response(request, HtmlResponse(request.url, body=body,
                                                          request=request))
    middleware.spider_closed()
    files = sorted(tmp_path.glob("*.warc.gz"))
    assert len(files) == 10 and len({p.name for p in files}) == 10
    total = sum(1 for p in files for e in RecordReader(Source(str(p)))
                if getattr(e, "reason", None) != "warcinfo")
    assert total == 10


def test_settings_and_their_readme_rows():
    import re

    from scrapy_grownup.warc.settings import WARC_DEFAULTS, WarcSettings

    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(GROWNUP_WARC_[A-Z_]+)` \| `([^`]*)` \|", text, re.M))
    assert rows == {name: repr(value) for name, value in WARC_DEFAULTS.items()}

    parsed = WarcSettings.from_settings({"GROWNUP_WARC_RECORD_TYPES": "response, resource",
                                         "GROWNUP_WORKERS": "0", "GROWNUP_MAX_PAGE_NODES": 50,
                                         "GROWNUP_WARC_ITEMS": "true"})
    assert parsed.record_types == ("response", "resource") and parsed.items
    assert parsed.workers == 0 and parsed.limits.max_nodes == 50  # the live crawl's settings
    assert WarcSettings.from_settings(None).shard_pages == WARC_DEFAULTS[
        "GROWNUP_WARC_SHARD_PAGES"]
    for bad in ({"GROWNUP_WARC_SHARD_PAGES": 0}, {"GROWNUP_WARC_RECORD_TYPES": ""},
                {"GROWNUP_WORKERS": -1}):
        with pytest.raises(ValueError):
            WarcSettings.from_settings(bad)


# Junk for every WARC setting: each is a SettingsError naming the setting and the value.
WARC_INVALID = {
    "GROWNUP_WARC_PATHS": [3, ["a.warc.gz", 1]],
    "GROWNUP_WARC_CORPUS_DIR": [5, ["corpus/"]],
    "GROWNUP_WARC_ENCODER": ["bert", 3],
    "GROWNUP_WARC_SHARD_PAGES": [0, "many", 2.5],
    "GROWNUP_WARC_RECORD_TYPES": ["", [], 3],
    "GROWNUP_WARC_PAIR_PARTITION_PAGES": [0, "lots"],
    "GROWNUP_WARC_FINALIZE": ["perhaps", 2],
    "GROWNUP_WARC_ITEMS": ["sometimes", "2"],
    "GROWNUP_WARC_LOG_EVERY": [-1, "often"],
    "GROWNUP_WARC_REDIS_POLL": [0, "soon", "nan", True],
    "GROWNUP_WARC_REDIS_IDLE_CLOSE": [-1, "later"],
    "GROWNUP_WARC_REDIS_START_WAIT": [-5, "inf"],
    "GROWNUP_WARC_OUTPUT": [3],
    "GROWNUP_WARC_OUTPUT_MAX_BYTES": [0, "1GB"],
    "GROWNUP_WARC_OUTPUT_PREFIX": ["", 7],
    "GROWNUP_WARC_OUTPUT_REQUESTS": ["perhaps", "2"],
}


def test_every_warc_setting_has_a_check_and_bad_values_here():
    from scrapy_grownup.warc.settings import WARC_CHECKS, WARC_DEFAULTS

    assert set(WARC_CHECKS) == set(WARC_DEFAULTS) == set(WARC_INVALID)


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in WARC_INVALID.items() for v in vs])
def test_a_bad_warc_setting_is_one_line_naming_it(name, value):
    """Junk was read as False (``GROWNUP_WARC_FINALIZE = "perhaps"``: no manifest) or as a
    traceback; now every ``GROWNUP_*`` setting goes through the crawl's checks."""
    from scrapy_grownup.crawl.settings import check
    from scrapy_grownup.errors import SettingsError

    with pytest.raises(SettingsError) as info:
        check({name: value}, name)
    message = str(info.value)
    assert message.startswith(f"{name} = {value!r}: ") and "; allowed: " in message
    assert "\n" not in message
    if name not in ("GROWNUP_WARC_OUTPUT", "GROWNUP_WARC_OUTPUT_MAX_BYTES",
                    "GROWNUP_WARC_OUTPUT_PREFIX", "GROWNUP_WARC_OUTPUT_REQUESTS",
                    "GROWNUP_WARC_PATHS", "GROWNUP_WARC_CORPUS_DIR"):  # the spider reads these
        from scrapy_grownup.warc.settings import WarcSettings

        with pytest.raises(SettingsError, match=f"^{name} = "):
            WarcSettings.from_settings({name: value})


@pytest.mark.parametrize("value,expected", [("yes", True), ("On", True), ("1", True),
                                            (1, True), (True, True), ("no", False),
                                            ("off", False), ("FALSE", False), (0, False)])
def test_warc_and_crawl_booleans_read_alike(value, expected):
    from scrapy_grownup.crawl.settings import GrownupSettings
    from scrapy_grownup.warc.settings import WarcSettings

    warc = WarcSettings.from_settings({"GROWNUP_WARC_FINALIZE": value,
                                       "GROWNUP_WARC_ITEMS": value})
    assert warc.finalize is expected and warc.items is expected
    assert GrownupSettings.from_settings({"GROWNUP_AUTO_ITEMS": value}).auto_items is expected


def test_an_empty_output_setting_leaves_the_archive_off():
    from scrapy_grownup.crawl.settings import check

    assert check({"GROWNUP_WARC_OUTPUT": ""}, "GROWNUP_WARC_OUTPUT") is None
    assert check({}, "GROWNUP_WARC_OUTPUT_REQUESTS") is True  # the default, checked


def test_grownup_warc_refuses_a_bad_setting_in_one_line(tmp_path, capsys):
    from scrapy_grownup.cli.main import main

    archive = write_warc(tmp_path / "a.warc.gz", [("http://a.example/", b"<p>x</p>",
                                                   "text/html")])
    code = main(["warc", str(archive), "--output", str(tmp_path / "corpus"), "--workers", "0",
                 "-s", "GROWNUP_WARC_FINALIZE=perhaps"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [("grownup warc: error: GROWNUP_WARC_FINALIZE = 'perhaps': not "
                                  "a boolean; allowed: True or False")]
    assert not (tmp_path / "corpus").exists()


@pytest.mark.slow
def test_scrapy_crawl_grownup_warc_stops_on_a_bad_setting(tmp_path):
    """As the add-on does for the crawl's settings: exit 1, one error line, no traceback."""
    out = tmp_path / "corpus"
    result = scrapy_crawl_warc(tmp_path, "-a", f"paths={tmp_path}", "-a", f"output={out}",
                               "-s", "GROWNUP_WARC_ITEMS=sometimes")
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "GROWNUP_WARC_ITEMS = 'sometimes': not a boolean" in errors[0]
    assert "Traceback" not in result.stderr and not out.exists()


def _story_pages(count: int) -> list[tuple[str, bytes, str]]:
    from example_project.news_site import article_page

    return [(f"http://news.example/2024/story-{i}.html",
             article_page(i, variant=i % 3)[0].encode("utf-8"), "text/html")
            for i in range(count)]


def test_a_damaged_archive_is_one_skip_and_the_next_ones_are_read(tmp_path):
    """A whole-file-gzip WARC whose first response has a negative Content-Length stopped the
    run (OSError from a seek to warcio's negative offset; finish_reason start_error, exit 0,
    every later archive unread). Now: one damaged archive, the others read; a symbolic link to
    an archive is that archive, and a FIFO named like one is passed over."""
    import gzip as gz
    import os

    inputs = tmp_path / "in"
    inputs.mkdir()
    record = response_record("http://bad.example/1", b"<html><p>Lost page</p></html>", b"-5")
    bad = inputs / "a-bad.warc.gz"
    bad.write_bytes(gz.compress(record * 3))
    good = write_warc(inputs / "b-good.warc.gz", _story_pages(6))
    (inputs / "c-link.warc.gz").symlink_to(good)
    os.mkfifo(inputs / "d-pipe.warc")
    later = write_warc(tmp_path / "later.warc", _story_pages(9)[6:], gzip=False)
    out = tmp_path / "corpus"
    result = scrapy_crawl_warc(tmp_path, "-a", f"paths={bad},{inputs},{later}",
                               "-a", f"output={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "start_error" not in result.stderr and "Traceback" not in result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pages"] == 9  # 6 from the good archive (once), 3 from the last one
    assert "'grownup/warc/files': 3" in result.stderr
    assert "'grownup/warc/files_damaged': 1" in result.stderr
    # the whole-file gzip of records with a negative Content-Length reads as the same bytes
    # uncompressed do (issue 55): each record's head, then its body as damage
    assert manifest["skipped"].get("corrupt") == 3
    assert manifest["skipped"].get("no_http_headers") == 3
    assert "'grownup/warc/skipped/not_a_file': 1" in result.stderr  # the FIFO, counted
    assert len(list((out / "files").glob("*.json"))) == 3


# Loaded by ``grownup warc`` through PYTHONPATH: the first shard written stops after its
# temporary file is complete but before the rename, and says so (the moment of a kill -9).
HANG_SAVE = '''
import os
import time

import safetensors.numpy as st

_save_file = st.save_file


def save_file(tensors, filename, *args, **kwargs):
    result = _save_file(tensors, filename, *args, **kwargs)
    flag = os.environ.get("GROWNUP_TEST_SAVE_FLAG")
    if flag and ".tmp-" in filename and "shard" in os.path.basename(os.path.dirname(filename)):
        with open(flag, "w") as handle:
            handle.write(filename)
        time.sleep(3600)
    return result


st.save_file = save_file
'''


def test_a_kill_during_a_shard_write_leaves_nothing_after_the_rerun(tmp_path):
    """kill -9 while a shard is written leaves its temporary (``.<shard>.tmp-<pid>``), which
    reruns never removed (104 MB in the probe). The next run removes the temporaries of dead
    processes, only those of the writer's own naming, and finishes the corpus."""
    import signal
    import time

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HANG_SAVE)
    archive = write_warc(tmp_path / "in.warc.gz", _story_pages(6))
    out = tmp_path / "corpus"
    flag = tmp_path / "saving"
    environment = child_env()
    environment["PYTHONPATH"] = os.pathsep.join([str(hooks), environment["PYTHONPATH"]])
    environment["GROWNUP_TEST_SAVE_FLAG"] = str(flag)
    process = subprocess.Popen(
        [sys.executable, "-m", "scrapy_grownup.cli.main", "warc", str(archive), "--output", str(out),
         "--workers", "1", "--shard-pages", "2"], env=environment, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flag.exists(), "no shard write started"
        time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    left = Path(flag.read_text())
    assert left.is_file() and left.stat().st_size > 0 and left.name.startswith(".")
    # A spill directory and a marker temporary of the dead process, a temporary of a running
    # process (this one) and files that only look alike: only the first two are stale.
    (out / f".pairs-spill-{process.pid}").mkdir()
    (out / f".pairs-spill-{process.pid}" / "part-00000.tsv").write_text("x\n")
    (out / "files").mkdir(exist_ok=True)
    (out / "files" / f".k.json.tmp-{process.pid}").write_text("{}")
    alive = out / "shards" / f".other.safetensors.tmp-{os.getpid()}"
    alive.write_bytes(b"x")
    keep = [out / "shards" / "notes.tmp-1", out / ".notes.tmp", out / "shards" / ".x.tmp-1a"]
    for path in keep:
        path.write_text("mine")
    result = grownup(archive, "--output", out, "--workers", "1", "--shard-pages", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not left.exists()
    assert not (out / f".pairs-spill-{process.pid}").exists()
    assert not (out / "files" / f".k.json.tmp-{process.pid}").exists()
    assert alive.exists() and all(path.exists() for path in keep)
    summary = json.loads(result.stderr.strip().splitlines()[-1])
    assert summary["pages"] == 6 and summary["this_run"]["stale_temporaries_removed"] == 3
    assert "removed 3 temporary files" in result.stderr
