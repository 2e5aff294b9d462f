"""``ModelCard``: a model's config and heads without its weights.

A page's article reads of the model only its head names and which heads it has; the scores
come from the forward pass. Where that runs elsewhere (a crawl's model process), the page
workers build articles holding this card in the network's place: no weights, no torch.
"""

from __future__ import annotations

from scrapy_grownup.model.config import HeadNames, ModelConfig


class ModelCard(HeadNames):
    """What ``ArticleExtractor`` reads of a model besides its forward pass."""

    runtime = "none"  # runs no forward pass: ``ArticleExtractor.batch_outputs`` cannot use it

    def __init__(self, config: ModelConfig):
        self.config = config
        pooled = bool(config.num_page_types) and config.page_type_readout == "content_pooled"
        # as the networks have them: present or None (``load_page_type`` reads both)
        self.page_type_head = True if config.num_page_types else None
        self.page_type_readout = True if pooled else None
        self.role_head = True if config.num_roles else None


__all__ = ["ModelCard"]
