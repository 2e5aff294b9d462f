"""The per-page benchmarks still run: each, on three Dragnet test pages, prints one JSON line.

The README's speed figures come from these scripts; one that breaks (a renamed attribute, a
moved function) would only be noticed when someone next needs a figure. Timings are not
checked here: they belong to the benchmarks, not to the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_grownup.data import datasets

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RUNS = {
    "block_rescorer": ["block_rescorer.py", "3"],
    "decisions": ["decisions.py", "3"],
    "page_signals": ["page_signals.py", "3"],
    "laplacian": ["laplacian.py", "--pages", "3"],
    "page_type": ["page_type.py", "--pages", "3"],
    "extract": ["extract.py", "--models", "fast", "--pages", "3", "--rounds", "1"],
    "train_epoch": ["train_epoch.py", "3"],
}


@pytest.fixture(scope="module", autouse=True)
def dragnet():
    try:
        datasets.load("dragnet", split="test", limit=1)
    except datasets.DatasetNotAvailable:
        pytest.skip("Dragnet data not available")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_prints_one_json_line(name):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, *RUNS[name]], cwd=BENCHMARKS, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, done.stdout[-2000:]
    result = json.loads(lines[0])
    assert result["benchmark"] == name and result["pages"] == 3
