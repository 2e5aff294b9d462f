"""The extractor's output: one article per page."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable


@dataclass
class Article:
    """Main content of one page, as ``ArticleExtractor.extract`` returns it.

    ``markdown`` and ``html`` may be built on first read (``ArticleExtractor`` does so unless
    its ``output_format`` is "markdown"), so a caller who never reads them does not pay for
    them: until then the article holds the page's text runs and tags that it needs; reading
    one, ``to_dict()``, comparing or pickling builds it. Should that fail, each of these
    raises ``ArticleError`` (a ``GrownupError``).

    Attributes:
        url: the page's URL, as given.
        title: the page's title.
        text: the main content, paragraphs separated by newlines (the Markdown with
            ``output_format="markdown"``).
        page_type: article, forum, service, product, documentation, listing or collection;
            ``None`` for a model without a page-type head.
        page_type_score: the probability of ``page_type``.
        language: the page's declared or detected language.
        authors: the authors the page names.
        published: the publication date, ISO 8601 (date or date-time).
        canonical_url: the page's canonical URL.
        site_name: the site's name.
        description: the page's own summary (JSON-LD, ``og:`` or meta description).
        image: the main image, absolute (``og:image``, ``twitter:image``, JSON-LD, else the
            first content image).
        images: the content's images, ``{"url", "alt"}`` each.
        date_modified: the last modification, ISO 8601.
        tags: the tags the page declares.
        categories: the sections the page declares.
        markdown: the content as Markdown (headings, lists, tables, links).
        html: the content as clean HTML, safe to render; its text is ``text`` up to
            whitespace.
        model: the name of the model that extracted it.
        truncated: the page caps that were hit (``bytes``, ``nodes``, ``depth``...).
        content_nodes: how many DOM nodes were kept as content.
        nodes: how many DOM nodes the page had.
        text_source: which path chose the text: ``"rescorer"``, ``"content_model"``,
            ``"prose"`` (the model kept nothing, the page's prose was kept instead) or
            ``"none"``.
        confidence: the estimated chance, from 0 to 1, that ``text`` is the page's main
            content; ``None`` for a model without a confidence model.
        comments: the text of the user comments, from a model with a block-role head.
        related_links: the links to related content, from a model with a block-role head.
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
        """Every field as plain JSON-ready values (``markdown`` and ``html`` built).

        Returns:
            A dict of the fields, in declaration order.
        """
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
