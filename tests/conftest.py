import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tests use tiny tensors: intra-op threads only add latency (badly so on a busy 2-core
    machine). Only when the test's module has imported torch: importing it costs seconds."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def group_folds(monkeypatch):
    """Every ``GroupKFold`` split made while the test runs, as ``(training sites, test
    sites)`` pairs (scikit-learn's own splits, passed through unchanged)."""
    from sklearn import model_selection

    seen = []
    split = model_selection.GroupKFold.split

    def spy(self, X, y=None, groups=None):
        for train, test in split(self, X, y, groups):
            seen.append(({groups[i] for i in train}, {groups[i] for i in test}))
            yield train, test

    monkeypatch.setattr(model_selection.GroupKFold, "split", spy)
    return seen
