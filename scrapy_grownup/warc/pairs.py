"""Same-website page pairs for pre-training (GROWN+UP Sections 2.4.2 and 4.1).

The paper pairs "webpages with similar URL subpaths", assuming they belong to the same website,
and makes negatives by permuting the pairs of a training batch. Here:

- a page's **site** is its URL host, lower-cased, without a leading ``www.``;
- within a site, pages are matched bottom-up along their URL directory (the path without its
  last segment): pages of the same deepest directory are paired first, in URL order; an odd page
  out moves up one directory and is paired there, up to the site root. Every site of ``n``
  distinct URLs gives ``n // 2`` disjoint pairs, each page in at most one, and each pair records
  ``depth``, the number of directory segments its two URLs share. Repeated captures of one URL
  are paired once (the first capture).
- positives only are stored; ``batch_negatives`` makes the negatives of a batch the way the
  reference implementation does (the second pages of the first half are reversed) and labels
  every pair by comparing site hashes, so an accidental same-site permutation stays positive.

Grouping is streamed: ``PairSpill`` appends one line per page to a partition file chosen by the
site hash, then reads one partition at a time, so memory is bounded by the largest partition,
not by the corpus (``partition_pages`` sets how many pages a partition should hold).
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Iterator, Sequence
from urllib.parse import urlsplit

import numpy as np

PAIRS_FORMAT = "grownup-pairs/1"


def site_key(url: str | None) -> str | None:
    """Website of a URL: the host, lower-cased, without ``www.``; None without a host."""
    if not url:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".").lower()
    return host[4:] if host.startswith("www.") and host.count(".") >= 2 else host


def site_hash(site: str | None) -> int:
    """Signed 64-bit hash of a site (0 for pages without one), stable across processes."""
    if not site:
        return 0
    return int.from_bytes(hashlib.sha1(site.encode("utf-8")).digest()[:8], "big", signed=True)


def url_directory(url: str) -> tuple[str, ...]:
    """Directory segments of a URL path: ``/news/2024/a.html`` and ``/news/2024/`` give
    ``("news", "2024")``. The query is ignored."""
    try:
        path = urlsplit(url.strip()).path
    except ValueError:
        return ()
    segments = path.split("/")
    return tuple(s for s in segments[:-1] if s)


def match_site(pages: Sequence[tuple[int, str]]) -> list[tuple[int, int, int]]:
    """Pairs ``(page_a, page_b, depth)`` of one site's pages ``(index, url)``."""
    first: dict[str, int] = {}
    for index, url in sorted(pages):
        first.setdefault(url.split("#", 1)[0], index)
    by_dir: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for url, index in first.items():
        by_dir[url_directory(url)].append((url, index))
    pairs: list[tuple[int, int, int]] = []
    carry: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    depth = max((len(d) for d in by_dir), default=0)
    for level in range(depth, -1, -1):
        for directory in sorted({d for d in by_dir if len(d) == level} |
                                {d for d in carry if len(d) == level}):
            members = sorted(by_dir.get(directory, []) + carry.pop(directory, []))
            for k in range(0, len(members) - 1, 2):
                pairs.append((members[k][1], members[k + 1][1], level))
            if len(members) % 2 and level > 0:
                carry[directory[:-1]].append(members[-1])
    return pairs


def _escape(text: str) -> str:
    return text.replace("\t", "%09").replace("\n", "%0A").replace("\r", "%0D")


class PairSpill:
    """Group pages by site through partition files on disk, then pair each partition.

    ``add(index, url)`` for every page (any order), then ``pairs()``. The spill directory is
    removed by ``close()`` (also on ``with`` exit).
    """

    def __init__(self, directory: str | os.PathLike, expected_pages: int,
                 partition_pages: int = 100_000):
        self.directory = Path(directory)
        self.partitions = max(1, math.ceil(max(expected_pages, 1) / max(partition_pages, 1)))
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files = [open(self.directory / f"part-{p:05d}.tsv", "w", encoding="utf-8",
                            newline="\n") for p in range(self.partitions)]
        self.pages = 0
        self.without_site = 0

    def add(self, index: int, url: str) -> None:
        site = site_key(url)
        if site is None:
            self.without_site += 1
            return
        h = site_hash(site)
        self._files[(h & 0x7FFF_FFFF_FFFF_FFFF) % self.partitions].write(
            f"{h}\t{index}\t{site}\t{_escape(url)}\n")
        self.pages += 1

    def pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
        """Per partition: ``(pairs int64 [k, 2], site int64 [k], depth int32 [k], sites)``,
        ``sites`` being the number of distinct sites in the partition."""
        for handle in self._files:
            handle.close()
        for p in range(self.partitions):
            groups: dict[str, list[tuple[int, str]]] = defaultdict(list)
            hashes: dict[str, int] = {}
            with open(self.directory / f"part-{p:05d}.tsv", encoding="utf-8") as handle:
                for line in handle:
                    h, index, site, url = line.rstrip("\n").split("\t", 3)
                    groups[site].append((int(index), url))
                    hashes[site] = int(h)
            rows, sites, depths = [], [], []
            for site in sorted(groups):
                for a, b, depth in match_site(groups[site]):
                    rows.append((a, b))
                    sites.append(hashes[site])
                    depths.append(depth)
            yield (np.asarray(rows, dtype=np.int64).reshape(-1, 2),
                   np.asarray(sites, dtype=np.int64), np.asarray(depths, dtype=np.int32),
                   len(groups))
            groups.clear()

    def close(self) -> None:
        for handle in self._files:
            if not handle.closed:
                handle.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "PairSpill":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def build_pairs(pages: Iterable[tuple[int, str]], spill_dir: str | os.PathLike,
                expected_pages: int, partition_pages: int = 100_000) -> dict[str, np.ndarray]:
    """All pairs of ``(global index, url)`` pages: ``{"pairs", "site", "depth"}`` arrays, plus
    ``sites`` (number of distinct sites) and ``without_site`` counts as 0-d arrays."""
    with PairSpill(spill_dir, expected_pages, partition_pages) as spill:
        for index, url in pages:
            spill.add(index, url)
        parts = list(spill.pairs())
        without_site = spill.without_site
    out = {
        "pairs": np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, 2), np.int64),
        "site": np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64),
        "depth": np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int32),
    }
    out["sites"] = np.asarray(sum(p[3] for p in parts), dtype=np.int64)
    out["without_site"] = np.asarray(without_site, dtype=np.int64)
    return out


def write_pairs(path: str | os.PathLike, arrays: dict[str, np.ndarray],
                meta: dict[str, str] | None = None) -> Path:
    """Save pairs as safetensors (no pickle), atomically."""
    from safetensors.numpy import save_file

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tensors = {name: np.ascontiguousarray(arrays[name]) for name in ("pairs", "site", "depth")}
    save_file(tensors, str(tmp), metadata={"format": PAIRS_FORMAT, **(meta or {})})
    os.replace(tmp, path)
    return path


def read_pairs(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``{"pairs": int64 [P, 2] global page numbers, "site": int64 [P], "depth": int32 [P]}``."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        meta = handle.metadata() or {}
        if meta.get("format") != PAIRS_FORMAT:
            raise ValueError(f"{path}: not a {PAIRS_FORMAT} file")
        return {name: handle.get_tensor(name) for name in handle.keys()}


def batch_negatives(site_a: np.ndarray, site_b: np.ndarray, ratio: float = 0.5
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Negatives by permutation within one batch of positive pairs.

    Only positives are stored; as in the reference implementation, the second pages of the
    first ``ratio`` of the batch are reversed among themselves (mostly other sites: the
    negatives) and the rest keep their partner.

    Args:
        site_a: the site hash of each pair's first page (``site`` of a pairs batch).
        site_b: the site hash of each pair's second page.
        ratio: the share of the batch whose partners are permuted.

    Returns:
        ``(order, labels)``: pair ``i`` of the batch is (first page ``i``, second page
        ``order[i]``), with label ``labels[i]`` (1.0 when both pages come from the same site).
    """
    site_a = np.asarray(site_a)
    site_b = np.asarray(site_b)
    n = len(site_a)
    k = int(round(n * ratio))
    order = np.arange(n)
    order[:k] = order[:k][::-1]
    labels = (site_a == site_b[order]).astype(np.float32)
    return order, labels
