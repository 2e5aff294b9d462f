"""The corpus directory's bookkeeping: configuration, per-archive markers, index and manifest.

Written while reading (each atomically: temporary name, then rename):

- ``config.json``: what every shard of the directory shares (encoder and its version, feature
  version, ``shard_pages``, page limits, record types). A run with other values refuses to write
  into the directory, since finished shards are reused on reruns.
- ``files/<key>.json``: one marker per archive read to its end (damaged archives included, with
  their ``errors``): its records, HTML records, pages, skip counts and shards. An archive with a
  marker is not read again. ``files/<key>.failed.json`` notes an archive that could not be
  opened or fetched (it is tried again on the next run).

Written by ``finalize`` (under a file lock, so workers finishing at the same time serialise;
the last one to finish sees every marker): ``index.json``, ``pairs.safetensors`` and
``manifest.json`` (see the package docstring for the fields).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from scrapy_grownup.errors import CorpusConfigError
from scrapy_grownup.warc.pairs import build_pairs, write_pairs
from scrapy_grownup.warc.shards import SHARD_DIR, read_header

logger = logging.getLogger(__name__)
CORPUS_FORMAT = "grownup-warc-corpus/1"
FILES_DIR = "files"
INDEX_FILE = "index.json"
MANIFEST_FILE = "manifest.json"
PAIRS_FILE = "pairs.safetensors"
CONFIG_FILE = "config.json"


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_json(path: str | os.PathLike, data) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)
    return path


def read_json(path: str | os.PathLike):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# -- stale temporaries -------------------------------------------------------------------------
# The names this package writes under before a rename: ``.<name>.tmp-<pid>`` (shards, markers,
# index, pairs, manifest, config) and the pair-grouping directory ``.pairs-spill-<pid>``.
_TEMPORARY = re.compile(r"\..+\.tmp-(\d+)")
_SPILL = re.compile(r"\.pairs-spill-(\d+)")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return pid > 0  # exists but is another user's, or not a pid this system can check
    return True


def remove_stale_temporaries(directory: str | os.PathLike, min_age: float = 0.0
                             ) -> tuple[int, int]:
    """Remove what a killed writer left: temporaries of this package's own naming in the
    corpus directory, ``files/`` and ``shards/`` whose process is no longer running on this
    machine and that were last written ``min_age`` seconds ago or more (a queue worker sharing
    the directory with other machines passes an hour, as their pids mean nothing here).
    Nothing else is touched. Returns ``(entries removed, bytes freed)``."""
    directory = Path(directory)
    removed = freed = 0
    now_ = time.time()
    for folder in (directory, directory / FILES_DIR, directory / SHARD_DIR):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _TEMPORARY.fullmatch(entry.name) or _SPILL.fullmatch(entry.name)
            if match is None or _pid_alive(int(match.group(1))):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if now_ - info.st_mtime < min_age:
                    continue
                if entry.is_dir(follow_symlinks=False) and _SPILL.fullmatch(entry.name):
                    size = sum(p.stat().st_size for p in Path(entry.path).rglob("*")
                               if p.is_file())
                    shutil.rmtree(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    size = info.st_size
                    os.unlink(entry.path)
                else:
                    continue
            except OSError as exc:
                logger.warning("could not remove the stale temporary %s: %s", entry.path, exc)
                continue
            removed += 1
            freed += size
            logger.info("removed %s, left by process %s that no longer runs", entry.path,
                        match.group(1))
    return removed, freed


# -- config -----------------------------------------------------------------------------------
def ensure_config(directory: str | os.PathLike, config: dict) -> dict:
    """Create ``config.json`` or check that the existing one matches ``config``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CONFIG_FILE
    if not path.exists():
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        write_json(tmp, dict(config, format=CORPUS_FORMAT))
        try:
            os.link(tmp, path)  # atomic create-if-absent: two workers may start together
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    existing = read_json(path)
    wrong = {k: (existing.get(k), v) for k, v in config.items() if existing.get(k) != v}
    if wrong:
        details = ", ".join(f"{k}: directory has {a!r}, this run {b!r}"
                            for k, (a, b) in sorted(wrong.items()))
        raise CorpusConfigError(f"{directory} holds a corpus written with other settings "
                                f"({details}); use another output directory")
    return existing


# -- per-archive markers ------------------------------------------------------------------------
def marker_path(directory: str | os.PathLike, key: str, failed: bool = False) -> Path:
    return Path(directory) / FILES_DIR / f"{key}{'.failed' if failed else ''}.json"


def is_done(directory: str | os.PathLike, key: str) -> bool:
    return marker_path(directory, key).is_file()


def write_marker(directory: str | os.PathLike, key: str, data: dict) -> Path:
    path = write_json(marker_path(directory, key), data)
    marker_path(directory, key, failed=True).unlink(missing_ok=True)
    return path


def write_failure(directory: str | os.PathLike, key: str, data: dict) -> Path:
    return write_json(marker_path(directory, key, failed=True), data)


def iter_markers(directory: str | os.PathLike, failed: bool = False) -> Iterator[dict]:
    files = Path(directory) / FILES_DIR
    if not files.is_dir():
        return
    for path in sorted(files.glob("*.json")):
        if path.name.endswith(".failed.json") != failed:
            continue
        try:
            yield read_json(path)
        except (OSError, ValueError):  # a marker is written atomically; this is outside damage
            continue


# -- finalize -----------------------------------------------------------------------------------
@contextmanager
def directory_lock(directory: str | os.PathLike):
    path = Path(directory) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def finalize(directory: str | os.PathLike, partition_pages: int = 100_000) -> dict:
    """Write ``index.json``, ``pairs.safetensors`` and ``manifest.json`` from the markers.

    Idempotent; safe to run while other workers are still writing (it indexes the archives
    finished so far) and again at any time (``grownup warc --finalize-only``).

    Args:
        directory: the corpus directory.
        partition_pages: pages per spill partition when pairs are formed
            (``GROWNUP_WARC_PAIR_PARTITION_PAGES``).

    Returns:
        The manifest written (``pages``, ``pairs``, ``shards``, ``skipped``...).
    """
    directory = Path(directory)
    with directory_lock(directory):
        config = read_json(directory / CONFIG_FILE) if (directory / CONFIG_FILE).is_file() \
            else {}
        markers = sorted(iter_markers(directory), key=lambda m: m["key"])
        failures = list(iter_markers(directory, failed=True))
        shards, first = [], 0
        skipped: Counter[str] = Counter()
        records = candidates = missing = 0
        for marker in markers:
            skipped.update(marker.get("skipped", {}))
            records += marker.get("records", 0)
            candidates += marker.get("candidates", 0)
            for shard in marker.get("shards", []):
                if shard["pages"] == 0:
                    continue
                if not (directory / SHARD_DIR / shard["name"]).is_file():
                    logger.error("%s: shard %s is missing; delete files/%s.json to read %s "
                                 "again", directory, shard["name"], marker["key"],
                                 marker["source"])
                    missing += 1
                    continue
                shards.append({
                    "file": f"{SHARD_DIR}/{shard['name']}", "pages": shard["pages"],
                    "nodes": shard["nodes"], "first_page": first, "sha256": shard["sha256"],
                    "bytes": shard["bytes"], "source": marker["source"],
                    "part": shard["part"],
                })
                first += shard["pages"]
        for failure in failures:
            skipped.update(failure.get("skipped", {"file_unreadable": 1}))

        def pages():
            for shard in shards:
                header = read_header(directory / shard["file"])
                for row, url in enumerate(header.get("urls", [])):
                    yield shard["first_page"] + row, url

        spill = directory / f".pairs-spill-{os.getpid()}"
        pairs = build_pairs(pages(), spill, first, partition_pages)
        pairs_meta = {"pages": str(first), "encoder": str(config.get("encoder"))}
        write_pairs(directory / PAIRS_FILE, pairs, pairs_meta)
        from scrapy_grownup.warc.shards import file_sha256

        pair_count = int(len(pairs["pairs"]))
        common = {
            "format": CORPUS_FORMAT,
            "encoder": config.get("encoder"),
            "encoder_version": config.get("encoder_version"),
            "text_dim": config.get("text_dim"),
            "feature_version": config.get("feature_version"),
        }
        index = dict(common, pages=first, shards=shards, pairs={
            "file": PAIRS_FILE, "count": pair_count,
            "sha256": file_sha256(directory / PAIRS_FILE)})
        write_json(directory / INDEX_FILE, index)
        manifest = dict(
            common,
            pages=first,
            skipped=dict(sorted(skipped.items())),
            pairs=pair_count,
            shards=len(shards),
            sites=int(pairs["sites"]),
            pages_without_site=int(pairs["without_site"]),
            records=records,
            html_records=candidates,
            files={"read": len(markers), "failed": len(failures),
                   "damaged": sum(1 for m in markers if m.get("errors"))},
            missing_shards=missing,
            workers=sorted({m.get("worker", "?") for m in markers}),
            shard_pages=config.get("shard_pages"),
            limits=config.get("limits"),
            record_types=config.get("record_types"),
            finalized=now(),
        )
        write_json(directory / MANIFEST_FILE, manifest)
        return manifest
