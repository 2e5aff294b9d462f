"""``Article.comments`` and ``Article.related_links`` against L3S-GN1's labelled blocks, on the
sites the role head never saw.

    python benchmarks/role_fields.py [--model fast] [--side test]

The shipped role head is fitted on the L3S-GN1 pages of 80% of its sites
(``training.holdout.site_split`` by host name); this scores the other sites' pages ("test", the
default; "train" shows how much the head remembers of its own sites). Gold: L3S-GN1's blocks
aligned to nodes (``training.roles.role_labels``; pages whose labelled text aligns under 75%
are left out); gold comments are the text of the nodes labelled "user comments", gold related
links the links whose text is mostly in nodes labelled "related content".

Two methods on the same pages and the same model outputs: ``head`` (the role head's calls as
they are: every node it calls a comment, every link it mostly calls related) and ``fields``
(``role_fields``: the fields the extractor gives). Figures, in %:

- comments P / R: word tokens of the field that are gold comment words (micro, multiset), and
  of the gold comment words found in the field;
- filled | gold: pages with gold comments whose field is not empty; empty | none: pages without
  gold comments whose field is empty; right when filled: non-empty fields at least half of
  whose words are gold comment words;
- the same for related links, by URL.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

from _common import pin_single_core

pin_single_core()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="fast")
    parser.add_argument("--side", default="test", choices=("test", "train"))
    args = parser.parse_args()

    import numpy as np
    import torch

    torch.set_num_threads(1)
    from scrapy_grownup.data import datasets
    from scrapy_grownup.output.assembly import assemble_text
    from scrapy_grownup.output.assembly import complete_blocks
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.decisions.head_fields import related_links
    from scrapy_grownup.decisions.refine import content_mask
    from scrapy_grownup.decisions.roles import role_fields
    from scrapy_grownup.training.holdout import page_host, site_split
    from scrapy_grownup.training.roles import MIN_ROLE_COVERAGE, role_labels

    records = sorted(datasets.load("l3s_gn1"), key=lambda r: r.id)
    train, test = site_split([page_host(r.url) for r in records])
    chosen = [records[i] for i in (test if args.side == "test" else train)]
    extractor = ArticleExtractor.from_pretrained(args.model, device="cpu")
    names = list(extractor.model.role_names)
    comments_role, related_role = names.index("comments"), names.index("related")
    pages, golds = [], []
    for record in chosen:
        page = parse_page(record.html, url=record.url,
                          content_type=record.extra.get("content_type"))
        aligned = role_labels(page, record.extra["roles"])
        if aligned.coverage >= MIN_ROLE_COVERAGE:
            pages.append(page)
            golds.append(aligned.labels)
    outputs = extractor.predict(pages)
    tally = {"head": collections.Counter(), "fields": collections.Counter()}
    for page, gold, out in zip(pages, golds, outputs):
        keep = complete_blocks(page, content_mask(page, out["content"], extractor.threshold,
                                                  extractor.refine))
        role = out["roles"].argmax(1)
        made = {"head": (assemble_text(page, role == comments_role),
                         related_links(page, role == related_role))}
        fields = role_fields(page, keep, out["roles"], names)
        made["fields"] = (fields["comments"], fields["related_links"])
        gold_words = collections.Counter(re.findall(r"\w+", " ".join(
            page.node_text[n] for n in np.flatnonzero(gold == comments_role)).lower()))
        gold_urls = {link["url"] for link in related_links(page, gold == related_role)}
        for method, (comments, related) in made.items():
            t = tally[method]
            words = collections.Counter(re.findall(r"\w+", (comments or "").lower()))
            hit = sum((gold_words & words).values())
            t["c_tp"] += hit
            t["c_pred"] += sum(words.values())
            t["c_gold"] += sum(gold_words.values())
            t["c_pages" if gold_words else "c_none"] += 1
            t["c_filled" if gold_words else "c_empty"] += bool(words) == bool(gold_words)
            if words:
                t["c_made"] += 1
                t["c_right"] += 2 * hit >= sum(words.values())
            urls = {link["url"] for link in related or []}
            t["r_tp"] += len(urls & gold_urls)
            t["r_pred"] += len(urls)
            t["r_gold"] += len(gold_urls)
            t["r_pages" if gold_urls else "r_none"] += 1
            t["r_filled" if gold_urls else "r_empty"] += bool(urls) == bool(gold_urls)
            if urls:
                t["r_made"] += 1
                t["r_right"] += 2 * len(urls & gold_urls) >= len(urls)

    def pct(a, b):
        return round(100 * a / b, 1) if b else None

    print(f"{'method':<8} {'pages':>5} {'c P':>6} {'c R':>6} {'filled|gold':>11} "
          f"{'empty|none':>10} {'right|made':>10} {'r P':>6} {'r R':>6} {'filled|gold':>11} "
          f"{'empty|none':>10} {'right|made':>10}", file=sys.stderr)
    for method, t in tally.items():
        row = {"benchmark": "role_fields", "side": args.side, "method": method,
               "pages": len(pages),
               "comments": {"precision": pct(t["c_tp"], t["c_pred"]),
                            "recall": pct(t["c_tp"], t["c_gold"]),
                            "filled_when_gold": pct(t["c_filled"], t["c_pages"]),
                            "empty_when_none": pct(t["c_empty"], t["c_none"]),
                            "right_when_filled": pct(t["c_right"], t["c_made"]),
                            "pages_with_gold": t["c_pages"], "filled": t["c_made"]},
               "related": {"precision": pct(t["r_tp"], t["r_pred"]),
                           "recall": pct(t["r_tp"], t["r_gold"]),
                           "filled_when_gold": pct(t["r_filled"], t["r_pages"]),
                           "empty_when_none": pct(t["r_empty"], t["r_none"]),
                           "right_when_filled": pct(t["r_right"], t["r_made"]),
                           "pages_with_gold": t["r_pages"], "filled": t["r_made"]}}
        print(json.dumps(row), flush=True)
        c, r = row["comments"], row["related"]
        print(f"{method:<8} {len(pages):>5} {c['precision']!s:>6} {c['recall']!s:>6} "
              f"{c['filled_when_gold']!s:>11} {c['empty_when_none']!s:>10} "
              f"{c['right_when_filled']!s:>10} {r['precision']!s:>6} {r['recall']!s:>6} "
              f"{r['filled_when_gold']!s:>11} {r['empty_when_none']!s:>10} "
              f"{r['right_when_filled']!s:>10}", file=sys.stderr)


if __name__ == "__main__":
    main()
