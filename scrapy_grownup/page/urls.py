"""URLs read from page markup, which may be anything: joins and parts that never raise.

``urllib.parse`` raises ``ValueError`` for some strings (``http://[``: "Invalid IPv6 URL"; a
host that changes under NFKC normalisation). A page's bad URL is ignored, never the page's end.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

__all__ = ["join_url", "url_host", "url_path"]


def join_url(base: str | None, href: str) -> str | None:
    """``href`` resolved against ``base`` (``urljoin``); ``None`` when either cannot be parsed."""
    try:
        return urljoin(base or "", href)
    except ValueError:
        return None


def url_host(url: str | None) -> str | None:
    """The host name of ``url`` (lower case), or ``None``."""
    try:
        return urlsplit(url).hostname if url else None
    except ValueError:
        return None


def url_path(url: str | None) -> str:
    """The path of ``url``, or ``""``."""
    try:
        return urlsplit(url).path if url else ""
    except ValueError:
        return ""
