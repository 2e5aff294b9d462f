"""Per-request control of the add-on: ``request.meta["grownup"]``.

- ``False``: the page is not extracted; the items of its callback pass untouched and no
  automatic item is made (counted ``grownup/skipped/meta``).
- absent, ``None`` or ``True``: the crawl's settings.
- a dict: the crawl's settings, overridden for this page by the keys of ``OPTIONS``:

  - what the item gets (the pipeline): ``output_format`` ("text" or "markdown", as
    ``GROWNUP_OUTPUT_FORMAT``), ``comments`` (``False``: the item gets no ``comments``),
    ``exclude`` (article fields the item does not get, e.g. ``["markdown", "related_links"]``),
    ``page_types``, ``min_text_length``, ``min_confidence`` (as their ``GROWNUP_*`` settings);
  - what is extracted (wherever the article is built, a page worker or the model process):
    ``threshold`` (a number between 0 and 1, used exactly on this page, as
    ``GROWNUP_THRESHOLD``) and ``refine`` (as ``GROWNUP_REFINE``).

A key outside ``OPTIONS``, or a value its setting would refuse, is a ``RequestMetaError``: one
error line naming the key, and the page's item is dropped as ``bad_meta``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from scrapy_grownup.errors import RequestMetaError

META_KEY = "grownup"
# key -> the GROWNUP_* setting whose check its value goes through (None: checked here)
OPTIONS = {
    "output_format": "GROWNUP_OUTPUT_FORMAT",
    "threshold": "GROWNUP_THRESHOLD",
    "refine": "GROWNUP_REFINE",
    "page_types": "GROWNUP_PAGE_TYPES",
    "min_text_length": "GROWNUP_MIN_TEXT_LENGTH",
    "min_confidence": "GROWNUP_MIN_CONFIDENCE",
    "comments": None,
    "exclude": None,
}
# the options that change what is extracted (``model_process.extractor_with``'s arguments)
EXTRACTION_OPTIONS = ("threshold", "refine")
# the options that replace a ``GrownupSettings`` field of the same name for the page
SETTINGS_OPTIONS = ("output_format", "page_types", "min_text_length", "min_confidence")

__all__ = ["META_KEY", "OPTIONS", "RequestMetaError", "RequestOptions", "request_options"]


@dataclass(frozen=True)
class RequestOptions:
    """The checked overrides of one request (only the keys it gave)."""

    values: dict = field(default_factory=dict)

    @property
    def extraction(self) -> dict:
        """The overrides of the extraction itself (``threshold``, ``refine``), without Nones."""
        return {k: self.values[k] for k in EXTRACTION_OPTIONS if self.values.get(k) is not None}

    def settings(self, settings):
        """``settings`` (``GrownupSettings``) with this page's output-side overrides."""
        changes = {k: self.values[k] for k in SETTINGS_OPTIONS if k in self.values}
        return dataclasses.replace(settings, **changes) if changes else settings

    def item_values(self, values: dict) -> dict:
        """The article values an item gets: without ``comments`` where they are off, without
        the ``exclude``d fields."""
        left_out = set(self.values.get("exclude", ()))
        if self.values.get("comments") is False:
            left_out.add("comments")
        return {k: v for k, v in values.items() if k not in left_out}


def request_options(request, page_types=None) -> RequestOptions | bool | None:
    """What ``request.meta["grownup"]`` asks for: ``False`` (skip the page), ``None`` (the
    crawl's settings) or ``RequestOptions``; raises ``RequestMetaError`` naming the bad key.
    ``page_types``: the model's page types (or a function returning them, called only for a
    ``page_types`` option), which a ``page_types`` option must be among."""
    meta = getattr(request, "meta", None) or {}
    value = meta.get(META_KEY)
    if value is None or value is True:
        return None
    if value is False:
        return False
    name = f'meta["{META_KEY}"]'
    if not isinstance(value, dict):
        raise RequestMetaError(f"{name} = {value!r}: not False, True or a dict of options; "
                               f"allowed keys: {', '.join(OPTIONS)}")
    from scrapy_grownup.crawl.settings import CHECKS, SettingsError

    checked = {}
    for key, given in value.items():
        if key not in OPTIONS:
            raise RequestMetaError(f"{name} key {key!r} is unknown; allowed keys: "
                                   f"{', '.join(OPTIONS)}")
        label = f'{name}["{key}"]'
        try:
            checked[key] = CHECKS[OPTIONS[key]](label, given) if OPTIONS[key] else \
                _check_own(label, key, given)
        except SettingsError as exc:
            raise RequestMetaError(str(exc)) from None
        known = page_types() if key == "page_types" and callable(page_types) else page_types
        if key == "page_types" and known is not None and checked[key] - known:
            unknown = sorted(checked[key] - known)
            raise RequestMetaError(f"{label} = {sorted(checked[key])!r}: unknown page type "
                                   f"{', '.join(map(repr, unknown))}; allowed: a list of "
                                   f"{', '.join(sorted(known))} ([] keeps every page)")
    return RequestOptions(checked) if checked else None


def _check_own(label: str, key: str, value):
    from scrapy_grownup.crawl.settings import CHECKS

    if key == "comments":
        return CHECKS["GROWNUP_AUTO_ITEMS"](label, value)  # a boolean
    from scrapy_grownup.crawl.items import article_fields

    known = article_fields()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)) or \
            not all(isinstance(v, str) for v in value):
        raise RequestMetaError(f"{label} = {value!r}: not a list of field names; allowed: "
                               f"{', '.join(known)}")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise RequestMetaError(f"{label} = {sorted(value)!r}: unknown field "
                               f"{', '.join(map(repr, unknown))}; allowed: {', '.join(known)}")
    return frozenset(value)
