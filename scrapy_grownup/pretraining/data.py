"""Pre-training batches from a corpus directory (``grownup warc``'s output, ``load_corpus``).

A training **unit** is either a same-website pair (two pages, both objectives) or a single page
that is in no pair (a site with one page, or a page without URL host: masked-node prediction
only). Every page of the corpus is used once per epoch.

Order: units are grouped by the shard of their first page; each epoch shuffles the shards and
the units inside each shard, then fills batches greedily up to ``batch_pages`` pages and
``batch_nodes`` nodes, pairs and single pages in separate batches (a pair batch gets all the
in-batch negatives it can). Shards are read through the corpus' LRU cache, so a corpus much larger
than memory is read a few shards at a time (the pairs of a site come from one archive, usually
one shard).

Dev split: a deterministic share of the sites (every unit of a site on the same side, so no
dev page's site partner is trained on); pages without a site are split on their page number.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scrapy_grownup.data.datasets import holdout_split

logger = logging.getLogger(__name__)
RAW_FIELDS = ("tag_ids", "num_children", "child_index", "text_idx", "class_idx", "id_idx")


@dataclass(frozen=True)
class Unit:
    first: int       # global page number
    second: int      # its same-site partner, -1 for a single page
    site: int        # site hash (0: unknown)

    @property
    def pages(self) -> tuple[int, ...]:
        return (self.first,) if self.second < 0 else (self.first, self.second)


@dataclass
class PageBatch:
    """One collated batch: ``batch`` (a torch_geometric ``Batch``) holds ``pages`` in the order
    asked for (graph ``k`` is ``pages[k]``); ``raw`` the per-node arrays of ``RAW_FIELDS``."""

    batch: object
    pages: list[int]
    raw: dict[str, np.ndarray]


class PretrainData:
    """Units of a corpus, split into train and dev, and their batches."""

    def __init__(self, corpus, dev_fraction: float = 0.1, seed: int = 0,
                 max_pages: int | None = None):
        from safetensors import safe_open

        self.corpus = corpus
        sizes, sites = [], []
        for shard in corpus.shards:
            with safe_open(str(shard.path), framework="numpy") as handle:
                ptr = handle.get_tensor("page_ptr")
                keys = set(handle.keys())
                site = (handle.get_tensor("page_site") if "page_site" in keys
                        else np.zeros(len(ptr) - 1, dtype=np.int64))
            sizes.append(np.diff(ptr))
            sites.append(site.astype(np.int64))
        self.sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        self.page_site = np.concatenate(sites) if sites else np.zeros(0, np.int64)
        if len(self.sizes) != corpus.num_pages:
            raise ValueError(f"{corpus.directory}: shards hold {len(self.sizes)} pages, the "
                             f"index says {corpus.num_pages}")
        data = corpus.pairs()
        units: list[Unit] = []
        paired = np.zeros(corpus.num_pages, dtype=bool)
        for (a, b), site in zip(data["pairs"].tolist(), data["site"].tolist()):
            units.append(Unit(int(a), int(b), int(site)))
            paired[[a, b]] = True
        for page in np.flatnonzero(~paired).tolist():
            units.append(Unit(int(page), -1, int(self.page_site[page])))
        units.sort(key=lambda u: u.first)
        if max_pages is not None:
            units = self._limit(units, max_pages, seed)
        keys = [f"site:{u.site}" if u.site else f"page:{u.first}" for u in units]
        _, dev_keys = holdout_split(sorted(set(keys)), dev_fraction, f"pretrain-dev-{seed}")
        dev_set = set(dev_keys)
        self.train_units = [u for u, k in zip(units, keys) if k not in dev_set]
        self.dev_units = [u for u, k in zip(units, keys) if k in dev_set]
        logger.info("pre-training units: %d train (%d pairs), %d dev (%d pairs); %d pages",
                    len(self.train_units), self.count_pairs(self.train_units),
                    len(self.dev_units), self.count_pairs(self.dev_units),
                    sum(len(u.pages) for u in units))

    @staticmethod
    def count_pairs(units: Sequence[Unit]) -> int:
        return sum(1 for u in units if u.second >= 0)

    @staticmethod
    def _limit(units: list[Unit], max_pages: int, seed: int) -> list[Unit]:
        order = np.random.default_rng([seed, 7]).permutation(len(units))
        kept, pages = [], 0
        for i in order.tolist():
            if pages >= max_pages:
                break
            kept.append(units[i])
            pages += len(units[i].pages)
        return sorted(kept, key=lambda u: u.first)

    # -- batches --------------------------------------------------------------------------------
    def batches(self, units: Sequence[Unit], batch_pages: int, batch_nodes: int,
                rng: np.random.Generator | None = None) -> list[list[Unit]]:
        """Batches of at most ``batch_pages`` pages and ``batch_nodes`` nodes (a unit larger
        than that is a batch of its own).

        Units are grouped by the shard of their first page, shard after shard; inside a shard,
        pairs and single pages make separate batches (so a pair batch has as many in-batch
        negatives as it can), and the shard's batches are interleaved. ``rng`` shuffles the
        shards, the units and the batches of a shard; without it, file order.
        """
        by_shard: dict[int, list[Unit]] = {}
        for unit in units:
            by_shard.setdefault(self.corpus.locate(unit.first)[0], []).append(unit)
        shard_ids = sorted(by_shard)
        if rng is not None:
            shard_ids = [shard_ids[i] for i in rng.permutation(len(shard_ids))]
        out: list[list[Unit]] = []
        for shard in shard_ids:
            group = by_shard[shard]
            if rng is not None:
                group = [group[i] for i in rng.permutation(len(group))]
            batches = (self._cut([u for u in group if u.second >= 0], batch_pages, batch_nodes)
                       + self._cut([u for u in group if u.second < 0], batch_pages, batch_nodes))
            if rng is not None:
                batches = [batches[i] for i in rng.permutation(len(batches))]
            out.extend(batches)
        return out

    def _cut(self, units: Sequence[Unit], batch_pages: int, batch_nodes: int
             ) -> list[list[Unit]]:
        out, current, pages, nodes = [], [], 0, 0
        for unit in units:
            n_pages = len(unit.pages)
            n_nodes = int(sum(self.sizes[p] for p in unit.pages))
            if current and (pages + n_pages > batch_pages or nodes + n_nodes > batch_nodes):
                out.append(current)
                current, pages, nodes = [], 0, 0
            current.append(unit)
            pages += n_pages
            nodes += n_nodes
        if current:
            out.append(current)
        return out

    def collate(self, pages: Sequence[int]) -> PageBatch:
        """A model-ready batch of global pages (from any shards), graphs in the order given."""
        return collate_pages(self.corpus, pages)


def batch_layout(units: Sequence[Unit]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """``(pages, pairs, sites)``: the batch's pages (first pages of the pairs, then their second
    pages, then the single pages), the ``[P, 2]`` graph positions of each pair and their site
    hashes ``[P]``."""
    pairs = [u for u in units if u.second >= 0]
    singles = [u for u in units if u.second < 0]
    pages = [u.first for u in pairs] + [u.second for u in pairs] + [u.first for u in singles]
    k = len(pairs)
    positions = np.stack([np.arange(k), np.arange(k) + k], axis=1) if k else \
        np.zeros((0, 2), np.int64)
    return pages, positions, np.array([u.site for u in pairs], dtype=np.int64)


def collate_pages(corpus, pages: Sequence[int]) -> PageBatch:
    """Collate global page numbers of ``corpus`` into one batch (graph ``k`` = ``pages[k]``).

    Pages are gathered shard by shard with ``GraphStore.collate`` (each shard has its own
    string table), then the graphs are put back in the order asked for.
    """
    import torch
    from torch_geometric.data import Batch

    pages = [int(p) for p in pages]
    groups: dict[int, list[tuple[int, int]]] = {}
    for k, page in enumerate(pages):
        shard, row = corpus.locate(page)
        groups.setdefault(shard, []).append((k, row))
    parts, order, raws = [], [], []
    for shard, members in groups.items():
        store = corpus.load_shard(shard)
        rows = [row for _, row in members]
        parts.append(store.collate(rows))
        order.extend(k for k, _ in members)
        raws.append({name: np.concatenate([store.page_arrays(r)[name] for r in rows])
                     for name in RAW_FIELDS})
    if len(parts) == 1 and order == sorted(order):
        return PageBatch(parts[0], pages, raws[0])

    # Graph g of the concatenation is page order[g]; rebuild the batch in the asked order.
    sizes = np.concatenate([np.diff(p.ptr.numpy()) for p in parts])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    where = np.empty(len(pages), dtype=np.int64)
    where[np.asarray(order)] = np.arange(len(pages))  # page k is graph where[k]
    node_perm = np.concatenate([np.arange(starts[g], starts[g] + sizes[g]) for g in where])
    new_sizes = sizes[where]
    new_id = np.empty(len(node_perm), dtype=np.int64)
    new_id[node_perm] = np.arange(len(node_perm))

    def cat(name: str) -> torch.Tensor:
        return torch.cat([getattr(p, name) for p in parts])

    perm = torch.from_numpy(node_perm)
    edge_parts, type_parts, total = [], [], 0
    for p in parts:
        edge_parts.append(p.edge_index + total)
        type_parts.append(p.edge_type)
        total += int(p.num_nodes)
    edge_index = torch.from_numpy(new_id)[torch.cat(edge_parts, dim=1)]
    batch = Batch(
        x_text=cat("x_text")[perm], x_class=cat("x_class")[perm], x_id=cat("x_id")[perm],
        x_struct=cat("x_struct")[perm], x_pos=cat("x_pos")[perm],
        x_layout=cat("x_layout")[perm],
        edge_index=edge_index, edge_type=torch.cat(type_parts),
        y=cat("y")[perm],
        batch=torch.from_numpy(np.repeat(np.arange(len(pages)), new_sizes)),
        ptr=torch.from_numpy(np.concatenate([[0], np.cumsum(new_sizes)])),
    )
    if all(getattr(p, "x_repeat", None) is not None for p in parts):
        batch.x_repeat = cat("x_repeat")[perm]
    batch.num_nodes = int(new_sizes.sum())
    batch._num_graphs = len(pages)
    raw = {name: np.concatenate([r[name] for r in raws])[node_perm] for name in RAW_FIELDS}
    return PageBatch(batch, pages, raw)

__all__ = ["PageBatch", "PretrainData", "RAW_FIELDS", "Unit", "batch_layout", "collate_pages"]
