"""Torch intra-op threads: one by default for model calls, configurable, and restored after."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from scrapy_grownup.model.threads import check_threads, torch_threads

PAGE = (Path(__file__).parents[1] / "golden" / "news_jsonld.html").read_bytes()
SENTENCE = "The council voted 7-2 on Tuesday"


@pytest.fixture
def torch_at_three():
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(before)


def test_check_threads():
    assert check_threads(None) is None and check_threads(1) == 1 and check_threads(8) == 8
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="threads"):
            check_threads(bad)


def test_torch_threads_sets_for_the_block_and_restores(torch_at_three):
    with torch_threads(1):
        assert torch.get_num_threads() == 1
        with torch_threads(2):  # nested: the inner count, then back to torch's own at the end
            assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == torch_at_three
    with torch_threads(None):
        assert torch.get_num_threads() == torch_at_three
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            raise RuntimeError("the count is restored on errors too")
    assert torch.get_num_threads() == torch_at_three


def test_another_threads_calls_leave_this_threads_count_alone(torch_at_three):
    seen = []

    def worker():
        torch.get_num_threads()  # a thread that already ran torch keeps its own count
        with torch_threads(1):
            seen.append(torch.get_num_threads())
        seen.append(torch.get_num_threads())

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert seen == [1, torch_at_three]
    assert torch.get_num_threads() == torch_at_three


@pytest.fixture(scope="module")
def fast():
    from scrapy_grownup import ArticleExtractor

    return ArticleExtractor.from_pretrained("fast", device="cpu", runtime="torch")


def _threads_seen_by_the_model(extractor) -> list[int]:
    seen: list[int] = []
    handle = extractor.model.register_forward_pre_hook(
        lambda module, inputs: seen.append(torch.get_num_threads()))
    try:
        article = extractor.extract(PAGE, url="https://riverside.example.com/x")
    finally:
        handle.remove()
    assert SENTENCE in article.text
    return seen


def test_extractor_runs_the_model_on_one_thread_by_default(fast, torch_at_three):
    assert fast.threads == 1
    assert _threads_seen_by_the_model(fast) == [1]
    assert torch.get_num_threads() == torch_at_three  # the user's setting is back


def test_extractor_threads_option(fast, torch_at_three):
    from scrapy_grownup import ArticleExtractor

    two = ArticleExtractor(fast.model, fast.featurizer, name="fast", device="cpu", threads=2)
    assert _threads_seen_by_the_model(two) == [2]
    untouched = ArticleExtractor(fast.model, fast.featurizer, device="cpu", threads=None)
    assert _threads_seen_by_the_model(untouched) == [torch_at_three]
    assert torch.get_num_threads() == torch_at_three
    with pytest.raises(ValueError, match="threads"):
        ArticleExtractor.from_pretrained("fast", device="cpu", threads=0)
    assert ArticleExtractor.from_pretrained("fast", device="cpu", threads=4).threads == 4


@pytest.fixture
def loads(monkeypatch):
    """Record the ``threads`` every ``ArticleExtractor.from_pretrained`` call gets."""
    from scrapy_grownup.extractor import ArticleExtractor

    calls: list = []
    original = ArticleExtractor.from_pretrained.__func__

    def recording(cls, *args, **kwargs):
        calls.append(kwargs.get("threads", "default"))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(ArticleExtractor, "from_pretrained", classmethod(recording))
    return calls


def test_cli_extract_and_inspect_take_threads(tmp_path, loads):
    from scrapy_grownup.cli.main import main

    page = tmp_path / "owls.html"
    page.write_bytes(PAGE)
    out = tmp_path / "out.jsonl"
    assert main(["extract", str(page), "-o", str(out), "--model", "fast"]) == 0
    assert main(["extract", str(page), "-o", str(out), "--model", "fast",
                 "--threads", "2"]) == 0
    assert SENTENCE in json.loads(out.read_text().splitlines()[0])["text"]
    assert main(["inspect", str(page), "-o", str(tmp_path / "r.html"), "--model", "fast",
                 "--threads", "3"]) == 0
    assert loads == [1, 2, 3]


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_cli_rejects_bad_thread_counts(bad, capsys):
    from scrapy_grownup.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["extract", "page.html", "--threads", bad])
    assert exit_info.value.code == 2
    assert "--threads" in capsys.readouterr().err


def test_model_process_uses_grownup_model_threads(loads):
    from scrapy_grownup.crawl import model_process
    from scrapy_grownup.page.limits import PageLimits

    model_process.load_extractor("fast", "cpu", PageLimits(), 4000, 2)
    try:
        assert model_process.loaded_extractor().threads == 2
    finally:
        model_process._state.clear()
    assert loads == [2]


def test_the_numpy_runtime_runs_blas_on_one_thread_by_default():
    """The numpy runtime's matmuls run on the extractor's ``threads`` BLAS threads, and the
    process's own BLAS setting is back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from scrapy_grownup import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained("fast", device="cpu", runtime="numpy")
    assert extractor.threads == 1
    seen: list = []
    predict = extractor.model.predict

    def recording(arrays, **options):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return predict(arrays, **options)

    extractor.model.predict = recording
    with threadpool_limits(limits=3, user_api="blas"):
        article = extractor.extract(PAGE, url="https://riverside.example.com/x")
        after = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    assert SENTENCE in article.text
    assert seen == [{1}] and after == {3}
