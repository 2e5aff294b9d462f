"""Splits by site, never by page: what makes an accuracy figure mean "on sites never seen".

Pages of one site share their templates, so a page-level split lets a model score well by
remembering a site's boilerplate. Every split here is grouped: a *site* is the page's
registrable domain (``news.bbc.co.uk`` and ``www.bbc.co.uk`` are ``bbc.co.uk``), or its
publisher where a set names one (fundus), and pages a set lists as ``near_duplicates`` of each
other are joined into one group. Groups are assigned to a side by a hash of the group's sites,
so the assignment is the same on every machine and does not move when other pages come or go.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

__all__ = ["site_of", "registrable_domain", "site_groups", "site_folds", "grouped_holdout", "sites"]

# Second-level labels under which a country-code TLD registers names (``bbc.co.uk``).
_SECOND_LEVEL = frozenset(
    "ac co com edu gen go gob gov govt ltd ne net nic nom or org plc sch".split())


def registrable_domain(host: str) -> str:
    """``host`` without ``www.``-like prefixes, cut to its registrable part (no public-suffix
    list: two labels, or three under a country code's ``co``/``com``/``org``/... level)."""
    host = host.lower().strip(".")
    if host.count(".") == 3 and host.replace(".", "").isdigit():  # an IPv4 address
        return host
    labels = [part for part in host.split(".") if part]
    if len(labels) <= 2:
        return ".".join(labels)
    keep = 3 if len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL else 2
    return ".".join(labels[-keep:])


def site_of(record) -> str:
    """The site key of a ``PageRecord``: ``publisher:NAME`` where the set names a publisher,
    else the URL's registrable domain, else (no URL) ``DATASET/ID`` (the page is its own site)."""
    publisher = (record.extra or {}).get("publisher")
    if publisher:
        return f"publisher:{str(publisher).lower()}"
    return _domain(record) or f"{record.dataset}/{record.id}"


def _domain(record) -> str | None:
    if not record.url:
        return None
    try:
        host = urlsplit(record.url.strip()).hostname
    except ValueError:
        return None
    return registrable_domain(host) if host else None


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        self.parent.setdefault(key, key)
        root = key
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[key] != root:  # path compression
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def site_groups(records: Sequence) -> list[str]:
    """One group key per record: records share a key when they share a site or a domain
    (across datasets too), are listed as each other's ``near_duplicates``, or share a URL. The key is the
    smallest site key of the group, so it does not depend on the records' order."""
    uf = _UnionFind()
    page_key = {f"{r.dataset}/{r.id}": r for r in records}
    for record in records:
        site = "site:" + site_of(record)
        uf.union(f"page:{record.dataset}/{record.id}", site)
        domain = _domain(record)
        if domain:  # a publisher's pages share a group with other sets' pages of its domain
            uf.union(site, "site:" + domain)
        if record.url:
            uf.union(site, "url:" + record.url.strip().rstrip("/"))
        for other in (record.extra or {}).get("near_duplicates") or ():
            if other in page_key:
                uf.union(site, "site:" + site_of(page_key[other]))
    return [uf.find(f"page:{r.dataset}/{r.id}") for r in records]


def _unit(key: str, seed: str) -> float:
    digest = hashlib.sha1(f"{seed}:{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def site_folds(records: Sequence, folds: int, seed: str = "grownup-sites") -> list[int]:
    """Fold ``0..folds-1`` of each record; all pages of a site group share a fold."""
    if folds < 2:
        raise ValueError("site_folds needs at least 2 folds")
    return [min(folds - 1, int(_unit(g, seed) * folds)) for g in site_groups(records)]


def grouped_holdout(records: Sequence, fraction: float,
                    seed: str = "grownup-sites") -> tuple[list[int], list[int]]:
    """``(train indices, held-out indices)`` with whole site groups on one side."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("fraction must be in [0, 1]")
    train: list[int] = []
    held: list[int] = []
    for i, group in enumerate(site_groups(records)):
        (held if _unit(group, seed) < fraction else train).append(i)
    return train, held


def sites(records: Iterable) -> set[str]:
    """The set of site keys of ``records`` (to check that two sides share none)."""
    return {site_of(r) for r in records}
