"""The extractor's output: one article per page."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Article:
    """Main content of one page.

    ``text`` holds paragraphs separated by newlines. ``page_type`` and its score stay ``None``
    until a genre head is trained; ``truncated`` lists the page caps that were hit.
    """

    url: str | None
    title: str
    text: str
    page_type: str | None = None
    page_type_score: float | None = None
    language: str | None = None
    model: str = ""
    truncated: list[str] = field(default_factory=list)
    content_nodes: int = 0
    nodes: int = 0

    def to_dict(self) -> dict:
        return asdict(self)
