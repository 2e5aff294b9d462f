"""The ``GROWNUP_*`` Scrapy settings: defaults and checks in one place, read once per crawler.

``DEFAULTS`` holds every setting and its default, ``CHECKS`` what each may hold.
``GrownupSettings.from_settings`` checks them all and raises ``SettingsError`` (one line naming
the setting, its value and the allowed values) on the first bad one; the add-on calls it when the
crawler starts, before the spider opens and before any model loads. The checks of the kinds of
value (``boolean``, ``whole``, ``non_negative``...) are the ones every ``GROWNUP_*`` setting
goes through, the WARC ones (``warc.settings.WARC_CHECKS``) included: one spelling of a
boolean, and junk is an error, never a silent default. The docs' settings page
(``docs/settings.md``) lists these same names and defaults; a test keeps the two in step.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import warnings
from dataclasses import dataclass
from typing import Callable

from scrapy_grownup.errors import SettingsError
from scrapy_grownup.page.limits import PageLimits

DEFAULTS: dict[str, object] = {
    "GROWNUP_ENABLED": True,
    "GROWNUP_MODEL": "auto",
    "GROWNUP_DEVICE": "auto",
    "GROWNUP_THRESHOLD": None,
    "GROWNUP_REFINE": None,
    "GROWNUP_RESCORER": None,
    "GROWNUP_BATCH_PAGES": 32,
    "GROWNUP_BATCH_NODES": 40_000,
    "GROWNUP_BATCH_WAIT_MS": 50,
    "GROWNUP_BATCHES_IN_FLIGHT": 2,
    "GROWNUP_QUEUE_SIZE": 256,
    "GROWNUP_MODEL_PROCESS": "auto",
    "GROWNUP_MODEL_THREADS": 1,
    "GROWNUP_WORKERS": "auto",
    "GROWNUP_MAX_PENDING_PAGES": 64,
    "GROWNUP_MAX_PAGE_BYTES": PageLimits.max_bytes,
    "GROWNUP_MAX_PAGE_NODES": PageLimits.max_nodes,
    "GROWNUP_MAX_PAGE_DEPTH": PageLimits.max_depth,
    "GROWNUP_PAGE_TIMEOUT": 10.0,
    "GROWNUP_PAGE_TYPES": [],
    "GROWNUP_MIN_TEXT_LENGTH": 1,
    "GROWNUP_MIN_CONFIDENCE": None,
    "GROWNUP_AUTO_ITEMS": True,
    "GROWNUP_OUTPUT_FORMAT": "text",
}
OUTPUT_FORMATS = ("text", "markdown")
DEVICE_PATTERN = re.compile(r"auto|cpu|mps|(cuda|xpu)(:\d+)?")


# -- one check per kind of value: the parsed value, or SettingsError naming what is allowed -----
def bad_value(name: str, value, problem: str, allowed: str) -> SettingsError:
    """The one-line error of every ``GROWNUP_*`` check: the setting, its value, what is wrong
    and what is allowed."""
    return SettingsError(f"{name} = {value!r}: {problem}; allowed: {allowed}")


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _is_none(value) -> bool:
    """``None``, or a string that says it (``""``, ``"none"``): a setting left to a default."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none"))


def boolean(name: str, value) -> bool:
    """``True``/``False``, ``1``/``0``, or a string of ``_TRUE`` or ``_FALSE`` (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise bad_value(name, value, "not a boolean", "True or False")


def _model_process(name: str, value) -> bool | str:
    """``"auto"``, or a boolean (``boolean``)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return boolean(name, value)
    except SettingsError:
        raise bad_value(name, value, "not a boolean or auto", "auto, True or False") from None


def whole(minimum: int, extra: str = "") -> Callable[[str, object], int]:
    """A check of a whole number >= ``minimum`` (``extra`` ends the allowed values' words)."""
    allowed = f"a whole number >= {minimum}{extra}"

    def check(name: str, value) -> int:
        number = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            number = int(value)
        if number is None:
            raise bad_value(name, value, "not a whole number", allowed)
        if number < minimum:
            raise bad_value(name, value, "too small", allowed)
        return number

    return check


def _number(name: str, value, allowed: str) -> float:
    """``value`` as a finite float: a number or a string of one (a boolean is not one; NaN and
    infinities are refused, they would never compare as meant)."""
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number):
        raise bad_value(name, value, "not a number", allowed)
    return number


def non_negative(allowed: str, zero: bool = True) -> Callable[[str, object], float]:
    """A check of a number >= 0 (> 0 where ``zero`` is False); ``allowed`` says what it is."""
    def check_value(name: str, value) -> float:
        number = _number(name, value, allowed)
        if number < 0 or (number == 0 and not zero):
            raise bad_value(name, value, "negative" if number < 0 else "zero", allowed)
        return number
    return check_value


_milliseconds = non_negative("a number of milliseconds >= 0")
_seconds = non_negative("a number of seconds > 0, or 0 for no budget")


def _threshold(name: str, value) -> float | None:
    allowed = ("a number between 0 and 1 (exclusive), used on every page, or None for each "
               "page's own cut-off near the model's threshold")
    if _is_none(value):
        return None
    number = _number(name, value, allowed)
    if not 0.0 < number < 1.0:
        raise bad_value(name, value, "out of range", allowed)
    return number


def _model_default_bool(models_own: str) -> Callable[[str, object], bool | None]:
    """A boolean that may also be ``None``: the model's own setting (``models_own`` says what
    that is, for the error line)."""
    def check_value(name: str, value) -> bool | None:
        if _is_none(value):
            return None
        try:
            return boolean(name, value)
        except SettingsError:
            raise bad_value(name, value, "not a boolean",
                       f"True, False, or None for the model's own ({models_own})") from None
    return check_value


def _min_confidence(name: str, value) -> float | None:
    """A confidence between 0 and 1; ``None`` (or 0) keeps every page."""
    allowed = "a number between 0 and 1 (pages whose Article.confidence is below it are " \
              "dropped), or None (or 0) for no minimum"
    if _is_none(value):
        return None
    number = _number(name, value, allowed)
    if not 0.0 <= number <= 1.0:
        raise bad_value(name, value, "out of range", allowed)
    return number or None


_refine = _model_default_bool("False")
_rescorer = _model_default_bool("on where it has one")


def _workers(name: str, value) -> int:
    """``"auto"``: one page worker per core but one here; the runtime sets the number it
    takes (``runtime.default_workers``) once it knows whether the workers hold the model."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return max(1, (os.cpu_count() or 2) - 1)
    return whole(0, ", or 'auto' (0 parses on a thread)")(name, value)


def _device(name: str, value) -> str | None:
    device = str(value or "auto").strip().lower()
    if not DEVICE_PATTERN.fullmatch(device):
        raise bad_value(name, value, "unknown device", "auto, cpu, cuda, cuda:N, mps, xpu")
    return None if device == "auto" else device


def _output_format(name: str, value) -> str:
    if value not in OUTPUT_FORMATS:
        raise bad_value(name, value, "unknown format", ", ".join(OUTPUT_FORMATS))
    return value


def _model(name: str, value) -> str:
    from scrapy_grownup.extractor import MODELS_DIR, resolve_model_dir, shipped_models

    allowed = (f"auto, default, {', '.join(shipped_models())}, or a model directory "
               "(written by grownup train)")
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise bad_value(name, value, "not a model name", allowed)
    model = str(value).strip()
    if model == "auto":
        return model
    try:
        directory = resolve_model_dir(model)
    except Exception:  # noqa: BLE001 - ModelLoadError: neither shipped nor a directory
        raise bad_value(name, value, "no such model", allowed) from None
    if directory.parent != MODELS_DIR and not (directory / "config.json").is_file():
        raise bad_value(name, value, "not a model directory (no config.json)", allowed)
    return model


def _page_types(name: str, value) -> frozenset[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple, set, frozenset)) or \
            not all(isinstance(v, str) for v in value):
        raise bad_value(name, value, "not a list of page types",
                   "a list of page type names, or [] for every page")
    return frozenset(v.strip() for v in value if v.strip())


# What each setting may hold; every name of ``DEFAULTS`` has one.
CHECKS: dict[str, Callable[[str, object], object]] = {
    "GROWNUP_ENABLED": boolean,
    "GROWNUP_MODEL": _model,
    "GROWNUP_DEVICE": _device,
    "GROWNUP_THRESHOLD": _threshold,
    "GROWNUP_REFINE": _refine,
    "GROWNUP_RESCORER": _rescorer,
    "GROWNUP_BATCH_PAGES": whole(1),
    "GROWNUP_BATCH_NODES": whole(1),
    "GROWNUP_BATCH_WAIT_MS": _milliseconds,
    "GROWNUP_BATCHES_IN_FLIGHT": whole(1),
    "GROWNUP_QUEUE_SIZE": whole(1),
    "GROWNUP_MODEL_PROCESS": _model_process,
    "GROWNUP_MODEL_THREADS": whole(1),
    "GROWNUP_WORKERS": _workers,
    "GROWNUP_MAX_PENDING_PAGES": whole(1),
    "GROWNUP_MAX_PAGE_BYTES": whole(1),
    "GROWNUP_MAX_PAGE_NODES": whole(1),
    "GROWNUP_MAX_PAGE_DEPTH": whole(1),
    "GROWNUP_PAGE_TIMEOUT": _seconds,
    "GROWNUP_PAGE_TYPES": _page_types,
    "GROWNUP_MIN_TEXT_LENGTH": whole(0),
    "GROWNUP_MIN_CONFIDENCE": _min_confidence,
    "GROWNUP_AUTO_ITEMS": boolean,
    "GROWNUP_OUTPUT_FORMAT": _output_format,
}
assert set(CHECKS) == set(DEFAULTS)


# Settings kept so that existing projects still start, though they no longer do anything.
UNUSED = {
    "GROWNUP_BATCHES_IN_FLIGHT": "the page workers send their pages to the model process "
                                 "themselves",
    "GROWNUP_QUEUE_SIZE": "each page worker waits for its own page's model outputs "
                          "(GROWNUP_MAX_PENDING_PAGES bounds the pages in flight)",
}


def check(settings, name: str):
    """The checked value of one ``GROWNUP_*`` setting (its default when unset): the crawl's
    (``CHECKS``) and the WARC spider's and archive's (``warc.settings.WARC_CHECKS``) alike.

    Raises:
        SettingsError: the value is not one the setting takes (one line naming both).
    """
    value = settings.get(name) if settings is not None else None
    if name not in CHECKS:
        from scrapy_grownup.warc.settings import WARC_CHECKS, WARC_DEFAULTS

        return WARC_CHECKS[name](name, WARC_DEFAULTS[name] if value is None else value)
    if value is None and name not in ("GROWNUP_THRESHOLD", "GROWNUP_REFINE", "GROWNUP_RESCORER"):
        value = DEFAULTS[name]
    return CHECKS[name](name, value)


def model_page_types(model: str, device: str | None) -> set[str] | None:
    """Page types the model(s) ``GROWNUP_MODEL`` may load can tell apart, read from their
    ``config.json`` (no torch): ``auto`` may be either of its models unless the device says
    which. ``None`` when none of them has a page-type head."""
    from scrapy_grownup.extractor import auto_model, model_document, resolve_model_dir
    from scrapy_grownup.model.config import saved_config_keys

    if model == "auto":
        names = {auto_model(device, warn=False)} if device else \
            {auto_model("cpu"), auto_model("cuda", warn=False)}
    else:
        names = {model}
    found: set[str] | None = None
    for name in names:
        try:
            config = saved_config_keys(model_document(resolve_model_dir(name)).get("config")
                                       or {})
            count = int(config.get("num_page_types") or 0)
            page_types = [str(g) for g in config.get("page_type_names") or []] or \
                [f"page_type_{i}" for i in range(count)]
        except Exception:  # noqa: BLE001 - an unreadable config fails when the model loads
            continue
        if count:
            found = (found or set()) | set(page_types)
    return found


def unknown_names(settings) -> list[str]:
    """``GROWNUP_*`` names set in ``settings`` that no part of the package reads, each with the
    nearest known name (a typo such as ``GROWNUP_WORKER`` would otherwise do nothing)."""
    from scrapy_grownup.warc.settings import WARC_DEFAULTS

    known = set(DEFAULTS) | set(WARC_DEFAULTS)
    out = []
    for name in settings if settings is not None else ():
        if isinstance(name, str) and name.startswith("GROWNUP_") and name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=1)
            out.append(f"{name} (did you mean {near[0]}?)" if near else name)
    return out


@dataclass(frozen=True)
class GrownupSettings:
    """Typed, checked view of the ``GROWNUP_*`` settings of one crawler."""

    enabled: bool
    model: str
    device: str | None  # None: CUDA when available, else CPU
    threshold: float | None  # None: adapted per page near the model's own (fast: 0.4)
    refine: bool | None  # None: the model's own (False)
    rescorer: bool | None  # None: the model's block rescorer where it has one
    batch_pages: int
    batch_nodes: int
    batch_wait_ms: float
    batches_in_flight: int  # no longer used: the model process gathers the workers' pages
    queue_size: int  # no longer used: each page worker waits for its own page's outputs
    # "auto": the page workers run the model where it runs on a CPU with the numpy runtime,
    # else a model process; True: a model process; False: a thread of the crawl's process
    model_process: bool | str
    model_threads: int
    workers: int
    max_pending_pages: int
    limits: PageLimits
    # seconds a page may take in its page worker: its parsing, then its article (decisions,
    # metadata, text, Markdown), a model process's forward pass not counted; None: no cap
    page_timeout: float | None
    page_types: frozenset[str]
    min_text_length: int
    # pages whose article's confidence is below this are dropped (None: no minimum)
    min_confidence: float | None
    auto_items: bool
    output_format: str

    @classmethod
    def from_settings(cls, settings) -> "GrownupSettings":
        """Check every ``GROWNUP_*`` setting; ``SettingsError`` names the first bad one. A
        setting that no longer does anything (``UNUSED``) is still checked, and a project that
        sets it gets a ``ScrapyDeprecationWarning`` saying so."""
        values = {name: check(settings, name) for name in DEFAULTS}
        for name, why in UNUSED.items():
            if settings is not None and settings.get(name) is not None:
                from scrapy.exceptions import ScrapyDeprecationWarning

                warnings.warn(f"{name} no longer has any effect: {why}; remove it from the "
                              "project's settings", ScrapyDeprecationWarning, stacklevel=2)
        page_types = values["GROWNUP_PAGE_TYPES"]
        if page_types:
            known = model_page_types(values["GROWNUP_MODEL"], values["GROWNUP_DEVICE"])
            if known is None:
                raise bad_value("GROWNUP_PAGE_TYPES", sorted(page_types),
                           f"model {values['GROWNUP_MODEL']!r} has no page-type head",
                           "[] with this model, or a model with a page-type head")
            unknown = sorted(page_types - known)
            if unknown:
                raise bad_value("GROWNUP_PAGE_TYPES", settings.get("GROWNUP_PAGE_TYPES"),
                           f"unknown page type {', '.join(map(repr, unknown))}",
                           f"a list of {', '.join(sorted(known))} ([] keeps every page)")
        return cls(
            enabled=values["GROWNUP_ENABLED"],
            model=values["GROWNUP_MODEL"],
            device=values["GROWNUP_DEVICE"],
            threshold=values["GROWNUP_THRESHOLD"],
            refine=values["GROWNUP_REFINE"],
            rescorer=values["GROWNUP_RESCORER"],
            batch_pages=values["GROWNUP_BATCH_PAGES"],
            batch_nodes=values["GROWNUP_BATCH_NODES"],
            batch_wait_ms=values["GROWNUP_BATCH_WAIT_MS"],
            batches_in_flight=values["GROWNUP_BATCHES_IN_FLIGHT"],
            queue_size=values["GROWNUP_QUEUE_SIZE"],
            model_process=values["GROWNUP_MODEL_PROCESS"],
            model_threads=values["GROWNUP_MODEL_THREADS"],
            workers=values["GROWNUP_WORKERS"],
            max_pending_pages=values["GROWNUP_MAX_PENDING_PAGES"],
            limits=PageLimits(max_bytes=values["GROWNUP_MAX_PAGE_BYTES"],
                              max_nodes=values["GROWNUP_MAX_PAGE_NODES"],
                              max_depth=values["GROWNUP_MAX_PAGE_DEPTH"]),
            page_timeout=values["GROWNUP_PAGE_TIMEOUT"] or None,
            page_types=page_types,
            min_text_length=values["GROWNUP_MIN_TEXT_LENGTH"],
            min_confidence=values["GROWNUP_MIN_CONFIDENCE"],
            auto_items=values["GROWNUP_AUTO_ITEMS"],
            output_format=values["GROWNUP_OUTPUT_FORMAT"],
        )
