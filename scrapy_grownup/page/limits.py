"""Per-page caps: a page over a cap is truncated and flagged, never dropped or fatal."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageLimits:
    """Upper bounds on the work one page may cause.

    ``max_bytes`` cuts the raw body before decoding, ``max_nodes`` stops adding elements in
    document order, ``max_depth`` folds deeper subtrees into their ancestor at the cap (their text
    is kept, their elements are not nodes). Defaults are far above real article pages (the Dragnet
    median is ~800 elements) yet keep a pathological page to tens of milliseconds.
    """

    max_bytes: int = 5_000_000
    max_nodes: int = 8_000
    max_depth: int = 128

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_nodes", "max_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"PageLimits.{name} must be >= 1")

    @classmethod
    def from_settings(cls, settings) -> "PageLimits":
        """Build from Scrapy settings (``GROWNUP_MAX_PAGE_BYTES``, ``_NODES``, ``_DEPTH``)."""
        default = cls()
        return cls(
            max_bytes=settings.getint("GROWNUP_MAX_PAGE_BYTES", default.max_bytes),
            max_nodes=settings.getint("GROWNUP_MAX_PAGE_NODES", default.max_nodes),
            max_depth=settings.getint("GROWNUP_MAX_PAGE_DEPTH", default.max_depth),
        )
