"""The cross-site protocol (``training/crosssite.py``): plans without leaks, site-cv end to end,
baselines, per-page scores."""

import numpy as np
import pytest

from scrapy_grownup.data import datasets as D
from tests.data_support import available
from tests.data_support import skip_missing_data


def record(dataset, id_, url=None, **extra):
    return D.PageRecord(dataset, id_, b"", "", url, "all", extra)


def test_cross_site_plans_hold_no_test_site_in_training():
    from scrapy_grownup.training import crosssite as C

    evals = [record("wcxb_dev", str(i), f"https://s{i % 23}.com/{i}", page_type="article")
             for i in range(120)]
    evals += [record("fundus", f"f{i}", f"https://s{i % 4}.com/f{i}", publisher=f"P{i % 6}")
              for i in range(30)]
    extra = [record("dragnet", f"d{i}", f"https://s{i % 50}.com/d") for i in range(60)]
    everything = evals + extra
    plans = C.site_cv_plan(evals, extra, 4)
    assert [p.name for p in plans] == ["fold0", "fold1", "fold2", "fold3"]
    assert sum(len(p.test) for p in plans) == len(evals)
    for plan in plans:
        C.check_disjoint(plan, everything)  # raises on a leak
        assert not {C.record_key(r) for r in plan.test} & plan.train_keys
    held = C.leave_out_plan(evals, extra, ("fundus",))
    C.check_disjoint(held, everything)
    assert {r.dataset for r in held.test} == {"fundus"}
    # pages of wcxb on the same domains as fundus pages are not trained on either
    assert "wcxb_dev/0" not in held.train_keys  # s0.com hosts fundus pages too? (0 % 4 == 0)
    leak = C.FoldPlan("leak", [evals[0]], {C.record_key(evals[23])})  # same site s0.com
    with pytest.raises(AssertionError):
        C.check_disjoint(leak, everything)


def test_wcxb_gold_wins_over_pagetype_for_the_same_url():
    if not (available("wcxb_dev") and available("pagetype")):
        skip_missing_data("wcxb_dev or pagetype")
    from scrapy_grownup.training.crosssite import load_records

    recs = load_records(["wcxb_dev", "pagetype"])
    wcxb = {r.url for r in recs if r.dataset == "wcxb_dev"}
    assert not [r for r in recs if r.dataset == "pagetype" and r.url in wcxb]
    assert any(r.dataset == "pagetype" for r in recs)


# ------------------------------------------------------------------------------------------
# The cross-site protocol end to end (small: 2 folds over 40 forum pages, 1 epoch)


@pytest.mark.slow
def test_site_cv_protocol_end_to_end(tmp_path, capsys, monkeypatch):
    if not available("magic_html_forum"):
        skip_missing_data("dataset magic_html_forum")
    from scrapy_grownup.cli.main import main

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))

    out = tmp_path / "cv"
    argv = ["lab", "evaluate", "--protocol", "site-cv", "--eval-datasets", "magic_html_forum",
            "--train-datasets", "", "--folds", "2", "--epochs", "1", "--limit", "40",
            "--average-last", "1", "--jobs", "2", "--out", str(out),
            "--json", str(tmp_path / "rows.jsonl")]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "all:all" in table and "trafilatura" in table and "grownup" in table
    import json

    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    overall = {r["method"]: r for r in rows if r["slice"] == "all"}
    assert {"grownup", "grownup -blocks", "grownup -adaptive", "grownup -container",
            "grownup -repeats", "grownup +drop-hidden", "perfect filter"} <= set(overall)
    assert all(r["pages"] == 40 for r in overall.values())
    assert overall["perfect filter"]["bow_f1"] > 0.8
    for fold in ("fold0", "fold1"):
        assert (out / "site-cv" / fold / "model" / "config.json").is_file()
    saved = json.loads((out / "site-cv" / "fold0" / "model" / "config.json").read_text())
    assert saved["metadata"]["train"]["average_last"] == 1  # the averaged weights were saved
    assert saved["metadata"]["train_pages"] > 0  # trained by a --jobs process, then loaded
    # a re-run resumes from the saved per-page scores: nothing is trained again
    mtime = (out / "site-cv" / "fold0" / "model" / "model.safetensors").stat().st_mtime
    scores = out / "site-cv" / "scores.jsonl"
    before = scores.read_text().splitlines()
    assert main(argv) == 0
    assert (out / "site-cv" / "fold0" / "model" / "model.safetensors").stat().st_mtime == mtime
    assert scores.read_text().splitlines() == before  # nothing scored twice
    # a method whose rows are deleted is scored again, and only it
    kept = [line for line in before if json.loads(line)["method"] != "grownup -repeats"]
    scores.write_text("\n".join(kept) + "\n")
    assert main(argv) == 0
    after = scores.read_text().splitlines()
    assert after[:len(kept)] == kept
    assert sorted(after[len(kept):]) == sorted(set(before) - set(kept))
    # --no-baselines: a baseline's missing rows stay missing, and its column leaves the table
    kept = [line for line in after if json.loads(line)["method"] != "trafilatura"]
    scores.write_text("\n".join(kept) + "\n")
    capsys.readouterr()
    assert main(argv + ["--no-baselines"]) == 0
    assert scores.read_text().splitlines() == kept
    assert "trafilatura" not in capsys.readouterr().out


@pytest.mark.slow
def test_plans_trained_in_parallel_match_plans_trained_one_by_one(tmp_path, monkeypatch, capsys):
    """``grownup lab evaluate --jobs N``: each process trains exactly the model the serial run
    trains (same pages, seed and recipe), and saved models are not trained again."""
    if not available("magic_html_forum"):
        skip_missing_data("dataset magic_html_forum")
    from safetensors.numpy import load_file

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    records = crosssite.load_records(["magic_html_forum"], limit=24)
    plans = crosssite.site_cv_plan(records, [], 2)
    cfg = {"preset": "small", "epochs": 1, "lr": 2e-3, "threads": 1, "device": "cpu",
           "overrides": {"num_layers": 2, "num_transformer_layers": 0, "readout": "mean"}}
    out = tmp_path / "parallel"
    assert crosssite.train_in_parallel(plans, records, "static", cfg, out, jobs=2) \
        == ["fold0", "fold1"]
    # nothing but the models: the processes read the datasets' cached stores, no extra copy
    assert sorted(p.name for p in out.iterdir()) == ["fold0", "fold1"]
    encoder = corpus_encoder("static")
    store, keys = crosssite.training_store(records, encoder)
    parallel, same = {}, 0.0
    for plan in plans:
        serial = tmp_path / "serial" / plan.name / "model"
        crosssite.train_plan_model(store, keys, plan, encoder, cfg, serial)
        a = parallel[plan.name] = load_file(str(out / plan.name / "model" / "model.safetensors"))
        b = load_file(str(serial / "model.safetensors"))
        assert a.keys() == b.keys()
        same = max(same, *(float(np.abs(a[n] - b[n]).max()) for n in a))
    # the same weights up to float summation order (the processes' thread counts differ),
    # far closer than the two folds' models, trained from the same seed on other pages
    other = max(float(np.abs(parallel["fold0"][n] - parallel["fold1"][n]).max())
                for n in parallel["fold0"])
    assert same < 1e-4 and other > 50 * same
    assert crosssite.train_in_parallel(plans, records, "static", cfg, out, jobs=2) == []
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--jobs 0: at least 1")


def test_baseline_texts_are_cached_per_page_and_version(tmp_path, monkeypatch):
    """fit-rescorer re-runs read the baselines' texts back instead of extracting them again;
    a page whose HTML changed is extracted anew."""
    pytest.importorskip("trafilatura")
    from pathlib import Path

    from scrapy_grownup.training import crosssite as C

    golden = Path(__file__).parents[1] / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("article_*.html"))]
    assert len(records) >= 2
    first = C.baseline_texts("trafilatura", records, cache=tmp_path)
    assert first == [C.baseline_text("trafilatura", r) for r in records]
    assert any(first) and len(list(tmp_path.glob("baseline-trafilatura-*.json"))) == 1

    calls = []

    def counted(method, record):
        calls.append(record.id)
        return f"new text of {record.id}"

    monkeypatch.setattr(C, "baseline_text", counted)
    assert C.baseline_texts("trafilatura", records, cache=tmp_path) == first
    assert calls == []
    changed = D.PageRecord("golden", records[0].id, records[0].html + b"<p>more</p>", None,
                           None, "all")
    again = C.baseline_texts("trafilatura", [changed, *records[1:]], cache=tmp_path)
    assert calls == [records[0].id] and again == [f"new text of {records[0].id}", *first[1:]]


def test_per_page_scores_round_trip(tmp_path):
    """``grownup lab fit-rescorer --scores`` writes the rows ``grownup lab evaluate`` resumes from."""
    from scrapy_grownup.training import crosssite as C

    gold = "The council approved the new budget on Tuesday after a long debate."
    page = record("fundus", "a1", "https://news.example.de/a1", language="de-DE")
    page.gold = gold
    scores = [C.score_page(page, "grownup", gold), C.score_page(page, "trafilatura", gold[:30])]
    path = tmp_path / "scores.jsonl"
    C.write_scores(path, "without-fundus", scores[:1])
    C.write_scores(path, "without-fundus", scores[1:])
    back = C.read_scores(path)
    assert list(back) == ["without-fundus"]
    assert back["without-fundus"]["grownup"] == scores[:1]
    assert back["without-fundus"]["trafilatura"] == scores[1:]
    assert back["without-fundus"]["grownup"][0].bow[2] == pytest.approx(1.0)
    assert back["without-fundus"]["trafilatura"][0].language == "de"


def test_evaluation_scores_the_text_the_extractor_returns():
    """``grownup lab evaluate`` and ``fit-rescorer`` score the extractor's own article text: the
    rescorer's stored decisions (its cut-off rule too) and the completed tables and code."""
    from pathlib import Path

    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.training import crosssite as C

    golden = Path(__file__).parents[1] / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("*.html"))]
    extractor = ArticleExtractor.from_pretrained("fast")
    assert extractor.rescorer.cut_weight == "block-chars"
    texts = C.model_texts(extractor, records, C.DEFAULT_VARIANTS[:1])["grownup"]
    assert len(texts) == len(records) >= 5 and all(texts)
    assert texts == [extractor.extract(r.html).text for r in records]
