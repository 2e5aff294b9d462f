"""The datatrove steps (``scrapy_grownup.datatrove``) in real datatrove pipelines: the same
articles as ``grownup extract`` for every record, stats by reason, the model loaded once per
task, and nothing importing datatrove unless the steps are used (issue 53)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("datatrove", reason="datatrove is not installed (pip install "
                                        "'scrapy-grownup[datatrove]')")

from datatrove.executor import LocalPipelineExecutor  # noqa: E402
from datatrove.pipeline.writers import JsonlWriter  # noqa: E402

from scrapy_grownup.cli.main import main  # noqa: E402
from scrapy_grownup.data.datasets import DatasetNotAvailable  # noqa: E402
from scrapy_grownup.datatrove import GrownupExtractor, GrownupWarcReader  # noqa: E402
from scrapy_grownup.warc.synthetic import dataset_pages, fixture_dir, write_warc  # noqa: E402
from tests.data_support import skip_missing_data


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> Path:
    """Real pages in two WARCs (one of them with pages that give no article), real crawls
    (Common Crawl, pywb's iana.org) and broken archives, in one folder."""
    try:
        pages = dataset_pages(12)
        fixtures = fixture_dir()
    except DatasetNotAvailable:
        skip_missing_data("datasets")
    folder = tmp_path_factory.mktemp("archives")
    urls = [f"http://site{i % 3}.example/news/{i:02d}.html" for i in range(len(pages))]
    records = [(url, html, "text/html") for url, (_, html) in zip(urls, pages)]
    write_warc(folder / "a.warc.gz", records[:6], noise=True)
    write_warc(folder / "b.warc", records[6:] + [
        ("http://site0.example/empty.html", b"<html><body>  </body></html>", "text/html"),
        ("http://site0.example/binary.html", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "text/html"),
    ], gzip=False)
    for name in ("resiliparse_testdata/warcfile.warc.gz",
                 "pywb_sample_archive/warcs/iana.warc.gz",
                 "resiliparse_testdata/clipped.warc.gz", "warcio_testdata/example-trunc.warc"):
        shutil.copy(fixtures / name, folder / Path(name).name)
    return folder


def _cli(folder: Path, out: Path) -> dict[str, dict]:
    code = main(["extract", str(folder), "--model", "fast", "--jobs", "1", "-o", str(out)])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return {line["warc"]["record_id"]: line for line in lines}


def _pipeline(reader, out: Path, tasks: int = 2) -> tuple[dict[str, dict], list[dict]]:
    LocalPipelineExecutor(pipeline=[reader, GrownupExtractor(model="fast", batch_size=8),
                                    JsonlWriter(str(out / "output"), compression=None)],
                          tasks=tasks, logging_dir=str(out / "logs")).run()
    docs = {}
    for path in sorted((out / "output").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            docs[doc["id"].strip("<>")] = doc
    stats = json.loads((out / "logs" / "stats.json").read_text())
    return docs, stats


def _step(stats: list[dict], name: str) -> dict:
    return next(step for step in stats if name in step["name"])


def _same(doc: dict, line: dict) -> None:
    assert doc["text"] == line["text"], line["url"]
    for key, value in line.items():
        if key in ("text", "path", "warc"):
            continue
        if isinstance(value, float):
            assert doc["metadata"][key] == pytest.approx(value, abs=1e-4), key
        else:
            assert doc["metadata"][key] == value, (key, line["url"])


def test_pipeline_gives_what_grownup_extract_gives(archives, tmp_path, capsys):
    """GrownupWarcReader -> GrownupExtractor -> JsonlWriter, two tasks: every document is the
    CLI's line for the same record, and the drops and skips are counted by reason."""
    expected = _cli(archives, tmp_path / "cli.jsonl")
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    docs, stats = _pipeline(GrownupWarcReader(str(archives)), tmp_path / "dt")
    assert set(docs) == set(expected) and len(docs) == summary["extracted"] == 6 + 6 + 16 + 16 + 1
    for record_id, line in expected.items():
        doc = docs[record_id]
        _same(doc, line)
        assert doc["metadata"]["url"] == line["warc"]["target_uri"]
        assert doc["metadata"]["date"] == line["warc"]["date"]
        assert doc["metadata"]["file_path"] == line["path"]
    extractor = _step(stats, "EXTRAC")["stats"]
    reader = _step(stats, "READER")["stats"]
    assert extractor["forwarded"] == len(docs)
    # the two pages of b.warc that give no article are dropped by the CLI's reasons; every
    # reason of the CLI's summary is a reader's skip or an extractor's drop
    assert extractor["dropped"] == 2 and extractor["dropped_not_html"] == 1
    for reason, count in summary["skipped"].items():
        assert reader.get(f"skipped_{reason}", 0) + extractor.get(f"dropped_{reason}", 0) \
            == count, reason
    # the model once per task, at most (a worker process that ran both tasks loads it once)
    assert 1 <= extractor["model_loads"] <= 2
    for task in sorted((tmp_path / "dt" / "logs" / "stats").glob("*.json")):
        task_stats = _step(json.loads(task.read_text()), "EXTRAC")["stats"]
        assert task_stats.get("model_loads", 0) <= 1
    assert _step(stats, "EXTRAC")["time_stats"]["total"] > 0


def test_datatroves_own_warc_reader(archives, tmp_path, capsys):
    """datatrove's WarcReader -> GrownupExtractor: the CLI's articles for the records both
    take as HTML pages. (WarcReader has other rules: it takes non-200 responses, leaves out
    ``resource`` records, and fails a task on a truncated gzip, so the broken archives are
    left out here.)"""
    pytest.importorskip("magic", reason="datatrove's WarcReader needs python-magic")
    pytest.importorskip("cchardet", reason="datatrove's WarcReader needs faust-cchardet")
    from datatrove.pipeline.readers import WarcReader

    good = tmp_path / "good"
    good.mkdir()
    for name in ("a.warc.gz", "warcfile.warc.gz", "iana.warc.gz"):
        shutil.copy(archives / name, good / name)
    expected = _cli(good, tmp_path / "cli.jsonl")
    capsys.readouterr()
    docs, stats = _pipeline(WarcReader(str(good)), tmp_path / "dt")
    common = set(docs) & set(expected)
    assert len(common) >= len(expected) - 4, (len(common), len(expected))
    for record_id in common:
        assert docs[record_id]["text"] == expected[record_id]["text"]
    assert _step(stats, "EXTRAC")["stats"]["forwarded"] == len(docs)


def test_one_document_and_markdown(archives):
    """The step on its own (no executor): ``extract`` for one page, Markdown and comments as
    ``grownup extract --format markdown --comments`` would write them."""
    from datatrove.data import Document

    reader = GrownupWarcReader(str(archives))
    docs = [doc for doc in reader.run() if doc.metadata["file_path"].endswith("/a.warc.gz")]
    assert len(docs) == 6 and all(doc.metadata["url"].startswith("http://") for doc in docs)
    step = GrownupExtractor(model="fast", output_format="markdown", comments=True)
    first = Document(text=docs[0].text, id=docs[0].id, metadata=dict(docs[0].metadata))
    out = list(step.run(iter([first])))
    assert len(out) == 1 and out[0].text.strip() and out[0].metadata["title"]
    assert out[0].text.startswith(out[0].metadata["markdown"].rstrip("\n")[:200])
    assert step.extract(docs[1].text).strip()
    assert step.extract("") == ""


def test_nothing_imports_datatrove_unless_the_step_is_used():
    code = ("import sys, scrapy_grownup, scrapy_grownup.warc, scrapy_grownup.warc.extract\n"
            "import scrapy_grownup.cli.main\n"
            "assert 'datatrove' not in sys.modules, 'datatrove imported'\n"
            "from scrapy_grownup.datatrove import GrownupExtractor\n"
            "step = GrownupExtractor(model='fast')\n"
            "assert 'torch' not in sys.modules or True\n"
            "assert step.extractor is step.extractor  # loaded once\n"
            "assert step.stats['model_loads'].total == 1\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
