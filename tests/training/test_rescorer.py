"""``grownup lab fit-rescorer`` (``training/rescorer.py``): folds scored from kept vectors, held-out
sets, nested folds."""

import numpy as np
import pytest

from scrapy_grownup.data import datasets as D


@pytest.mark.minilm
def test_fit_rescorer_scores_minilm_folds_from_the_training_vectors(tmp_path, monkeypatch):
    """A MiniLM fold model's pages are scored from the vectors kept on disk while the folds
    trained (``corpus_encoder``), not embedded again: the strings land in that cache, and the
    scores equal those of the encoder run live."""
    from pathlib import Path

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.extractor import MODELS_DIR, ArticleExtractor
    from scrapy_grownup.training.crosssite import FoldPlan
    from scrapy_grownup.training.rescorer import scored_pages

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "home"))
    golden = Path(__file__).parents[1] / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("article_*.html"))[:2]]
    encoder = get_encoder("minilm", device=None)
    monkeypatch.setattr(encoder, "disk_cache", None)  # the shared encoder: restored after
    encoder.clear_cache()  # nothing from earlier tests in memory: every string goes to disk
    pages = scored_pages(FoldPlan("fold9", records, set()), MODELS_DIR / "minilm",
                         tmp_path / "scores", 0.4, None)
    chunks = list((tmp_path / "home" / "embeddings").glob("minilm-*/*"))
    assert chunks, "the fold's strings were not kept on disk"
    live = ArticleExtractor.from_pretrained("minilm")
    live.featurizer.encoder.disk_cache = None
    live.featurizer.encoder.clear_cache()
    for page, want in zip(pages, live.score([p.page for p in pages])):
        np.testing.assert_allclose(page.probs, want, atol=1e-5)


def test_fit_rescorer_skip_cv_needs_a_held_out_set(tmp_path, capsys):
    from scrapy_grownup.cli.main import main

    assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--skip-cv"]) == 2
    assert capsys.readouterr().err.strip() == "grownup lab fit-rescorer: error: --skip-cv needs --hold"
    # a misspelt --cv-dir: one line before any page is loaded, no traceback
    assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.strip() == \
        f"grownup lab fit-rescorer: error: --cv-dir {tmp_path / 'none'}: no such directory"
    assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--also-cv-dir",
                 str(tmp_path / "seed1")]) == 2
    assert capsys.readouterr().err.strip() == \
        f"grownup lab fit-rescorer: error: --also-cv-dir {tmp_path / 'seed1'}: no such directory"


def _stubbed_rescorer_run(tmp_path, monkeypatch, argv):
    """``rescorer.run_rescorer(argv)`` with the fold models under ``tmp_path`` stubbed: each
    fold's "pages" are the fold model's directory (``seed0/fold1``), ``fit`` records the pages
    it learns from and ``measure`` the pages and trees it scores. Returns ``(result, fitted,
    measured)``."""
    import argparse
    from pathlib import Path

    from scrapy_grownup.training import rescorer as R
    from scrapy_grownup.training.crosssite import FoldPlan

    fitted, measured = [], []
    monkeypatch.setattr(R, "load_records", lambda names: [])
    monkeypatch.setattr(R, "site_cv_plan", lambda ev, ex, k, only: [
        FoldPlan(f"fold{f}", [], set()) for f in range(k) if only is None or f in only])
    monkeypatch.setattr(R, "scored_pages", lambda plan, model_dir, *a, **kw: [
        Path(model_dir).parent.relative_to(tmp_path).as_posix()])
    monkeypatch.setattr(R, "fit", lambda pages, args, keys=None: fitted.append(sorted(pages))
                        or f"trees{len(fitted)}")
    monkeypatch.setattr(R, "measure", lambda pages, trees, args: measured.append(
        (pages, trees)) or [])
    monkeypatch.setattr(R, "summary", lambda scores: {})
    parser = argparse.ArgumentParser()
    R.add_arguments(parser)
    result = R.run_rescorer(parser.parse_args([*argv, "--cache", str(tmp_path / "c")]))
    return result, fitted, measured


def test_fit_rescorer_also_learns_from_other_trainings_out_of_fold_scores(tmp_path, monkeypatch):
    """``--also-cv-dir``: the trees of each fold learn from every training's scores of the
    other folds' pages, and the saved trees from all of them; what is measured is always the
    ``--cv-dir`` model's own scores of the fold's pages."""
    for run in ("seed0", "seed1"):
        for fold in ("fold0", "fold1"):
            (tmp_path / run / fold / "model").mkdir(parents=True)
            (tmp_path / run / fold / "model" / "config.json").write_text("{}")
    _, fitted, measured = _stubbed_rescorer_run(
        tmp_path, monkeypatch, ["--cv-dir", str(tmp_path / "seed0"), "--also-cv-dir",
                                str(tmp_path / "seed1"), "--folds", "2"])
    assert fitted == [["seed0/fold1", "seed1/fold1"], ["seed0/fold0", "seed1/fold0"]]
    assert measured == [(["seed0/fold0"], "trees1"), (["seed0/fold1"], "trees2")]


def test_fit_rescorer_only_folds_nests_over_the_folds_it_names(tmp_path, monkeypatch, capsys):
    """``--only-folds 0,2``: the folds ``grownup lab evaluate --only-folds`` trained, each rescored
    by trees fitted on the other named folds' pages; the folds not named need no model. A
    fold list that is not one is a one-line error before any page is loaded."""
    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training.command import fold_list

    assert fold_list(None, 5) is None and fold_list("2,0,2", 5) == [0, 2]
    for fold in ("fold0", "fold2"):  # fold1 was never trained
        (tmp_path / fold / "model").mkdir(parents=True)
        (tmp_path / fold / "model" / "config.json").write_text("{}")
    result, fitted, measured = _stubbed_rescorer_run(
        tmp_path, monkeypatch, ["--cv-dir", str(tmp_path), "--only-folds", "0,2"])
    assert fitted == [["fold2"], ["fold0"]]
    assert measured == [(["fold0"], "trees1"), (["fold2"], "trees2")]
    assert result["settings"]["only_folds"] == "0,2"
    for folds, message in (("1", "--only-folds 1: at least two folds"),
                           ("0,7", "--only-folds 0,7: fold numbers from 0 to 4"),
                           ("0,b", "--only-folds 0,b: comma-separated fold numbers, as 0,2")):
        assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--only-folds", folds]) == 2
        assert capsys.readouterr().err.strip().startswith(f"grownup lab fit-rescorer: error: {message}")
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--only-folds", "5"]) == 2
    assert "--only-folds 5: fold numbers from 0 to 4" in capsys.readouterr().err
    assert main(["lab", "page-type-cv", "--only-folds", "10"]) == 2  # its 10 folds: 0 to 9
    assert "--only-folds 10: fold numbers from 0 to 9" in capsys.readouterr().err
