"""Settings of the example news crawl: Scrapy's defaults plus the scrapy_grownup add-on.

The one line that matters is ``ADDONS``; the ``GROWNUP_*`` lines show the most used settings
at their defaults (docs/settings.md lists them all; a test checks these are the defaults).
"""

BOT_NAME = "news"
# Works whether the project is run as ``news`` (scrapy.cfg) or ``example_project.news`` (demo).
SPIDER_MODULES = [__name__.rsplit(".", 1)[0] + ".spiders", "scrapy_grownup.warc.spider"]
NEWSPIDER_MODULE = SPIDER_MODULES[0]
try:  # the scale-out spider needs scrapy-redis
    import scrapy_redis  # noqa: F401
except ImportError:
    pass
else:
    SPIDER_MODULES.append("scrapy_grownup.warc.scaleout")

ADDONS = {"scrapy_grownup.Addon": 500}

GROWNUP_MODEL = "auto"             # "default" on a GPU, "fast" on a CPU; or "fast", "minilm",
                                   # "default" (the most accurate), a directory of your own
GROWNUP_WORKERS = "auto"           # featurization processes: one per core but one (at least 1)
GROWNUP_THRESHOLD = None           # content cut-off: None adapts it per page near the model's
                                   # own (fast: 0.4); a number is used on every page, lower
                                   # for recall, higher for precision
GROWNUP_MIN_TEXT_LENGTH = 1        # drop pages whose article is empty
GROWNUP_OUTPUT_FORMAT = "text"     # or "markdown"

ROBOTSTXT_OBEY = False             # the demo site is local; obey robots.txt on the real web
CONCURRENT_REQUESTS = 16
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
