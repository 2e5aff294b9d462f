"""Block roles: L3S block labels on nodes, scores, the site split, and the extractor's fields."""

import numpy as np
import pytest

from scrapy_grownup.data import datasets
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.decisions.head_fields import head_fields, related_links, subtree_sizes
from scrapy_grownup.training.holdout import page_host, site_split
from scrapy_grownup.training.roles import ROLES, role_labels, role_scores, store_roles
from tests.data_support import skip_missing_data

PAGE = b"""<html><head><title>Owls at night</title><base href="https://news.test/a/"></head>
<body>
<div id="nav"><a href="/">Home</a> <a href="/world">World</a></div>
<h1>Owls hunt at night</h1>
<p>Owls are birds of prey that hunt mostly at night.</p>
<p>Their feathers make their flight almost silent.</p>
<div class="caption">Photo: a barn owl</div>
<ul class="related">
  <li><a href="owls-day.html">Do owls ever hunt by day?</a></li>
  <li><a href="https://other.test/bats"><span>Bats and their sonar</span></a></li>
  <li><a href="javascript:void(0)">More stories like this</a></li>
</ul>
<div class="comments"><p>Great story about owls!</p><p>I saw one last week.</p></div>
<div id="footer">All rights reserved</div>
</body></html>"""

SEGMENTS = [
    (0, "Home World"),
    (1, "Owls hunt at night"),
    (2, "Owls are birds of prey that hunt mostly at night."),
    (2, "Their feathers make their flight almost silent."),
    (3, "Photo: a barn owl"),
    (4, "Do owls ever hunt by day?"),
    (4, "Bats and their sonar"),
    (4, "More stories like this"),
    (5, "Great story about owls!"),
    (5, "I saw one last week."),
]


def node_of(page, text):
    return next(i for i, t in enumerate(page.node_text) if t.startswith(text))


def test_role_labels_on_nodes():
    page = parse_page(PAGE, url="https://news.test/a/owls.html")
    result = role_labels(page, SEGMENTS)
    labels = result.labels
    assert result.coverage == 1.0
    assert labels.shape == (page.num_nodes,)
    expect = {"Owls hunt": "headline", "Owls are": "main_text", "Their feathers": "main_text",
              "Photo:": "supplemental", "Do owls": "related", "Bats and": "related",
              "Great story": "comments", "I saw": "comments", "Home": "not_content",
              "All rights": "not_content", "Owls at night": "not_content"}  # title: unselected
    for text, role in expect.items():
        assert ROLES[labels[node_of(page, text)]] == role, text
    # nodes that own no text are never labelled
    assert all(labels[i] == -1 for i, t in enumerate(page.node_text) if not t)
    assert (labels >= 0).sum() == sum(1 for t in page.node_text if t)


def test_majority_and_ties():
    page = parse_page(b"<html><body><p>one two three <b>x</b></p><p>a b</p></body></html>")
    p1, p2 = node_of(page, "one"), node_of(page, "a b")
    labels = role_labels(page, [(2, "one two"), (5, "a")]).labels
    assert ROLES[labels[p1]] == "main_text"  # 2 of 3 tokens
    assert ROLES[labels[p2]] == "comments"   # 1-1 tie with unselected text goes to the role
    none = role_labels(page, [])
    assert none.coverage == 1.0 and set(none.labels[none.labels >= 0].tolist()) == {0}
    poor = role_labels(page, [(2, "completely different words here")])
    assert poor.coverage == 0.0


def test_role_scores_by_hand():
    gold = np.array([0, 0, 1, 2, 2, 5, -1])
    pred = np.array([0, 2, 1, 2, 0, 5, 3])
    s = role_scores(gold, pred)
    assert s["roles"]["main_text"]["precision"] == pytest.approx(0.5)
    assert s["roles"]["main_text"]["recall"] == pytest.approx(0.5)
    assert s["roles"]["headline"]["f1"] == 1.0 and s["roles"]["comments"]["f1"] == 1.0
    assert s["roles"]["related"]["f1"] == 0.0 and s["roles"]["related"]["support"] == 0
    assert s["accuracy"] == pytest.approx(4 / 6)  # the -1 node is not scored
    assert s["macro_f1"] == pytest.approx((1 + 0.5 + 0 + 0 + 1) / 5)
    weighted = role_scores(gold, pred, weights=np.array([1, 1, 1, 3, 1, 1, 1]))
    assert weighted["roles"]["main_text"]["recall"] == pytest.approx(0.75)


def test_site_split_keeps_hosts_together():
    assert page_host("https://www.BBC.co.uk/news/1") == "bbc.co.uk"
    assert page_host("http://news.bbc.co.uk/x") == "news.bbc.co.uk"
    assert page_host(None) == "" and page_host("not a url") == ""
    hosts = [f"site{i % 37}.test" for i in range(300)]
    train, test = site_split(hosts)
    assert sorted(train + test) == list(range(300))
    assert not {hosts[i] for i in train} & {hosts[i] for i in test}
    assert 0.05 < len(test) / 300 < 0.45
    assert site_split(hosts) == (train, test)  # deterministic


def test_subtree_sizes():
    parent = np.array([-1, 0, 1, 1, 0, 4])
    assert subtree_sizes(parent).tolist() == [6, 3, 1, 1, 2, 1]


def test_head_fields_comments_and_related_links():
    page = parse_page(PAGE, url="https://news.test/a/owls.html")
    labels = role_labels(page, SEGMENTS).labels
    probs = np.eye(len(ROLES))[np.maximum(labels, 0)]
    fields = head_fields(page, {"roles": probs, "page_type": np.array([0.1, 0.7, 0.2])},
                         ["article", "forum", "listing"], list(ROLES))
    assert fields["page_type"] == "forum" and fields["page_type_score"] == pytest.approx(0.7)
    assert fields["comments"] == "Great story about owls!\nI saw one last week."
    assert fields["related_links"] == [
        {"text": "Do owls ever hunt by day?", "url": "https://news.test/a/owls-day.html"},
        {"text": "Bats and their sonar", "url": "https://other.test/bats"},
    ]  # javascript: links are skipped; relative links resolve against <base href>
    # no role head / no page-type head: those fields are left out
    assert head_fields(page, {"roles": None, "page_type": None}, [], []) == {}
    none = head_fields(page, {"roles": np.eye(len(ROLES))[np.zeros(page.num_nodes, int)]},
                       [], list(ROLES))
    assert none == {"comments": "", "related_links": []}


def test_related_links_need_a_majority_of_link_text():
    page = parse_page(b'<html><body><a href="/x"><span>one two</span> three four five</a>'
                      b'<a href="/x">again</a></body></html>', url="http://h.test/p")
    span = node_of(page, "one two")
    related = np.zeros(page.num_nodes, bool)
    related[span] = True
    assert related_links(page, related) == []  # 7 of 21 characters
    related[node_of(page, "three")] = True  # the anchor's own text
    assert related_links(page, related) == [{"text": "three four five one two",
                                             "url": "http://h.test/x"}]


def test_store_roles_align_with_store_nodes():
    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.data.store import GraphStore

    page = parse_page(PAGE, url="https://news.test/a/owls.html")
    record = datasets.PageRecord("l3s_gn1", "p1", PAGE, "", page.url, "all",
                                 {"roles": SEGMENTS})
    plain = datasets.PageRecord("l3s_gn1", "p2", PAGE, "", page.url, "all", {})
    store = GraphStore.build([page, page], get_encoder("static"), ids=["p2", "p1"])
    roles = store_roles(store, records=[record, plain], workers=1)
    assert roles.shape == (2 * page.num_nodes,)
    assert (roles[:page.num_nodes] == -1).all()  # no annotation
    assert roles[page.num_nodes:].tolist() == role_labels(page, SEGMENTS).labels.tolist()


def test_real_l3s_pages_align_well():
    try:
        records = datasets.load("l3s_gn1", limit=5)
    except datasets.DatasetNotAvailable:
        skip_missing_data("L3S-GN1 data")
    seen = set()
    for record in records:
        page = parse_page(record.html, url=record.url,
                          content_type=record.extra.get("content_type"))
        result = role_labels(page, record.extra["roles"])
        assert result.coverage > 0.75, record.id
        seen.update(ROLES[r] for r in result.labels[result.labels >= 0])
    assert {"not_content", "headline", "main_text"} <= seen
