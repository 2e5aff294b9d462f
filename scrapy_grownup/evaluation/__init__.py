"""Training side: text-extraction metrics. Serving never imports it."""
