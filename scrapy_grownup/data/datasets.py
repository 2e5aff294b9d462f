"""Loaders for the labelled web-page datasets (Dragnet, CleanEval, page-type, L3S-GN1, ...).

The datasets are never part of the repository. They are unpacked from ``NAME.tar.xz`` archives
(``shared/data/`` beside the project) into a cache, ``dataset_root()``: ``$GROWNUP_DATA_DIR`` or
``~/.cache/scrapy_grownup/datasets``. ``load(name, split)`` returns ``PageRecord`` s with the
page's raw HTML bytes and its cleaned gold text; the caller parses and aligns.

Names: ``dragnet`` (train 966 / test 415), ``cleaneval`` (train = dev 58 / test = final 681),
``pagetype`` (806, split ``all``; see ``holdout_split``), ``l3s_gn1`` (621, ``all``) and
``cleanportaleval`` (71, ``test``), and the modern sets (2020-26, split ``all``, one layout:
``html/ID.html``, ``gold/ID.txt``, ``meta.jsonl``): ``wcxb_dev``, ``fundus``, ``fundus_history``,
``magic_html_article``, ``magic_html_forum`` (human gold) and ``postlight_silver``,
``newspaper_2014_silver``, ``newspaper4k_silver`` (silver gold: another extractor's output).

None of the sets has a split by site, so every figure that claims generalization splits them with
``site_groups`` / ``site_folds`` (site = registrable domain, publisher for fundus, with
``near_duplicates`` and same-site pages of other sets kept together).
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import html as html_lib
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from scrapy_grownup.data.labels import clean_cleaneval_gold, split_dragnet_gold
from scrapy_grownup.errors import DatasetNotAvailable
from scrapy_grownup.page.tags import BLOCK_TAGS

__all__ = [
    "DATASETS",
    "DatasetNotAvailable",
    "PageRecord",
    "dataset_root",
    "dataset_dir",
    "ensure_unpacked",
    "list_ids",
    "iter_records",
    "load",
    "load_record",
    "holdout_split",
    "decode_text",
    "strip_text_wrapper",
    "l3s_segments",
    "L3S_LABELS",
]

# dataset name -> archive / directory name
DATASETS: dict[str, str] = {
    "dragnet": "dragnet",
    "cleaneval": "cleaneval_en",
    "pagetype": "pagetype",
    "l3s_gn1": "l3s_gn1",
    "cleanportaleval": "cleanportaleval",
    "wcxb_dev": "wcxb_dev",
    "fundus": "fundus",
    "fundus_history": "fundus_history",
    "magic_html_article": "magic_html_article",
    "magic_html_forum": "magic_html_forum",
    "postlight_silver": "postlight_silver",
    "newspaper_2014_silver": "newspaper_2014_silver",
    "newspaper4k_silver": "newspaper4k_silver",
}
# The modern sets: one layout, split "all".
MODERN_DATASETS = ("wcxb_dev", "fundus", "fundus_history", "magic_html_article",
                   "magic_html_forum", "postlight_silver", "newspaper_2014_silver",
                   "newspaper4k_silver")
# Gold written by another extractor, not by people: weighted lower in training.
SILVER_DATASETS = frozenset({"postlight_silver", "newspaper_2014_silver", "newspaper4k_silver"})
_ALIASES = {"cleaneval_en": "cleaneval", "l3s": "l3s_gn1", "l3s-gn1": "l3s_gn1"}

SPLITS: dict[str, tuple[str, ...]] = {
    "dragnet": ("train", "test"),
    "cleaneval": ("train", "test"),
    "pagetype": ("all",),
    "l3s_gn1": ("all",),
    "cleanportaleval": ("test",),
    **{name: ("all",) for name in MODERN_DATASETS},
}

L3S_LABELS = {
    0: "not_content",
    1: "headline",
    2: "full_text",
    3: "supplemental",
    4: "related_content",
    5: "comments",
}


@dataclass
class PageRecord:
    dataset: str
    id: str
    html: bytes
    gold: str | None
    url: str | None
    split: str
    extra: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# Locations


def dataset_root() -> Path:
    """Cache directory holding unpacked datasets (``$GROWNUP_DATA_DIR`` overrides)."""
    env = os.environ.get("GROWNUP_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "scrapy_grownup" / "datasets"


def _canonical(name: str) -> str:
    name = _ALIASES.get(name, name)
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return name


def _archive_candidates(archive_name: str, archive_dir: str | Path | None) -> list[Path]:
    file_name = f"{archive_name}.tar.xz"
    if archive_dir is not None:
        return [Path(archive_dir).expanduser() / file_name]
    env = os.environ.get("GROWNUP_ARCHIVE_DIR")
    if env:
        return [Path(env).expanduser() / file_name]
    out: list[Path] = []
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for directory in (start, *start.parents):
            candidate = directory / "shared" / "data" / file_name
            if candidate not in out:
                out.append(candidate)
    return out


def ensure_unpacked(name: str, archive_dir: str | Path | None = None) -> Path:
    """Directory of the unpacked dataset, unpacking ``NAME.tar.xz`` into the cache if needed.

    The archive is looked up in ``archive_dir``, else ``$GROWNUP_ARCHIVE_DIR``, else in
    ``shared/data/`` of the current directory, the package directory or any of their parents.
    It is unpacked to a temporary directory inside ``dataset_root()`` and renamed into place, so
    an interrupted unpack never leaves a half dataset. Raises ``DatasetNotAvailable``.
    """
    archive_name = DATASETS[_canonical(name)]
    root = dataset_root()
    target = root / archive_name
    if target.is_dir():
        return target
    candidates = _archive_candidates(archive_name, archive_dir)
    archive = next((c for c in candidates if c.is_file()), None)
    if archive is None:
        looked = ", ".join(str(c) for c in candidates[:6])
        raise DatasetNotAvailable(
            f"dataset {name!r} is not unpacked at {target} and no archive {archive_name}.tar.xz "
            f"was found (looked in: {looked}). Set GROWNUP_DATA_DIR to an unpacked copy or "
            f"GROWNUP_ARCHIVE_DIR to the folder holding the archive."
        )
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{archive_name}-", dir=root))
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts
                if not parts or parts[0] != archive_name or ".." in parts:
                    raise ValueError(f"unexpected member {member.name!r} in {archive}")
            tar.extractall(tmp, filter="data")
        try:
            (tmp / archive_name).rename(target)
        except OSError:
            if not target.is_dir():  # not a concurrent unpack that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def dataset_dir(name: str) -> Path:
    """Unpacked directory of ``name`` (unpacking it if needed)."""
    return ensure_unpacked(name)


# ----------------------------------------------------------------------------------------------
# Text helpers

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes) -> str:
    """Decode a gold text file of unknown encoding, never failing.

    BOM (UTF-8, UTF-16), else strict UTF-8, else UTF-8 with cp1252 for the stray invalid bytes
    when valid multi-byte characters outnumber them, else cp1252 (what the "ISO-8859" files of
    Dragnet and CleanEval really are: their 0x85/0x92/0x93 bytes are cp1252 punctuation), with the
    five bytes cp1252 leaves undefined read as Latin-1. Line ends are normalised to ``"\\n"``.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            text = data.decode(codec, errors="replace")
            break
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="replace")
            valid_multibyte = sum(1 for ch in text if ord(ch) > 127 and ch != "\ufffd")
            if valid_multibyte > text.count("\ufffd"):
                # UTF-8 with a few stray cp1252 bytes (a handful of CleanEval gold files).
                text = data.decode("utf-8", errors=_CP1252_FALLBACK)
            else:
                text = _decode_cp1252(data)
    text = text.lstrip("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n")


_CP1252_UNDEFINED = frozenset({0x81, 0x8D, 0x8F, 0x90, 0x9D})
_CP1252_FALLBACK = "scrapy_grownup.cp1252-fallback"


def _cp1252_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return _decode_cp1252(exc.object[exc.start: exc.end]), exc.end


codecs.register_error(_CP1252_FALLBACK, _cp1252_fallback)


def _decode_cp1252(data: bytes) -> str:
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return "".join(
            chr(b) if b in _CP1252_UNDEFINED else bytes((b,)).decode("cp1252") for b in data
        )


_WRAPPER_OPEN = re.compile(rb"\A\s*<text\b([^>]*)>", re.I)
_WRAPPER_CLOSE = re.compile(rb"</text>\s*\Z", re.I)
_ATTR = re.compile(rb"""([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


def strip_text_wrapper(data: bytes) -> tuple[bytes, dict[str, str]]:
    """Remove CleanEval's ``<text id="URL" title=... encoding=...>`` wrapper from raw HTML.

    Returns ``(html_bytes, attributes)``; bytes without the wrapper come back unchanged.
    """
    match = _WRAPPER_OPEN.match(data)
    if not match:
        return data, {}
    attrs: dict[str, str] = {}
    for m in _ATTR.finditer(match.group(1)):
        raw = m.group(2) if m.group(2) is not None else m.group(3) or m.group(4) or b""
        value = raw.decode("utf-8", errors="replace")
        attrs[m.group(1).decode("ascii").lower()] = html_lib.unescape(value)
    body = data[match.end():]
    close = _WRAPPER_CLOSE.search(body)
    if close:
        body = body[: close.start()]
    return body.lstrip(b"\r\n"), attrs


def holdout_split(
    ids: Iterable[str], fraction: float = 0.2, seed: int | str = 0
) -> tuple[list[str], list[str]]:
    """Deterministic ``(train_ids, holdout_ids)``: each id is assigned on its own hash.

    An id goes to the holdout when ``sha1(f"{seed}:{id}")`` maps below ``fraction``, so the
    assignment is the same across runs, machines and Python versions, and adding or removing
    other ids never moves an id between the two sides. Order of ``ids`` is kept.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("fraction must be in [0, 1]")
    train: list[str] = []
    hold: list[str] = []
    for id_ in ids:
        digest = hashlib.sha1(f"{seed}:{id_}".encode("utf-8")).digest()
        u = int.from_bytes(digest[:8], "big") / 2.0**64
        (hold if u < fraction else train).append(id_)
    return train, hold


# ----------------------------------------------------------------------------------------------
# Id listings


def _read_ids(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def list_ids(name: str, split: str | None = None) -> list[tuple[str, str]]:
    """``(id, split)`` pairs of a dataset without reading any page (cheap)."""
    name = _canonical(name)
    splits = SPLITS[name] if split is None else (split,)
    unknown = [s for s in splits if s not in SPLITS[name]]
    if unknown:
        raise ValueError(f"dataset {name!r} has splits {SPLITS[name]}, not {unknown[0]!r}")
    root = ensure_unpacked(name)
    out: list[tuple[str, str]] = []
    for s in splits:
        if name == "dragnet":
            ids = _read_ids(root / ("training.txt" if s == "train" else "test.txt"))
        elif name == "cleaneval":
            ids = _read_ids(
                root / ("split_train_dev58.txt" if s == "train" else "split_test_final681.txt")
            )
        elif name == "pagetype":
            ids = sorted(p.name[: -len(".html")] for p in (root / "html").glob("*.html")
                         if (root / "ground-truth" / f"{p.name[:-5]}.json").is_file())
        elif name == "l3s_gn1":
            ids = sorted(p.stem for p in (root / "original").glob("*.html"))
        elif name in MODERN_DATASETS:
            ids = [i for i in _modern_meta(root) if (root / "html" / f"{i}.html").is_file()
                   and (root / "gold" / f"{i}.txt").is_file()]
        else:  # cleanportaleval
            ids = sorted(p.stem for p in (root / "input").glob("*.html")
                         if (root / "GoldStandard" / f"{p.stem}.txt").is_file())
        out.extend((i, s) for i in ids)
    return out


# ----------------------------------------------------------------------------------------------
# Record loading


def load_record(name: str, id_: str, split: str | None = None) -> PageRecord:
    """One page of a dataset by id (``split`` defaults to the id's split)."""
    name = _canonical(name)
    if split is None:
        lookup = dict(list_ids(name))
        if id_ not in lookup:
            raise KeyError(f"no page {id_!r} in dataset {name!r}")
        split = lookup[id_]
    root = ensure_unpacked(name)
    return _LOADERS[name](root, id_, split)


def iter_records(
    name: str, split: str | None = None, ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> Iterator[PageRecord]:
    """Lazily yield the pages of a dataset (optionally only ``ids`` / the first ``limit``)."""
    name = _canonical(name)
    root = ensure_unpacked(name)
    listing = list_ids(name, split)
    if ids is not None:
        wanted = set(ids)
        listing = [(i, s) for i, s in listing if i in wanted]
    if limit is not None:
        listing = listing[:limit]
    if name == "l3s_gn1":
        _l3s_urls(root)  # read the mapping once
    for id_, s in listing:
        yield _LOADERS[name](root, id_, s)


def load(
    name: str, split: str | None = None, ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[PageRecord]:
    """All pages of ``name`` (one split, or all splits when ``split`` is None)."""
    return list(iter_records(name, split, ids=ids, limit=limit))


def with_comments(record: PageRecord) -> PageRecord:
    """Dragnet page scored against article + comments (the setting of the paper's Table 2)."""
    gold = "\n".join(part for part in (record.gold, record.extra.get("comments")) if part)
    return dataclasses.replace(record, gold=gold)


def _load_dragnet(root: Path, id_: str, split: str) -> PageRecord:
    html = (root / "HTML" / f"{id_}.html").read_bytes()
    gold_raw = decode_text((root / "Corrected" / f"{id_}.html.corrected.txt").read_bytes())
    article, comments = split_dragnet_gold(gold_raw)
    return PageRecord("dragnet", id_, html, article, None, split, {"comments": comments})


def _cleaneval_paths(root: Path, id_: str, split: str) -> tuple[Path, Path]:
    sub = root / ("dev" if split == "train" else "final")
    return sub / "input" / f"{id_}.html", sub / "gold" / f"{id_}.txt"


def _load_cleaneval(root: Path, id_: str, split: str) -> PageRecord:
    html_path, gold_path = _cleaneval_paths(root, id_, split)
    html, attrs = strip_text_wrapper(html_path.read_bytes())
    gold_raw = decode_text(gold_path.read_bytes())
    extra = {"title": attrs.get("title"), "declared_encoding": attrs.get("encoding")}
    return PageRecord(
        "cleaneval", id_, html, clean_cleaneval_gold(gold_raw), attrs.get("id") or None, split,
        extra,
    )


def _load_cleanportaleval(root: Path, id_: str, split: str) -> PageRecord:
    html, attrs = strip_text_wrapper((root / "input" / f"{id_}.html").read_bytes())
    gold_raw = decode_text((root / "GoldStandard" / f"{id_}.txt").read_bytes())
    # Unlike CleanEval, this gold keeps HTML character references (&#8217; in 64 of 71 files).
    gold = html_lib.unescape(clean_cleaneval_gold(gold_raw))
    site = id_.rsplit("_", 1)[0]
    return PageRecord(
        "cleanportaleval", id_, html, gold, attrs.get("id") or None, split, {"site": site}
    )


def _load_pagetype(root: Path, id_: str, split: str) -> PageRecord:
    html = (root / "html" / f"{id_}.html").read_bytes()
    data = json.loads((root / "ground-truth" / f"{id_}.json").read_text(encoding="utf-8"))
    truth = data.get("ground_truth") or {}
    internal = (data.get("_internal") or {}).get("page_type") or {}
    raw_type = internal.get("primary")
    extra = {
        "title": truth.get("title"),
        "author": truth.get("author"),
        "publish_date": truth.get("publish_date"),
        "page_type": "article" if raw_type == "blog" else raw_type,
        "page_type_raw": raw_type,
        "page_type_confidence": internal.get("confidence"),
        "with": list(truth.get("with") or []),
        "without": list(truth.get("without") or []),
    }
    return PageRecord(
        "pagetype", id_, html, truth.get("main_content") or "", data.get("url"), split, extra
    )


_MODERN_META: dict[Path, dict[str, dict]] = {}


def _modern_meta(root: Path) -> dict[str, dict]:
    """``meta.jsonl`` of a modern set: id -> its line, in file order (read once)."""
    if root not in _MODERN_META:
        rows: dict[str, dict] = {}
        for line in (root / "meta.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[str(row["id"])] = row
        _MODERN_META[root] = rows
    return _MODERN_META[root]


def _load_modern(root: Path, id_: str, split: str) -> PageRecord:
    name = root.name
    meta = _modern_meta(root)[id_]
    html = (root / "html" / f"{id_}.html").read_bytes()
    gold = decode_text((root / "gold" / f"{id_}.txt").read_bytes())
    extra = {
        "title": meta.get("title"),
        "author": meta.get("author"),
        "publish_date": meta.get("publish_date") or meta.get("publishing_date"),
        "page_type": meta.get("page_type") or ("article" if name.startswith(("fundus", "post",
                                                                              "newspaper"))
                                                else None),
        "language": meta.get("language"),
        "publisher": meta.get("publisher"),
        # "dataset/id" of pages that must stay in the same split as this one
        "near_duplicates": list(meta.get("near_duplicates") or []),
        "fragment": bool(meta.get("html_is_fragment")),
        "silver": name in SILVER_DATASETS,
    }
    if name == "wcxb_dev":
        truth = json.loads((root / "ground-truth" / f"{id_}.json").read_text(encoding="utf-8"))
        gt = truth.get("ground_truth") or {}
        extra["with"] = list(gt.get("with") or [])
        extra["without"] = list(gt.get("without") or [])
    return PageRecord(name, id_, html, gold, meta.get("url"), split, extra)


_L3S_URLS: dict[Path, dict[str, str]] = {}


def _l3s_urls(root: Path) -> dict[str, str]:
    if root not in _L3S_URLS:
        mapping: dict[str, str] = {}
        for line in (root / "url-mapping.txt").read_text(encoding="utf-8").splitlines():
            if "\t" not in line:
                continue
            urn, url = line.split("\t", 1)
            uuid = urn.strip().strip("<>")
            if uuid.startswith("urn:uuid:"):
                uuid = uuid[len("urn:uuid:"):]
            mapping[uuid] = url.strip()
        _L3S_URLS[root] = mapping
    return _L3S_URLS[root]


def _load_l3s(root: Path, id_: str, split: str) -> PageRecord:
    html = (root / "original" / f"{id_}.html").read_bytes()
    segments = l3s_segments((root / "annotated" / f"{id_}.html").read_bytes())
    segments = _repair_l3s_segments(segments, html)
    gold = "\n".join(text for label, text in segments if label in (1, 2))
    headline = "\n".join(text for label, text in segments if label == 1)
    # Every page was converted to UTF-8 but 242 still declare iso-8859-1: pass this to parse_page.
    extra = {"roles": segments, "headline": headline, "content_type": "text/html; charset=utf-8"}
    return PageRecord("l3s_gn1", id_, html, gold, _l3s_urls(root).get(id_), split, extra)


_QMARK_TOKEN = re.compile(r"\S*\?\S*")


def _repair_l3s_segments(segments: list[tuple[int, str]], original: bytes) -> list[tuple[int, str]]:
    """Restore the characters the annotated L3S-GN1 pages lost.

    The annotated copies replaced every character outside Latin-1 by "?" (``Kosovo?s`` where the
    original page has ``Kosovo’s``), which would never match the page's tokens. A token
    containing "?" is replaced by the original page's token that becomes identical when its
    non-Latin-1 characters are turned into "?" (about 1,650 of 271k gold tokens).
    """
    if not any("?" in text for _, text in segments):
        return segments
    root = _parse_utf8_html(original)
    if root is None:
        return segments
    etree.strip_elements(root, "script", "style", with_tail=False)
    lookup: dict[str, str] = {}
    for tok in " ".join(root.itertext()).split():
        if any(ord(c) > 255 for c in tok):
            lookup.setdefault("".join(c if ord(c) < 256 else "?" for c in tok), tok)
    if not lookup:
        return segments

    def fix(match: re.Match) -> str:
        return lookup.get(match.group(0), match.group(0))

    return [(label, _QMARK_TOKEN.sub(fix, text)) for label, text in segments]


_LOADERS = {
    "dragnet": _load_dragnet,
    "cleaneval": _load_cleaneval,
    "pagetype": _load_pagetype,
    "l3s_gn1": _load_l3s,
    "cleanportaleval": _load_cleanportaleval,
    **{name: _load_modern for name in MODERN_DATASETS},
}

# ----------------------------------------------------------------------------------------------
# L3S-GN1 annotated pages

_SEL_RE = re.compile(r"\bx-nc-sel(\d)\b")
_TAIL = object()
_L3S_SKIP = frozenset({"script", "style", "noscript", "template", "head", "title"})


def _parse_utf8_html(data: bytes):
    """lxml root of an HTML document known to be UTF-8 (all of L3S-GN1 is, whatever it declares)."""
    parser = etree.HTMLParser(
        encoding="utf-8", remove_comments=True, remove_pis=True, recover=True, huge_tree=True
    )
    try:
        return etree.fromstring(data.replace(b"\x00", b""), parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None


def l3s_segments(annotated_html: bytes) -> list[tuple[int, str]]:
    """``(label, text)`` blocks of an L3S-GN1 annotated page, in document order.

    The annotation wraps text in (nested) ``<span class="x-nc-selN">``; a piece of text takes the
    label of its innermost labelled ancestor (0 not content, 1 headline, 2 full text,
    3 supplemental, 4 related content, 5 comments). Elements marked ``x-nc-invisible`` and
    script/style are skipped. Consecutive pieces with the same label form one block unless a block
    element boundary separates them; whitespace is normalised. Unlabelled text is dropped.
    """
    root = _parse_utf8_html(annotated_html)
    if root is None:
        return []
    blocks: list[tuple[int, str]] = []
    current: list[str] = []
    current_label: list[int | None] = [None]

    def flush() -> None:
        if current_label[0] is not None and current:
            joined = " ".join("".join(current).split())
            if joined:
                blocks.append((current_label[0], joined))
        current.clear()
        current_label[0] = None

    def add(piece: str | None, label: int | None) -> None:
        if not piece:
            return
        if label is None:
            if piece.strip():
                flush()
            elif current:
                current.append(piece)
            return
        if label != current_label[0]:
            if not piece.strip():
                if current:
                    current.append(piece)
                return
            flush()
            current_label[0] = label
        current.append(piece)

    # Iterative pre-order walk (annotated pages nest spans deeply). Stack items are either
    # (element, inherited label) or (_TAIL, text, label, flush_before).
    stack: list[tuple] = [(root, None)]
    while stack:
        item = stack.pop()
        if item[0] is _TAIL:
            _, tail, label, block = item
            if block:
                flush()
            add(tail, label)
            continue
        el, inherited = item
        if not isinstance(el.tag, str):
            continue
        tag = el.tag.lower()
        cls = el.get("class") or ""
        if tag in _L3S_SKIP or "x-nc-invisible" in cls:
            continue
        match = _SEL_RE.search(cls)
        label = int(match.group(1)) if match else inherited
        if tag in BLOCK_TAGS:
            flush()
        add(el.text, label)
        children = list(el)
        # After the element: its block boundary, then each child's tail in the parent's label.
        stack.append((_TAIL, None, label, tag in BLOCK_TAGS))
        for child in reversed(children):
            child_block = isinstance(child.tag, str) and child.tag.lower() in BLOCK_TAGS
            stack.append((_TAIL, child.tail, label, child_block))
            stack.append((child, label))

    flush()
    return blocks
