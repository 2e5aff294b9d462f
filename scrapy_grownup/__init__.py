"""GROWN+UP graph neural network main-content extraction for Scrapy.

Importing the package is cheap: torch (and sentence-transformers for a MiniLM model) is imported
only when a model or encoder is first used; torch-geometric only by training. Heavy names are
resolved lazily below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_grownup.errors import (ArticleError, CorpusConfigError, DatasetNotAvailable,
                                   DeviceError, EmptyPageError, GrownupError, ModelError,
                                   ModelLoadError, NotHTMLError, OptionError, PageTimeoutError,
                                   ParseError, RequestMetaError, SettingsError,
                                   WorkerCrashedError)
from scrapy_grownup.page.limits import PageLimits

__version__ = "0.1.0"

__all__ = [
    "ArticleExtractor",
    "Article",
    "Addon",
    "ArticleItem",
    "with_article",
    "Featurizer",
    "PageLimits",
    "parse_page",
    "GrownupError",
    "NotHTMLError",
    "EmptyPageError",
    "ParseError",
    "ModelError",
    "ArticleError",
    "ModelLoadError",
    "OptionError",
    "DeviceError",
    "SettingsError",
    "PageTimeoutError",
    "WorkerCrashedError",
    "RequestMetaError",
    "DatasetNotAvailable",
    "CorpusConfigError",
    "__version__",
]

_LAZY = {
    "parse_page": ("scrapy_grownup.page.dom", "parse_page"),
    "PageStructure": ("scrapy_grownup.page.dom", "PageStructure"),
    "Featurizer": ("scrapy_grownup.graph.featurizer", "Featurizer"),
    "ArticleExtractor": ("scrapy_grownup.extractor", "ArticleExtractor"),
    "Article": ("scrapy_grownup.output.article", "Article"),
    "Addon": ("scrapy_grownup.crawl.addon", "Addon"),
    "ArticleItem": ("scrapy_grownup.crawl.items", "ArticleItem"),
    "with_article": ("scrapy_grownup.crawl.middlewares", "with_article"),
}

if TYPE_CHECKING:  # pragma: no cover
    from scrapy_grownup.page.dom import PageStructure, parse_page
    from scrapy_grownup.graph.featurizer import Featurizer


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'scrapy_grownup' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
