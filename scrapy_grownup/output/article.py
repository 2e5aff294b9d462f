"""The extractor's output: one article per page."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable


@dataclass
class Article:
    """Main content of one page.

    ``text`` holds paragraphs separated by newlines. ``page_type`` (article, forum, service,
    product, documentation, listing, collection) and its probability come from the model's
    genre head and stay ``None`` for a model without one; ``truncated`` lists the page caps
    that were hit.

    ``markdown`` and ``html`` may be built on first read (``ArticleExtractor`` does so unless
    its ``output_format`` is "markdown"): until then the article holds the page's text runs and
    tags that it needs; reading it, ``to_dict()``, comparing or pickling builds it. Should
    that fail, each of these raises ``ArticleError`` (a ``GrownupError``).
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
    # The page's own summary (JSON-LD / og: / meta description); the main image (og:image,
    # twitter:image, JSON-LD image, else the first content image; absolute); the content's
    # images, ``{"url", "alt"}`` each (``images.content_images``); the last modification,
    # ISO 8601 as ``published``; the tags and sections the page declares.
    description: str | None = None
    image: str | None = None
    images: list[dict] = field(default_factory=list)
    date_modified: str | None = None
    tags: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    # The same content as markdown (headings, lists, tables, links); ``text`` holds it too when
    # the extractor's ``output_format`` is "markdown".
    markdown: str = ""
    # The same content as clean HTML, safe to render (``output.html``): built from the same
    # kept nodes, so its text is ``text`` up to whitespace. Built on first read, as markdown.
    html: str = ""
    model: str = ""
    truncated: list[str] = field(default_factory=list)
    content_nodes: int = 0
    nodes: int = 0
    # Which path chose the text (``assembly.TEXT_SOURCES``): "rescorer", "content_model",
    # "prose" where the model's scores kept nothing and the page's prose was kept instead, or
    # "none" where nothing was kept.
    text_source: str = ""
    # The extractor's estimate, from 0 to 1, that ``text`` is the page's main content: the
    # expected bag-of-words F1 of the text against human gold, calibrated on sites the model
    # never saw (``decisions.confidence``); None for a model without ``confidence.npz``.
    confidence: float | None = None
    # From a model with a block-role head (None without one): the text of the elements
    # classified as user comments, and the links classified as related content.
    comments: str | None = None
    related_links: list[dict] | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def __repr__(self) -> str:
        """One short line: the page, its title and type, and how much text (not the text)."""
        text = " ".join(self.text.split())
        head = text[:60] + ("..." if len(text) > 60 else "")
        return (f"Article(url={self.url!r}, title={self.title[:80]!r}, "
                f"page_type={self.page_type!r}, language={self.language!r}, "
                f"text={head!r} ({len(self.text)} characters))")

    def defer_markdown(self, build: Callable[[], str]) -> None:
        """Build ``markdown`` with ``build()`` when it is first read, not now."""
        self.__dict__["_markdown"] = None
        self.__dict__["_markdown_build"] = build

    def defer_html(self, build: Callable[[], str]) -> None:
        """Build ``html`` with ``build()`` when it is first read, not now."""
        self.__dict__["_html"] = None
        self.__dict__["_html_build"] = build

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_markdown"] = self.markdown  # built: the builder (a closure) does not pickle
        state.pop("_markdown_build", None)
        state["_html"] = self.html
        state.pop("_html_build", None)
        return state


def _deferred_property(name: str, doc: str) -> property:
    """A property over the dataclass field ``name`` whose value may be built on first read
    (``defer_markdown`` / ``defer_html`` store the builder under ``_{name}_build``)."""
    value_key, build_key = f"_{name}", f"_{name}_build"

    def get(self: Article) -> str:
        value = self.__dict__.get(value_key)
        if value is None:
            build = self.__dict__.get(build_key)
            value = build() if build is not None else ""  # a failure raises again on each read
            self.__dict__[value_key] = value
            self.__dict__.pop(build_key, None)
        return value

    def set_(self: Article, value: str) -> None:
        self.__dict__.pop(build_key, None)
        self.__dict__[value_key] = value

    return property(get, set_, doc=doc)


# Properties over the dataclass fields: ``__init__``, ``asdict``, ``repr``, ``==`` and
# ``dataclasses.replace`` go through them, so a deferred value is built when any of them needs it.
Article.markdown = _deferred_property(  # type: ignore[assignment]
    "markdown", "The same content as markdown (headings, lists, tables, links).")
Article.html = _deferred_property(  # type: ignore[assignment]
    "html", "The same content as clean HTML (paragraphs, headings, lists, tables, figures, links).")
