"""The numpy runtime serves ``fast`` on a CPU: the torch model's outputs, without torch.

``NumpyModel`` against ``GrownUpModel`` on real pages (node scores, role and page-type
probabilities, the page-type head's pooled inputs), the articles both give, the runtime the
extractor picks, and a process that serves ``fast`` without importing torch or torch_geometric.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scrapy_grownup import ArticleExtractor
from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.extractor import node_probabilities, resolve_model_dir
from scrapy_grownup.graph.batching import node_budget_batches
from scrapy_grownup.model.numpy_model import NumpyModel, supports
from scrapy_grownup.page.dom import parse_page

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def real_pages() -> list:
    """Real pages: the golden pages, and up to 300 pages of two datasets where available."""
    pages = [parse_page(p.read_bytes(), url=f"https://example.com/{p.stem}")
             for p in sorted(GOLDEN.glob("*.html"))]
    try:
        from scrapy_grownup.data import datasets

        for name, split in (("dragnet", "test"), ("wcxb_dev", None)):
            for record in list(datasets.iter_records(name, split))[:150]:
                pages.append(parse_page(record.html, url=record.url))
    except Exception:  # noqa: BLE001 - datasets absent: the golden pages alone
        pass
    return pages


@pytest.fixture(scope="module", params=["onnxruntime", "numpy"])
def models(request):
    """The torch extractor, and the numpy runtime with each backbone: the shipped ONNX graph
    on ONNX Runtime, and numpy's own."""
    directory = resolve_model_dir("fast")
    torch_extractor = ArticleExtractor.from_pretrained("fast", runtime="torch")
    model = NumpyModel.from_pretrained(directory, onnx=request.param == "onnxruntime")
    assert model.backend == request.param
    return torch_extractor, model


@pytest.fixture(scope="module")
def pages():
    return real_pages()


def test_numpy_outputs_equal_the_torch_models_on_real_pages(models, pages):
    torch_extractor, numpy_model = models
    featurizer = torch_extractor.featurizer
    assert len(pages) >= 10
    worst = dict.fromkeys(("content", "roles", "page_type", "page_type_inputs"), 0.0)
    for ids in node_budget_batches([p.num_nodes for p in pages], 4096):
        chunk = [pages[i] for i in ids]
        expected = node_probabilities(torch_extractor.model, [p.num_nodes for p in chunk],
                                      lambda rows: featurizer.batch([chunk[r] for r in rows]),
                                      10 ** 9, "cpu", heads=True)
        arrays = featurizer.batch_arrays(chunk)
        arrays["x_signals"] = np.stack([page.signals for page in chunk])
        for want, got in zip(expected, numpy_model.predict(arrays)):
            for key in worst:
                assert (want[key] is None) == (got[key] is None), key
                if want[key] is not None:
                    assert got[key].shape == want[key].shape, key
                    worst[key] = max(worst[key], float(np.abs(got[key] - want[key]).max()))
    assert max(worst.values()) < 1e-4, worst


def test_both_runtimes_give_the_same_articles(pages):
    by_torch = ArticleExtractor.from_pretrained("fast", runtime="torch")
    by_numpy = ArticleExtractor.from_pretrained("fast", runtime="numpy")
    assert type(by_numpy.model).__name__ == "NumpyModel"
    for page in pages[:60]:
        a, b = by_torch.articles([page])[0], by_numpy.articles([page])[0]
        assert (a.text, a.markdown, a.page_type, a.title) == (b.text, b.markdown, b.page_type,
                                                              b.title)


def test_auto_picks_numpy_on_a_cpu_and_refuses_what_numpy_cannot_run():
    assert ArticleExtractor.from_pretrained("fast").model.runtime == "numpy"
    with pytest.raises(ValueError, match="runtime must be one of"):
        ArticleExtractor.from_pretrained("fast", runtime="onnx")
    from scrapy_grownup.model.files import read_model_config

    config, _ = read_model_config(resolve_model_dir("minilm"))
    if not supports(config):
        with pytest.raises(ModelLoadError, match="runtime 'numpy' does not run this model"):
            ArticleExtractor.from_pretrained("minilm", runtime="numpy")


def test_a_graph_of_other_weights_or_no_onnxruntime_means_the_numpy_backbone(tmp_path, caplog,
                                                                           monkeypatch):
    import shutil

    directory = tmp_path / "model"
    shutil.copytree(resolve_model_dir("fast"), directory)
    assert NumpyModel.from_pretrained(directory).backend == "onnxruntime"
    doc = json.loads((directory / "config.json").read_text())
    doc["weights_sha256"] = "0" * 64  # as if retrained after the graph was exported
    (directory / "config.json").write_text(json.dumps(doc))
    with caplog.at_level("WARNING"):
        assert NumpyModel.from_pretrained(directory, verify_checksum=False).backend == "numpy"
    assert "exported from other weights" in caplog.text
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # not installed
    assert NumpyModel.from_pretrained(resolve_model_dir("fast")).backend == "numpy"


def test_the_exported_graph_is_the_shipped_one(tmp_path):
    """``export_onnx`` on the shipped weights gives a graph that scores as the shipped one."""
    import shutil

    pytest.importorskip("onnxscript")
    from scrapy_grownup.model.onnx_export import export_onnx

    directory = tmp_path / "model"
    shutil.copytree(resolve_model_dir("fast"), directory)
    (directory / "backbone.onnx").unlink()
    assert NumpyModel.from_pretrained(directory).backend == "numpy"
    export_onnx(directory)
    fresh, shipped = (NumpyModel.from_pretrained(d) for d in (directory,
                                                               resolve_model_dir("fast")))
    assert fresh.backend == shipped.backend == "onnxruntime"
    extractor = ArticleExtractor.from_pretrained("fast")
    pages = [parse_page(p.read_bytes()) for p in sorted(GOLDEN.glob("*.html"))[:8]]
    arrays = extractor.featurizer.batch_arrays(pages)
    arrays["x_signals"] = np.stack([page.signals for page in pages])
    for a, b in zip(fresh.predict(arrays), shipped.predict(arrays)):
        assert np.abs(a["content"] - b["content"]).max() < 1e-5


def test_a_corrupt_weights_file_is_a_model_load_error(tmp_path):
    import shutil

    directory = tmp_path / "model"
    shutil.copytree(resolve_model_dir("fast"), directory)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match="checksum mismatch"):
        NumpyModel.from_pretrained(directory)
    with pytest.raises(ModelLoadError, match="unreadable safetensors"):
        NumpyModel.from_pretrained(directory, verify_checksum=False)


def test_serving_fast_imports_neither_torch_nor_torch_geometric():
    script = (
        "import json, sys\n"
        "from scrapy_grownup import ArticleExtractor\n"
        "ex = ArticleExtractor.from_pretrained('fast')\n"
        f"article = ex.extract(open({str(GOLDEN / 'news_jsonld.html')!r}, 'rb').read())\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "               ('torch', 'torch_geometric', 'transformers', 'sentence_transformers'))\n"
        "print(json.dumps({'heavy': heavy, 'text': len(article.text),\n"
        "                  'markdown': len(article.markdown)}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["heavy"] == [] and found["text"] > 200 and found["markdown"] > 200
