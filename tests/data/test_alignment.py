"""Label alignment, run assembly and gold cleaning on small hand-written pages."""

import numpy as np
import pytest

from scrapy_grownup.data.labels import (
    align_labels, assemble_text, clean_cleaneval_gold, match_blocks, page_tokens,
    perfect_filter_text, split_dragnet_gold,
)
from scrapy_grownup.page.dom import parse_page

PAGE = (
    "<html><head><title>T</title></head><body>"
    "<div id=nav><a href=/>Home</a> <a href=/news>News</a></div>\n"
    "<div id=main><h1>Big title</h1><p>Hello wor<b>ld</b> again</p>"
    "<p>Second <i>para</i> here</p></div>\n"
    "<div id=footer>Copyright 2024</div></body></html>"
)
GOLD = "Big title\n\nHello world again\nSecond para here\n"


def page(html):
    return parse_page(html.encode("utf-8"), positions=False)


def node(p, tag, nth=0):
    return [i for i, t in enumerate(p.tags) if t == tag][nth]


def test_page_tokens_glue_runs_across_inline_tags():
    p = page(PAGE)
    toks, owners = page_tokens(p)
    assert toks == ["T", "Home", "News", "Big", "title", "Hello", "world", "again", "Second",
                    "para", "here", "Copyright", "2024"]
    world = toks.index("world")
    assert owners[world] == (node(p, "p"), node(p, "b"))  # one token, two owners
    assert owners[toks.index("para")] == (node(p, "i"),)


def test_align_labels_exact_node_labels():
    p = page(PAGE)
    result = align_labels(p, GOLD)
    expected = {
        "html": -1, "head": -1, "title": 0, "body": -1,
        ("div", 0): -1,  # nav: only whitespace between its links
        ("a", 0): 0, ("a", 1): 0,
        ("div", 1): -1,  # main: owns no text itself
        "h1": 1, ("p", 0): 1, "b": 1, ("p", 1): 1, "i": 1,
        ("div", 2): 0,  # footer
    }
    for key, label in expected.items():
        tag, nth = key if isinstance(key, tuple) else (key, 0)
        assert result.labels[node(p, tag, nth)] == label, key
    assert result.labels.dtype == np.int8 and result.labels.shape == (p.num_nodes,)
    assert result.coverage == 1.0 and result.ok
    assert (result.gold_tokens, result.page_tokens, result.matched) == (8, 13, 8)
    assert result.num_content == 5 and result.num_boilerplate == 4


def test_glued_token_makes_inline_node_content():
    # "bar" alone is not a gold token, but the glued token "foobar" is matched.
    p = page("<html><body><p>foo<span>bar</span> baz</p><div>menu</div></body></html>")
    result = align_labels(p, "foobar baz")
    assert result.labels[node(p, "span")] == 1
    assert result.labels[node(p, "p")] == 1
    assert result.labels[node(p, "div")] == 0


def test_nested_nodes_are_labelled_by_their_own_text():
    html = "<html><body><div>Intro text<div>inner words</div>tail text</div></body></html>"
    p = page(html)
    outer, inner = node(p, "div", 0), node(p, "div", 1)
    r = align_labels(p, "inner words")
    assert (r.labels[outer], r.labels[inner]) == (0, 1)
    r = align_labels(p, "Intro text tail text")  # the outer div owns text and tail
    assert (r.labels[outer], r.labels[inner]) == (1, 0)


def test_coverage_counts_matched_gold_tokens():
    p = page(PAGE)
    r = align_labels(p, "Big title missing words")
    assert r.coverage == pytest.approx(0.5)
    assert not r.ok
    r = align_labels(p, "")
    assert r.coverage == 0.0
    assert set(r.labels.tolist()) <= {-1, 0}


def test_match_blocks_anchoring_agrees_with_difflib_on_a_long_page():
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(300)]
    gold = [vocab[i] for i in rng.integers(0, 300, 3000)]
    # Page = boilerplate, gold with a few deletions, boilerplate.
    noise = [f"n{i % 50}" for i in range(2000)]
    body = [t for k, t in enumerate(gold) if k % 97 != 5]
    a = noise + body + noise
    exact, anchored_flag = match_blocks(a, gold, max_cells=10**12)
    fast, anchored = match_blocks(a, gold, max_cells=100_000)
    assert not anchored_flag and anchored
    n_exact = sum(n for _, _, n in exact)
    n_fast = sum(n for _, _, n in fast)
    assert n_exact == len(body)
    assert n_fast >= 0.99 * n_exact
    for i, j, n in fast:  # blocks are real matches, increasing on both sides
        assert a[i: i + n] == gold[j: j + n]
    assert [b[0] for b in fast] == sorted(b[0] for b in fast)
    assert [b[1] for b in fast] == sorted(b[1] for b in fast)


def test_assemble_text_all_nodes():
    p = page(PAGE)
    text = assemble_text(p, np.ones(p.num_nodes, dtype=bool))
    assert text == ("T\nHome News\nBig title\nHello world again\nSecond para here\n"
                    "Copyright 2024")


def test_assemble_text_perfect_filter_and_partial_masks():
    p = page(PAGE)
    labels = align_labels(p, GOLD).labels
    assert perfect_filter_text(p, labels) == "Big title\nHello world again\nSecond para here"
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[[node(p, "h1"), node(p, "div", 2)]] = True
    # The dropped runs between them contain a block break, so the break survives.
    assert assemble_text(p, keep) == "Big title\nCopyright 2024"
    keep = labels == 1
    keep[node(p, "b")] = False  # dropping the glued half of "world"
    assert assemble_text(p, keep) == "Big title\nHello wor again\nSecond para here"
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[node(p, "i")] = True
    assert assemble_text(p, keep) == "para"
    assert assemble_text(p, np.zeros(p.num_nodes, dtype=bool)) == ""


def test_assemble_text_nested_nodes_never_duplicate_text():
    p = page("<html><body><div>a <span>b <em>c</em> d</span> e</div></body></html>")
    assert assemble_text(p, np.ones(p.num_nodes, dtype=bool)) == "a b c d e"
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[node(p, "span")] = True  # the span's own runs only, not the em inside
    assert assemble_text(p, keep) == "b d"


def test_assemble_text_rejects_a_wrong_mask():
    p = page(PAGE)
    with pytest.raises(ValueError):
        assemble_text(p, np.ones(p.num_nodes + 1, dtype=bool))


def keep_all_but(p, *tags):
    return np.array([t not in tags for t in p.tags])


def test_assemble_text_never_glues_words_where_something_stood_between():
    # A dropped element between two kept runs is a separator, even without whitespace.
    p = page("<p><span>Community</span><span>|</span><span>Badges</span></p>")
    keep = np.array([t != "span" or p.node_text[i] != "|" for i, t in enumerate(p.tags)])
    assert assemble_text(p, keep) == "Community Badges"
    assert assemble_text(p, np.ones(p.num_nodes, bool)) == "Community|Badges"
    # Two elements meeting as "today" / "Develop": a lower-case letter or a sentence end, then
    # a capital (styled spans of a menu); glued halves of a word stay glued.
    p = page("<p><span>get started today</span><span>Develop skills.</span><span>Books</span>"
             " wor<b>ld</b> i<b>OS</b> 3<sup>rd</sup></p>")
    assert assemble_text(p, np.ones(p.num_nodes, bool)) == \
        "get started today Develop skills. Books world iOS 3rd"


def test_assemble_text_keeps_the_lines_of_pre():
    html = ("<p>Run:</p><pre><code><span class=c># comment</span>\n"
            "python -m x  --flag\n\n\tindented\n</code></pre><p>Done.</p>")
    p = page(html)
    assert assemble_text(p, np.ones(p.num_nodes, bool)) == \
        "Run:\n# comment\npython -m x  --flag\n\n    indented\nDone."
    # Partly kept: the kept words, still on their own lines.
    assert assemble_text(p, keep_all_but(p, "span")) == \
        "Run:\npython -m x  --flag\n\n    indented\nDone."
    # Lines written as block elements or as <span class="line"> without a newline.
    p = page('<pre><div>a = 1</div><div>b = 2</div></pre>'
             '<pre><span class="line">x</span><span class="line">  y</span></pre>')
    assert assemble_text(p, np.ones(p.num_nodes, bool)) == "a = 1\nb = 2\nx\n  y"


def test_assemble_text_writes_a_data_table_row_per_line():
    html = ("<table><caption>Fees</caption><thead><tr><th>Cost</th><th>Public</th>"
            "<th>Private</th></tr></thead><tr><td>Credit <b>Hour</b></td><td>$337</td>"
            "<td>$516</td></tr><tr><td></td><td>x</td><td>y</td></tr></table><p>After.</p>")
    p = page(html)
    assert assemble_text(p, np.ones(p.num_nodes, bool)) == (
        "Fees\n| Cost | Public | Private |\n| Credit Hour | $337 | $516 |\n| | x | y |\n"
        "After.")
    # A dropped cell keeps its column; trailing empty cells are left off.
    keep = np.ones(p.num_nodes, bool)
    keep[[i for i, t in enumerate(p.tags) if t == "th"][1:]] = False
    assert assemble_text(p, keep).split("\n")[1] == "| Cost |"
    keep = np.ones(p.num_nodes, bool)
    keep[[i for i, t in enumerate(p.tags) if t == "td"][1]] = False
    assert assemble_text(p, keep).split("\n")[2] == "| Credit Hour | | $516 |"
    # Layout tables (block content, one column, prose cells) stay one block per cell.
    for layout in ("<table><tr><td><p>a</p></td><td>b</td></tr><tr><td>c</td><td>d</td></tr>"
                   "</table>",
                   "<table><tr><td>a</td></tr><tr><td>b</td></tr></table>",
                   f"<table><tr><td>{'word ' * 250}</td><td>b</td></tr>"
                   "<tr><td>c</td><td>d</td></tr></table>"):
        p = page(layout)
        assert "|" not in assemble_text(p, np.ones(p.num_nodes, bool))


def test_complete_blocks_keeps_code_whole_and_tables_kept_mostly():
    from scrapy_grownup.output.assembly import complete_blocks

    p = page("<pre><span>a</span>\n<span>b</span></pre><p>x</p>"
             "<table><tr><th>Name</th><th>Price</th></tr><tr><td>Alpha</td><td>$1</td></tr>"
             "<tr><td>Beta</td><td>$2</td></tr></table>"
             "<table><tr><td>one</td><td>two</td></tr><tr><td>three</td><td>four</td></tr>"
             "</table>")
    spans = [i for i, t in enumerate(p.tags) if t == "span"]
    keep = np.zeros(p.num_nodes, bool)
    keep[spans[0]] = True  # one line of the code block
    for i, t in enumerate(p.tags):  # the first table without its header
        if t == "td" and i < p.tags.index("table", p.tags.index("table") + 1):
            keep[i] = True
    keep[[i for i, t in enumerate(p.tags) if t == "td"][-1]] = True  # one cell of four
    done = complete_blocks(p, keep)
    assert keep.sum() < done.sum() and not np.array_equal(keep, done)
    assert assemble_text(p, done) == (
        "a\nb\n| Name | Price |\n| Alpha | $1 |\n| Beta | $2 |\n| | four |")
    assert assemble_text(p, complete_blocks(p, np.zeros(p.num_nodes, bool))) == ""


def test_clean_cleaneval_gold():
    raw = ("URL: http://example.com/x\r\n\r\n<p>Hello there\n   <h>A  title\n<l>* item one\n"
           "text with <b> inline tag\n")
    cleaned = clean_cleaneval_gold(raw)
    assert "URL:" not in cleaned and "http://example.com/x" not in cleaned
    assert cleaned.split() == ["Hello", "there", "A", "title", "*", "item", "one", "text",
                               "with", "<b>", "inline", "tag"]


@pytest.mark.parametrize("marker", [
    "!@#$%^&*()  COMMENTS", "!@#$%^&*() COMMENTS", "!@ $%^&*()  COMMENTS",
    "!@#$%^&**()  COMMENTS", "   #$%^&*()  COMMENTS", "!@#$%^&*()  COMMENTS\t",
])
def test_split_dragnet_gold_marker_variants(marker):
    article, comments = split_dragnet_gold(f"Title\r\n\r\nBody text.\r\n{marker}\r\nNice post!\r\n")
    assert article.split() == ["Title", "Body", "text."]
    assert comments.split() == ["Nice", "post!"]


def test_split_dragnet_gold_without_marker():
    assert split_dragnet_gold("Only COMMENTS about the article") == (
        "Only COMMENTS about the article", "")
