"""Step 5: the kept blocks as an ``Article``: text, Markdown, metadata, and the ``inspect`` report."""
