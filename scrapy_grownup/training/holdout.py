"""What no trainer ever trains on: the page hold-outs of the sets without a standard split, and
the host-level site split of L3S-GN1's roles.

``heldout_ids(name)`` are a fixed 20% of a set's pages (a hash of each id, so the same on every
machine); ``grownup train`` leaves them out and ``grownup lab evaluate`` / ``page-type-cv --model`` /
``roles-eval --model`` / ``fit-heads`` score on them. ``site_split`` puts every page of a host
on one side (``page_host``: the host without ``www.``).
"""

from __future__ import annotations

from typing import Sequence
from urllib.parse import urlsplit

from scrapy_grownup.data import datasets

# Page-level hold-outs of the datasets without a standard split (never trained on).
HOLDOUT_FRACTION = 0.2
HOLDOUT_SEED = "grownup-holdout"
SITE_SPLIT_FRACTION = 0.2
SITE_SPLIT_SEED = "grownup-roles-sites"


def holdout(dataset: str) -> tuple[list[str], list[str]]:
    """``(training ids, held-out ids)`` of a dataset's pages."""
    ids = [i for i, _ in datasets.list_ids(dataset)]
    return datasets.holdout_split(ids, HOLDOUT_FRACTION, HOLDOUT_SEED)


def heldout_ids(dataset: str) -> list[str]:
    return holdout(dataset)[1]


def page_host(url: str | None) -> str:
    """Lower-case host without a leading ``www.`` ("" when unknown)."""
    if not url:
        return ""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
    return host[4:] if host.startswith("www.") else host


def site_split(hosts: Sequence[str], fraction: float = SITE_SPLIT_FRACTION,
               seed: str = SITE_SPLIT_SEED) -> tuple[list[int], list[int]]:
    """``(train, test)`` positions: every page of a host lands on the same side."""
    _, test_hosts = datasets.holdout_split(sorted(set(hosts)), fraction, seed)
    held = set(test_hosts)
    train = [i for i, h in enumerate(hosts) if h not in held]
    test = [i for i, h in enumerate(hosts) if h in held]
    return train, test
