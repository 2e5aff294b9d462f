"""Hand-made pages and scores shared by the tests of several modules (decisions,
output, graph, data, training)."""

import numpy as np


def scored(page, default=0.3, **by_text):
    """Scores per node: ``default`` everywhere, ``by_text[word]`` on nodes whose own text
    starts with that word."""
    probs = np.full(page.num_nodes, default)
    for i, text in enumerate(page.node_text):
        for word, score in by_text.items():
            if text.startswith(word):
                probs[i] = score
    return probs


def prose_page(paragraphs: int) -> bytes:
    """A page the model cannot read (a book chapter, a station's teasers): ``paragraphs``
    long paragraphs in a plain ``div``, beside long text in the page's chrome, a hidden
    paragraph, a paragraph that is mostly a link, and short lines."""
    sentence = "The river rose through the night and the town woke to water in its streets. "
    body = "".join(f"<p>Part {i}: {sentence * 2}<a href=/n{i}>more</a></p>"
                   for i in range(paragraphs))
    return (
        "<html><body><header><p>Welcome: " + sentence * 2 + "</p></header>"
        "<nav><a href=/>Home</a> <a href=/news>News</a></nav>"
        "<div class=content><h2>Flood</h2>" + body +
        "<p>Links: <a href=/x>" + sentence * 2 + "</a></p>"
        "<p style='display:none'>Hidden: " + sentence * 2 + "</p>"
        "<p>Short line.</p></div>"
        "<div role=contentinfo><p>About us: " + sentence * 2 + "</p></div>"
        "<footer><p>Imprint: " + sentence * 2 + "</p></footer></body></html>").encode()
