"""``Article.comments`` and ``Article.related_links`` that hold what their names say.

The block-role head labels nodes; on sites it has not seen its "comments" and "related" calls
are often wrong (a comment form, a counter, the article's own headings; a link inside a
sentence). These fields take the head's call only with evidence of their own, and stay empty
otherwise:

* comments: a node the head calls a comment, outside the article's text (the content mask),
  outside forms, buttons, labels and navigation, not a comment form's wording ("Leave a
  reply", "Your email address will not be published"), a counter or a control ("Reply"),
  under an element whose class or id names comments ("comment", "reply", "discussion",
  "disqus", ...) whose such nodes hold at least ``MIN_COMMENT_WORDS`` words.
* related links: links the head calls related, each with a title of at least three words (not
  "Read more", "Back to blog"), in a list of at least two such links that is mostly links and
  that a heading or a class names as related ("Related articles", "See also", "Lesen Sie
  auch", ``class="related-posts"``).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from scrapy_grownup.decisions import page_memo
from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.page.dom import PageStructure

__all__ = ["role_fields", "comment_mask", "related_link_list"]

MIN_COMMENT_WORDS = 5
MIN_RELATED_LINKS = 2
MIN_LINK_DENSITY = 0.5  # link text / all text of the list holding the related links
_SKIP_HREF = ("javascript:", "mailto:", "tel:", "#", "data:")
# Elements whose text is never a comment (the comment form, its buttons, navigation).
_NOT_COMMENT = frozenset({"form", "button", "label", "select", "option", "textarea", "input",
                          "nav", "header", "footer", "fieldset", "legend"})
_COMMENT_MARKUP = re.compile(r"\b(?:comments?|commentlist|replies|reply|discussion|disqus|"
                             r"respond|responses?|talk)\b")
# Comment-form and notice text, matched on lower-cased text (re.IGNORECASE over every candidate
# node's text was 6x slower).
_COMMENT_FORM = re.compile(
    r"akismet|required fields|will not be published|(?:sign|log) ?in to|leave a (?:reply|comm)"
    r"|post a comment|cancel reply|let us know what you think|be the first to|comments? "
    r"(?:are|is) closed|loading comments|share your thoughts|join the (?:discussion|"
    r"conversation)|notify me|your email|your comment|comment data|community guidelines|"
    r"will get back to you|captcha|^\W*\d+\s+(?:responses?|comments?|replies|thoughts)\b|"
    r"do you own this|are moderated|has been (?:deleted|archived)|add to the discussion|"
    r"\bto (?:comment|reply)\W*$|already have an account|does not support")
# A comment's controls, not its text.
_COMMENT_UI = re.compile(r"^\W*(?:reply|replies|share|like|likes|report|flag|edit|delete|"
                         r"permalink|quote|vote|upvote|downvote|collapse|expand(?: full comment)?|"
                         r"load more|show more|sort(?: by)?|newest|oldest|top|best|all|cancel|"
                         r"see all comments)\W*$",
                         re.IGNORECASE)
_RELATED_HEADING = re.compile(
    r"^(?:related|more (?:on|from|in|about|stories|news|articles|headlines)|read (?:more|also|"
    r"next)|see also|also (?:in|on|read|today)|you (?:may|might) also|recommended|further "
    r"reading|on this topic|top stories|weitere|mehr zum thema|mehr (?:aus|zu)|lesen sie auch|"
    r"das könnte|lire aussi|à lire aussi|sur le même sujet|leer más|noticias relacionadas|"
    r"relacionad|veja também|leia também|関連|相关)", re.IGNORECASE)
_RELATED_MARKUP = re.compile(r"\brelated\b")
_NOT_RELATED_TITLE = re.compile(
    r"^(?:read more|more|back to|get in touch|sign in|log ?in|make a gift|contact|subscribe|"
    r"more (?:articles|posts|stories) (?:from|by|in)|see all|view all|request a quote)\b",
    re.IGNORECASE)


def role_fields(page: PageStructure, keep: np.ndarray, roles: np.ndarray,
                role_names: Sequence[str]) -> dict:
    """``comments`` and ``related_links`` of one page from its role probabilities ``roles``
    ([n, R]) and content mask ``keep``; a role the model lacks leaves its field out."""
    names = list(role_names)
    role = np.asarray(roles).argmax(1)
    keep = np.asarray(keep, dtype=bool)
    fields: dict = {}
    if "comments" in names:
        mask = comment_mask(page, keep, role == names.index("comments"))
        fields["comments"] = assemble_text(page, mask) if mask.any() else ""
    if "related" in names:
        fields["related_links"] = related_link_list(page, role == names.index("related"))
    return fields


def _ancestors(page: PageStructure, node: int):
    while node >= 0:
        yield node
        node = int(page.parent[node])


class _CommentAncestors:
    """``comment_of(v)``: the nearest element at or above ``v`` whose class or id names
    comments, or -1, also when ``v`` is inside a form or a control (``_NOT_COMMENT``). Each
    ancestor is judged once per page, however many candidate nodes share it."""

    def __init__(self, page: PageStructure):
        self.page = page
        self.known: dict[int, tuple[int, bool]] = {}  # node -> (nearest marked, in a control)

    def __call__(self, v: int) -> int:
        page, known = self.page, self.known
        path = []
        node = v
        while node >= 0 and node not in known:
            path.append(node)
            node = int(page.parent[node])
        marked, blocked = known[node] if node >= 0 else (-1, False)
        for node in reversed(path):  # top down: a deeper marked element is the nearer one
            blocked = blocked or page.tags[node] in _NOT_COMMENT
            words, ident = page.class_words[node], page.id_words[node]
            if (words or ident) and _COMMENT_MARKUP.search(words + " " + ident):
                marked = node
            known[node] = (marked, blocked)
        return -1 if blocked else marked


def comment_mask(page: PageStructure, keep: np.ndarray, comments: np.ndarray) -> np.ndarray:
    """The nodes of ``comments`` (the head's calls) that are comments by the rules above.

    Nodes are judged by the comment they belong to (their nearest element whose class or id
    names comments): its nodes count when together they hold ``MIN_COMMENT_WORDS`` words, so
    a commenter's name and a short reply stay with their comment, while a counter or a
    "Reply" link does not count on its own."""
    out = np.zeros(page.num_nodes, dtype=bool)
    texts = page.node_text
    groups: dict[int, list[int]] = {}
    comment_of = _CommentAncestors(page)
    lengths = page_memo.text_lengths(page)
    for v in np.flatnonzero(comments & ~keep & (lengths > 0)).tolist():
        marked = comment_of(v)  # first: memoized per page, and most candidates have none
        if marked < 0:
            continue
        text = texts[v]
        if not any(c.isalpha() for c in text) or _COMMENT_FORM.search(text.lower()) \
                or _COMMENT_UI.match(text):
            continue
        groups.setdefault(marked, []).append(v)
    if not groups:
        return out
    kept_chars = np.concatenate([[0], np.cumsum(np.where(keep, lengths, 0))])
    ends = page.subtree_end
    for marked, nodes in groups.items():
        if sum(len(texts[v].split()) for v in nodes) < MIN_COMMENT_WORDS:
            continue
        # more of the article's own text than comment text under it: the marked element
        # holds content (a forum's posts) and these nodes are its bylines and badges
        if kept_chars[ends[marked]] - kept_chars[marked] >= sum(len(texts[v]) for v in nodes):
            continue
        out[nodes] = True
    return out


def related_link_list(page: PageStructure, related: np.ndarray) -> list[dict]:
    """``{"text", "url"}`` of the links in related lists (rules above), each URL once."""
    from scrapy_grownup.output.metadata import base_url
    from scrapy_grownup.page.urls import join_url

    if not related.any():
        return []
    lengths = page_memo.text_lengths(page)
    cum = np.concatenate([[0], np.cumsum(lengths)])
    ends = page.subtree_end
    links = page_memo.tag_nodes(page, "a")
    titles = {}
    for i in links:
        text = " ".join(t for t in page.node_text[i:ends[i]] if t)
        if len(text.split()) >= 3 and not _NOT_RELATED_TITLE.match(text):
            href = (page.attrs.get(i) or {}).get("href", "").strip()
            if href and not href.lower().startswith(_SKIP_HREF):
                titles[i] = (text, href)
    if len(titles) < MIN_RELATED_LINKS:
        return []
    named = set()  # links in a list a heading or a class names as related
    texts, classes, ids = page.node_text, page.class_words, page.id_words
    # the nodes a heading or their markup names as related (in any order: ``named`` is a set);
    # the markup's word is in the class or the id words, which most nodes (and most pages,
    # searched whole first) lack
    headings = [v for v in np.flatnonzero(lengths).tolist()
                if len(texts[v].split()) <= 6
                and _RELATED_HEADING.match(texts[v].strip(" :»›|•-"))]
    marked = [v for v, (words, ident) in enumerate(zip(classes, ids))
              if ("related" in words or "related" in ident)
              and _RELATED_MARKUP.search(words + " " + ident)] \
        if "related" in " ".join(classes) or "related" in " ".join(ids) else []
    for v in dict.fromkeys(headings + marked):
        for a in [v] + list(_ancestors(page, int(page.parent[v])))[:3]:
            inside = [j for j in titles if a <= j < ends[a] and j >= v]
            if len(inside) >= MIN_RELATED_LINKS:
                link_chars = sum(int(cum[ends[j]] - cum[j]) for j in inside)
                if link_chars >= MIN_LINK_DENSITY * int(cum[ends[a]] - cum[a]):
                    named.update(inside)
                break
    base = base_url(page) or ""
    out, seen = [], set()
    for i in sorted(named):
        lo, hi = i, ends[i]
        total = int(lengths[lo:hi].sum())
        if not total or 2 * int(lengths[lo:hi][related[lo:hi]].sum()) <= total:
            continue  # the head does not call this link related
        text, href = titles[i]
        url = join_url(base, href)
        if url is None or url in seen:
            continue
        seen.add(url)
        out.append({"text": text, "url": url})
    return out if len(out) >= MIN_RELATED_LINKS else []
