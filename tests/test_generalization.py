"""Cross-site building blocks: site-grouped splits, modern-set loaders, the visibility and
whole-block rules, and the WCXB bag-of-words metric."""

import numpy as np
import pytest

from scrapy_grownup.data import datasets as D
from scrapy_grownup.data import splits
from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.evaluation.metrics import bag_of_words_f1, bag_of_words_scores
from scrapy_grownup.decisions.refine import (block_of, block_scores, content_mask, drop_repeated_blocks,
                                   main_container, page_threshold, whole_blocks, without_byline,
                                   without_embed_notices, without_headline)


def record(dataset, id_, url=None, **extra):
    return D.PageRecord(dataset, id_, b"", "", url, "all", extra)


# ------------------------------------------------------------------------------------------
# Site keys and grouped splits


def test_registrable_domain():
    assert splits.registrable_domain("www.bbc.co.uk") == "bbc.co.uk"
    assert splits.registrable_domain("news.bbc.co.uk") == "bbc.co.uk"
    assert splits.registrable_domain("WWW.Example.COM.") == "example.com"
    assert splits.registrable_domain("blog.example.com") == "example.com"
    assert splits.registrable_domain("example.de") == "example.de"
    assert splits.registrable_domain("a.b.example.com.au") == "example.com.au"
    assert splits.registrable_domain("10.0.0.1") == "10.0.0.1"


def test_site_of_prefers_publisher_then_domain_then_page():
    assert splits.site_of(record("fundus", "x", "https://www.zeit.de/a", publisher="Zeit")) == \
        "publisher:zeit"
    assert splits.site_of(record("wcxb_dev", "1", "https://m.example.org/p")) == "example.org"
    assert splits.site_of(record("dragnet", "7")) == "dragnet/7"
    assert splits.site_of(record("wcxb_dev", "2", "http://[")) == "wcxb_dev/2"


def test_site_groups_join_sites_near_duplicates_and_urls():
    recs = [
        record("wcxb_dev", "1", "https://a.example.com/x"),
        record("pagetype", "9", "https://www.example.com/y"),   # same site, other set
        record("fundus", "t1", "https://taz.de/1", publisher="Taz",
               near_duplicates=["fundus/t2"]),
        record("fundus", "t2", "https://taz.de/2", publisher="TazArchive"),
        record("magic_html_article", "m", "https://other.net/z"),
        record("postlight_silver", "p", "https://other2.net/same/"),
        record("wcxb_dev", "3", "https://other2.net/same"),           # same URL
    ]
    g = splits.site_groups(recs)
    assert g[0] == g[1]
    assert g[2] == g[3]
    assert g[5] == g[6]
    assert len({g[0], g[2], g[4], g[5]}) == 4
    # the key does not depend on the order of the records
    assert splits.site_groups(recs[::-1])[::-1] == g


def test_site_folds_never_put_a_site_on_both_sides():
    recs = [record("wcxb_dev", str(i), f"https://www.site{i % 37}.org/page{i}")
            for i in range(400)]
    folds = splits.site_folds(recs, 5)
    assert set(folds) == {0, 1, 2, 3, 4}
    by_site = {}
    for r, f in zip(recs, folds):
        by_site.setdefault(splits.site_of(r), set()).add(f)
    assert all(len(fs) == 1 for fs in by_site.values())
    train, held = splits.grouped_holdout(recs, 0.3)
    assert not splits.sites(recs[i] for i in train) & splits.sites(recs[i] for i in held)
    assert sorted(train + held) == list(range(len(recs)))
    with pytest.raises(ValueError):
        splits.site_folds(recs, 1)


def test_cross_site_plans_hold_no_test_site_in_training():
    from scrapy_grownup.training import crosssite as C

    evals = [record("wcxb_dev", str(i), f"https://s{i % 23}.com/{i}", page_type="article")
             for i in range(120)]
    evals += [record("fundus", f"f{i}", f"https://s{i % 4}.com/f{i}", publisher=f"P{i % 6}")
              for i in range(30)]
    extra = [record("dragnet", f"d{i}", f"https://s{i % 50}.com/d") for i in range(60)]
    everything = evals + extra
    plans = C.site_cv_plan(evals, extra, 4)
    assert [p.name for p in plans] == ["fold0", "fold1", "fold2", "fold3"]
    assert sum(len(p.test) for p in plans) == len(evals)
    for plan in plans:
        C.check_disjoint(plan, everything)  # raises on a leak
        assert not {C.record_key(r) for r in plan.test} & plan.train_keys
    held = C.leave_out_plan(evals, extra, ("fundus",))
    C.check_disjoint(held, everything)
    assert {r.dataset for r in held.test} == {"fundus"}
    # pages of wcxb on the same domains as fundus pages are not trained on either
    assert "wcxb_dev/0" not in held.train_keys  # s0.com hosts fundus pages too? (0 % 4 == 0)
    leak = C.FoldPlan("leak", [evals[0]], {C.record_key(evals[23])})  # same site s0.com
    with pytest.raises(AssertionError):
        C.check_disjoint(leak, everything)


# ------------------------------------------------------------------------------------------
# Modern-set loaders on real pages (skipped where the archives are absent)


def _available(name):
    try:
        D.ensure_unpacked(name)
    except D.DatasetNotAvailable:
        return False
    return True


@pytest.mark.parametrize("name", D.MODERN_DATASETS)
def test_modern_loader_reads_real_pages(name):
    if not _available(name):
        pytest.skip(f"dataset {name} not available")
    ids = D.list_ids(name)
    assert len(ids) >= 20 and all(split == "all" for _, split in ids)
    everything = D.load(name)
    recs = [r for r in everything if r.url][:3]
    assert len(recs) == 3 and sum(bool(r.url) for r in everything) >= 0.5 * len(ids)
    for r in recs:
        assert r.dataset == name and r.html.lstrip()[:1] == b"<" or b"<" in r.html[:2000]
        assert r.gold and len(r.gold.split()) > 5
        assert r.url is None or r.url.startswith("http")
        assert r.extra["silver"] == (name in D.SILVER_DATASETS)
        page = parse_page(r.html, url=r.url)
        assert page.num_nodes > 10
    if name == "wcxb_dev":
        assert {r.extra["page_type"] for r in D.load(name)} == {
            "article", "service", "product", "collection", "forum", "listing", "documentation"}
        assert isinstance(recs[0].extra["with"], list)
    if name.startswith("fundus"):
        assert all(r.extra["publisher"] for r in recs)


def test_wcxb_gold_wins_over_pagetype_for_the_same_url():
    if not (_available("wcxb_dev") and _available("pagetype")):
        pytest.skip("wcxb_dev or pagetype not available")
    from scrapy_grownup.training.crosssite import load_records

    recs = load_records(["wcxb_dev", "pagetype"])
    wcxb = {r.url for r in recs if r.dataset == "wcxb_dev"}
    assert not [r for r in recs if r.dataset == "pagetype" and r.url in wcxb]
    assert any(r.dataset == "pagetype" for r in recs)


# ------------------------------------------------------------------------------------------
# Visibility


HIDDEN_PAGE = (b"<html><head><noscript><img src=pixel.gif></noscript></head><body>"
               b"<p>Visible start.</p>"
               b"<div hidden><p>hidden attribute</p></div>"
               b"<div aria-hidden=\"TRUE\"><p>aria hidden</p></div>"
               b"<div style=\"color:red; DISPLAY : none\"><p>display none</p></div>tail one"
               b"<span style=\"visibility:hidden\">visibility hidden</span>"
               b"<template><p>template copy</p></template>"
               b"<dialog><p>closed dialog</p></dialog><dialog open><p>open dialog</p></dialog>"
               b"<noscript>Please enable JavaScript.</noscript>"
               b"<div id=posts><noscript><div class=post><p>" + b"A real forum post. " * 15 +
               b"</p></div></noscript></div>"
               b"<p>Visible end.</p></body></html>")


def test_markup_hidden_elements_are_flagged_or_removed():
    from scrapy_grownup.graph.layout import LAYOUT_BLOCKS, layout_features

    text = " ".join(parse_page(HIDDEN_PAGE, visibility=True).seg_text)
    for gone in ("hidden attribute", "aria hidden", "display none", "visibility hidden",
                 "template copy", "closed dialog", "Please enable JavaScript"):
        assert gone not in text
    for kept in ("Visible start.", "tail one", "open dialog", "A real forum post.",
                 "Visible end."):
        assert kept in text
    # by default they stay, flagged (with their subtree) for the model's layout features
    page = parse_page(HIDDEN_PAGE)
    raw = " ".join(page.seg_text)
    assert "hidden attribute" in raw and "closed dialog" in raw and "display none" in raw
    assert "Please enable JavaScript" not in raw and "A real forum post." in raw
    hidden = layout_features(page)[:, sum(size for _, size in LAYOUT_BLOCKS) - 1]
    flagged = {page.node_text[i] for i in range(page.num_nodes) if hidden[i] and page.node_text[i]}
    assert {"hidden attribute", "aria hidden", "display none", "visibility hidden",
            "closed dialog"} <= flagged
    assert not flagged & {"Visible start.", "open dialog", "Visible end."}


def test_anti_flicker_hidden_body_is_kept():
    page = parse_page(b"<html style='display:none'><body hidden style='visibility:hidden'>"
                      b"<p>Article text.</p></body></html>", visibility=True)
    assert page.seg_text == ["Article text."]


# ------------------------------------------------------------------------------------------
# Blocks are judged whole


BLOCK_PAGE = (b"<html><body><div>"
              b"<p>We pushed out the first version of the <a href=/x>release notes</a> in "
              b"January.</p>"
              b"<ul><li><a href=/r1>Related story one</a></li></ul>"
              b"</div></body></html>")


def _node(page, tag, nth=0):
    return [i for i, t in enumerate(page.tags) if t == tag][nth]


def test_inline_link_text_stays_with_its_kept_sentence():
    page = parse_page(BLOCK_PAGE)
    probs = np.zeros(page.num_nodes)
    probs[_node(page, "p")] = 0.9        # the sentence
    probs[_node(page, "a", 0)] = 0.2     # its link, scored alone as boilerplate
    probs[_node(page, "a", 1)] = 0.3     # a related link
    text = assemble_text(page, content_mask(page, probs))
    assert text == "We pushed out the first version of the release notes in January."
    old = assemble_text(page, content_mask(page, probs, blocks=False))
    assert "release notes" not in old
    assert block_of(page)[_node(page, "a", 0)] == _node(page, "p")
    assert block_of(page)[_node(page, "a", 1)] == _node(page, "li")


def test_a_block_is_dropped_whole_when_its_text_is_mostly_boilerplate():
    page = parse_page(b"<html><body><p><a href=/a>Read more about this and other news</a>"
                      b" here</p></body></html>")
    probs = np.zeros(page.num_nodes)
    probs[_node(page, "p")] = 0.8      # " here": 4 characters
    probs[_node(page, "a")] = 0.1      # the link: most of the block's text
    keep = whole_blocks(page, probs)
    assert not keep[_node(page, "p")] and not keep[_node(page, "a")]


# A highlighted code listing as Pygments writes it (the Python docs): a span per token.
CODE_PAGE = (b"<html><body><div class=highlight><pre>"
             b"<span class=k>def</span> <span class=nf>pairwise</span><span class=p>(</span>"
             b"<span class=n>iterable</span><span class=p>):</span>\n"
             b"    <span class=k>return</span> <span class=nb>zip</span><span class=p>(</span>"
             b"<span class=n>iterable</span><span class=p>,</span> <span class=n>iterable</span>"
             b"<span class=p>[</span><span class=mi>1</span><span class=p>:])</span>"
             b"</pre></div>"
             b"<p>Return successive overlapping pairs taken from the input iterable.</p>"
             b"</body></html>")


def test_a_code_block_is_judged_by_its_most_confident_token():
    page = parse_page(CODE_PAGE)
    probs = np.full(page.num_nodes, 0.15)   # the punctuation and names, judged one by one
    probs[_node(page, "span", 0)] = 0.7     # "def": the model knows this is code
    probs[_node(page, "p")] = 0.9
    pre = _node(page, "pre")
    spans = [i for i, t in enumerate(page.tags) if t == "span"]
    assert all(block_of(page)[s] == pre for s in spans)
    scores = block_scores(page, probs)
    assert np.allclose(scores[spans], 0.7)
    text = assemble_text(page, content_mask(page, probs, 0.4))
    assert "def pairwise(iterable):" in text and "return zip(iterable, iterable[1:])" in text
    # the root's own score counts too (a listing whose every token scored low)
    probs[spans] = 0.1
    probs[pre] = 0.6
    assert np.allclose(block_scores(page, probs)[spans], 0.6)
    # a paragraph is still judged by its text-weighted mean, as before
    page2 = parse_page(BLOCK_PAGE)
    probs2 = np.zeros(page2.num_nodes)
    probs2[_node(page2, "p")] = 0.9
    probs2[_node(page2, "a", 0)] = 0.0
    p_scores = block_scores(page2, probs2)
    assert 0.0 < p_scores[_node(page2, "p")] < 0.9


# ------------------------------------------------------------------------------------------
# The main container and repeated blocks

CONTAINER_PAGE = (
    b"<html><body>"
    b"<div id=consent><p>We use cookies to improve your experience on this site.</p></div>"
    b"<article><h1>Storm closes the harbour</h1>"
    b"<p>The harbour closed on Monday after a storm brought waves of six metres to the coast "
    b"and the port authority stopped all ferries until further notice.</p>"
    b"<p>Fishermen said they had never seen the water rise so fast in the bay before.</p>"
    b"<p>To view this video please enable JavaScript in your browser.</p>"
    b"<p>Repairs to the pier are expected to take several weeks, the authority said.</p>"
    b"<p>To view this video please enable JavaScript in your browser.</p>"
    b"</article>"
    b"<aside><ul><li>Related: ferry timetable changes for the summer season</li>"
    b"<li>Signed by the editor of the weekly bulletin of the harbour</li></ul></aside>"
    b"</body></html>")


def _scored(page, default=0.3, **by_text):
    """Scores per node: ``default`` everywhere, ``by_text[word]`` on nodes whose own text
    starts with that word."""
    probs = np.full(page.num_nodes, default)
    for i, text in enumerate(page.node_text):
        for word, score in by_text.items():
            if text.startswith(word):
                probs[i] = score
    return probs


def test_blocks_outside_the_main_container_are_dropped_unless_sure():
    page = parse_page(CONTAINER_PAGE)
    probs = _scored(page, The=0.95, Fishermen=0.9, Repairs=0.9, To=0.6, Storm=0.5,
                    We=0.55, Related=0.5, Signed=0.97)
    text = assemble_text(page, content_mask(page, probs, 0.4, repeats=False, adaptive=False))
    assert "harbour closed on Monday" in text and "Repairs to the pier" in text
    assert "cookies" not in text and "ferry timetable" not in text  # outside, unsure
    assert "Signed by the editor" in text  # outside, but the model is sure
    without = assemble_text(page, content_mask(page, probs, 0.4, container=False,
                                               repeats=False, adaptive=False))
    assert "cookies" in without and "ferry timetable" in without
    keep = whole_blocks(page, probs, 0.4)
    assert (main_container(page, keep, probs) <= keep).all()  # it only ever drops


def test_the_main_container_is_the_deepest_element_holding_most_kept_text():
    page = parse_page(CONTAINER_PAGE)
    probs = _scored(page, The=0.95, Fishermen=0.9, Repairs=0.9, We=0.6, Related=0.6,
                    Signed=0.6)
    # share 0: every element qualifies, the deepest is one paragraph: everything else goes
    only = assemble_text(page, main_container(page, whole_blocks(page, probs, 0.4), probs,
                                              share=0.0, sure=1.1))
    assert only.count("\n") == 0
    nothing = np.zeros(page.num_nodes, dtype=bool)
    assert not main_container(page, nothing, probs).any()


def test_a_repeated_block_is_kept_once():
    page = parse_page(CONTAINER_PAGE)
    probs = _scored(page, default=0.9)
    text = assemble_text(page, content_mask(page, probs, 0.4))
    assert text.count("To view this video please enable JavaScript") == 1
    assert text.index("To view this video") < text.index("Repairs to the pier")  # the first
    twice = assemble_text(page, content_mask(page, probs, 0.4, repeats=False))
    assert twice.count("To view this video please enable JavaScript") == 2
    short = parse_page(b"<html><body><p>Photo AP</p><p>Some text in between.</p>"
                       b"<p>Photo AP</p></body></html>")
    keep = np.ones(short.num_nodes, dtype=bool)
    assert (drop_repeated_blocks(short, keep) == keep).all()  # under three words: left alone


_STORY = [
    "The harbour closed on Monday after a storm brought waves of six metres to the coast and "
    "the port authority stopped all ferries until further notice.",
    "Fishermen said they had never seen the water rise so fast in the bay before, and several "
    "boats broke loose from their moorings during the night.",
    "Repairs to the pier are expected to take several weeks, the authority said, and the "
    "ferries will run from the northern quay until the work is done.",
]
_TAB = ("Timetable for the northern quay: the first ferry leaves at six in the morning, the "
        "last one at ten in the evening, every hour on the hour on weekdays and every two hours "
        "on Sundays and public holidays, with extra boats on market days.")
HIDDEN_COPY_PAGE = (  # freitag.de: a paywall's display:none copy of the whole article
    "<html><body><article>" + "".join(f"<p>{p}</p>" for p in _STORY)
    + f'<div class=tab hidden><p>{_TAB}</p></div>'
    + f'<div class=tab aria-hidden=true><p>In short: {_STORY[0]}</p></div>'  # under 50 words
    + "</article>"
    + '<div class="o-paywall" style="display: none">' + " ".join(_STORY[1:]) + " "
    + _STORY[0] + "</div></body></html>").encode()


def test_a_hidden_copy_of_the_kept_text_is_dropped():
    from scrapy_grownup.decisions.refine import HIDDEN_COPY_WORDS, hidden_nodes, without_hidden_copies

    page = parse_page(HIDDEN_COPY_PAGE)
    probs = _scored(page, default=0.95)
    text = assemble_text(page, content_mask(page, probs, 0.4, container=False))
    assert all(text.count(p) == 1 for p in _STORY[1:])  # the paywall's copy is gone
    assert _TAB in text                                 # a hidden tab of its own text stays
    assert text.count(_STORY[0]) == 2                   # a short hidden repeat stays too
    assert "In short: " in text
    doubled = assemble_text(page, content_mask(page, probs, 0.4, container=False,
                                               copies=False))
    assert doubled.count(_STORY[1]) == 2
    hidden = hidden_nodes(page)
    hidden_text = {page.node_text[i] for i in np.flatnonzero(hidden)}
    assert _TAB in hidden_text and _STORY[2] not in hidden_text  # only the hidden subtrees
    assert len(" ".join(_STORY).split()) >= HIDDEN_COPY_WORDS > len(_STORY[0].split())
    # a page with nothing hidden, or nothing kept, is left as it is
    keep = np.ones(page.num_nodes, dtype=bool)
    plain = parse_page(b"<html><body><p>" + _STORY[0].encode() + b"</p></body></html>")
    assert (without_hidden_copies(plain, np.ones(plain.num_nodes, bool)) ==
            np.ones(plain.num_nodes, bool)).all()
    assert not without_hidden_copies(page, ~keep).any()


NOTICE_PAGE = """<html><body><article>
<p>Der Stadtrat hat am Dienstag neue Radwege in drei Straßen beschlossen.</p>
<div class="embed"><p>An dieser Stelle finden Sie einen externen Inhalt von Instagram, der den
Artikel ergänzt. Sie können ihn sich mit einem Klick anzeigen lassen.</p>
<p>Ich bin damit einverstanden, dass mir externe Inhalte angezeigt werden.</p></div>
<p>Third-party content: click here to load this post from X.</p>
<p>Platforms must accept liability for third-party content under the new law, the council
said.</p>
<p>The regulator will publish its guidance on external content in May.</p>
<p>Die Arbeiten sollen im Frühjahr beginnen.</p>
</article></body></html>""".encode()


def test_embed_consent_notices_leave_the_text():
    """A notice names external content and asks to show it; a news sentence about such
    content, or one that only names it, stays."""
    page = parse_page(NOTICE_PAGE)
    probs = _scored(page, default=0.9)
    text = assemble_text(page, content_mask(page, probs, 0.4))
    assert "externen Inhalt von Instagram" not in text
    assert "einverstanden" not in text and "click here to load" not in text
    assert "Platforms must accept liability for third-party content" in text
    assert "guidance on external content" in text
    assert "Radwege" in text and "Frühjahr" in text
    kept = assemble_text(page, content_mask(page, probs, 0.4, notices=False))
    assert "externen Inhalt von Instagram" in kept and "click here to load" in kept
    # a long paragraph is news, not a notice, whatever it names
    long_page = parse_page(("<html><body><p>" + "Sie können externe Inhalte mit einem Klick "
                            "anzeigen lassen, sagte die Ministerin. " * 12 +
                            "</p></body></html>").encode())
    keep = np.ones(long_page.num_nodes, dtype=bool)
    assert (without_embed_notices(long_page, keep) == keep).all()
    nothing = np.zeros(page.num_nodes, dtype=bool)
    assert not without_embed_notices(page, nothing).any()


def _assert_marked_rule_guards(page, rule, marked, plain_html: bytes) -> None:
    """A rule that drops marked nodes keeps nothing of an empty selection, and a page without
    its markup has no marked node."""
    assert not rule(page, np.zeros(page.num_nodes, dtype=bool)).any()
    assert not marked(parse_page(plain_html)).any()


DIALOG_PAGE = (
    "<html><body><article><h1>Wool Runner</h1>"
    "<p>Our Wool Runner combines soft merino wool with cloud-like comfort for every day.</p>"
    "<p>Machine washable, and made with responsibly sourced materials from end to end.</p>"
    "</article>"
    "<div id=modal-privacy aria-modal=true class='fixed inset-0'><h2>Privacy policy</h2>"
    "<p>Privacy terms: we may collect certain information automatically through our "
    "services, and share it with our partners for advertising.</p></div>"
    "<div role=dialog aria-label=cookies><p>Cookie notice: we use cookies to improve your "
    "experience of our site; accept all cookies or manage your settings.</p></div>"
    "<div role='alertdialog presentation'><p>Size chart alert: sizes run one size small "
    "in this model, so order one size up from your usual.</p></div>"
    "<div aria-modal=false><p>Not modal: our stores are open every day of the week.</p></div>"
    "</body></html>").encode()


def test_kept_blocks_inside_modal_dialogs_leave_the_text():
    """``role=dialog`` / ``alertdialog`` and ``aria-modal=true`` elements are overlays that
    scripts open: their blocks leave the text however the model scores them, unless the
    page's only kept text is in one."""
    from scrapy_grownup.decisions.refine import dialog_nodes, without_dialogs

    page = parse_page(DIALOG_PAGE)
    probs = _scored(page, default=0.9)
    text = assemble_text(page, content_mask(page, probs, 0.4, headline=False))
    assert "Wool Runner combines" in text and "Machine washable" in text
    assert "Not modal: our stores" in text
    for overlay in ("Privacy policy", "Privacy terms", "Cookie notice", "Size chart alert"):
        assert overlay not in text
    kept = assemble_text(page, content_mask(page, probs, 0.4, headline=False, dialogs=False))
    assert "Privacy terms" in kept and "Cookie notice" in kept and "Size chart alert" in kept
    inside = dialog_nodes(page)
    assert {page.tags[i] for i in np.flatnonzero(inside)} == {"div", "h2", "p"}
    assert not inside[[i for i, t in enumerate(page.node_text) if t.startswith("Not modal")]].any()
    # a page whose only kept text is in a dialog keeps it
    only = _scored(page, default=0.05, Privacy=0.9)
    keep = content_mask(page, only, 0.4, adaptive=False, headline=False)
    assert assemble_text(page, keep).startswith("Privacy policy")
    _assert_marked_rule_guards(page, without_dialogs, dialog_nodes,
                               b"<html><body><p>No dialog at all on this page.</p></body></html>")


def test_the_prose_fallback_leaves_a_dialogs_text_out():
    """A consent overlay's long paragraphs are not the page's prose."""
    sentence = "We and our partners store and read cookies on your device to measure ads. "
    page = parse_page(("<html><body><div role=dialog>" +
                       "".join(f"<p>Consent {i}: {sentence * 2}</p>" for i in range(4)) +
                       "</div><p>Short line.</p></body></html>").encode())
    assert assemble_text(page, content_mask(page, _scored(page, default=0.02), 0.5)) == ""


SCREEN_READER_PAGE = (
    "<html><body><a class='sr-only sr-only-focusable' href='#main'>Skip to main content</a>"
    "<main id=main><h1>Desks</h1>"
    "<p>Our standing desks rise from 60 to 125 cm at the touch of a button, "
    "<a href='/warranty' target=_blank>see the warranty<span class=visually-hidden> "
    "(opens in a new window)</span></a>.</p>"
    "<ul class=grid>"
    "<li><h2>Micke desk</h2><p>Price <span class='price'><span class=screen-reader-text>"
    "Original price was: $99.</span> $79</span></p>"
    "<button><span class=sr-only>Add Micke desk to cart</span>+</button></li>"
    "<li><h2>Alex desk</h2><p>A drawer unit and a desk top in one, 132 cm wide.</p>"
    "<span class='visuallyhidden'>Rated 4 out of 5 stars</span></li></ul>"
    "<p class='srcset-only'>Not a screen-reader class: this sentence stays.</p>"
    "</main></body></html>").encode()


def test_text_for_screen_readers_only_leaves_the_text():
    """Text inside an element with a screen-reader-only utility class (``sr-only``,
    ``visually-hidden``, ``visuallyhidden``, ``screen-reader-text``) is not what a reader
    sees: it leaves the kept text, the visible text of the same blocks stays, and a page whose
    only kept text is such text keeps it."""
    from scrapy_grownup.decisions.refine import screen_reader_nodes, without_screen_reader_text

    page = parse_page(SCREEN_READER_PAGE)
    probs = _scored(page, default=0.9)
    text = assemble_text(page, content_mask(page, probs, 0.4, headline=False))
    for hidden in ("Skip to main content", "opens in a new window", "Original price was",
                   "Add Micke desk to cart", "Rated 4 out of 5"):
        assert hidden not in text
    for seen in ("see the warranty", "$79", "Micke desk", "A drawer unit", "this sentence stays"):
        assert seen in text
    kept = assemble_text(page, content_mask(page, probs, 0.4, headline=False,
                                            screen_reader=False))
    assert "opens in a new window" in kept and "Original price was: $99." in kept
    inside = screen_reader_nodes(page)
    assert {page.tags[i] for i in np.flatnonzero(inside)} == {"a", "span"}
    # only the screen-reader text kept: it stays rather than an empty article
    only = np.zeros(page.num_nodes, dtype=bool)
    only[np.flatnonzero(inside)] = True
    assert (without_screen_reader_text(page, only) == only).all()
    # class lists that only contain the letters are not screen-reader classes
    _assert_marked_rule_guards(
        page, without_screen_reader_text, screen_reader_nodes,
        b"<html><body><p class='sr-onlyish srcset-only'>Plain text.</p></body></html>")


def test_the_prose_fallback_leaves_screen_reader_text_out():
    """A page the model cannot read keeps its prose, without the text only screen readers get."""
    sentence = "The ferry to the island runs twice a day from the old harbour in summer. "
    page = parse_page(("<html><body>" + "".join(
        f"<p>Part {i}: {sentence * 2}<a href='/t'>timetable<span class=sr-only> (PDF, opens "
        f"in a new window)</span></a></p>" for i in range(4)) + "</body></html>").encode())
    text = assemble_text(page, content_mask(page, _scored(page, default=0.02), 0.5))
    assert "Part 3: The ferry" in text and "timetable" in text
    assert "opens in a new window" not in text


def test_the_headline_goes_to_the_title_not_the_text():
    page = parse_page(CONTAINER_PAGE)
    probs = _scored(page, default=0.05, Storm=0.8, The=0.9, Fishermen=0.9, Repairs=0.9)
    text = assemble_text(page, content_mask(page, probs, 0.4, adaptive=False))
    assert text.startswith("The harbour closed on Monday") and "Storm closes" not in text
    kept = assemble_text(page, content_mask(page, probs, 0.4, adaptive=False, headline=False))
    assert kept.startswith("Storm closes the harbour")
    # a heading after the start of the kept text is a section heading: it stays
    inside = parse_page(b"<html><body><article><p>The storm reached the coast on Monday night "
                        b"and the ferries stopped.</p><h1>What happens next</h1><p>Repairs "
                        b"will take weeks, the port authority said on Tuesday.</p></article>"
                        b"</body></html>")
    keep = np.ones(inside.num_nodes, dtype=bool)
    assert "What happens next" in assemble_text(inside, without_headline(inside, keep))


BYLINE_PAGE = (
    b"<html><head><meta name=author content='Jane Doe'></head><body><article>"
    b"<h1>Storm closes the harbour</h1><p>By Jane Doe, harbour reporter</p>"
    b"<p>March 1, 2026</p>"
    b"<p>The harbour closed on Monday after a storm brought waves of six metres.</p>"
    b"<p>Jane Doe asked the port authority when the ferries run again.</p>"
    b"<p>Repairs are expected to take several weeks, the authority said on Tuesday.</p>"
    b"</article></body></html>")


def test_the_byline_and_date_go_to_their_fields_not_the_text():
    page = parse_page(BYLINE_PAGE)
    keep = np.ones(page.num_nodes, dtype=bool)
    text = assemble_text(page, without_byline(page, keep))
    assert "By Jane Doe" not in text and "March 1, 2026" not in text
    assert text.startswith("Storm closes")  # not a byline: left to without_headline
    # a short sentence that names the author is body text: more than a name and a date
    assert "Jane Doe asked the port authority" in text
    probs = _scored(page, default=0.9)
    assert "By Jane Doe" in assemble_text(page, content_mask(page, probs, 0.4, byline=False))
    assert "By Jane Doe" not in assemble_text(page, content_mask(page, probs, 0.4))


def test_the_page_threshold_splits_the_pages_scores_within_the_band():
    lengths = np.array([0, 50, 80, 120, 40, 60, 30])
    # two clear groups, 0.1-0.15 and 0.3-0.35: the cut falls between them, under 0.4
    scores = np.array([0.9, 0.1, 0.12, 0.15, 0.3, 0.33, 0.35])
    cut = page_threshold(scores, lengths, 0.4)
    assert 0.2 <= cut < 0.3 and abs(cut - (0.15 + 0.3) / 2) < 1e-9
    assert page_threshold(scores, lengths, 0.6) == pytest.approx(0.4)  # clipped to 0.6 - 0.2
    assert page_threshold(scores, lengths, 0.4, band=0.0) == 0.4  # no band: the threshold
    assert page_threshold(np.full(7, 0.7), lengths, 0.4) == 0.4    # one distinct score
    assert page_threshold(scores, np.zeros(7), 0.4) == 0.4          # no text at all
    # the node without text (score 0.9) takes no part
    assert page_threshold(scores, lengths, 0.4) == page_threshold(
        np.where(lengths > 0, scores, 0.0), lengths, 0.4)


def test_an_adaptive_cut_keeps_a_page_the_model_is_unsure_of():
    page = parse_page(CONTAINER_PAGE)
    probs = _scored(page, default=0.05, The=0.35, Fishermen=0.33, Repairs=0.34, To=0.3)
    fixed = assemble_text(page, content_mask(page, probs, 0.4, adaptive=False))
    adapted = assemble_text(page, content_mask(page, probs, 0.4))
    assert fixed == "" and "harbour closed on Monday" in adapted and "Repairs" in adapted
    assert "cookies" not in adapted
    # the band bounds how far the page's cut-off moves: 0.5 - 0.1 keeps nothing, 0.5 - 0.3 does
    assert assemble_text(page, content_mask(page, probs, 0.5, band=0.1)) == ""
    wider = assemble_text(page, content_mask(page, probs, 0.5, band=0.3))
    assert "harbour closed on Monday" in wider and "cookies" not in wider
    # and it drops only on a page with a block within LOWERING_MARGIN (0.2) of the threshold:
    # the best block, 0.35, is 0.25 under 0.6, so however wide the band, nothing is kept
    assert assemble_text(page, content_mask(page, probs, 0.6, band=0.3)) == ""


SHELL_PAGE = (  # a shop's product page whose scripts render everything (aliexpress.com)
    b"<html><head><title>Tufted rug | Example Shop</title></head><body>"
    b"<div id=root><div class=loading>Loading...</div></div>"
    b"<footer><p>Help Center</p><p>Intellectual Property Protection</p>"
    b"<p>Example Group</p></footer></body></html>")


def test_a_page_of_nothing_but_boilerplate_keeps_nothing():
    """Otsu splits every page in two: on a shell page the upper group is the least unlikely
    lines (the shop's name, scored 0.23 where the rest is 0.02), and a cut-off lowered to
    0.5 - 0.3 would keep it. No block comes within 0.2 of 0.5, so the cut-off stays."""
    from scrapy_grownup.decisions.refine import LOWERING_MARGIN, lowers_cut

    page = parse_page(SHELL_PAGE)
    probs = _scored(page, default=0.02, Example=0.23)
    rescorer_decisions = {"container": False, "band": 0.3, "cut_weight": "block-chars"}
    assert assemble_text(page, content_mask(page, probs, 0.5, **rescorer_decisions)) == ""
    # what the same page kept with the cut-off lowered regardless: the shop's name
    lowered = assemble_text(page, content_mask(page, probs, 0.5 - 0.2 - 1e-9,
                                               **rescorer_decisions))
    assert lowered == "Example Group"
    lengths = page.text_lengths()
    assert LOWERING_MARGIN == 0.2 and not lowers_cut(probs, lengths, 0.5)
    assert lowers_cut(probs, lengths, 0.5, margin=0.3)   # 0.23 >= 0.5 - 0.3
    assert lowers_cut(probs, lengths, 0.43)              # 0.23 >= 0.43 - 0.2
    assert not lowers_cut(probs, np.zeros_like(lengths), 0.5)  # no text at all
    # a block within the margin lets the cut-off drop as before: kept at 0.3 with band 0.3
    probs = _scored(page, default=0.02, Example=0.31)
    assert assemble_text(page, content_mask(page, probs, 0.5, **rescorer_decisions)) == \
        "Example Group"


def _prose_page(paragraphs: int) -> bytes:
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


def test_a_page_that_keeps_nothing_but_has_prose_keeps_its_prose():
    """Scores under 0.1 everywhere keep nothing (``lowers_cut``); a page with three or more
    long, visible paragraphs of little link text outside its chrome keeps those instead, so
    a crawl does not drop it; with two, or with ``fallback=False``, it keeps nothing."""
    from scrapy_grownup.decisions.refine import PROSE_MIN_BLOCKS

    page = parse_page(_prose_page(3))
    probs = _scored(page, default=0.03)
    kept = assemble_text(page, content_mask(page, probs, 0.5))
    assert PROSE_MIN_BLOCKS == 3
    assert [line.split(":")[0] for line in kept.splitlines()] == ["Part 0", "Part 1", "Part 2"]
    assert kept.splitlines()[0].endswith("streets. more")  # a block is kept with its link
    assert assemble_text(page, content_mask(page, probs, 0.5, fallback=False)) == ""
    two = parse_page(_prose_page(2))
    assert assemble_text(two, content_mask(two, _scored(two, default=0.03), 0.5)) == ""
    # the shell page of a shop has no prose: it keeps nothing still
    shell = parse_page(SHELL_PAGE)
    assert assemble_text(shell, content_mask(shell, _scored(shell, default=0.02), 0.5)) == ""
    # a page whose scores keep something never reaches the fallback
    probs = _scored(page, default=0.03, Short=0.9)
    assert assemble_text(page, content_mask(page, probs, 0.5)) == "Short line."


def test_the_prose_fallback_comes_after_the_content_models_own_article():
    """Where the rescorer's trees keep nothing, the content model's article is next; the
    page's prose only where that keeps nothing too."""
    from types import SimpleNamespace

    from scrapy_grownup.output.assembly import model_article, rescored_article, rescored_article_mask

    page = parse_page(_prose_page(3))
    trees = SimpleNamespace(rescore=lambda page, probs: np.full(page.num_nodes, 0.02),
                            decisions={"container": False, "band": 0.3,
                                       "cut_weight": "block-chars"},
                            feature_threshold=0.4)
    own = _scored(page, default=0.03, Short=0.9)
    assert assemble_text(page, rescored_article_mask(page, own, trees, 0.5)) == "Short line."
    nothing = _scored(page, default=0.03)
    prose = assemble_text(page, rescored_article_mask(page, nothing, trees, 0.5))
    assert prose.startswith("Part 0:") and len(prose.splitlines()) == 3
    assert assemble_text(page, rescored_article_mask(page, nothing, trees, 0.5,
                                                     fallback=False)) == ""
    # and each article says which path chose it
    assert rescored_article(page, own, trees, 0.5).source == "content_model"
    assert rescored_article(page, nothing, trees, 0.5).source == "prose"
    assert rescored_article(page, nothing, trees, 0.5, fallback=False).source == "none"
    assert model_article(page, nothing, 0.5).source == "prose"
    assert model_article(page, own, 0.5).source == "content_model"
    kept = _scored(page, default=0.9)
    assert rescored_article(page, kept, SimpleNamespace(**{**vars(trees), "rescore": lambda
                            page, probs: probs}), 0.5).source == "rescorer"


def _schedule_page():
    """A news story beside a long results widget and a menu (vg.no's Olympics pages): four
    long paragraphs, 60 short event blocks whose text sits in inline spans, 150 menu items."""
    menu = "".join(f"<li><a href=/s{i}>Section {i}</a></li>" for i in range(150))
    events = "".join(f"<div class=event><span>Event</span> <span>heat {i}, final</span></div>"
                     for i in range(60))
    story = "".join(f"<p>Story paragraph {i}: " + "the rowers reached the final. " * 9 + "</p>"
                    for i in range(4))
    page = parse_page(f"<html><body><nav><ul>{menu}</ul></nav><aside>{events}</aside>"
                      f"<article>{story}</article></body></html>".encode())
    return page, _scored(page, default=0.0, Section=0.02, Event=0.22, heat=0.22, Story=0.7)


def test_a_cut_weighed_by_block_characters_leaves_a_widget_of_short_blocks_out():
    """Otsu over text-owning nodes by log length lets the many short nodes decide: the cut falls
    between the menu and the widget (clipped to 0.5 - 0.3) and the widget is kept; over blocks
    by their characters the long paragraphs decide and the cut falls above the widget."""
    from scrapy_grownup.decisions.refine import CUT_WEIGHTS, block_threshold

    page, probs = _schedule_page()
    lengths = page.text_lengths()
    by_nodes = assemble_text(page, content_mask(page, probs, 0.5, container=False, band=0.3))
    by_blocks = assemble_text(page, content_mask(page, probs, 0.5, container=False, band=0.3,
                                                 cut_weight="block-chars"))
    assert "heat 7, final" in by_nodes and "Story paragraph 3" in by_nodes
    assert "heat 7, final" not in by_blocks and "Event" not in by_blocks
    assert all(f"Story paragraph {i}" in by_blocks for i in range(4))
    assert "Section" not in by_nodes + by_blocks
    block = block_of(page)
    cut = block_threshold(block_scores(page, probs, block, lengths), lengths, block, 0.5, 0.3)
    assert 0.22 < cut < 0.7 and cut == pytest.approx((0.22 + 0.7) / 2)
    # each block once: the same cut whether a widget line is one text node or two
    assert page_threshold(block_scores(page, probs, block, lengths), lengths, 0.5, 0.3) < 0.22
    assert CUT_WEIGHTS == ("log-nodes", "block-chars")
    with pytest.raises(ValueError, match="cut_weight"):
        content_mask(page, probs, 0.5, cut_weight="chars")


def test_a_block_cut_stays_in_the_band_and_needs_two_scores():
    from scrapy_grownup.decisions.refine import block_threshold

    page, probs = _schedule_page()
    lengths = page.text_lengths()
    block = block_of(page)
    scores = block_scores(page, probs, block, lengths)
    assert block_threshold(scores, lengths, block, 0.5, band=0.0) == 0.5
    assert block_threshold(scores, lengths, block, 0.8, band=0.1) == pytest.approx(0.7)
    assert block_threshold(np.full_like(scores, 0.6), lengths, block, 0.5, 0.3) == 0.5
    assert block_threshold(scores, np.zeros_like(lengths), block, 0.5, 0.3) == 0.5


# ------------------------------------------------------------------------------------------
# WCXB metric


def test_bag_of_words_metric():
    assert bag_of_words_scores("The cat sat.", "the CAT sat") == (1.0, 1.0, 1.0)
    p, r, f = bag_of_words_scores("a a b", "a b c d")
    assert (p, r) == (2 / 3, 0.5) and abs(f - 4 / 7) < 1e-12
    assert bag_of_words_scores("", "") == (1.0, 1.0, 1.0)
    assert bag_of_words_scores("", "x") == (0.0, 0.0, 0.0)
    agg = bag_of_words_f1([("a", "a"), ("", "b")])
    assert agg == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "pages": 2}


# ------------------------------------------------------------------------------------------
# Layout features


def test_layout_features_measure_link_density_landmarks_and_position():
    from scrapy_grownup.graph.layout import LAYOUT_BLOCKS, LAYOUT_DIM, layout_column, layout_features

    page = parse_page(
        b"<html><body><nav role=navigation><ul><li><a href=/a>Home page link</a></li></ul></nav>"
        b"<main><article><div itemprop=articleBody><p>One sentence here. Another one!</p>"
        b"<p>Text with <a href=/x>a link</a> inside.</p></div></article></main>"
        b"<footer><p>(c) 2026</p></footer></body></html>")
    f = layout_features(page)
    assert f.shape == (page.num_nodes, LAYOUT_DIM) and f.dtype == np.float32
    col = {name: layout_column(name).start for name, _ in LAYOUT_BLOCKS}
    assert layout_column("landmark") == slice(9, 15) and layout_column("hidden").stop == LAYOUT_DIM
    nav, li = _node(page, "nav"), _node(page, "li")
    body_div, footer_p = _node(page, "div"), _node(page, "p", 2)
    assert f[li, col["link_density"]] == 1.0                  # all of its text is a link
    assert 0.0 < f[body_div, col["link_density"]] < 0.3       # "a link" of the article's text
    assert f[_node(page, "a", 1), col["in_link"]] == 1.0
    assert f[li, col["landmark"] + 0] == 1.0                  # inside <nav>
    assert f[li, col["aria_role"] + 0] == 1.0                 # role=navigation, inherited
    assert f[nav, col["article_body"]] == 0.0
    assert f[_node(page, "p", 0), col["article_body"]] == 1.0
    assert f[_node(page, "p", 0), col["main"] + 0] == 1.0     # inside <article>
    assert f[footer_p, col["landmark"] + 2] == 1.0            # inside <footer>
    assert f[footer_p, col["position"]] > f[_node(page, "p", 0), col["position"]]
    assert f[_node(page, "p", 0), col["sentences"]] > 0
    assert f[0, col["text_share"]] == 1.0                     # the root holds all the text
    assert np.isfinite(f).all() and f.min() >= 0.0


def test_old_models_keep_their_inputs_and_new_ones_read_layout():
    from scrapy_grownup.graph.featurizer import feature_blocks, uses_layout
    from scrapy_grownup.graph.layout import LAYOUT_DIM

    assert feature_blocks(256)[-1] == ("x_layout", LAYOUT_DIM) and uses_layout(feature_blocks(8))
    assert not uses_layout(feature_blocks(256, layout=False))
    assert len(feature_blocks(256, layout=False)) == len(feature_blocks(256)) - 1


# ------------------------------------------------------------------------------------------
# Repeated-structure features


_CARDS = b"".join(b'<div class="card"><h3>Story number %d</h3><p>Teaser text of story %d.</p>'
                  b"</div>" % (i, i) for i in range(8))
REPEAT_PAGE = (b"<html><body><nav><a href=/>Home</a></nav><main><article><h1>Headline</h1>"
               b"<p>A paragraph of real article text, long enough to count.</p>"
               b"<p>Another paragraph of article text, also long enough.</p></article>"
               b'<section class="related">' + _CARDS + b"</section>"
               b'<div class="solo"><p>One box that is alike to nothing else here.</p></div>'
               b"</main></body></html>")


def test_repetition_features_tell_cards_their_list_and_their_share():
    from scrapy_grownup.graph.repetition import REPETITION_BLOCKS, REPETITION_DIM, repetition_features

    page = parse_page(REPEAT_PAGE)
    f = repetition_features(page)
    assert f.shape == (page.num_nodes, REPETITION_DIM) and f.dtype == np.float32
    col = {name: k for k, (name, _) in enumerate(REPETITION_BLOCKS)}
    card, section = _node(page, "div", 0), _node(page, "section")
    heading, solo = _node(page, "h3", 0), _node(page, "div", 8)
    first_p = _node(page, "p", 0)
    assert page.class_words[card] == "card" and page.class_words[solo] == "solo"
    assert f[card, col["group_size"]] == pytest.approx(np.log(8) / np.log(64))
    assert f[first_p, col["group_size"]] == pytest.approx(np.log(2) / np.log(64))  # two <p>
    assert f[solo, col["group_size"]] == 0.0                  # one of a kind
    assert f[section, col["largest_child_group"]] == f[card, col["group_size"]]
    assert f[section, col["group_size"]] == 0.0 and f[section, col["inside_group"]] == 0.0
    assert f[heading, col["inside_group"]] == f[card, col["group_size"]]  # inside a card
    assert f[card, col["inside_group"]] == 0.0
    # the eight cards hold most of the page's text; the heading inherits its card's share
    share = f[card, col["group_text_share"]]
    assert 0.5 < share < 1.0 and f[heading, col["group_text_share"]] == share
    assert f[solo, col["group_text_share"]] == 0.0
    assert f[0].tolist() == [0.0, 0.0, 0.0, 0.0]              # the root is in no group
    assert np.isfinite(f).all() and f.min() >= 0.0 and f.max() <= 1.0
    # many alike siblings saturate at 1
    many = b"<ul>" + b"".join(b"<li>List item number %d here</li>" % i for i in range(100))
    g = repetition_features(parse_page(b"<html><body>" + many + b"</ul></body></html>"))
    assert g[:, col["group_size"]].max() == 1.0


def test_repetition_features_of_pages_without_groups():
    from scrapy_grownup.graph.repetition import REPETITION_DIM, repetition_features

    for html in (b"<html><body></body></html>", b"<html><body><p>short</p></body></html>"):
        f = repetition_features(parse_page(html))
        assert f.shape[1] == REPETITION_DIM and not f.any()


def test_models_read_repetition_only_when_trained_with_it(tmp_path):
    import torch

    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.graph.featurizer import Featurizer, feature_blocks, uses_repetition
    from scrapy_grownup.model import GrownUpModel, ModelConfig
    from scrapy_grownup.graph.repetition import REPETITION_DIM

    assert feature_blocks(8, repetition=True)[-1] == ("x_repeat", REPETITION_DIM)
    assert not uses_repetition(feature_blocks(8)) and uses_repetition(feature_blocks(8, True, True))
    page = parse_page(REPEAT_PAGE)
    plain, reading = Featurizer("static"), Featurizer("static", repetition=True)
    assert not hasattr(plain.batch([page]), "x_repeat")
    batch, graph = reading.batch([page]), reading.graphs([page])[0]
    assert torch.equal(batch.x_repeat, torch.from_numpy(page.repetition))
    assert torch.equal(graph.x_repeat, batch.x_repeat)
    # a model trained with the block: the loaded extractor computes it (here and in a crawl's
    # workers) and its scores move with it
    config = ModelConfig.preset("tiny", encoder="static", text_dim=reading.encoder.dim,
                                input_blocks=reading.blocks)
    torch.manual_seed(0)
    GrownUpModel(config).save_pretrained(tmp_path / "m")
    extractor = ArticleExtractor.from_pretrained(tmp_path / "m", device="cpu")
    assert extractor.featurizer.repetition and "repetition" in extractor.page_features
    model = extractor.model.eval()
    with torch.no_grad():
        scores = model(reading.batch([page])).node_logits
        batch = reading.batch([page])
        batch.x_repeat = torch.zeros_like(batch.x_repeat)
        assert not torch.equal(model(batch).node_logits, scores)
    assert "repetition" not in ArticleExtractor.from_pretrained("fast").page_features


def test_stores_keep_the_repetition_block_and_old_stores_still_load(tmp_path):
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.data.store import GraphStore

    page = parse_page(REPEAT_PAGE)
    store = GraphStore.build([page, page], get_encoder("static"), ids=["a", "b"])
    batch = store.collate([0, 1])
    assert torch.equal(batch.x_repeat[:page.num_nodes],
                       torch.from_numpy(page.repetition).to(torch.float16).float())
    # a store written before the block: its batches lack it, the other blocks are unchanged
    del store.arrays["repeat"]
    old = GraphStore.load(store.save(tmp_path / "old.safetensors"))
    assert "repeat" not in old.fields and "layout" in old.fields
    assert not hasattr(old.collate([0]), "x_repeat")
    assert "repeat" not in GraphStore.concat([old, GraphStore.build(
        [page], get_encoder("static"), ids=["c"])]).fields


# ------------------------------------------------------------------------------------------
# The cross-site protocol end to end (small: 2 folds over 40 forum pages, 1 epoch)


@pytest.mark.slow
def test_site_cv_protocol_end_to_end(tmp_path, capsys, monkeypatch):
    if not _available("magic_html_forum"):
        pytest.skip("dataset magic_html_forum not available")
    from scrapy_grownup.cli.main import main

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))

    out = tmp_path / "cv"
    argv = ["lab", "evaluate", "--protocol", "site-cv", "--eval-datasets", "magic_html_forum",
            "--train-datasets", "", "--folds", "2", "--epochs", "1", "--limit", "40",
            "--average-last", "1", "--jobs", "2", "--out", str(out),
            "--json", str(tmp_path / "rows.jsonl")]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "all:all" in table and "trafilatura" in table and "grownup" in table
    import json

    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    overall = {r["method"]: r for r in rows if r["slice"] == "all"}
    assert {"grownup", "grownup -blocks", "grownup -adaptive", "grownup -container",
            "grownup -repeats", "grownup +drop-hidden", "perfect filter"} <= set(overall)
    assert all(r["pages"] == 40 for r in overall.values())
    assert overall["perfect filter"]["bow_f1"] > 0.8
    for fold in ("fold0", "fold1"):
        assert (out / "site-cv" / fold / "model" / "config.json").is_file()
    saved = json.loads((out / "site-cv" / "fold0" / "model" / "config.json").read_text())
    assert saved["metadata"]["train"]["average_last"] == 1  # the averaged weights were saved
    assert saved["metadata"]["train_pages"] > 0  # trained by a --jobs process, then loaded
    # a re-run resumes from the saved per-page scores: nothing is trained again
    mtime = (out / "site-cv" / "fold0" / "model" / "model.safetensors").stat().st_mtime
    scores = out / "site-cv" / "scores.jsonl"
    before = scores.read_text().splitlines()
    assert main(argv) == 0
    assert (out / "site-cv" / "fold0" / "model" / "model.safetensors").stat().st_mtime == mtime
    assert scores.read_text().splitlines() == before  # nothing scored twice
    # a method whose rows are deleted is scored again, and only it
    kept = [line for line in before if json.loads(line)["method"] != "grownup -repeats"]
    scores.write_text("\n".join(kept) + "\n")
    assert main(argv) == 0
    after = scores.read_text().splitlines()
    assert after[:len(kept)] == kept
    assert sorted(after[len(kept):]) == sorted(set(before) - set(kept))
    # --no-baselines: a baseline's missing rows stay missing, and its column leaves the table
    kept = [line for line in after if json.loads(line)["method"] != "trafilatura"]
    scores.write_text("\n".join(kept) + "\n")
    capsys.readouterr()
    assert main(argv + ["--no-baselines"]) == 0
    assert scores.read_text().splitlines() == kept
    assert "trafilatura" not in capsys.readouterr().out


@pytest.mark.slow
def test_plans_trained_in_parallel_match_plans_trained_one_by_one(tmp_path, monkeypatch, capsys):
    """``grownup lab evaluate --jobs N``: each process trains exactly the model the serial run
    trains (same pages, seed and recipe), and saved models are not trained again."""
    if not _available("magic_html_forum"):
        pytest.skip("dataset magic_html_forum not available")
    from safetensors.numpy import load_file

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    records = crosssite.load_records(["magic_html_forum"], limit=24)
    plans = crosssite.site_cv_plan(records, [], 2)
    cfg = {"preset": "small", "epochs": 1, "lr": 2e-3, "threads": 1, "device": "cpu",
           "overrides": {"num_layers": 2, "num_transformer_layers": 0, "readout": "mean"}}
    out = tmp_path / "parallel"
    assert crosssite.train_in_parallel(plans, records, "static", cfg, out, jobs=2) \
        == ["fold0", "fold1"]
    # nothing but the models: the processes read the datasets' cached stores, no extra copy
    assert sorted(p.name for p in out.iterdir()) == ["fold0", "fold1"]
    encoder = corpus_encoder("static")
    store, keys = crosssite.training_store(records, encoder)
    parallel, same = {}, 0.0
    for plan in plans:
        serial = tmp_path / "serial" / plan.name / "model"
        crosssite.train_plan_model(store, keys, plan, encoder, cfg, serial)
        a = parallel[plan.name] = load_file(str(out / plan.name / "model" / "model.safetensors"))
        b = load_file(str(serial / "model.safetensors"))
        assert a.keys() == b.keys()
        same = max(same, *(float(np.abs(a[n] - b[n]).max()) for n in a))
    # the same weights up to float summation order (the processes' thread counts differ),
    # far closer than the two folds' models, trained from the same seed on other pages
    other = max(float(np.abs(parallel["fold0"][n] - parallel["fold1"][n]).max())
                for n in parallel["fold0"])
    assert same < 1e-4 and other > 50 * same
    assert crosssite.train_in_parallel(plans, records, "static", cfg, out, jobs=2) == []
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--jobs 0: at least 1")


def test_page_type_weights_lift_rare_page_types_and_average_one():
    from scrapy_grownup.training.loop import AuxLabels, page_type_weights

    types = ["article"] * 80 + ["listing"] * 5 + ["product"] * 15
    weights = page_type_weights(types, 0.5)
    assert weights.shape == (100,) and weights.dtype == np.float32
    assert weights.mean() == pytest.approx(1.0, abs=1e-6)
    article, listing, product = weights[0], weights[80], weights[85]
    assert listing > product > 1.0 > article
    # frequency ** -0.5 (with the add-one of class_weights): 16 / 6 pages -> sqrt(81 / 6)
    assert listing / article == pytest.approx((81 / 6) ** 0.5, rel=1e-5)
    assert (page_type_weights(types, 0.0) == 1.0).all()

    class Store:  # what node_weights reads of a GraphStore
        num_pages = 3
        page_ptr = np.array([0, 2, 5, 6])

        def num_nodes(self, i):
            return int(self.page_ptr[i + 1] - self.page_ptr[i])

    aux = AuxLabels(np.full(3, -1), np.full(6, -1, dtype=np.int8))
    assert aux.node_weights(Store(), [2, 0]) is None
    aux.page_weights = np.array([0.5, 1.0, 4.0], dtype=np.float32)
    assert aux.node_weights(Store(), [2, 0]).tolist() == [4.0, 0.5, 0.5]
    joined = AuxLabels.concat([aux, AuxLabels(np.full(2, -1), np.full(3, -1, dtype=np.int8))])
    assert joined.page_weights.tolist() == [0.5, 1.0, 4.0, 1.0, 1.0]


def test_node_weights_follow_each_nodes_characters_and_page():
    """``--node-weight``: a node's content-loss weight ~ log(1 + its characters)
    (``log-chars``), or each page's nodes summing to the same total (``page``), or both,
    averaging 1 over the batch's labelled nodes, in ``collate``'s node order; the nodes that
    own no text (label -1) are outside the loss whatever their weight."""
    from scrapy_grownup.training.loop import node_weights

    class Store:  # what node_weights reads of a GraphStore
        page_ptr = np.array([0, 3, 5])
        arrays = {"text_len": np.array([0, 400, 5, 0, 60]),
                  "labels": np.array([-1, 1, 0, -1, 0], dtype=np.int8)}

        def num_nodes(self, i):
            return int(self.page_ptr[i + 1] - self.page_ptr[i])

    labelled = [1, 3, 4]  # batch [page 1, page 0]: nodes 3, 4 and 0, 1, 2 of the store
    assert node_weights(Store(), [1, 0], "none") is None
    weights = node_weights(Store(), [1, 0], "log-chars").numpy()
    raw = np.log1p([0, 60, 0, 400, 5])
    np.testing.assert_allclose(weights, raw / raw[labelled].mean(), rtol=1e-6)
    assert weights[3] > weights[1] > weights[4]  # the paragraph, the caption, "Share"
    # page: page 1's one labelled node weighs what page 0's two weigh together
    per_page = node_weights(Store(), [1, 0], "page").numpy()
    np.testing.assert_allclose(per_page[labelled], [1.5, 0.75, 0.75], rtol=1e-6)
    both = node_weights(Store(), [1, 0], "page-log-chars").numpy()
    assert both[1] == pytest.approx(both[3] + both[4], rel=1e-6)
    assert both[3] / both[4] == pytest.approx(raw[3] / raw[4], rel=1e-6)
    for mode in ("log-chars", "page", "page-log-chars"):
        assert node_weights(Store(), [1, 0], mode).numpy()[labelled].mean() == \
            pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="unknown node weight 'chars'"):
        node_weights(Store(), [0], "chars")


def test_type_balance_trains_another_model_from_the_same_pages(tmp_path, monkeypatch, capsys):
    """``grownup lab evaluate --type-balance``: the same pages and seed, rare page types weigh
    more, so the weights differ; training without the pages' types is refused."""
    if not _available("wcxb_dev"):
        pytest.skip("dataset wcxb_dev not available")
    from safetensors.numpy import load_file

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    records = crosssite.load_records(["wcxb_dev"], limit=30)
    types = crosssite.page_types_of(records)
    assert len(set(types.values())) >= 2 and set(types) == {crosssite.record_key(r)
                                                             for r in records}
    plan = crosssite.FoldPlan("all", [], set(types))
    encoder = corpus_encoder("static")
    store, keys = crosssite.training_store(records, encoder)
    cfg = {"preset": "small", "epochs": 1, "lr": 2e-3, "threads": 1, "device": "cpu",
           "overrides": {"num_layers": 2, "num_transformer_layers": 0, "readout": "mean"}}
    crosssite.train_plan_model(store, keys, plan, encoder, cfg, tmp_path / "plain", types)
    balanced = {**cfg, "type_balance": 0.5}
    crosssite.train_plan_model(store, keys, plan, encoder, balanced, tmp_path / "bal", types)
    a = load_file(str(tmp_path / "plain" / "model.safetensors"))
    b = load_file(str(tmp_path / "bal" / "model.safetensors"))
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a) > 1e-3
    with pytest.raises(ValueError, match="page types"):
        crosssite.train_plan_model(store, keys, plan, encoder, balanced, tmp_path / "x")
    by_node = {**cfg, "node_weight": "page"}
    crosssite.train_plan_model(store, keys, plan, encoder, by_node, tmp_path / "page")
    c = load_file(str(tmp_path / "page" / "model.safetensors"))
    assert max(float(np.abs(a[n] - c[n]).max()) for n in a) > 1e-3
    with pytest.raises(SystemExit):
        main(["lab", "evaluate", "--protocol", "site-cv", "--node-weight", "chars"])
    assert "invalid choice: 'chars'" in capsys.readouterr().err
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--type-balance", "-1"]) == 2
    assert "--type-balance -1" in capsys.readouterr().err
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--workers", "0"]) == 2
    assert "--workers 0: at least 1" in capsys.readouterr().err


def test_forward_precision_autocasts_only_for_bf16():
    import torch

    from scrapy_grownup.training.loop import TrainConfig, forward_precision

    layer = torch.nn.Linear(8, 4)
    x = torch.ones(3, 8)
    with forward_precision(TrainConfig(out="x")):
        assert layer(x).dtype == torch.float32
    with forward_precision(TrainConfig(out="x", precision="bf16")):
        assert layer(x).dtype == torch.bfloat16
    assert layer(x).dtype == torch.float32  # the context ends with the forward pass
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        forward_precision(TrainConfig(out="x", precision="fp16"))


def test_bf16_on_a_cpu_that_would_emulate_it_warns(tmp_path, monkeypatch, caplog):
    """bfloat16 on a CPU without AVX512-BF16 or AMX is emulated (an epoch took 8x fp32's
    time on an AVX2-only core): the run says so before it trains; fp32, a GPU or a CPU with
    the instructions say nothing."""
    import logging

    import torch

    from scrapy_grownup.training import loop

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert loop.emulated_bf16("cpu") and not loop.emulated_bf16("cuda")
    warning = loop.precision_warning("bf16", "cpu")
    assert warning.startswith("--precision bf16: this CPU has no AVX512-BF16 or AMX")
    assert loop.precision_warning("fp32", "cpu") is None
    assert loop.precision_warning("bf16", "cuda:0") is None
    # grownup train's run says it first thing, before any data is read
    from scrapy_grownup.training import trainer

    monkeypatch.setattr(trainer, "corpus_encoder", lambda name: 1 / 0)
    with caplog.at_level(logging.WARNING, logger="scrapy_grownup.training.loop"), \
            pytest.raises(ZeroDivisionError):
        trainer.train(loop.TrainConfig(out=str(tmp_path / "run"), precision="bf16"))
    assert [r.getMessage() for r in caplog.records] == [warning]
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert loop.precision_warning("bf16", "cpu") is None


def test_bf16_training_keeps_float32_weights_and_the_recipes_losses(tmp_path, monkeypatch,
                                                                    capsys):
    """``grownup lab evaluate --precision bf16``: the same pages, seed and recipe trained with
    bfloat16 matrix products; the saved weights are float32, the losses follow fp32's
    closely without being fp32's, and the model scores pages as any other."""
    if not _available("wcxb_dev"):
        pytest.skip("dataset wcxb_dev not available")
    import json

    from safetensors.numpy import load_file

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    records = crosssite.load_records(["wcxb_dev"], limit=20)
    plan = crosssite.FoldPlan("all", [], {crosssite.record_key(r) for r in records})
    encoder = corpus_encoder("static")
    store, keys = crosssite.training_store(records, encoder)
    cfg = {"preset": "small", "epochs": 2, "lr": 2e-3, "threads": 1, "device": "cpu",
           "overrides": {"num_layers": 2, "num_transformer_layers": 0, "readout": "mean"}}
    fp32 = crosssite.train_plan_model(store, keys, plan, encoder, cfg, tmp_path / "fp32")
    bf16 = crosssite.train_plan_model(store, keys, plan, encoder, {**cfg, "precision": "bf16"},
                                      tmp_path / "bf16")
    a = load_file(str(tmp_path / "fp32" / "model.safetensors"))
    b = load_file(str(tmp_path / "bf16" / "model.safetensors"))
    assert {str(v.dtype) for v in b.values()} == {"float32"}
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a) > 1e-4
    assert {str(p.dtype) for p in bf16.parameters()} == {"torch.float32"}
    del fp32
    history = {}
    for name in ("fp32", "bf16"):
        meta = json.loads((tmp_path / name / "config.json").read_text())["metadata"]
        history[name] = [epoch["content"] for epoch in meta["history"]]
    assert history["fp32"] != history["bf16"]
    for x, y in zip(history["fp32"], history["bf16"]):
        assert abs(x - y) < 0.05 * x
    extractor = ArticleExtractor.from_pretrained(tmp_path / "bf16")
    probs = extractor.score([parse_page(records[0].html, url=records[0].url)])[0]
    assert np.isfinite(probs).all() and 0 <= probs.min() <= probs.max() <= 1
    with pytest.raises(SystemExit):
        main(["lab", "evaluate", "--protocol", "site-cv", "--precision", "fp16"])
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
    seen = []  # grownup train hands it to its TrainConfig
    monkeypatch.setattr("scrapy_grownup.training.trainer.train",
                        lambda cfg: seen.append(cfg) or {"ok": True})
    assert main(["train", "--out", str(tmp_path / "run"), "--precision", "bf16"]) == 0
    assert seen[0].precision == "bf16"


def test_trainer_dev_split_holds_whole_sites():
    from scrapy_grownup.training.loop import TrainConfig
    from scrapy_grownup.training.trainer import _dev_ids

    recs = [record("wcxb_dev", str(i), f"https://www.site{i % 30}.com/p{i}") for i in range(300)]
    dev = _dev_ids("wcxb_dev", "all", [r.id for r in recs], recs,
                   TrainConfig(out="unused", dev_fraction=0.2))
    assert 20 < len(dev) < 120
    dev_sites = {splits.site_of(r) for r in recs if r.id in dev}
    train_sites = {splits.site_of(r) for r in recs if r.id not in dev}
    assert dev_sites and not dev_sites & train_sites
    assert _dev_ids("wcxb_dev", "all", [r.id for r in recs], recs,
                    TrainConfig(out="unused", dev_fraction=0.0)) == set()


def test_baseline_texts_are_cached_per_page_and_version(tmp_path, monkeypatch):
    """fit-rescorer re-runs read the baselines' texts back instead of extracting them again;
    a page whose HTML changed is extracted anew."""
    pytest.importorskip("trafilatura")
    from pathlib import Path

    from scrapy_grownup.training import crosssite as C

    golden = Path(__file__).parent / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("article_*.html"))]
    assert len(records) >= 2
    first = C.baseline_texts("trafilatura", records, cache=tmp_path)
    assert first == [C.baseline_text("trafilatura", r) for r in records]
    assert any(first) and len(list(tmp_path.glob("baseline-trafilatura-*.json"))) == 1

    calls = []

    def counted(method, record):
        calls.append(record.id)
        return f"new text of {record.id}"

    monkeypatch.setattr(C, "baseline_text", counted)
    assert C.baseline_texts("trafilatura", records, cache=tmp_path) == first
    assert calls == []
    changed = D.PageRecord("golden", records[0].id, records[0].html + b"<p>more</p>", None,
                           None, "all")
    again = C.baseline_texts("trafilatura", [changed, *records[1:]], cache=tmp_path)
    assert calls == [records[0].id] and again == [f"new text of {records[0].id}", *first[1:]]


@pytest.mark.minilm
def test_fit_rescorer_scores_minilm_folds_from_the_training_vectors(tmp_path, monkeypatch):
    """A MiniLM fold model's pages are scored from the vectors kept on disk while the folds
    trained (``corpus_encoder``), not embedded again: the strings land in that cache, and the
    scores equal those of the encoder run live."""
    from pathlib import Path

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.extractor import MODELS_DIR, ArticleExtractor
    from scrapy_grownup.training.crosssite import FoldPlan
    from scrapy_grownup.training.rescorer import scored_pages

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "home"))
    golden = Path(__file__).parent / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("article_*.html"))[:2]]
    encoder = get_encoder("minilm", device=None)
    monkeypatch.setattr(encoder, "disk_cache", None)  # the shared encoder: restored after
    encoder.clear_cache()  # nothing from earlier tests in memory: every string goes to disk
    pages = scored_pages(FoldPlan("fold9", records, set()), MODELS_DIR / "minilm",
                         tmp_path / "scores", 0.4, None)
    chunks = list((tmp_path / "home" / "embeddings").glob("minilm-*/*"))
    assert chunks, "the fold's strings were not kept on disk"
    live = ArticleExtractor.from_pretrained("minilm")
    live.featurizer.encoder.disk_cache = None
    live.featurizer.encoder.clear_cache()
    for page, want in zip(pages, live.score([p.page for p in pages])):
        np.testing.assert_allclose(page.probs, want, atol=1e-5)


def test_per_page_scores_round_trip(tmp_path):
    """``grownup lab fit-rescorer --scores`` writes the rows ``grownup lab evaluate`` resumes from."""
    from scrapy_grownup.training import crosssite as C

    gold = "The council approved the new budget on Tuesday after a long debate."
    page = record("fundus", "a1", "https://news.example.de/a1", language="de-DE")
    page.gold = gold
    scores = [C.score_page(page, "grownup", gold), C.score_page(page, "trafilatura", gold[:30])]
    path = tmp_path / "scores.jsonl"
    C.write_scores(path, "without-fundus", scores[:1])
    C.write_scores(path, "without-fundus", scores[1:])
    back = C.read_scores(path)
    assert list(back) == ["without-fundus"]
    assert back["without-fundus"]["grownup"] == scores[:1]
    assert back["without-fundus"]["trafilatura"] == scores[1:]
    assert back["without-fundus"]["grownup"][0].bow[2] == pytest.approx(1.0)
    assert back["without-fundus"]["trafilatura"][0].language == "de"


def test_fit_rescorer_skip_cv_needs_a_held_out_set(tmp_path, capsys):
    from scrapy_grownup.cli.main import main

    assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--skip-cv"]) == 2
    assert capsys.readouterr().err.strip() == "grownup lab fit-rescorer: error: --skip-cv needs --hold"
    # a misspelt --cv-dir: one line before any page is loaded, no traceback
    assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.strip() == \
        f"grownup lab fit-rescorer: error: --cv-dir {tmp_path / 'none'}: no such directory"
    assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--also-cv-dir",
                 str(tmp_path / "seed1")]) == 2
    assert capsys.readouterr().err.strip() == \
        f"grownup lab fit-rescorer: error: --also-cv-dir {tmp_path / 'seed1'}: no such directory"


def test_evaluation_scores_the_text_the_extractor_returns():
    """``grownup lab evaluate`` and ``fit-rescorer`` score the extractor's own article text: the
    rescorer's stored decisions (its cut-off rule too) and the completed tables and code."""
    from pathlib import Path

    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.training import crosssite as C

    golden = Path(__file__).parent / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("*.html"))]
    extractor = ArticleExtractor.from_pretrained("fast")
    assert extractor.rescorer.cut_weight == "block-chars"
    texts = C.model_texts(extractor, records, C.DEFAULT_VARIANTS[:1])["grownup"]
    assert len(texts) == len(records) >= 5 and all(texts)
    assert texts == [extractor.extract(r.html).text for r in records]


def test_the_article_mask_completes_a_data_table_the_decisions_kept_most_of():
    from scrapy_grownup.output.assembly import article_mask

    cells = [("Alpha", "Ten"), ("Bravo", "Eleven"), ("Charlie", "Twelve"), ("Delta", "Thirteen")]
    rows = "".join(f"<tr><td>{name} station</td><td>{rain} mm of rain fell overnight</td></tr>"
                   for name, rain in cells)
    page = parse_page(b"<html><body><article><p>" + b"Storm totals by station. " * 6
                      + b"</p><table><tr><th>Station</th><th>Rain</th></tr>"
                      + rows.encode() + b"</table></article></body></html>")
    sure = {word: 0.9 for word in ("Storm", "Alpha", "Ten", "Bravo", "Eleven", "Charlie",
                                   "Twelve")}
    probs = _scored(page, default=0.0, **sure)
    by_decisions = assemble_text(page, content_mask(page, probs, 0.5, adaptive=False))
    kept = assemble_text(page, article_mask(page, probs, 0.5, adaptive=False))
    assert "Twelve mm" in by_decisions and "Thirteen" not in by_decisions
    assert "Rain" not in by_decisions
    assert "Thirteen mm of rain" in kept and "Rain" in kept and "Delta station" in kept
    alone = _scored(page, default=0.0, Storm=0.9)  # nothing to complete: the decisions' mask
    np.testing.assert_array_equal(article_mask(page, alone, 0.5, adaptive=False),
                                  content_mask(page, alone, 0.5, adaptive=False))


def _stubbed_rescorer_run(tmp_path, monkeypatch, argv):
    """``rescorer.run_rescorer(argv)`` with the fold models under ``tmp_path`` stubbed: each
    fold's "pages" are the fold model's directory (``seed0/fold1``), ``fit`` records the pages
    it learns from and ``measure`` the pages and trees it scores. Returns ``(result, fitted,
    measured)``."""
    import argparse
    from pathlib import Path

    from scrapy_grownup.training import rescorer as R
    from scrapy_grownup.training.crosssite import FoldPlan

    fitted, measured = [], []
    monkeypatch.setattr(R, "load_records", lambda names: [])
    monkeypatch.setattr(R, "site_cv_plan", lambda ev, ex, k, only: [
        FoldPlan(f"fold{f}", [], set()) for f in range(k) if only is None or f in only])
    monkeypatch.setattr(R, "scored_pages", lambda plan, model_dir, *a, **kw: [
        Path(model_dir).parent.relative_to(tmp_path).as_posix()])
    monkeypatch.setattr(R, "fit", lambda pages, args, keys=None: fitted.append(sorted(pages))
                        or f"trees{len(fitted)}")
    monkeypatch.setattr(R, "measure", lambda pages, trees, args: measured.append(
        (pages, trees)) or [])
    monkeypatch.setattr(R, "summary", lambda scores: {})
    parser = argparse.ArgumentParser()
    R.add_arguments(parser)
    result = R.run_rescorer(parser.parse_args([*argv, "--cache", str(tmp_path / "c")]))
    return result, fitted, measured


def test_fit_rescorer_also_learns_from_other_trainings_out_of_fold_scores(tmp_path, monkeypatch):
    """``--also-cv-dir``: the trees of each fold learn from every training's scores of the
    other folds' pages, and the saved trees from all of them; what is measured is always the
    ``--cv-dir`` model's own scores of the fold's pages."""
    for run in ("seed0", "seed1"):
        for fold in ("fold0", "fold1"):
            (tmp_path / run / fold / "model").mkdir(parents=True)
            (tmp_path / run / fold / "model" / "config.json").write_text("{}")
    _, fitted, measured = _stubbed_rescorer_run(
        tmp_path, monkeypatch, ["--cv-dir", str(tmp_path / "seed0"), "--also-cv-dir",
                                str(tmp_path / "seed1"), "--folds", "2"])
    assert fitted == [["seed0/fold1", "seed1/fold1"], ["seed0/fold0", "seed1/fold0"]]
    assert measured == [(["seed0/fold0"], "trees1"), (["seed0/fold1"], "trees2")]


def test_fit_rescorer_only_folds_nests_over_the_folds_it_names(tmp_path, monkeypatch, capsys):
    """``--only-folds 0,2``: the folds ``grownup lab evaluate --only-folds`` trained, each rescored
    by trees fitted on the other named folds' pages; the folds not named need no model. A
    fold list that is not one is a one-line error before any page is loaded."""
    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training.command import fold_list

    assert fold_list(None, 5) is None and fold_list("2,0,2", 5) == [0, 2]
    for fold in ("fold0", "fold2"):  # fold1 was never trained
        (tmp_path / fold / "model").mkdir(parents=True)
        (tmp_path / fold / "model" / "config.json").write_text("{}")
    result, fitted, measured = _stubbed_rescorer_run(
        tmp_path, monkeypatch, ["--cv-dir", str(tmp_path), "--only-folds", "0,2"])
    assert fitted == [["fold2"], ["fold0"]]
    assert measured == [(["fold0"], "trees1"), (["fold2"], "trees2")]
    assert result["settings"]["only_folds"] == "0,2"
    for folds, message in (("1", "--only-folds 1: at least two folds"),
                           ("0,7", "--only-folds 0,7: fold numbers from 0 to 4"),
                           ("0,b", "--only-folds 0,b: comma-separated fold numbers, as 0,2")):
        assert main(["lab", "fit-rescorer", "--cv-dir", str(tmp_path), "--only-folds", folds]) == 2
        assert capsys.readouterr().err.strip().startswith(f"grownup lab fit-rescorer: error: {message}")
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--only-folds", "5"]) == 2
    assert "--only-folds 5: fold numbers from 0 to 4" in capsys.readouterr().err
    assert main(["lab", "page-type-cv", "--only-folds", "10"]) == 2  # its 10 folds: 0 to 9
    assert "--only-folds 10: fold numbers from 0 to 9" in capsys.readouterr().err
