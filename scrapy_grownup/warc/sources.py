"""Input archives: files, directories, globs and http(s) URLs, each with a stable key.

A ``Source`` is one archive file. Its ``key`` names everything the corpus writes for it (shards,
the per-file marker), so it must be the same on every machine and on every rerun: it is derived
from the resolved path (symbolic links followed, so a file reached through a link is the same
archive) or the URL, never from the order or the time the file was read. Only regular files are
read: a FIFO, socket or device named like an archive is passed over.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

ARCHIVE_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")
_GLOB_CHARS = re.compile(r"[*?\[]")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Source:
    """One archive to read: a local path or an http(s) URL."""

    location: str  # absolute path, or URL

    @property
    def is_url(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    @property
    def name(self) -> str:
        return self.location.rstrip("/").rsplit("/", 1)[-1] or "archive"

    @property
    def key(self) -> str:
        """Readable, unique, filesystem-safe id: ``<name>-<hash of the location>``."""
        stem = self.name
        for suffix in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                break
        stem = _UNSAFE.sub("_", stem).strip("._-")[:48] or "archive"
        digest = hashlib.sha1(self.location.encode("utf-8")).hexdigest()[:12]
        return f"{stem}-{digest}"

    def open(self, timeout: float = 60.0) -> BinaryIO:
        """A binary stream of the archive (seekable for local files). Raises ``OSError``."""
        if self.is_url:
            import urllib.request

            request = urllib.request.Request(self.location,
                                             headers={"User-Agent": "scrapy-grownup-warc"})
            return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - http(s) only
        return open_regular_file(self.location)

    def size(self) -> int | None:
        if self.is_url:
            return None
        try:
            return os.path.getsize(self.location)
        except OSError:
            return None


def open_regular_file(path: str) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file; ``OSError`` otherwise.

    Opened without blocking and checked on the open descriptor: a FIFO (or a device) named
    ``*.warc`` would block ``open()`` forever, waiting for a writer.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=1 << 20)
    except BaseException:
        os.close(fd)
        raise


def _is_regular(path: Path) -> bool:
    """A regular file, or a link to one (not a FIFO, socket or device)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def _local(path: Path) -> Source:
    """Local archives are keyed by their resolved path: the same file reached through a
    symbolic link (or ``..``) is one archive, read once."""
    return Source(str(path.expanduser().resolve()))


def is_archive_name(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def source_for(spec: str) -> Source:
    """The ``Source`` of one explicit path or URL (no expansion)."""
    spec = spec.strip()
    if spec.startswith(("http://", "https://")):
        return Source(spec)
    if spec.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        spec = unquote(urlsplit(spec).path)
    return _local(Path(spec))


def split_specs(value: str | Iterable[str] | None) -> list[str]:
    """``-a paths=a.warc.gz,dir/ "b c.warc"`` style values: comma, newline or list separated."""
    if value is None:
        return []
    if not isinstance(value, str):
        return [part for item in value for part in split_specs(item)]
    return [part.strip() for part in re.split(r"[,\n]", value) if part.strip()]


def expand(specs: Iterable[str]) -> tuple[list[Source], list[str]]:
    """Sources for files, directories (recursively, archive suffixes only), globs and URLs.

    An explicit file is taken whatever its name; directories and globs keep the names ending in
    ``.warc``, ``.warc.gz``, ``.arc`` or ``.arc.gz``. Returns ``(sources, missing)``: sources in a
    stable order without duplicates, and the specs that matched nothing.
    """
    out: list[Source] = []
    seen: set[str] = set()
    missing: list[str] = []

    def add(source: Source) -> None:
        if source.location not in seen:
            seen.add(source.location)
            out.append(source)

    for spec in specs:
        found = list(_expand_one(spec))
        if not found:
            missing.append(spec)
        for source in found:
            add(source)
    return out, missing


def _expand_one(spec: str) -> Iterator[Source]:
    spec = spec.strip()
    if not spec:
        return
    if spec.startswith(("http://", "https://")):
        yield Source(spec)
        return
    if spec.startswith("file://"):
        spec = source_for(spec).location
    path = Path(spec).expanduser()
    if _GLOB_CHARS.search(spec) and not path.exists():
        for match in sorted(glob.glob(str(path), recursive=True)):
            p = Path(match)
            if is_archive_name(p.name) and _is_regular(p):
                yield _local(p)
            elif p.is_dir():
                yield from _walk(p)
        return
    if path.is_dir():
        yield from _walk(path)
    elif _is_regular(path):
        yield _local(path)


def _walk(directory: Path) -> Iterator[Source]:
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if is_archive_name(name) and _is_regular(path):
                yield _local(path)
