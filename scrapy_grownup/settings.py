"""The ``GROWNUP_*`` Scrapy settings: defaults in one place, read once per crawler.

The README's settings table lists these same names and defaults; a test keeps the two in step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .limits import PageLimits

DEFAULTS: dict[str, object] = {
    "GROWNUP_ENABLED": True,
    "GROWNUP_MODEL": "auto",
    "GROWNUP_DEVICE": "auto",
    "GROWNUP_BATCH_PAGES": 32,
    "GROWNUP_BATCH_NODES": 40_000,
    "GROWNUP_BATCH_WAIT_MS": 50,
    "GROWNUP_QUEUE_SIZE": 256,
    "GROWNUP_MODEL_PROCESS": True,
    "GROWNUP_MODEL_THREADS": 1,
    "GROWNUP_WORKERS": "auto",
    "GROWNUP_MAX_PENDING_PAGES": 64,
    "GROWNUP_MAX_PAGE_BYTES": PageLimits.max_bytes,
    "GROWNUP_MAX_PAGE_NODES": PageLimits.max_nodes,
    "GROWNUP_MAX_PAGE_DEPTH": PageLimits.max_depth,
    "GROWNUP_PAGE_TYPES": [],
    "GROWNUP_MIN_TEXT_LENGTH": 1,
    "GROWNUP_AUTO_ITEMS": True,
    "GROWNUP_OUTPUT_FORMAT": "text",
}
OUTPUT_FORMATS = ("text", "markdown")


@dataclass(frozen=True)
class GrownupSettings:
    """Typed view of the ``GROWNUP_*`` settings of one crawler."""

    enabled: bool
    model: str
    device: str | None  # None: CUDA when available, else CPU
    batch_pages: int
    batch_nodes: int
    batch_wait_ms: float
    queue_size: int
    model_process: bool
    model_threads: int
    workers: int
    max_pending_pages: int
    limits: PageLimits
    page_types: frozenset[str]
    min_text_length: int
    auto_items: bool
    output_format: str

    @classmethod
    def from_settings(cls, settings) -> "GrownupSettings":
        def get(name):
            return settings.get(name, DEFAULTS[name])

        device = str(get("GROWNUP_DEVICE") or "auto")
        output_format = str(get("GROWNUP_OUTPUT_FORMAT"))
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"GROWNUP_OUTPUT_FORMAT must be one of {OUTPUT_FORMATS}, "
                             f"not {output_format!r}")
        page_types = settings.getlist("GROWNUP_PAGE_TYPES", DEFAULTS["GROWNUP_PAGE_TYPES"])
        values = cls(
            enabled=settings.getbool("GROWNUP_ENABLED", DEFAULTS["GROWNUP_ENABLED"]),
            model=str(get("GROWNUP_MODEL")),
            device=None if device == "auto" else device,
            batch_pages=settings.getint("GROWNUP_BATCH_PAGES", DEFAULTS["GROWNUP_BATCH_PAGES"]),
            batch_nodes=settings.getint("GROWNUP_BATCH_NODES", DEFAULTS["GROWNUP_BATCH_NODES"]),
            batch_wait_ms=settings.getfloat("GROWNUP_BATCH_WAIT_MS",
                                            DEFAULTS["GROWNUP_BATCH_WAIT_MS"]),
            queue_size=settings.getint("GROWNUP_QUEUE_SIZE", DEFAULTS["GROWNUP_QUEUE_SIZE"]),
            model_process=settings.getbool("GROWNUP_MODEL_PROCESS",
                                           DEFAULTS["GROWNUP_MODEL_PROCESS"]),
            model_threads=settings.getint("GROWNUP_MODEL_THREADS",
                                          DEFAULTS["GROWNUP_MODEL_THREADS"]),
            workers=_workers(settings.get("GROWNUP_WORKERS", DEFAULTS["GROWNUP_WORKERS"])),
            max_pending_pages=settings.getint("GROWNUP_MAX_PENDING_PAGES",
                                              DEFAULTS["GROWNUP_MAX_PENDING_PAGES"]),
            limits=PageLimits.from_settings(settings),
            page_types=frozenset(t.strip() for t in page_types if t.strip()),
            min_text_length=settings.getint("GROWNUP_MIN_TEXT_LENGTH",
                                            DEFAULTS["GROWNUP_MIN_TEXT_LENGTH"]),
            auto_items=settings.getbool("GROWNUP_AUTO_ITEMS", DEFAULTS["GROWNUP_AUTO_ITEMS"]),
            output_format=output_format,
        )
        for name in ("batch_pages", "batch_nodes", "queue_size", "max_pending_pages",
                     "model_threads"):
            if getattr(values, name) < 1:
                raise ValueError(f"GROWNUP_{name.upper()} must be >= 1")
        if values.workers < 0:
            raise ValueError("GROWNUP_WORKERS must be >= 0")
        return values


def _workers(value) -> int:
    """``"auto"``: one featurization process per core but one (the reactor and model need it)."""
    if str(value).strip().lower() == "auto":
        return max(1, (os.cpu_count() or 2) - 1)
    return int(value)
