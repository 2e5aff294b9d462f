"""Training side: labelled datasets, gold-text labels, site splits, featurized stores.

Serving never imports it (``tests/test_layering.py``).
"""
