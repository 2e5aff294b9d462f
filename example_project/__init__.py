"""A Scrapy project that uses scrapy_grownup, plus a bundled sample news site to crawl."""
