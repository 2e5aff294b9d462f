"""Bytes to text: HTTP charset, then BOM, then ``<meta charset>``, then detection.

A declaration is only trusted when the body decodes cleanly under it, so a wrong declaration
falls through to the next source instead of producing mojibake or an exception.
"""

from __future__ import annotations

import codecs
import json
import re

from scrapy_grownup.errors import NotHTMLError

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(rb"charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]+)", re.I)
_META_CHARSET = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]+)", re.I | re.S
)
# WHATWG: labels that browsers map to a superset encoding.
_ALIASES = {
    "latin1": "cp1252", "latin-1": "cp1252", "iso-8859-1": "cp1252", "iso8859-1": "cp1252",
    "ascii": "cp1252", "us-ascii": "cp1252", "iso-8859-9": "cp1254", "tis-620": "cp874",
    "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "shift-jis": "cp932",
    "shift_jis": "cp932", "sjis": "cp932", "euc-kr": "cp949", "x-sjis": "cp932",
}
# Python codecs that a page may name but no browser decodes a page with.
_NOT_PAGE_ENCODINGS = frozenset({"undefined", "idna", "punycode", "unicode-escape",
                                 "raw-unicode-escape", "unicode_escape", "raw_unicode_escape",
                                 "utf-7", "mbcs", "oem"})
# Magic numbers of formats that are certainly not HTML.
_BINARY_MAGIC = (
    b"%PDF-", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"\xff\xd8\xff", b"PK\x03\x04",
    b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"RIFF", b"\x00\x00\x01\x00", b"OggS", b"ID3",
    b"\x7fELF", b"wOFF", b"wOF2", b"%!PS",
)


def resolve_encoding(label: str | bytes | None) -> str | None:
    """Normalised Python codec name for an encoding label, or None when unknown."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "ignore")
    label = label.strip().strip("\"'").lower()
    label = _ALIASES.get(label, label)
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError):
        return None
    if info.name in _NOT_PAGE_ENCODINGS or not getattr(info, "_is_text_encoding", True):
        return None  # "undefined" always fails, "base64", "rot13"... are not text encodings
    return _ALIASES.get(info.name, info.name)


# Bytes below 0x20 that text does not hold (tab, LF, VT, FF and CR aren't counted), and DEL.
_CONTROL_BYTES = bytes(range(0, 9)) + bytes(range(14, 32)) + b"\x7f"
# Share of the first 4 KB that may be control bytes: random bytes have ~11%, HTML ~0% (a few
# stray ones are forgiven; a short random body without a tag fails the markup test anyway).
_MAX_CONTROL_SHARE = 0.05
_MAX_CONTROL_BYTES = 8
# What makes text HTML: at least one tag (``<p>``, ``</div>``, ``<br/>``, ``<a href=x>``), a
# comment, a doctype or an XML declaration. ``a < b``, ``<https://x>`` and ``<me@x.org>`` are
# not tags. Linear: an attribute run stops at the next ``<``.
_MARKUP = re.compile(
    rb"<(?:/?[A-Za-z][A-Za-z0-9:_.-]{0,63}(?:\s[^<>]{0,8192})?/?>|!--|!doctype|\?xml)", re.I)
_MARKUP_TEXT = re.compile(_MARKUP.pattern.decode("ascii"), re.I)


def sniff_binary(body: bytes | str, content_type: str | bytes | None = None) -> None:
    """Raise ``NotHTMLError`` for a body that is not an HTML document: a binary format (magic
    number, NUL or other control bytes: random bytes), JSON, or text without a single tag
    (plain text). A fragment such as ``<p>Hello</p>`` is HTML. A ``str`` body is judged on its
    characters (JSON, no tag); bytes that a BOM or the header's charset (``content_type``)
    declare UTF-16/32 are judged on the text they decode to, not on their NUL bytes."""
    if isinstance(body, str):
        _sniff_text(body, _MARKUP_TEXT)
        return
    head = body[:1024]
    if head.startswith(_BINARY_MAGIC):
        raise NotHTMLError(f"binary content (starts with {head[:8]!r})")
    for bom, name in _BOMS:
        if body.startswith(bom):  # UTF-16/32 text: judged on its characters
            _sniff_text(body[len(bom):].decode(name, errors="replace"), _MARKUP_TEXT)
            return
    wide = _header_charset(content_type)
    if wide and wide.startswith(("utf-16", "utf-32")) and _decodes(body, wide):
        try:  # UTF-16 without a BOM, declared in the header: HTML if its text is
            _sniff_text(body.decode(wide), _MARKUP_TEXT)
            return
        except NotHTMLError:
            pass  # the declaration may lie (UTF-8 bytes): judged on the bytes below
    if head.count(b"\x00") > len(head) // 8 and len(head) >= 32:
        raise NotHTMLError("binary content (NUL bytes in the first kilobyte)")
    sample = body[:4096]
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    if controls > max(_MAX_CONTROL_BYTES, _MAX_CONTROL_SHARE * len(sample)):
        raise NotHTMLError(f"binary content ({controls} control bytes in the first "
                           f"{len(sample)})")
    _sniff_text(body, _MARKUP)


def _sniff_text(text, markup: re.Pattern) -> None:
    """``NotHTMLError`` for JSON and for text without any tag (``text`` is bytes or str)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[", b"{", b"[") and stripped[-1:] in ("}", "]", b"}", b"]"):
        try:
            json.loads(stripped)
        except ValueError:  # not JSON (JSONDecodeError and UnicodeDecodeError are ValueErrors)
            pass
        else:
            raise NotHTMLError("JSON, not HTML")
    if not markup.search(text):
        raise NotHTMLError("no HTML tag in the document (plain text)")


def looks_like_html(body: bytes) -> bool:
    """Cheap sniff used for responses whose content type is missing or generic."""
    head = body[:2048].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<?xml")) or any(
        marker in head for marker in (b"<html", b"<head", b"<body", b"<div", b"<p>", b"<title")
    )


HTML_TYPES = ("text/html", "application/xhtml+xml")
# Content types that say nothing about the body: the bytes are sniffed instead.
GENERIC_TYPES = ("", "text/plain", "application/octet-stream", "binary/octet-stream")


def is_html(content_type: str | bytes | None, body: bytes) -> bool:
    """Whether a fetched or archived body should be treated as an HTML page.

    An HTML content type is trusted; a missing or generic one falls back to sniffing; any other
    declared type (images, PDF, JSON, CSS...) is not HTML, so it passes untouched.
    """
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in HTML_TYPES:
        return True
    return mime in GENERIC_TYPES and looks_like_html(body)


def _decodes(body: bytes, encoding: str) -> bool:
    try:
        body.decode(encoding)
    except (ValueError, LookupError):  # UnicodeError is a ValueError; "undefined" raises it
        return False
    return True


def _header_charset(content_type: str | bytes | None) -> str | None:
    """The codec named by a Content-Type header's ``charset=``, or None."""
    if not content_type:
        return None
    if isinstance(content_type, str):
        content_type = content_type.encode("latin-1", "ignore")
    match = _HEADER_CHARSET.search(content_type)
    return resolve_encoding(match.group(1)) if match else None


def candidate_encodings(body: bytes, content_type: str | bytes | None = None) -> list[str]:
    """Declared encodings in the order they are trusted (duplicates removed)."""
    found: list[str | None] = [_header_charset(content_type)]
    for bom, name in _BOMS:
        if body.startswith(bom):
            found.append(name)
            break
    match = _META_CHARSET.search(body[:8192])
    if match:
        meta = resolve_encoding(match.group(1))
        # A meta tag in bytes we can read as ASCII cannot truthfully declare UTF-16/32.
        if meta and not meta.startswith(("utf-16", "utf-32")):
            found.append(meta)
    out: list[str] = []
    for name in found:
        if name and name not in out:
            out.append(name)
    return out


def decode_html(body: bytes, content_type: str | bytes | None = None) -> tuple[str, str]:
    """Decode an HTML body; returns ``(text, encoding)``. Never raises on bad bytes.

    Sources in order: HTTP header charset, BOM, ``<meta charset>``/``http-equiv``, detection
    (UTF-8 if it decodes strictly, UTF-8 with replacements if invalid bytes are rare, else
    cp1252). The first declared encoding under which the body decodes cleanly wins; a
    declaration the bytes contradict is ignored, so a wrong one never crashes and rarely garbles.
    """
    for name in (*candidate_encodings(body, content_type), "utf-8"):
        try:  # decoded once: a check first and a decode after cost a page twice
            return _strip_bom(body.decode(name)), name
        except (ValueError, LookupError):  # as in ``_decodes``
            continue
    name = "utf-8" if _mostly_utf8(body) else "cp1252"
    return _strip_bom(body.decode(name, errors="replace")), name


def _mostly_utf8(body: bytes) -> bool:
    """True when invalid sequences are rare, i.e. UTF-8 with a few corrupt bytes."""
    sample = body[:65536]
    text = sample.decode("utf-8", errors="replace")
    multibyte = sum(1 for ch in text if ord(ch) > 127 and ch != "\ufffd")
    return multibyte > 4 * text.count("\ufffd")


def _strip_bom(text: str) -> str:
    return text[1:] if text.startswith("\ufeff") else text
