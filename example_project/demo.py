"""``make demo``: build the sample news site and featurize every page of it.

Prints, per page, the DOM graph that the GROWN+UP model would see.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from example_project.news_site import write_site


def main() -> int:
    from scrapy_grownup.featurizer import Featurizer

    featurizer = Featurizer("static")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_site(root)
        pages = sorted(root.glob("*.html"))
        start = time.perf_counter()
        for path in pages:
            graph = featurizer.featurize(path.read_bytes(), url=f"file://{path.name}")
            page = graph.page
            texts = [t for t in page.node_text if t]
            print(json.dumps({
                "page": path.name, "title": page.title, "nodes": page.num_nodes,
                "edges": int(graph.edge_index.shape[1]), "text_nodes": len(texts),
                "blocks": {name: list(getattr(graph, name).shape) for name, _ in featurizer.blocks},
                "first_text": texts[0][:60] if texts else "",
            }))
        elapsed = time.perf_counter() - start
    info = featurizer.encoder.cache_info()
    print(json.dumps({"pages": len(pages), "seconds": round(elapsed, 3),
                      "encoder": featurizer.encoder.name, "cache": info}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
