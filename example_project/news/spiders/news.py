"""A plain ``CrawlSpider``: it only follows links; the add-on turns each page into an article."""

from urllib.parse import urlparse

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class NewsSpider(CrawlSpider):
    name = "news"
    rules = (Rule(LinkExtractor(), follow=True),)

    def __init__(self, start_url: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("pass the site to crawl: -a start_url=https://news.example/")
        self.start_urls = [start_url]
        self.allowed_domains = [urlparse(start_url).hostname]
