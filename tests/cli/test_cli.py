"""The ``grownup`` command as a user meets it: version, help, inputs, formats, errors, summary."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_grownup import __version__
from scrapy_grownup.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "tests" / "golden" / "news_jsonld.html").read_bytes()
SENTENCE = "The council voted 7-2 on Tuesday to add protected bike lanes on three streets."
TITLE = "City council approves new bike lanes & parking rules"
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\n"
# Someone else's sub-command, changing while this is written: its options are theirs to explain.
NOT_CHECKED = {"lab evaluate"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _summary(err: str) -> dict:
    return json.loads(err.strip().splitlines()[-1])


@pytest.fixture
def pages(tmp_path):
    (tmp_path / "a.html").write_bytes(PAGE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.html.gz").write_bytes(gzip.compress(PAGE))
    (tmp_path / "sub" / "notes.txt").write_text("not a page: directories skip it")
    (tmp_path / "report.pdf").write_bytes(PDF)
    return tmp_path


# -- version, python -m, help --------------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"grownup {__version__} from ")
    assert str(ROOT / "scrapy_grownup") in out


def test_python_dash_m_runs_the_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "-m", "scrapy_grownup", "--version"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"grownup {__version__} ")


def test_every_option_has_plain_help_text(capsys):
    parser = build_parser()
    commands = _subparsers(parser)
    assert {"extract", "inspect", "train", "warc", "pretrain"} <= set(commands)
    commands.update({f"lab {name}": sub for name, sub in _subparsers(commands["lab"]).items()})
    problems = []
    for name, sub in [("grownup", parser)] + sorted(commands.items()):
        if name in NOT_CHECKED:
            continue
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            label = f"{name} {'/'.join(action.option_strings) or action.dest}"
            if not action.help or action.help == argparse.SUPPRESS:
                problems.append(f"{label}: no help")
        with pytest.raises(SystemExit) as exit_info:
            sub.parse_args(["--help"])
        assert exit_info.value.code == 0
        text = capsys.readouterr().out
        for markup in ("``", "`", ":class:", ":func:", ":meth:", "\n.. "):
            if markup in text:
                problems.append(f"{name} --help: RST markup {markup!r}")
    assert not problems, "\n".join(problems)


def test_the_help_shows_the_user_commands_and_one_entry_for_the_lab(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = _subparsers(build_parser(command="extract"))
    assert list(listed) == ["extract", "train", "inspect", "warc", "pretrain", "lab"]
    assert "fit-rescorer" not in capsys.readouterr().out
    lab = _subparsers(_subparsers(build_parser())["lab"])
    assert {"evaluate", "fit-rescorer", "page-type-cv", "export", "export-onnx"} <= set(lab)


def test_extract_imports_no_training_module():
    script = ("import sys\n"
              "from scrapy_grownup.cli.main import build_parser\n"
              "build_parser(command='extract').parse_args(['extract', 'x.html'])\n"
              "print(sorted(m for m in sys.modules if m.startswith(('scrapy_grownup.training',\n"
              "      'scrapy_grownup.pretraining', 'scrapy_grownup.data', 'torch'))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_distill_static_passes_its_options_on(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["lab", "distill-static", "--", "--help"])
    assert exit_info.value.code == 0
    assert "--pca-dims" in capsys.readouterr().out


# -- inputs and formats -----------------------------------------------------------------------------
def test_extract_files_directories_and_gzip(pages, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["extract", str(pages / "a.html"), str(pages / "sub"), "-o", str(out),
                 "--model", "fast"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [Path(r["path"]).name for r in rows] == ["a.html", "b.html.gz"]
    assert all(r["title"] == TITLE and SENTENCE in r["text"] for r in rows)
    assert rows[0]["url"] == (pages / "a.html").resolve().as_uri()
    assert _summary(capsys.readouterr().err) == {"read": 2, "extracted": 2, "skipped": {}}


def test_extract_stdin_with_url_as_text(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(PAGE))))
    assert main(["extract", "-", "--format", "text", "--model", "fast",
                 "--url", "https://riverside.example.com/news/bike-lanes"]) == 0
    captured = capsys.readouterr()
    assert SENTENCE in captured.out and not captured.out.lstrip().startswith("{")
    assert _summary(captured.err) == {"read": 1, "extracted": 1, "skipped": {}}


def test_extract_url_reaches_the_article(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(PAGE)))
    assert main(["extract", "-", "--model", "fast",
                 "--url", "https://riverside.example.com/news/bike-lanes"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["url"] == "https://riverside.example.com/news/bike-lanes" and row["path"] == "-"


def test_extract_markdown_pages_separated_by_a_blank_line(pages, capsys):
    assert main(["extract", str(pages / "a.html"), str(pages / "sub" / "b.html.gz"),
                 "--format", "markdown", "--model", "fast"]) == 0
    out = capsys.readouterr().out
    assert out.count(SENTENCE) == 2 and "\n\n" in out and not out.startswith("{")


def test_extract_threshold_knob(pages, tmp_path, capsys):
    lengths = {}
    for threshold in ("0.05", "0.95"):
        out = tmp_path / f"{threshold}.jsonl"
        main(["extract", str(pages / "a.html"), "-o", str(out), "--model", "fast",
              "--threshold", threshold])
        text = out.read_text(encoding="utf-8")
        lengths[threshold] = len(json.loads(text)["text"]) if text else 0
    assert lengths["0.05"] > lengths["0.95"]
    with pytest.raises(SystemExit) as exit_info:
        main(["extract", str(pages / "a.html"), "--threshold", "2"])
    assert exit_info.value.code == 2
    assert "--threshold" in capsys.readouterr().err


def test_a_threshold_outside_0_and_1_is_one_line_before_any_work(tmp_path, capsys):
    """``export --threshold`` and ``fit-rescorer --max-features`` refuse a value outside their
    range as argparse does, one line naming the option, before a model is read."""
    for argv, option in ((["lab", "export", str(tmp_path / "no-model"), "--out", str(tmp_path / "o"),
                           "--threshold", "1.5"], "--threshold"),
                         (["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--max-features",
                           "0"],
                          "--max-features")):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert option in err and "not '" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_extract_precision_and_recall_presets(pages, tmp_path, capsys):
    from scrapy_grownup.cli.main import RECALL_THRESHOLD, build_parser

    parse = build_parser().parse_args
    precise = parse(["extract", "x.html", "--precision"])
    assert precise.precision and precise.threshold is None  # the adaptive cut-off, refined
    assert parse(["extract", "x.html", "--recall"]).threshold == RECALL_THRESHOLD
    assert parse(["extract", "x.html"]).threshold is None  # adapted per page
    assert RECALL_THRESHOLD < 0.4
    with pytest.raises(SystemExit) as exit_info:
        main(["extract", str(pages / "a.html"), "--precision", "--threshold", "0.3"])
    assert exit_info.value.code == 2
    assert "not allowed" in capsys.readouterr().err
    texts = {}
    for preset in ("--precision", "--recall"):
        out = tmp_path / f"{preset}.jsonl"
        assert main(["extract", str(pages / "a.html"), "-o", str(out), preset]) == 0
        texts[preset] = json.loads(out.read_text(encoding="utf-8"))["text"]
    assert len(texts["--recall"]) >= len(texts["--precision"])


# -- user errors: one line, non-zero, no traceback -------------------------------------------------
def _one_error_line(capsys, *words) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and all(w in lines[0] for w in words), err
    return lines[0]


def test_missing_file(tmp_path, capsys):
    assert main(["extract", str(tmp_path / "nope.html")]) == 2
    _one_error_line(capsys, "grownup extract: error:", "no such file", "nope.html")


def test_unwritable_output(pages, tmp_path, capsys):
    assert main(["extract", str(pages / "a.html"), "-o",
                 str(tmp_path / "no-such-dir" / "out.jsonl")]) == 2
    _one_error_line(capsys, "cannot write", "out.jsonl")
    # a directory is -o DIR (one file per input), but never over an input
    assert main(["extract", str(pages / "a.html"), "-o", str(pages), "--format", "html"]) == 2
    _one_error_line(capsys, "would overwrite an input", "a.html")
    (tmp_path / "file").write_text("")
    assert main(["extract", str(pages / "a.html"), "-o", str(tmp_path / "file") + "/"]) == 2
    _one_error_line(capsys, "cannot write")


def test_unknown_model(pages, capsys):
    assert main(["extract", str(pages / "a.html"), "--model", "no-such-model"]) == 2
    _one_error_line(capsys, "no model 'no-such-model'", "fast")


def test_url_needs_one_page_and_directories_need_pages(pages, tmp_path, capsys):
    assert main(["extract", str(pages / "a.html"), str(pages / "sub"), "--url",
                 "https://x.test/"]) == 2
    _one_error_line(capsys, "--url")
    (tmp_path / "empty").mkdir()
    assert main(["extract", str(tmp_path / "empty")]) == 2
    _one_error_line(capsys, "no HTML files")
    assert main(["extract", "-", "-"]) == 2
    _one_error_line(capsys, "standard input")


def test_inspect_missing_page(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "gone.html"), "-o", str(tmp_path / "r.html")]) == 2
    _one_error_line(capsys, "grownup inspect: error:", "gone.html")


def test_a_pdf_is_skipped_and_counted(pages, caplog, capsys):
    assert main(["extract", str(pages / "report.pdf"), "--model", "fast"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert _summary(captured.err) == {"read": 1, "extracted": 0, "skipped": {"not_html": 1},
                                      "skipped_pages": {str(pages / "report.pdf"): "not_html"}}
    assert any("report.pdf: skipped (not_html)" in r.getMessage() for r in caplog.records)


def test_text_json_and_random_bytes_are_skipped_as_not_html(tmp_path, capsys):
    (tmp_path / "a.html").write_bytes(PAGE)
    (tmp_path / "notes.html").write_bytes(b"Just a few words, saved under the wrong name.\n")
    (tmp_path / "api.html").write_bytes(b'{"title": "x", "body": "<p>HTML in JSON</p>"}')
    (tmp_path / "noise.html").write_bytes(bytes(range(256)) * 8)
    out = tmp_path / "o.jsonl"
    assert main(["extract", str(tmp_path), "--model", "fast", "-o", str(out)]) == 0
    assert _summary(capsys.readouterr().err) == {
        "read": 4, "extracted": 1, "skipped": {"not_html": 3},
        "skipped_pages": {str(tmp_path / name): "not_html"
                          for name in ("api.html", "noise.html", "notes.html")}}
    assert len(out.read_text().splitlines()) == 1


def test_summary_counts_each_reason(pages, tmp_path, capsys):
    (pages / "bad.html.gz").write_bytes(b"\x1f\x8b" + b"truncated gzip")
    (pages / "empty.html").write_bytes(b"")
    assert main(["extract", str(pages), "--model", "fast", "-o", str(tmp_path / "o.jsonl")]) \
        == 0
    summary = _summary(capsys.readouterr().err)
    assert summary["read"] == 4 and summary["extracted"] == 2
    assert summary["skipped"]["unreadable"] == 1 and sum(summary["skipped"].values()) == 2


def test_jobs_give_what_this_process_gives_in_input_order(tmp_path, capsys):
    """``--jobs``: batches extracted side by side in processes with their own models; the
    output, its order and every skip with its reason are those of one process."""
    from example_project.news_site import article_page

    site = tmp_path / "site"
    site.mkdir()
    for k in range(7):
        (site / f"{k:02d}-story.html").write_bytes(article_page(k, variant=k % 3)[0].encode())
    (site / "02-bad.html.gz").write_bytes(b"\x1f\x8b" + b"truncated gzip")  # unreadable
    (site / "04-report.html").write_bytes(PDF)  # not HTML
    (site / "05-empty.html").write_bytes(b"")
    outputs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}.jsonl"
        assert main(["extract", str(site), "--model", "fast", "--batch-pages", "3",
                     "--jobs", jobs, "-o", str(out)]) == 0
        outputs[jobs] = (out.read_text(), _summary(capsys.readouterr().err))
    text, summary = outputs["1"]
    assert summary == {"read": 10, "extracted": 7,
                       "skipped": {"empty_page": 1, "not_html": 1, "unreadable": 1},
                       "skipped_pages": {str(site / "02-bad.html.gz"): "unreadable",
                                         str(site / "04-report.html"): "not_html",
                                         str(site / "05-empty.html"): "empty_page"}}
    assert [Path(json.loads(line)["path"]).name for line in text.splitlines()] == \
        [f"{k:02d}-story.html" for k in range(7)]
    assert outputs["2"] == outputs["1"]


def test_a_page_that_kills_its_job_process_costs_only_itself():
    """A batch whose process died twice (``WorkerCrashedError``) is tried page by page: the
    page that kills its process is skipped as ``worker_crashed``, its batch-mates come out,
    in order."""
    import asyncio

    from scrapy_grownup.cli.main import job_batch
    from scrapy_grownup.crawl.workers import WorkerCrashedError

    class Pool:  # a ProcessPool whose processes die on any batch holding a "crash" page
        calls = 0

        async def call(self, fn, entries, *options, what=""):
            Pool.calls += 1
            if any(name.startswith("crash") for name, _, _ in entries):
                raise WorkerCrashedError(f"{what}: the worker died")
            return [(name, ("ok", f"{name}\n")) for name, _, _ in entries]

    entries = [(name, b"<p>x</p>", None) for name in ("a", "crash-b", "c", "d")]
    results = asyncio.run(job_batch(Pool(), entries, "text", False))
    assert results == [("a", ("ok", "a\n")), ("crash-b", ("skip", "worker_crashed",
                                                           "its process died twice")),
                       ("c", ("ok", "c\n")), ("d", ("ok", "d\n"))]
    assert Pool.calls == 5  # the batch, then each page alone


@pytest.mark.parametrize("value", ["0", "two", "1.5"])
def test_jobs_must_be_a_count_or_auto(pages, value, capsys):
    with pytest.raises(SystemExit) as info:
        main(["extract", str(pages), "--jobs", value])
    assert info.value.code == 2
    assert f"must be a whole number >= 1 or 'auto', not {value!r}" in capsys.readouterr().err


def test_jobs_report_a_model_that_cannot_load_as_one_line(pages, tmp_path):
    """The model loads in the job processes: an unknown one is still one line, exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-m", "scrapy_grownup", "extract", str(pages),
                             "--model", str(tmp_path / "no-model"), "--jobs", "2"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("grownup extract: error: "), result.stderr


def test_errors_as_a_user_sees_them(pages, tmp_path):
    """A real process: stderr holds exactly the skip line and the summary, no traceback."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-m", "scrapy_grownup", "extract",
                             str(pages / "report.pdf"), "--model", "fast"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and "report.pdf: skipped (not_html)" in lines[0], result.stderr
    assert json.loads(lines[1]) == {"read": 1, "extracted": 0, "skipped": {"not_html": 1},
                                    "skipped_pages": {str(pages / "report.pdf"): "not_html"}}


def test_extract_comments_switch(tmp_path):
    """--comments appends the readers' comments to text and Markdown output."""
    from example_project.news_site import article_page

    page = tmp_path / "story.html"
    page.write_text(article_page(0, variant=0)[0], encoding="utf-8")
    outputs = {}
    for fmt in ("text", "markdown"):
        for flag in ([], ["--comments"]):
            out = tmp_path / f"{fmt}{len(flag)}.txt"
            assert main(["extract", str(page), "-o", str(out), "--format", fmt, *flag]) == 0
            outputs[fmt, bool(flag)] = out.read_text(encoding="utf-8")
    assert "reader0" not in outputs["text", False]
    assert "\nComments:\n" in outputs["text", True] and "reader0" in outputs["text", True]
    assert outputs["text", True].startswith(outputs["text", False].rstrip("\n"))
    assert "\n## Comments\n" in outputs["markdown", True]


# -- output choices: formats, -o DIR, --with-metadata, the pages named (issue 54.4) --------------
def test_html_and_csv_formats(pages, capsys):
    import csv

    from scrapy_grownup.cli.main import CSV_COLUMNS

    a = str(pages / "a.html")
    assert main(["extract", a, "--format", "html", "--model", "fast"]) == 0
    html = capsys.readouterr().out
    assert f"<p>{SENTENCE}</p>" in html and "<html" not in html and "==>" not in html
    assert main(["extract", a, "--format", "html", "--with-metadata", "--model", "fast"]) == 0
    html = capsys.readouterr().out
    assert html.startswith("<!DOCTYPE html>") and "<title>City council approves new bike " \
        "lanes &amp; parking rules</title>" in html and html.rstrip().endswith("</html>")
    assert main(["extract", a, str(pages / "sub"), str(pages / "report.pdf"), "--format",
                 "csv", "--model", "fast"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.reader(io.StringIO(captured.out, newline="")))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 3  # a header, one row per page
    row = dict(zip(rows[0], rows[1]))
    assert row["path"] == a and row["title"] == TITLE and SENTENCE in row["text"]
    assert row["url"] == (pages / "a.html").resolve().as_uri() and row["language"]
    assert row["authors"] and row["date"].startswith("20")
    assert _summary(captured.err)["skipped_pages"] == {str(pages / "report.pdf"): "not_html"}


def test_several_pages_in_one_stream_are_named_and_metadata_goes_first(pages, capsys):
    a, b = str(pages / "a.html"), str(pages / "sub" / "b.html.gz")
    assert main(["extract", a, b, "--format", "text", "--with-metadata", "--model",
                 "fast"]) == 0
    out = capsys.readouterr().out
    first, second = out.split(f"\n\n==> {b} <==\n")
    assert first.startswith(f"==> {a} <==\nTitle: {TITLE}\nURL: file://")
    assert second.startswith(f"Title: {TITLE}\n") and "\nAuthor: " in second
    assert "\nDate: 20" in second and f"\n\n{SENTENCE}" in second
    # one page: its text alone, as before (no name line); Markdown's header is front matter
    assert main(["extract", a, "--format", "markdown", "--with-metadata", "--model",
                 "fast"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'---\ntitle: "{TITLE}"\nurl: "file://') and "==>" not in out
    assert "\n---\n\n" in out and SENTENCE in out.split("\n---\n\n", 1)[1]


def test_output_directory_one_file_per_input(pages, tmp_path, tmp_path_factory, capsys):
    """-o DIR/: a file per input named after it (sub-directories kept), none for a skipped
    page, which the summary names; an archive gives one file of all its pages."""
    from example_project.news_site import STORIES, article_page
    from scrapy_grownup.warc.synthetic import write_warc

    archive = write_warc(tmp_path_factory.mktemp("warcs") / "crawl.warc.gz", [
        (f"http://news.example/story-{k}.html", article_page(k)[0].encode(), "text/html")
        for k in range(3)], noise=True)
    out = tmp_path_factory.mktemp("out")
    argv = ["extract", str(pages), str(pages / "report.pdf"), str(archive), "--model", "fast"]
    assert main(argv + ["--format", "text", "-o", f"{out}/"]) == 0
    summary = _summary(capsys.readouterr().err)
    assert summary["extracted"] == 5 and summary["archives"] == 1
    assert summary["skipped_pages"] == {str(pages / "report.pdf"): "not_html"}  # no records
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert files == ["a.txt", "crawl.txt", "sub", "sub/b.txt"]
    text = (out / "a.txt").read_text(encoding="utf-8")
    assert SENTENCE in text and "==>" not in text  # one page
    crawl = (out / "crawl.txt").read_text(encoding="utf-8")
    assert crawl.count("==> ") == 3 and crawl.startswith(f"==> {archive} [urn:uuid:")
    assert all(STORIES[k][1][0] in crawl for k in range(3))
    # json: a JSON object per page file, the archive's pages as JSON lines
    assert main(argv + ["-o", str(out)]) == 0  # an existing directory
    capsys.readouterr()
    assert json.loads((out / "a.json").read_text(encoding="utf-8"))["title"] == TITLE
    lines = (out / "crawl.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["warc"]["target_uri"] for line in lines] == \
        [f"http://news.example/story-{k}.html" for k in range(3)]
    # a name taken twice, and standard input
    (pages / "a.htm").write_bytes(PAGE)
    assert main(["extract", str(pages / "a.html"), str(pages / "a.htm"), "--format",
                 "markdown", "--model", "fast", "-o", str(out / "md") + "/"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (out / "md").iterdir()) == ["a-2.md", "a.md"]


def test_output_directory_resumes(pages, tmp_path, monkeypatch, capsys):
    """A stopped -o DIR run goes on from the first input it had not finished; its progress
    file lives in DIR and goes when the run ends."""
    import scrapy_grownup.cli.main as cli

    for k in range(3):
        (pages / f"p{k}.html").write_bytes(PAGE)
    out = tmp_path / "out"
    argv = ["extract", str(pages), "--model", "fast", "--format", "text", "--batch-pages", "1",
            "--jobs", "1", "-o", f"{out}/"]
    real, calls = cli.chunk_results, []

    def stopping(*args, **kwargs):  # Ctrl-C on the third batch
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "chunk_results", stopping)
    assert main(argv) == 130
    monkeypatch.setattr(cli, "chunk_results", real)
    progress = out / cli.DIRECTORY_PROGRESS
    assert json.loads(progress.read_text())["done"] == 2
    assert sorted(p.name for p in out.glob("*.txt")) == ["a.txt", "p0.txt"]
    capsys.readouterr()
    assert main(argv) == 0
    summary = _summary(capsys.readouterr().err)
    assert summary["resumed_after"] == 2 and summary["extracted"] == 5
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.txt")) == \
        ["a.txt", "p0.txt", "p1.txt", "p2.txt", "sub/b.txt"]
    assert not progress.exists()


def test_user_errors_of_the_corpus_and_training_commands_are_one_line(tmp_path, capsys):
    """``grownup warc`` and the training commands report a user's error like ``extract``
    does: one line naming the command, exit status 2, no traceback; ``python -m`` entry
    points (``training.command.standalone``) too."""
    from scrapy_grownup.training import rescorer

    archive = tmp_path / "pages.warc.gz"
    archive.write_bytes(b"")
    assert main(["warc", str(archive), "--output", str(tmp_path / "out"), "-s", "NOEQUALS"]) == 2
    assert capsys.readouterr().err.strip() == \
        "grownup warc: error: -s expects NAME=VALUE, not 'NOEQUALS'"
    missing = tmp_path / "no-folds"
    assert rescorer.main(["--cv-dir", str(missing)]) == 2
    assert capsys.readouterr().err.strip() == \
        f"grownup lab fit-rescorer: error: --cv-dir {missing}: no such directory"


def test_jobs_auto_asks_for_a_gpu_without_importing_torch(tmp_path):
    """``--jobs auto`` hands pages to child processes; where no GPU driver is installed the
    main process decides that without importing torch, and agrees with torch's answer."""
    code = (
        "import json, os, sys\n"
        "from scrapy_grownup.cli.main import _extract_jobs, build_parser\n"
        "from scrapy_grownup.model.cuda import cuda_available, gpu_driver_present\n"
        "args = build_parser().parse_args(['extract', 'pages', '--jobs', 'auto'])\n"
        "jobs = _extract_jobs(args, 10 * args.batch_pages)\n"
        "said = {'jobs': jobs, 'cpus': os.cpu_count(), 'driver': gpu_driver_present(),\n"
        "        'cuda': cuda_available(), 'torch': 'torch' in sys.modules}\n"
        "import torch\n"
        "said['torch_says'] = torch.cuda.is_available()\n"
        "said['asked_after_import'] = cuda_available()\n"
        "print(json.dumps(said))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["cuda"] == said["torch_says"] == said["asked_after_import"]
    if not said["driver"]:
        assert not said["torch"]
        assert said["jobs"] == said["cpus"]
    else:  # a GPU machine: one process where torch sees the GPU
        assert said["jobs"] == (1 if said["torch_says"] else said["cpus"])


def test_a_gpu_driver_is_found_by_its_device_node_or_tool(tmp_path, monkeypatch):
    from scrapy_grownup.model import cuda

    monkeypatch.setattr(cuda.sys, "platform", "linux")
    monkeypatch.setattr(cuda, "DRIVER_PATHS", (str(tmp_path / "nvidia0"),))
    monkeypatch.setattr(cuda.shutil, "which", lambda name: None)
    assert not cuda.gpu_driver_present()
    (tmp_path / "nvidia0").write_text("")
    assert cuda.gpu_driver_present()
    (tmp_path / "nvidia0").unlink()
    monkeypatch.setattr(cuda.shutil, "which",
                        lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    assert cuda.gpu_driver_present()
    monkeypatch.setattr(cuda.sys, "platform", "darwin")
    assert not cuda.gpu_driver_present()  # no CUDA on macOS
    monkeypatch.setattr(cuda.sys, "platform", "win32")
    assert cuda.gpu_driver_present()  # not checked there: torch is asked


def test_jobs_split_the_pages_into_several_batches_per_process():
    """With several ``--jobs`` processes a batch holds fewer pages than ``--batch-pages``, so
    each process gets several and none finishes alone on the last big one; one process keeps
    ``--batch-pages``, and a batch never drops below a floor nor rises above it."""
    from scrapy_grownup.cli.main import BATCHES_PER_JOB, MIN_JOB_BATCH, _batch_pages

    assert _batch_pages(64, 300, 1) == 64
    per = _batch_pages(64, 300, 2)
    assert per < 64 and -(-300 // per) >= BATCHES_PER_JOB * 2
    assert _batch_pages(64, 10, 4) == MIN_JOB_BATCH
    assert _batch_pages(64, 1_000_000, 16) == 64
    assert _batch_pages(5, 300, 2) == 5  # never above --batch-pages
