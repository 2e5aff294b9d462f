"""WARC archives -> a sharded pre-training corpus of featurized pages and same-website pairs.

Modules: ``sources`` (paths, globs, URLs; archives known by their first bytes; the skips of
paths), ``reader`` (records, skips: shared by the corpus, ``grownup extract`` and
``scrapy_grownup.datatrove``), ``extract`` (archives as ``grownup extract``'s pages, and its
resuming), ``writer`` (featurize
and shard one archive), ``shards``, ``pairs``, ``manifest`` (markers, index, manifest),
``corpus`` (``load_corpus``), ``spider`` (``grownup_warc``), ``scaleout`` (``grownup_warc_redis``
on scrapy-redis), ``archive`` (``WarcArchiveMiddleware``: crawl -> WARC), ``settings``.

Corpus directory format (``grownup-warc-corpus/1``)
----------------------------------------------------

::

    DIR/
      config.json           encoder, encoder_version, text_dim, feature_version, shard_pages,
                            limits, record_types: what every shard shares
      shards/<key>-<part>.safetensors
                            one GraphStore (grownup-graphs/1) per part of an archive
      files/<key>.json      one marker per archive read: records, pages, skipped, shards
      index.json            the shards in page order, and the pairs file
      pairs.safetensors     same-website pairs
      manifest.json         totals

``<key>`` is ``<archive name>-<sha1 of its absolute path or URL>``; ``<part>`` numbers the
archive's HTML records in blocks of ``shard_pages`` (``-00000``, ``-00001``...).

**Shards** are ``GraphStore`` files (``scrapy_grownup.data.store``), loaded with
``GraphStore.load(path)`` (safetensors: no pickle) and batched with ``GraphStore.collate``. Node
arrays are concatenated over the shard's pages and sliced by ``page_ptr`` (int64 [pages + 1]):
``parent`` (int32, -1 for the root), ``tag_ids`` (int16), ``font`` (int8 [n, 3]), ``text_len``,
``num_children``, ``child_index`` (int32), ``positions`` (float16 [n, 32], Laplacian
eigenvectors), ``text_idx``, ``class_idx``, ``id_idx`` (int32 rows of ``strings``, the float16
[U, text_dim] table of the shard's distinct strings, row 0 = the empty string) and ``labels``
(int8, all -1: unlabelled). The masked-node targets are there: tag (``tag_ids``), child position
(``child_index``), child count (``num_children``) and the text, class and id embeddings
(``strings[text_idx]``...). Per page: ``page_site`` (int64 site hash), ``GraphStore.ids`` (WARC
record ids), and in the metadata ``urls`` and ``record_offsets`` (JSON lists), ``source``,
``part``, ``failures``, ``encoder``, ``encoder_version``, ``feature_version``.

**index.json**: ``format``, ``encoder``, ``encoder_version``, ``text_dim``,
``feature_version``, ``pages``, ``shards`` (list of ``file``, ``pages``, ``nodes``,
``first_page``, ``sha256``, ``bytes``, ``source``, ``part``) and ``pairs`` (``file``, ``count``,
``sha256``). Pages are numbered globally: shard ``s`` holds pages ``first_page ..
first_page + pages - 1``.

**pairs.safetensors** (``grownup-pairs/1``): ``pairs`` int64 [P, 2] (global page numbers of two
pages of one site, similar URL sub-paths first, see ``pairs``), ``site`` int64 [P] (their site
hash) and ``depth`` int32 [P] (URL directory segments they share). Only positives are stored:
``pairs.batch_negatives`` permutes a batch into negatives and labels by site.

**manifest.json**: ``pages`` (HTML pages read into shards), ``skipped`` (counts by reason: record
types, ``http_<status>``, ``not_html``, damage, parse failures, see ``reader`` and
``writer``), ``pairs``, ``shards``, ``sites``, ``records``, ``html_records``, ``files``
(``read``, ``failed``, ``damaged``), ``missing_shards``, ``workers``, ``encoder``, ``encoder_version``,
``text_dim``, ``feature_version``, ``shard_pages``, ``limits``, ``record_types``.

Reading it back: ``load_corpus(DIR)`` -> ``Corpus`` with ``shards``, ``iter_shards()``,
``load_shard(i)``, ``locate(page)`` -> ``(shard, row)``, ``pairs()``, ``iter_pair_batches()``
and ``verify()`` (checksums).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["load_corpus", "Corpus", "CorpusWriter", "RecordReader", "WarcSettings",
           "batch_negatives", "finalize"]

_LAZY = {
    "load_corpus": ("scrapy_grownup.warc.corpus", "load_corpus"),
    "Corpus": ("scrapy_grownup.warc.corpus", "Corpus"),
    "CorpusWriter": ("scrapy_grownup.warc.writer", "CorpusWriter"),
    "RecordReader": ("scrapy_grownup.warc.reader", "RecordReader"),
    "WarcSettings": ("scrapy_grownup.warc.settings", "WarcSettings"),
    "batch_negatives": ("scrapy_grownup.warc.pairs", "batch_negatives"),
    "finalize": ("scrapy_grownup.warc.manifest", "finalize"),
}

if TYPE_CHECKING:  # pragma: no cover
    from scrapy_grownup.warc.corpus import Corpus, load_corpus
    from scrapy_grownup.warc.manifest import finalize
    from scrapy_grownup.warc.pairs import batch_negatives
    from scrapy_grownup.warc.reader import RecordReader
    from scrapy_grownup.warc.settings import WarcSettings
    from scrapy_grownup.warc.writer import CorpusWriter


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'scrapy_grownup.warc' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
