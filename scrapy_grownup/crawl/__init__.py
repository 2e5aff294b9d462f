"""The Scrapy side: the add-on, its middlewares and pipeline, settings, items and worker processes."""
