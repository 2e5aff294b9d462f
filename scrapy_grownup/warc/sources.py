"""Input archives: files, directories, globs and http(s) URLs, each with a stable key.

A ``Source`` is one archive file. Its ``key`` names everything the corpus writes for it (shards,
the per-file marker), so it must be the same on every machine and on every rerun: it is derived
from the resolved path (symbolic links followed, so a file reached through a link is the same
archive) or the URL, never from the order or the time the file was read. Only regular files are
read: a FIFO, socket or device named like an archive is passed over, counted.

What a path is, is read from its first bytes (``archive_format``): a ``WARC/`` or ARC header,
gzipped or not, whatever the file is called. A file named like an archive (``.warc``,
``.warc.gz``, ``.arc``, ``.arc.gz``) that is not one is still read as one, so that its damage
(or its emptiness) is counted by the reader instead of being passed over.

Every path given ends as archives (or, for ``grownup extract``, pages) or as a counted, logged
``PathSkip`` with its reason (``PATH_SKIP_REASONS``): ``missing_path`` (nothing there, or a glob
that matched nothing), ``dangling_link`` (a symbolic link to nothing), ``link_loop`` (links that
lead back to themselves, or a linked directory inside itself), ``not_a_file`` (a FIFO, socket or
device), ``unreadable_path`` (a directory that cannot be listed, a file that cannot be opened)
and ``empty_directory`` (a directory given, or one named like an archive, with no input in it).
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

ARCHIVE_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")
PATH_SKIP_REASONS = ("missing_path", "dangling_link", "link_loop", "not_a_file",
                     "unreadable_path", "empty_directory")
_GLOB_CHARS = re.compile(r"[*?\[]")
_SNIFF_BYTES = 4096
# An ARC record's header line: URL, IP address, 14-digit date, content type, length.
_ARC_LINE = re.compile(rb"^\S+ \d{1,3}(?:\.\d{1,3}){3} \d{14} \S+ \d+\r?$")
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


@dataclass(frozen=True)
class PathSkip:
    """A path that gives no archive (or page), and why (one of ``PATH_SKIP_REASONS``)."""

    path: str
    reason: str
    detail: str = ""


def archive_format(path: str | os.PathLike) -> str | None:
    """``"warc"`` or ``"arc"`` when the file's first bytes (gunzipped when they are gzip data)
    are a WARC or ARC header, whatever the file is called; ``None`` otherwise (also for a file
    that cannot be read, a FIFO or a directory)."""
    try:
        with open_regular_file(str(path)) as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return None
    return sniff_archive(head)


def sniff_archive(head: bytes) -> str | None:
    """``archive_format`` of a file's first bytes."""
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(31).decompress(head, _SNIFF_BYTES)
        except zlib.error:
            return None
    head = head.lstrip(b"\r\n\t ")
    if head.startswith(b"WARC/"):
        return "warc"
    if head.startswith(b"filedesc://"):
        return "arc"
    if _ARC_LINE.match(head.split(b"\n", 1)[0]):
        return "arc"  # an ARC file without its version block
    return None


def expand(specs: Iterable[str]) -> tuple[list[Source], list[str]]:
    """Sources for files, directories (recursively), globs and URLs.

    An explicit file is taken whatever its name; directories and globs keep the archives
    (``archive_format``) and the files named like archives. Returns ``(sources, missing)``:
    sources in a stable order without duplicates, and the specs that matched nothing.
    ``expand_inputs`` also says why each other path gave nothing.
    """
    found = expand_inputs(specs)
    return found.sources, found.missing


@dataclass
class Inputs:
    """What ``expand_inputs`` found, in the order given: ``items`` holds each ``Source``
    (archive), ``Path`` (a page, with ``page_name``) and ``PathSkip``."""

    items: list = field(default_factory=list)
    # the specs that gave no archive or page (each also has its ``PathSkip`` in ``items``)
    missing: list[str] = field(default_factory=list)

    @property
    def sources(self) -> list[Source]:
        return [item for item in self.items if isinstance(item, Source)]

    @property
    def pages(self) -> list[Path]:
        return [item for item in self.items if isinstance(item, Path)]

    @property
    def skipped(self) -> list[PathSkip]:
        return [item for item in self.items if isinstance(item, PathSkip)]


def expand_inputs(specs: Iterable[str], page_name: Callable[[str], bool] | None = None,
                  sort_pages: bool = False) -> Inputs:
    """Archives (and, with ``page_name``, pages) of files, directories, globs and URLs, and a
    ``PathSkip`` for every path that gives neither.

    A file given by name is an archive when its content says so (``archive_format``) or its
    name does; otherwise a page when ``page_name`` is given, else an archive still (its reader
    counts what it holds). Under a directory, archives by content or name, and the files for
    which ``page_name(name)`` is true; other files are left out, and links, FIFOs and the like
    are counted skips when named like an archive (or a page). Linked directories are followed,
    a link back into a directory being walked is a ``link_loop``. A spec that does not exist is
    a ``missing_path`` skip, a directory without any input an ``empty_directory`` one; every
    spec that gave no archive or page is also in ``missing``. Duplicates (the same file through links or two specs) are kept
    once. ``sort_pages`` orders each directory's inputs by path (``grownup extract``'s order)
    instead of files before sub-directories.
    """
    out = Inputs()
    seen: set = set()

    for spec in specs:
        items = list(_expand_one(spec, page_name, sort_pages))
        if not any(isinstance(item, (Source, Path)) for item in items):
            out.missing.append(spec)
            if not items:
                items = [PathSkip(spec, "missing_path", "no such file, directory or match")]
        for item in items:
            key = item if isinstance(item, PathSkip) else (
                item.location if isinstance(item, Source) else str(item.resolve()))
            if key not in seen:
                seen.add(key)
                out.items.append(item)
    return out


def _expand_one(spec: str, page_name, sort_pages: bool) -> Iterator:
    spec = spec.strip()
    if not spec:
        return
    if spec.startswith(("http://", "https://")):
        yield Source(spec)
        return
    if spec.startswith("file://"):
        spec = source_for(spec).location
    path = Path(spec).expanduser()
    if _GLOB_CHARS.search(spec) and not os.path.lexists(path):
        for match in sorted(glob.glob(str(path), recursive=True)):
            p = Path(match)
            if p.is_dir():
                yield from (item for _, item in _walk(p, page_name, sort_pages, frozenset()))
                continue
            item = _file_item(p, page_name, explicit=False)
            if item is not None:
                yield item
        return
    if not os.path.lexists(path):
        return  # missing
    skip = _path_problem(path)
    if skip is not None:
        yield PathSkip(spec, skip.reason, skip.detail)
        return
    if path.is_dir():
        found = [item for _, item in _walk(path, page_name, sort_pages, frozenset())]
        if not any(isinstance(item, (Source, Path)) for item in found):
            found.append(PathSkip(spec, "empty_directory",
                                  "no archive" + (" or page" if page_name else "") + " in it"))
        yield from found
    else:
        yield _file_item(path, page_name, explicit=True)


def _file_item(path: Path, page_name, explicit: bool):
    """A file's ``Source`` (archive), ``Path`` (page), ``PathSkip`` or None (not an input).
    ``explicit``: named by the user, so never left out."""
    skip = _path_problem(path)
    if skip is not None:
        return skip if explicit or _interesting(path.name, page_name) else None
    if _is_archive(path):
        return _local(path)
    if page_name is not None and (explicit or page_name(path.name)):
        return path
    return _local(path) if explicit else None


def _is_archive(path: Path) -> bool:
    return archive_format(path) is not None or is_archive_name(path.name)


def _interesting(name: str, page_name) -> bool:
    return is_archive_name(name) or (page_name is not None and page_name(name))


def _path_problem(path: Path) -> PathSkip | None:
    """Why ``path`` (which exists, perhaps as a link) cannot be read, or None."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return PathSkip(str(path), "link_loop", "symbolic links that lead back to "
                                                    "themselves")
        if path.is_symlink() and exc.errno == errno.ENOENT:
            return PathSkip(str(path), "dangling_link",
                            f"a symbolic link to {os.readlink(path)!r}, which does not exist")
        return PathSkip(str(path), "unreadable_path", exc.strerror or str(exc))
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return PathSkip(str(path), "not_a_file", "not a regular file (a FIFO, socket or device)")


def _walk(directory: Path, page_name, sort_pages: bool, ancestors: frozenset) -> Iterator:
    """``(path, item)`` of the inputs under ``directory``: its files, then its
    sub-directories' (or all ordered by path with ``sort_pages``). ``ancestors`` holds the
    (device, inode) of the directories being walked, so that a link back into one of them is
    one counted ``link_loop`` instead of a walk without end."""
    try:
        st = directory.stat()
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as exc:
        yield directory, PathSkip(str(directory), "unreadable_path", exc.strerror or str(exc))
        return
    identity = (st.st_dev, st.st_ino)
    if identity in ancestors:
        yield directory, PathSkip(str(directory), "link_loop",
                                  "a link to a directory that it is inside of")
        return
    ancestors = ancestors | {identity}
    files: list = []
    subdirs: list = []
    for entry in entries:
        path = Path(entry.path)
        problem = _path_problem(path)
        if problem is None and path.is_dir():
            subdirs.append(path)
            continue
        # a link loop is counted whatever its name: it may stand for a directory
        item = problem if problem is not None and problem.reason == "link_loop" \
            else _file_item(path, page_name, explicit=False)
        if item is not None:
            files.append((path, item))
    found = list(files)
    for sub in subdirs:
        inside = list(_walk(sub, page_name, sort_pages, ancestors))
        if is_archive_name(sub.name) and not any(isinstance(item, (Source, Path))
                                                 for _, item in inside):
            # a directory called like an archive (a download that made a directory?)
            inside.append((sub, PathSkip(str(sub), "empty_directory",
                                         "a directory named like an archive, with no archive "
                                         "in it")))
        found.extend(inside)
    if sort_pages:
        found.sort(key=lambda pair: pair[0])
    yield from found
