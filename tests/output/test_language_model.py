"""py3langid's model loaded from the cached, memory-mapped copy detects as py3langid does."""

import os

import numpy as np
import pytest

from scrapy_grownup.output import language_model

TEXTS = [
    "The council voted on Tuesday to extend the city's cycling lanes across the river.",
    "Der Stadtrat hat am Dienstag beschlossen, die Radwege über den Fluss zu verlängern.",
    "Le conseil municipal a voté mardi la prolongation des pistes cyclables.",
    "市议会周二投票决定延长跨河自行车道。",
    "1234 5678 !!!",
    "",
]


@pytest.fixture()
def reference():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def test_cached_copy_detects_as_py3langid(tmp_path, monkeypatch, reference):
    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path))
    first = language_model.load_identifier()  # writes the copy
    folders = list((tmp_path / "py3langid").iterdir())
    assert len(folders) == 1 and folders[0].is_dir()
    assert sorted(p.name for p in folders[0].iterdir()) == sorted(
        f"{name}.npy" for name in language_model.ARRAYS)
    second = language_model.load_identifier()  # reads it, the big tables mapped
    assert isinstance(second.nb_ptc, np.memmap)
    for identifier in (first, second):
        for text in TEXTS:
            assert identifier.rank(text) == reference.rank(text)


def test_unwritable_cache_falls_back_to_py3langid(tmp_path, monkeypatch, reference):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(blocked))
    identifier = language_model.load_identifier()
    assert not isinstance(identifier.nb_ptc, np.memmap)
    assert identifier.rank(TEXTS[1]) == reference.rank(TEXTS[1])


def test_partial_copy_is_rewritten(tmp_path, monkeypatch, reference):
    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path))
    language_model.load_identifier()
    folder = next((tmp_path / "py3langid").iterdir())
    os.unlink(folder / "ptc.npy")  # an interrupted or damaged copy
    identifier = language_model.load_identifier()
    assert isinstance(identifier.nb_ptc, np.memmap)
    assert (folder / "ptc.npy").is_file()
    assert identifier.rank(TEXTS[0]) == reference.rank(TEXTS[0])


def _page_samples(count: int) -> list[str]:
    """The language samples ``metadata.language`` gives py3langid, from real pages of several
    languages (Dragnet English, fundus German and others, wcxb_dev's many)."""
    from scrapy_grownup.data.datasets import DatasetNotAvailable, load
    from scrapy_grownup.output.metadata import _text_sample
    from scrapy_grownup.page.dom import parse_page
    from tests.data_support import skip_missing_data

    samples = []
    for name, split in (("dragnet", "test"), ("fundus", None), ("wcxb_dev", None)):
        try:
            records = list(load(name, split=split, limit=count))
        except DatasetNotAvailable:
            skip_missing_data(f"{name} pages")
        samples += [_text_sample(parse_page(r.html, url=r.url)) for r in records]
    return samples


def test_numpy_scores_are_py3langids_own_on_real_pages(reference):
    """``Identifier`` counts the automaton's features in numpy: every score, not only the
    answer, must be py3langid's, on real texts, bytes, after ``set_languages``, and where the
    walk does not settle (then py3langid's own loop runs)."""
    identifier = language_model.load_identifier()
    assert isinstance(identifier, language_model.Identifier)
    texts = _page_samples(40) + TEXTS + ["a", "ab", "\x00\xff", "é" * 300]
    for text in texts:
        assert np.array_equal(identifier._raw_score(text.encode()),
                              reference._raw_score(text.encode())), text[:60]
        assert identifier.rank(text) == reference.rank(text)
    for langs in (["en", "de", "fr"], ["zh", "ja"]):
        identifier.set_languages(langs)
        reference.set_languages(langs)
        for text in texts[::7]:
            assert identifier.classify(text) == reference.classify(text)


def test_unsettled_walk_falls_back_to_py3langid(monkeypatch, reference):
    identifier = language_model.load_identifier()
    monkeypatch.setattr(language_model, "MAX_PASSES", 1)  # no walk settles in one pass
    text = TEXTS[1].encode()
    assert identifier._feature_counts(text) is None
    assert np.array_equal(identifier._raw_score(text), reference._raw_score(text))
