"""Arguments and devices: a value ``ArticleExtractor`` cannot take is one clear error that names
it, when it is given; errors are exported at the top level; reprs and log lines stay short."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

import scrapy_grownup
from scrapy_grownup import ArticleExtractor, DeviceError, GrownupError, OptionError
from scrapy_grownup.model.cuda import cuda_available

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "tests" / "golden" / "news_jsonld.html").read_bytes()
LONG = ("<html><head><title>The harbour reopens after the storm</title></head><body>"
        "<nav><a href='/'>Home</a></nav><article><h1>The harbour reopens after the storm</h1>"
        + "".join(f"<p>Paragraph {i}: the fishing boats went out again on day {i}, and the "
                  f"harbour master counted {i * 3} of them before noon.</p>" for i in range(30))
        + "</article></body></html>").encode()


@pytest.fixture(scope="module")
def extractor():
    return ArticleExtractor.from_pretrained("fast")


@pytest.mark.parametrize("options, kind, name", [
    ({"threshold": 3}, OptionError, "threshold"),
    ({"threshold": -1}, OptionError, "threshold"),
    ({"threshold": "abc"}, TypeError, "threshold"),
    ({"threshold": True}, TypeError, "threshold"),
    ({"threads": 0}, OptionError, "threads"),
    ({"threads": 1.5}, TypeError, "threads"),
    ({"output_format": "xml"}, OptionError, "output_format"),
    ({"refine": "yes"}, TypeError, "refine"),
    ({"rescore": 1}, TypeError, "rescore"),
    ({"limits": {"max_nodes": 5}}, TypeError, "limits"),
    ({"runtime": "onnx"}, OptionError, "runtime"),
    ({"name_or_path": ""}, OptionError, "name_or_path"),
    ({"name_or_path": 7}, TypeError, "name_or_path"),
])
def test_a_bad_argument_is_refused_when_given_and_named(options, kind, name):
    with pytest.raises(kind, match=f"^{name} must be"):
        ArticleExtractor.from_pretrained(**options)
    if kind is OptionError:
        assert issubclass(kind, GrownupError) and issubclass(kind, ValueError)


@pytest.mark.skipif(cuda_available(), reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_a_device_that_is_not_there_is_one_line_naming_it(device):
    with pytest.raises(DeviceError, match=f"device '{device}' is not available"):
        ArticleExtractor.from_pretrained("fast", device=device)
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        ArticleExtractor.from_pretrained("fast", device="tpu")


@pytest.mark.parametrize("html, message", [(None, "html must be bytes or str, not NoneType"),
                                           (123, "html must be bytes or str, not int")])
def test_extract_names_an_argument_of_the_wrong_type(extractor, html, message):
    with pytest.raises(TypeError, match=message):
        extractor.extract(html)
    with pytest.raises(TypeError, match="url must be a str or None, not int"):
        extractor.extract(PAGE, url=5)
    with pytest.raises(TypeError, match=message):
        extractor.extract_batch([(html, None)], errors="skip")


def test_every_error_class_is_exported_at_the_top_level():
    from scrapy_grownup import errors

    classes = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, GrownupError)}
    assert classes <= set(scrapy_grownup.__all__)
    assert all(getattr(scrapy_grownup, name) is getattr(errors, name) for name in classes)


def test_errors_moved_to_errors_py_import_from_their_old_places_too():
    from scrapy_grownup import errors
    from scrapy_grownup.cli import main
    from scrapy_grownup.data import datasets
    from scrapy_grownup.warc import manifest

    assert datasets.DatasetNotAvailable is errors.DatasetNotAvailable
    assert manifest.CorpusConfigError is errors.CorpusConfigError
    assert main.UserError is errors.UserError
    assert issubclass(errors.DatasetNotAvailable, FileNotFoundError)
    assert issubclass(errors.CorpusConfigError, ValueError)
    assert not issubclass(errors.UserError, GrownupError)  # a command's error, not a page's


def test_the_article_repr_is_one_short_line(extractor):
    article = extractor.extract(LONG, url="https://harbour.example.com/x")
    assert len(article.text) > 500
    text = repr(article)
    assert "\n" not in text and len(text) < 400
    assert article.title[:20] in text and f"({len(article.text)} characters)" in text


def test_scrapy_logs_an_article_item_in_short(extractor, caplog):
    from scrapy_grownup.crawl.items import ArticleItem, ArticleLogFormatter, article_values

    item = ArticleItem(article_values(extractor.extract(LONG, url="https://x.example/a")))
    assert len(item["text"]) > 500 and len(item["markdown"]) > 500
    for shown in (repr(item), str(ArticleLogFormatter().scraped(item, None, None)["args"])):
        assert len(shown) < 1500 and item["markdown"] not in shown
        assert item["text"][:50] in shown and item["text"] not in shown


@pytest.mark.skipif(cuda_available(), reason="this machine has a CUDA GPU")
def test_the_add_on_refuses_a_missing_device_with_one_line(tmp_path):
    spider = tmp_path / "spider.py"
    spider.write_text("import scrapy\n"
                      "class S(scrapy.Spider):\n"
                      "    name = 's'\n"
                      "    start_urls = ['data:,x']\n"
                      "    custom_settings = {'ADDONS': {'scrapy_grownup.Addon': 500},\n"
                      "                       'GROWNUP_DEVICE': 'cuda'}\n"
                      "    def parse(self, response):\n"
                      "        pass\n")
    done = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    assert "device 'cuda' is not available" in done.stderr
    assert "Traceback" not in done.stderr
