"""Our HTML decoding (``decoding.decode_html``) against w3lib's ``html_to_unicode`` (what Scrapy
uses), on the same dataset pages: how often the decoded text differs, how many pages come out
with U+FFFD replacement characters, and the time per page. Prints one JSON line.

    python benchmarks/decoding.py
"""
import json
import time
from w3lib.encoding import html_to_unicode
from scrapy_grownup.data import datasets as D
from scrapy_grownup.page.decoding import decode_html
recs = (D.load("cleaneval", split="test")[:300] + D.load("fundus") + D.load("magic_html_article")
        + D.load("dragnet", split="test")[:200])
diff = ours_rep = w3_rep = 0
t_ours = t_w3 = 0.0
examples = []
for r in recs:
    ct = r.extra.get("content_type")
    t = time.perf_counter()
    a, enc_a = decode_html(r.html, ct)
    t_ours += time.perf_counter() - t
    t = time.perf_counter()
    enc_b, b = html_to_unicode(ct, r.html)
    t_w3 += time.perf_counter() - t
    ours_rep += "\ufffd" in a
    w3_rep += "\ufffd" in b
    if " ".join(a.split()) != " ".join(b.lstrip("\ufeff").split()):
        diff += 1
        if len(examples) < 5:
            examples.append((r.dataset, r.id, enc_a, enc_b))
print(json.dumps({"benchmark": "decoding", "pages": len(recs), "text_differs": diff,
                  "pages_with_replacement_chars": {"grownup": ours_rep, "w3lib": w3_rep},
                  "ms_per_page": {"grownup": round(1000 * t_ours / len(recs), 2),
                                  "w3lib": round(1000 * t_w3 / len(recs), 2)},
                  "first_differences": examples}))
