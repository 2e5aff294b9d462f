"""A Scrapy project that crawls a news site and gets one article item per page."""
