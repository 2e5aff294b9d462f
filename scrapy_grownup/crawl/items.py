"""Article fields on any item type, through itemadapter.

``ArticleItem`` is a ``scrapy.Item`` declaring every field the add-on fills; a user's own item
class gets those of the fields it declares (dicts get all). A user's non-empty value is never
overwritten.
"""

from __future__ import annotations

import dataclasses
import logging

import scrapy
import scrapy.logformatter
from itemadapter import ItemAdapter

from scrapy_grownup.output.article import Article

logger = logging.getLogger(__name__)
# Article fields that describe the extraction, not the page: kept off items.
INTERNAL_FIELDS = ("content_nodes", "nodes", "text_source")
EXTRA_FIELDS = ("model_version", "timing")


def article_fields() -> list[str]:
    """Field names the add-on fills, in declaration (and feed export) order."""
    names = [f.name for f in dataclasses.fields(Article) if f.name not in INTERNAL_FIELDS]
    return names + [name for name in EXTRA_FIELDS if name not in names]


# Item fields whose values are long: cut (text) or left out (the rest) in log lines.
LONG_FIELDS = {"text": 200, "markdown": 0, "html": 0, "images": 0, "comments": 0,
               "related_links": 0,
               # zyte_common_items.Article's (``scrapy_grownup.zyte``)
               "articleBody": 200, "articleBodyHtml": 0}


def short_item(item) -> dict:
    """A copy of ``item``'s fields for a log line: ``text`` cut to its first characters with its
    length, the other long fields (Markdown, HTML, images, comments, related links) replaced by
    their size."""
    values = dict(ItemAdapter(item).items())
    for name, keep in LONG_FIELDS.items():
        value = values.get(name)
        if not value or not hasattr(value, "__len__"):
            continue
        size = f"({len(value)} {'characters' if isinstance(value, str) else 'entries'})"
        if keep and isinstance(value, str):
            values[name] = (value[:keep] + "... " + size) if len(value) > keep else value
        else:
            values[name] = size
    return values


class ArticleItem(scrapy.Item):
    """A ``scrapy.Item`` that declares every field the add-on fills.

    The fields are the ``Article`` fields less ``content_nodes``, ``nodes`` and
    ``text_source`` (they describe the extraction, not the page), plus ``model_version`` and
    ``timing``, in the order feed exports write them (``article_fields()``; a test keeps the
    two in step). Subclass it to add fields of your own; the add-on makes one for a page whose
    callback yields no item (``GROWNUP_AUTO_ITEMS``). Its ``repr`` shortens the long fields,
    so a log line does not hold a whole article.
    """

    url = scrapy.Field()
    title = scrapy.Field()
    text = scrapy.Field()
    page_type = scrapy.Field()
    page_type_score = scrapy.Field()
    language = scrapy.Field()
    authors = scrapy.Field()
    published = scrapy.Field()
    canonical_url = scrapy.Field()
    site_name = scrapy.Field()
    description = scrapy.Field()
    image = scrapy.Field()
    images = scrapy.Field()
    date_modified = scrapy.Field()
    tags = scrapy.Field()
    categories = scrapy.Field()
    markdown = scrapy.Field()
    html = scrapy.Field()
    model = scrapy.Field()
    truncated = scrapy.Field()
    confidence = scrapy.Field()
    comments = scrapy.Field()
    related_links = scrapy.Field()
    model_version = scrapy.Field()
    timing = scrapy.Field()

    def __repr__(self) -> str:
        return f"ArticleItem({short_item(self)!r})"


class ArticleLogFormatter(scrapy.logformatter.LogFormatter):
    """Scrapy's log formatter, with items shortened (``short_item``): a DEBUG line per item
    instead of every article's whole text and Markdown. The add-on sets it as
    ``LOG_FORMATTER`` unless the project has its own."""

    def scraped(self, item, response, spider):
        return super().scraped(short_item(item), response, spider)

    def dropped(self, item, exception, response, spider):
        return super().dropped(short_item(item), exception, response, spider)

    def item_error(self, item, exception, response, spider):
        return super().item_error(short_item(item), exception, response, spider)


def article_values(article: Article, text_field: str = "text") -> dict[str, object]:
    """The item values of ``article``; ``text_field="markdown"`` puts the Markdown in ``text``
    and leaves the ``markdown`` field out, so an item carries it once."""
    values = {name: value for name, value in article.to_dict().items()
              if name not in INTERNAL_FIELDS}
    if text_field != "text":
        values["text"] = values.pop(text_field, None) or ""
    return values


_warned_classes: set[type] = set()


def fill_item(item, values: dict[str, object]) -> list[str]:
    """Set ``values`` on ``item`` where it has room and no value yet; returns fields it lacks."""
    adapter = ItemAdapter(item)
    missing = []
    for name, value in values.items():
        try:
            current = adapter.get(name)
            if current not in (None, "", [], {}):
                continue
            adapter[name] = value
        except KeyError:
            missing.append(name)
    if missing and type(item) not in _warned_classes:
        _warned_classes.add(type(item))
        logger.warning("%s does not declare the article fields %s; they are left out "
                       "(declare them, or subclass scrapy_grownup.ArticleItem)",
                       type(item).__name__, ", ".join(missing))
    return missing
