"""Per-page caps: a page over a cap is truncated and flagged, never dropped or fatal."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageLimits:
    """Upper bounds on the work one page may cause.

    ``max_bytes`` cuts the raw body before decoding, ``max_nodes`` stops adding elements in
    document order, ``max_depth`` folds deeper subtrees into their ancestor at the cap (their text
    is kept, their elements are not nodes). Defaults are far above real article pages yet keep a
    pathological page bounded (the figures behind them: ``docs/reliability.md``).

    What is read of any single value is capped too, so that no one attribute or script costs
    more than a bounded amount of work (flagged ``attribute`` / ``script`` in ``truncated``):

    - ``max_attribute_chars``: the characters read of one attribute value (``class``, ``id``,
      ``style``, ``itemprop`` / ``content``, a ``<meta>``'s ``content``...); a longer value is
      cut to it, but a longer URL (``href``) is left out, as a cut one would point elsewhere.
      The cap is well above the long ``class`` lists of real pages (utility-class CSS).
    - ``max_script_chars``: the characters read of one script (a JSON-LD block); a longer
      block is not read at all (a cut one is not JSON). The ``inspect`` report leaves out a
      ``<style>`` element over it. Real pages' JSON-LD blocks stay far below it.
    """

    max_bytes: int = 5_000_000
    max_nodes: int = 8_000
    max_depth: int = 128
    max_attribute_chars: int = 20_000
    max_script_chars: int = 1_000_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_nodes", "max_depth", "max_attribute_chars",
                     "max_script_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"PageLimits.{name} must be >= 1")
