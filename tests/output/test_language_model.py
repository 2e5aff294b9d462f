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
