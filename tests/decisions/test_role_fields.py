"""Article.comments and Article.related_links hold what their names say (role_fields)."""

import numpy as np

from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.decisions.roles import role_fields

ROLES = ["not_content", "headline", "main_text", "supplemental", "related", "comments"]
PAGE = """<html><head><base href="https://news.test/a/"></head><body>
<article><h1>Owls hunt at night</h1>
<p>Owls are birds of prey. Read <a href="study.html">the study of owl flight</a> here.</p>
<h2>Why owls are silent</h2><p>Their feathers make their flight almost silent.</p>
<aside><h3>Related articles</h3><ul>
  <li><a href="owls-day.html">Do owls ever hunt by day?</a></li>
  <li><a href="https://other.test/bats">Bats and their sonar</a></li>
  <li><a href="/">Back to home</a></li></ul></aside></article>
<div class="sidebar"><ul><li><a href="/x">Sign in to your account</a></li>
  <li><a href="/y">Weather for the week ahead</a></li></ul></div>
<section id="comments"><h4>941 comments</h4><span class="count">941</span>
  <ul><li class="comment"><b>reader0</b> Great story, long overdue.</li>
      <li class="comment"><b>reader1</b> I saw one in my garden last week, truly silent!</li>
      <li class="comment"><a href="#r">Reply</a></li></ul>
  <form class="comment-form"><p>Leave a reply</p><label>Your name</label>
  <p>Your email address will not be published. Required fields are marked</p>
  <button>Post comment</button></form></section>
<div class="footer"><p>A paragraph the model wrongly calls a comment, with many words.</p></div>
</body></html>"""


def fields_for(role_of):
    """``role_fields`` with every node the role ``role_of(page, node)`` names, the article
    kept as content."""
    page = parse_page(PAGE, url="https://news.test/a/owls.html", positions=False)
    roles = np.zeros((page.num_nodes, len(ROLES)))
    for v in range(page.num_nodes):
        roles[v, ROLES.index(role_of(page, v))] = 1.0
    start = page.tags.index("article")
    keep = np.zeros(page.num_nodes, dtype=bool)
    keep[start:page.subtree_end[start]] = True
    keep[[v for v in range(page.num_nodes) if page.tags[v] in ("aside", "h3", "ul", "li", "a")
          and start <= v < page.subtree_end[start]]] = False
    keep[page.tags.index("h2")] = True
    return page, role_fields(page, keep, roles, ROLES)


def test_comments_are_comments_not_forms_counters_or_the_article():
    def role_of(page, v):
        inside = [i for i, t in enumerate(page.tags) if t in ("section", "div")]
        section = page.tags.index("section")
        footer = [i for i in inside if page.class_words[i] == "footer"][0]
        if section <= v < page.subtree_end[section] or footer <= v < page.subtree_end[footer]:
            return "comments"
        if page.tags[v] == "h2":  # the article's own heading, called a comment
            return "comments"
        return "not_content"

    _, fields = fields_for(role_of)
    comments = fields["comments"]
    assert "reader0" in comments and "Great story, long overdue." in comments
    assert "truly silent!" in comments
    for wrong in ("941", "Reply", "Leave a reply", "Your name", "will not be published",
                  "Post comment", "Why owls are silent", "wrongly calls"):
        assert wrong not in comments, wrong


def test_nothing_that_is_a_comment_leaves_the_field_empty():
    def role_of(page, v):  # only the form and the counter are called comments
        form = page.tags.index("form")
        if form <= v < page.subtree_end[form] or page.tags[v] in ("h4", "span"):
            return "comments"
        return "not_content"

    _, fields = fields_for(role_of)
    assert fields["comments"] == ""


def test_related_links_are_a_named_list_not_links_in_a_sentence():
    def role_of(page, v):  # every link called related, the in-article one too
        return "related" if page.tags[v] == "a" else "not_content"

    _, fields = fields_for(role_of)
    assert fields["related_links"] == [
        {"text": "Do owls ever hunt by day?", "url": "https://news.test/a/owls-day.html"},
        {"text": "Bats and their sonar", "url": "https://other.test/bats"},
    ]  # not "the study of owl flight" (a sentence), "Back to home", nor the sidebar's list

    def only_one(page, v):
        return "related" if page.tags[v] == "a" and "owls-day" in \
            (page.attrs.get(v) or {}).get("href", "") else "not_content"

    _, fields = fields_for(only_one)
    assert fields["related_links"] == []  # one link is not a list


def test_a_model_without_those_roles_leaves_the_fields_out():
    page = parse_page(PAGE, positions=False)
    assert role_fields(page, np.zeros(page.num_nodes, bool),
                       np.zeros((page.num_nodes, 3)), ["a", "b", "c"]) == {}


def test_comment_ancestors_are_the_nearest_marked_element_outside_controls():
    """Each node's comment element is its nearest ancestor-or-self whose class or id names
    comments, none inside a form or control, the same however many nodes ask in any order."""
    from scrapy_grownup.decisions.roles import _COMMENT_MARKUP, _NOT_COMMENT, _CommentAncestors

    page = parse_page(PAGE, url="https://news.test/a/owls.html", positions=False)

    def walked(v):  # one node's own walk up the tree, nothing shared
        chain = []
        while v >= 0:
            chain.append(v)
            v = int(page.parent[v])
        if any(page.tags[a] in _NOT_COMMENT for a in chain):
            return -1
        return next((a for a in chain if _COMMENT_MARKUP.search(
            page.class_words[a] + " " + page.id_words[a])), -1)

    want = [walked(v) for v in range(page.num_nodes)]
    for order in (range(page.num_nodes), reversed(range(page.num_nodes))):
        comment_of = _CommentAncestors(page)
        got = {v: comment_of(v) for v in order}
        assert [got[v] for v in range(page.num_nodes)] == want
    section = page.tags.index("section")
    first = next(v for v in range(page.num_nodes) if page.class_words[v] == "comment")
    assert want[first] == first                         # the nearest: the comment, not the list
    assert want[first + 1] == first                     # its <b> belongs to it
    assert want[section + 1] == section                 # the heading: the section itself
    assert want[page.tags.index("button")] == -1        # inside the comment form
    assert want[page.tags.index("h1")] == -1            # no comment above the headline
