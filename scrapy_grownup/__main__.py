"""``python -m scrapy_grownup``: the ``grownup`` command."""

import sys

from scrapy_grownup.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
