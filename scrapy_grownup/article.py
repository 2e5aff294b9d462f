"""The extractor's output: one article per page."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Article:
    """Main content of one page.

    ``text`` holds paragraphs separated by newlines. ``page_type`` (article, forum, service,
    product, documentation, listing, collection) and its probability come from the model's
    genre head and stay ``None`` for a model without one; ``truncated`` lists the page caps
    that were hit.
    """

    url: str | None
    title: str
    text: str
    page_type: str | None = None
    page_type_score: float | None = None
    language: str | None = None
    # Metadata (``metadata.extract_metadata``): ``published`` is ISO 8601, date or date-time.
    authors: list[str] = field(default_factory=list)
    published: str | None = None
    canonical_url: str | None = None
    site_name: str | None = None
    # The same content as markdown (headings, lists, tables, links); ``text`` holds it too when
    # the extractor's ``output_format`` is "markdown".
    markdown: str = ""
    model: str = ""
    truncated: list[str] = field(default_factory=list)
    content_nodes: int = 0
    nodes: int = 0
    # From a model with a block-role head (None without one): the text of the elements
    # classified as user comments, and the links classified as related content.
    comments: str | None = None
    related_links: list[dict] | None = None

    def to_dict(self) -> dict:
        return asdict(self)
