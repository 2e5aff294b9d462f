"""A spider for ``scrapy parse`` in the tests (``-s SPIDER_MODULES=tests.parse_spiders``): it
yields its own item through ``with_article``."""

import scrapy

from scrapy_grownup import with_article


class WithArticleSpider(scrapy.Spider):
    name = "with_article"

    def parse(self, response):
        yield with_article({"section": "news", "kind": "story"}, response)
