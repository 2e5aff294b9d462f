"""The per-page benchmarks still run: each, on three Dragnet test pages, prints its JSON lines.

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
from tests.data_support import skip_missing_data

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RUNS = {
    "block_rescorer": ["block_rescorer.py", "3"],
    "decisions": ["decisions.py", "3"],
    "page_signals": ["page_signals.py", "3"],
    "laplacian": ["laplacian.py", "--pages", "3"],
    "page_type": ["page_type.py", "--pages", "3"],
    "extract": ["extract.py", "--models", "fast", "--pages", "3", "--rounds", "1"],
    "train_epoch": ["train_epoch.py", "3"],
    "cost": ["cost.py", "--pages", "3", "--rounds", "1", "--cli-runs", "1", "--site-pages", "3",
             "--repeat", "1"],
}
# the "benchmark" of each line a run prints: one line named after the run unless listed here
LINES = {"cost": ["extract", "extract", "extract", "cli", "jobs", "crawl", "projection"]}


@pytest.fixture(scope="module", autouse=True)
def dragnet():
    try:
        datasets.load("dragnet", split="test", limit=1)
    except datasets.DatasetNotAvailable:
        skip_missing_data("Dragnet data")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_prints_its_json_lines(name):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, *RUNS[name]], cwd=BENCHMARKS, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["benchmark"] for r in results] == LINES.get(name, [name]), done.stdout[-2000:]
    # a line per page set says where a set is not available, and cli, projection have no pages
    assert all(r.get("pages", 3) == 3 for r in results), done.stdout[-2000:]
    if name == "cost":  # every crawled page an item or a counted drop
        crawl = next(r for r in results if r["benchmark"] == "crawl")
        assert crawl["addon_unaccounted"] == [0]
