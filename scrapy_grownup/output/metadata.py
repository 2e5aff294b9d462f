"""Article metadata: title, authors, publication date, language, canonical URL, site name,
description, main image, modification date, tags and categories.

Structured sources come first because publishers fill them for search engines and social cards:
JSON-LD, then OpenGraph and other ``<meta>`` tags, then markup (``<link rel=canonical>``,
``<time datetime>``, microdata, ``rel=author``, bylines). The model's headline node (the ``h1``
closest to where the content starts) settles the title, because ``<title>`` and ``og:title``
often carry the site name too, and anchors the search for a byline date.

Pure Python on a ``PageStructure``: no lxml, no torch, no date library.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from email.utils import parsedate_tz

import numpy as np

from scrapy_grownup.decisions import page_memo
from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.page.urls import join_url, url_host, url_path
from scrapy_grownup.page.xmlsafe import xml_safe

__all__ = ["Metadata", "extract_metadata", "json_ld_objects", "normalize_date", "split_authors",
           "headline_node", "page_title", "description", "main_image", "date_modified", "tags",
           "categories"]


@dataclass
class Metadata:
    title: str = ""
    authors: list[str] = field(default_factory=list)
    published: str | None = None  # ISO 8601: "2025-09-04" or "2025-09-04T10:30:00+02:00"
    language: str | None = None
    canonical_url: str | None = None
    site_name: str | None = None
    description: str | None = None
    image: str | None = None  # the page's declared main image (absolute), else None
    date_modified: str | None = None  # ISO 8601, as ``published``
    tags: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)


def extract_metadata(page: PageStructure, keep=None) -> Metadata:
    """Metadata of ``page``; ``keep`` (the content node mask) locates the headline node."""
    ld = linked_data(page)
    site = site_name(page, ld)
    head = headline_node(page, keep)
    return Metadata(
        title=title(page, keep, ld, site, head=head),
        authors=authors(page, ld, keep),
        published=published(page, ld, keep, head=head),
        language=language(page, ld, keep),
        canonical_url=canonical_url(page, ld),
        site_name=site,
        description=description(page, ld),
        image=main_image(page, ld),
        date_modified=date_modified(page, ld),
        tags=tags(page, ld),
        categories=categories(page, ld),
    )


def _clean(text, unescape: bool = False) -> str:
    """Whitespace-normalised text; ``unescape`` decodes entities left in JSON-LD and meta.
    Without what XML refuses: a JSON-LD string may hold any character (``"\\u0011"``)."""
    if not text:
        return ""
    text = html.unescape(str(text)) if unescape and "&" in str(text) else str(text)
    return " ".join(xml_safe(text).split())


def _norm(text: str) -> str:
    """Lower-case words without punctuation, to compare titles and names."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


# ----------------------------------------------------------------------------------------------
# JSON-LD

ARTICLE_TYPES = frozenset("""Article NewsArticle BlogPosting ReportageNewsArticle
    AnalysisNewsArticle OpinionNewsArticle BackgroundNewsArticle ReviewNewsArticle
    AskPublicNewsArticle AdvertiserContentArticle SatiricalArticle TechArticle APIReference
    ScholarlyArticle MedicalScholarlyArticle Report LiveBlogPosting SocialMediaPosting
    DiscussionForumPosting Posting Review Recipe HowTo Guide""".split())
PAGE_TYPES = frozenset("""WebPage ItemPage AboutPage FAQPage QAPage ProfilePage CollectionPage
    MedicalWebPage ContactPage SearchResultsPage""".split())


def json_ld_objects(page: PageStructure) -> list[dict]:
    """Every typed object of the page's JSON-LD, ``@graph`` and lists flattened, in order."""
    out: list[dict] = []
    for raw in page.json_ld:
        data = _load_json(raw)
        if data is not None:
            _flatten(data, out, 0)
    return out


# A JSON string (kept) or a JavaScript comment (dropped): strings first, so "https://..." stays.
# An unterminated string or comment runs to the end, so no match is retried (linear time).
_STRING_OR_COMMENT = re.compile(r'("(?:[^"\\]|\\.)*(?:"|\\?\Z))|//[^\n]*|/\*.*?(?:\*/|\Z)',
                                re.DOTALL)
_BETWEEN_VALUES = re.compile(r"[\s,;]*")
_DECODER = json.JSONDecoder(strict=False)


def _load_json(raw: str):
    """Parsed JSON-LD, tolerating comment / CDATA wrappers, JavaScript comments, trailing
    commas and several top-level values in one block (``{...},{...}``: a list of them; junk
    after a complete value is dropped). ``None`` when no value parses."""
    raw = raw.strip()
    if raw.startswith(("<!--", "//", "<![CDATA[")):
        raw = re.sub(r"^(?://\s*)?(?:<!--|<!\[CDATA\[)", "", raw)
    if raw.endswith(("-->", "]]>")):
        raw = re.sub(r"(?://\s*)?(?:-->|\]\]>)$", "", raw)
    try:
        return json.loads(raw, strict=False)
    except ValueError:
        pass
    except RecursionError:  # nested deeper than the interpreter's stack: not metadata
        return None
    if "/" in raw:  # "ratingValue": "5" // hardcoded
        raw = _STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", raw)
    raw = re.sub(r",\s*([}\]])", r"\1", raw).strip()
    values, end = [], 0
    try:
        while end < len(raw):  # the values before any junk that follows them are kept
            value, end = _DECODER.raw_decode(raw, end)
            values.append(value)
            end = _BETWEEN_VALUES.match(raw, end).end()
    except (ValueError, RecursionError):
        pass
    return values[0] if len(values) == 1 else values or None


def _flatten(data, out: list[dict], depth: int) -> None:
    if depth > 8:
        return
    if isinstance(data, list):
        for item in data:
            _flatten(item, out, depth + 1)
    elif isinstance(data, dict):
        if "@type" in data:
            out.append(data)
        for key in ("@graph", "mainEntity", "mainEntityOfPage", "itemReviewed"):
            value = data.get(key)
            if isinstance(value, (list, dict)):
                _flatten(value, out, depth + 1)


def _types(obj: dict) -> set[str]:
    value = obj.get("@type")
    values = value if isinstance(value, list) else [value]
    return {str(v).rsplit("/", 1)[-1].rsplit(":", 1)[-1] for v in values if v}


class _LinkedData:
    """The page's JSON-LD objects, with the main article (or page) object picked out."""

    def __init__(self, objects: list[dict]):
        self.objects = objects
        self.by_id = {o["@id"]: o for o in objects if isinstance(o.get("@id"), str)}
        self.article = next((o for o in objects if _types(o) & ARTICLE_TYPES), None)
        self.webpage = next((o for o in objects if _types(o) & PAGE_TYPES), None)
        self.website = next((o for o in objects if "WebSite" in _types(o)), None)

    def resolve(self, value):
        """An ``{"@id": ...}`` reference replaced by the object it names, when present."""
        if isinstance(value, dict) and set(value) <= {"@id", "@type"} \
                and isinstance(value.get("@id"), str):
            return self.by_id.get(value["@id"], value)
        return value

    def field(self, *keys: str, objects=None):
        """First non-empty value of ``keys`` in the article object, then the web page."""
        for obj in objects or (self.article, self.webpage):
            if obj is None:
                continue
            for key in keys:
                value = obj.get(key)
                if value not in (None, "", [], {}):
                    return value
        return None


def linked_data(page: PageStructure) -> _LinkedData:
    """The page's ``_LinkedData``, parsed once per page (``page_memo``: the extractor's
    decisions read the authors before the metadata does); shared, not to be changed."""
    return page_memo.memo(page, "linked_data", lambda: _LinkedData(json_ld_objects(page)))


def _text_value(value) -> str:
    """A JSON-LD value as text: strings, ``{"name"}``/``{"@value"}`` objects, first of lists."""
    if isinstance(value, list):
        value = next((v for v in value if v), None)
    if isinstance(value, dict):
        value = value.get("name") or value.get("@value") or value.get("headline")
    return _clean(value, unescape=True) if isinstance(value, (str, int, float)) else ""


# ----------------------------------------------------------------------------------------------
# Title

_SEPARATORS = re.compile(r"\s+(?:[|–—·•»«/~]|-|::)\s+|\s*[|»«]\s*")


def title(page: PageStructure, keep=None, ld: _LinkedData | None = None,
          site: str | None = None, head: int | None | str = "find") -> str:
    """The headline: the headline node when a title source agrees with it, else the sources.

    ``<title>`` and ``og:title`` often read "Headline | Site": the headline node is taken when
    it equals a source or one of its parts; otherwise JSON-LD ``headline``, then ``og:title``,
    ``twitter:title``, ``dc.title``, ``<title>`` without a part that names the site, then the
    headline node alone.
    """
    ld = ld or linked_data(page)
    node = headline_node(page, keep) if head == "find" else head
    heading = node_full_text(page, node) if node is not None else ""
    headline = _text_value(ld.field("headline", objects=(ld.article,))) if ld.article else ""
    sources = [headline] + [_clean(page.meta.get(k), unescape=True) for k in (
        "og:title", "twitter:title", "dc.title", "citation_title")] + [page.title]
    sources = [s for s in sources if s]
    site_names = _site_names(site, page.url)
    others = [i for i in page_memo.tag_nodes(page, "h1") if i != node][:5]
    for candidate in ([node] if node is not None else []) + others:
        text = heading if candidate == node else node_full_text(page, candidate)
        key = _norm(text)
        if not key or key.replace(" ", "") in site_names:
            continue  # a logo h1 matches the "| Site" part of every title
        for source in sources:
            if _norm(source) == key or key in map(_norm, _title_parts(source)):
                return text
    for source in sources:  # JSON-LD headline first: its site part goes too
        cleaned = _strip_site(source, site, page.url)
        if cleaned:
            return cleaned
    return heading


def page_title(page: PageStructure, keep=None) -> str:
    """The title alone (kept for callers of the former ``extractor.page_title``)."""
    return title(page, keep)


# A title of more parts than this is not "Headline | Section | Site": it is one part, so a
# value of a million "|" costs one split, not a comparison per part.
TITLE_MAX_PARTS = 32


def _title_parts(text: str) -> list[str]:
    parts = _SEPARATORS.split(text, maxsplit=TITLE_MAX_PARTS)
    if len(parts) > TITLE_MAX_PARTS:
        return [text.strip()] if text.strip() else []
    return [p.strip() for p in parts if p and p.strip()]


def _site_names(site: str | None, url: str | None) -> set[str]:
    """The site's name and host name, normalised without spaces ("theriversidepost")."""
    names = {_norm(site or "")}
    host = url_host(url)
    if host:
        host = host.removeprefix("www.")
        names |= {_norm(host), _norm(host.rsplit(".", 1)[0])}
    return {n.replace(" ", "") for n in names} - {""}


def _strip_site(text: str, site: str | None, url: str | None) -> str:
    """``text`` without leading or trailing parts that name the site ("Headline | Site").

    Only parts known to be the site go (``_names_site``: ``og:site_name`` / the publisher and
    the host name): a guess by length cuts real titles ("Plans & Packages | Professional
    Tutoring") too often.
    """
    parts = _title_parts(text)
    if len(parts) < 2:
        return text
    rest = [p for p in parts if not _names_site(p, site, url)]
    if not rest or len(rest) == len(parts):
        return text
    return text[text.find(rest[0]): text.rfind(rest[-1]) + len(rest[-1])]


def _names_site(part: str, site: str | None, url: str | None) -> bool:
    """Whether a title part names the site: it is the site name or the host name ("Rust Blog"
    on rust-lang.org's blog host); its words are all in the site name ("Liberty University"
    of "Liberty University Online") or the site name's are all in it, with at most two more
    ("REI Co-op" of "REI"); it is the site name's initials ("WFA", World Future Awards); or
    each of its (at most three) words is in the host name ("Rust Blog" on
    blog.rust-lang.org)."""
    key = _norm(part)
    if not key:
        return False
    squashed = key.replace(" ", "")
    if squashed in _site_names(site, url):
        return True
    words = key.split()
    if len(words) > 5:
        return False
    site_words = _norm(site or "").split()
    if site_words:
        if set(words) <= set(site_words) or (
                set(site_words) <= set(words) and len(words) <= len(site_words) + 2):
            return True
        if len(words) == 1 and len(site_words) >= 2 and \
                squashed == "".join(w[0] for w in site_words):
            return True
    host = (url_host(url) or "").removeprefix("www.")
    host = _norm(host.rsplit(".", 1)[0]).replace(" ", "") if "." in host else ""
    return bool(host) and len(words) <= 3 and all(
        len(w) >= 3 and w in host for w in words)


HEADING_TAGS = ("h1", "h2", "h3")


def headline_node(page: PageStructure, keep=None) -> int | None:
    """The node holding the article headline, or ``None``.

    With a content mask: the ``h1`` closest to where the content starts (a site-name ``h1`` in
    the header or a modal's ``h1`` after the article lose), else an ``h2``/``h3`` just before
    the content. Without one: the first ``h1`` of the body.
    """
    first_run = page_memo.memo(page, "headings", lambda: _heading_runs(page))
    heads = list(first_run)
    if not heads:
        return None
    mask = None if keep is None else np.asarray(keep, dtype=bool)
    if mask is None or not mask.any() or not len(page.seg_text):
        h1 = [i for i in heads if page.tags[i] == "h1"]
        return (h1 or heads)[0]
    kept_runs = np.flatnonzero(mask[page.seg_owner])
    if not len(kept_runs):
        return next((i for i in heads if page.tags[i] == "h1"), heads[0])
    start, stop = int(kept_runs[0]), int(kept_runs[-1])
    words = page_memo.words_before(page)  # words before run k

    def distance(i: int) -> int:
        """Words between the heading and the content start (0 for the first content run)."""
        return abs(int(words[start] - words[first_run[i]]))

    h1 = [i for i in heads if page.tags[i] == "h1" and first_run[i] <= stop]
    if h1:
        return min(h1, key=distance)
    near = [i for i in heads if first_run[i] <= start and distance(i) <= 60]
    return near[-1] if near else None


def _heading_runs(page: PageStructure) -> dict[int, int]:
    """``headline_node``'s candidates: each heading of at most 40 words with text, by node in
    document order, and its first run."""
    heads = sorted(i for tag in HEADING_TAGS for i in page_memo.tag_nodes(page, tag))
    first_run = {}
    for i in heads:
        runs = page.subtree_runs(i)
        if len(runs) and len(node_full_text(page, i).split()) <= 40:
            first_run[i] = int(runs[0])
    return first_run


def node_full_text(page: PageStructure, node: int) -> str:
    """Text of ``node``'s whole subtree, runs joined as in ``assemble_text``."""
    parts: list[str] = []
    seps = page.seg_sep
    for k in page.subtree_runs(node):
        if parts and seps[k]:
            parts.append(" ")
        parts.append(page.seg_text[k])
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# Authors

AUTHOR_META = ("author", "article:author", "parsely-author", "sailthru.author", "dc.creator",
               "dcterms.creator", "citation_author", "byl", "og:article:author", "creator",
               "twitter:data1")
_BY = re.compile(r"^(?:(?:written|posted|post|published|authored|reviewed|edited|words|story|"
                 r"photos?|text|article)\s*)?(?:by|from|authors?|von|par|por|di)"
                 r"(?:\b|(?-i:(?=[A-Z])))[\s:]*", re.IGNORECASE)  # "ByJane", never "Di|ana"
_AUTHOR_SPLIT = re.compile(r"\s*(?:;|\||\band\b|&|\bund\b|\bet\b|\by\b)\s*", re.IGNORECASE)
_NAME_TAIL = re.compile(
    r"\s+(?:(?:published|updated|posted|on|last|reviewed|modified)\b|\d|" + r"(?:january|"
    r"february|march|april|may|june|july|august|september|october|november|december|jan|feb|"
    r"mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\b\.?\s*\d).*$", re.IGNORECASE)
_CREDENTIALS = frozenset("""md phd ph d rn dr mba msc bsc ma ba jd cpa esq jr sr ii iii iv dds
    do np pa lcsw mph""".split())
_NOT_NAMES = frozenset("""undefined null none admin administrator anonymous unknown author
    the author staff editor editors guest name team user january february march april june
    july august september october november december jan feb mar apr jun jul aug sep sept oct
    nov dec monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur
    thurs fri sat sun""".split())
# Words no name is made of: "Follow the author", "Get in touch", "This review is".
# (Not "for", "of", "in": "Center for Drug Evaluation", "Women in Tech" are authors.)
_NOT_NAME_WORDS = frozenset("""is are was this that these get follow visit read more by view all
    posts see contact touch here click share says wrote writes reply comment comments""".split())
_FORM_LABELS = frozenset({"your name", "full name", "first name", "last name", "nickname"})
# A part that names a role, not a person ("Senior Reporter", "Shipping Expert"), by its last
# word, or one of these before "at" / "of" ("Editor at Wired").
_ROLES = frozenset("""reporter reporters editor editors correspondent correspondents writer
    writers contributor contributors columnist columnists journalist journalists expert experts
    producer photographer photographers analyst analysts director manager founder cofounder
    co-founder ceo cto cfo coo president chief intern specialist strategist consultant
    researcher scientist professor lecturer student nutritionist dietitian therapist
    redaktion redakteur redakteurin korrespondent korrespondentin autor autorin reporterin
    journaliste rédacteur rédactrice correspondant correspondante envoyé envoyée periodista
    redactor redactora corresponsal giornalista""".split())
# Words that open a parenthesis of co-authors: "Martin Untersinger (avec Damien Leloup et
# Morgane Tual)" is three authors; any other parenthesis ("(obe)", "(Reuters)") is dropped.
_COAUTHORS = re.compile(r"^(?:with|avec|mit|con|com|met|med|and|und|et|y|e|&|additional "
                        r"reporting(?: by)?|reporting by|also by)\s+", re.IGNORECASE)


# The most names an author string gives, and the most of its parts (split at ";", "and"...)
# and of a part's comma-separated pieces that are read: more than any byline or paper's author
# list, and a bound on the work of a page of a hundred thousand author tags.
MAX_AUTHORS = 1000


def split_authors(text: str) -> list[str]:
    """One author string ("By A, B and C") as a list of names, cleaned and deduplicated, at
    most ``MAX_AUTHORS`` of them.

    A parenthesis never splits a name: one of co-authors ("(avec B et C)", "(with B)") adds
    them, any other ("(obe)", "(Reuters)", a lone "(") is dropped; a role ("A B, Senior
    Reporter") beside a name is not one."""
    text = _clean(text, unescape=True)
    if not text:
        return []
    text = _parentheses(text)
    out: list[str] = []
    seen: set[str] = set()  # the names so far, normalised: one lookup each, however many
    for part in _AUTHOR_SPLIT.split(text)[:MAX_AUTHORS]:
        pieces = [p.strip() for p in part.split(",", MAX_AUTHORS)[:MAX_AUTHORS]]
        pieces = [p for p in pieces if not _is_role(p)] or pieces  # "Staff Writer" alone stays
        # "Last, First" stays whole; "A B, C D" is two authors; "A B, PhD" keeps the name.
        if len(pieces) > 1 and not any(len(p.split()) > 1 for p in pieces):
            pieces = [part]
        for piece in pieces:
            name = _clean_name(piece)
            if name and _norm(name) not in seen:
                seen.add(_norm(name))
                out.append(name)
    return out[:MAX_AUTHORS]


def _parentheses(text: str) -> str:
    """``text`` with its parentheses resolved: co-authors appended after a ";", anything else
    inside parentheses (and an unbalanced one with what follows it) dropped."""
    if "(" not in text and ")" not in text:
        return text
    more: list[str] = []

    def inner(m: re.Match) -> str:
        lead = _COAUTHORS.match(m.group(1).strip())
        if lead:
            more.append(m.group(1).strip()[lead.end():])
        return " "

    text = re.sub(r"\(([^()]*)\)", inner, text)
    text = text.split("(", 1)[0].replace(")", " ")
    return "; ".join([" ".join(text.split())] + more)


def _is_role(piece: str) -> bool:
    words = _norm(piece).split()
    if not words or len(words) > 6:
        return False
    if words[-1] in _ROLES:
        return True
    return any(w in _ROLES and i + 1 < len(words) and words[i + 1] in ("at", "of", "for")
               for i, w in enumerate(words))


def _clean_name(name: str) -> str:
    """A person or organisation name without "By", dates and roles, or "" when it is none."""
    name = _BY.sub("", _clean(name)).strip(" .,:;-–—|/*»«›‹•·~")
    name = _NAME_TAIL.sub("", name).strip(" .,:;-–—|/*»«›‹•·~")
    name = re.sub(r"^@", "", name)
    key = _norm(name)
    if not key or key in _CREDENTIALS or key.replace(" ", "") in _CREDENTIALS or key in _NOT_NAMES:
        return ""
    if re.search(r"https?:|www\.|@\w+\.\w|\.(?:com|org|net)\b|[{}<>=:*]|\bago\b", name):
        return ""
    if len(name.split()) > 5 or len(name) > 60 or any(c.isdigit() for c in name):
        return ""
    if _NOT_NAME_WORDS & set(key.split()) or key in _FORM_LABELS:
        return ""  # a sentence or a label, not a name ("Follow the author", "Get in touch")
    return name if any(c.isalpha() for c in name) else ""


def authors(page: PageStructure, ld: _LinkedData | None = None, keep=None) -> list[str]:
    """Authors from JSON-LD, then author meta tags, then microdata, ``rel=author`` and bylines.

    JSON-LD authors typed as organisations are left out: they name the publisher (which is
    ``site_name``), not a byline. (A name equal to the site name stays: on a personal blog or
    a company blog without bylines it is the author the page gives, and the gold agrees.)
    """
    ld = ld or linked_data(page)
    for source in (lambda: _ld_authors(ld), lambda: _meta_authors(page),
                   lambda: _markup_authors(page, keep)):
        found = source()
        if found:
            return found
    return []


ORGANISATION_TYPES = frozenset({"Organization", "NewsMediaOrganization", "Corporation",
                                "EducationalOrganization", "LocalBusiness", "WebSite"})


def _ld_authors(ld: _LinkedData) -> list[str]:
    value = ld.field("author", "creator")
    if value is None:
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in value if isinstance(value, list) else [value]:
        if len(out) >= MAX_AUTHORS:
            break
        item = ld.resolve(item)
        if isinstance(item, dict):
            if _types(item) & ORGANISATION_TYPES:
                continue
            name = item.get("name")
            if isinstance(name, list):
                name = " ".join(str(n) for n in name)
            if not name and (item.get("givenName") or item.get("familyName")):
                name = f"{item.get('givenName', '')} {item.get('familyName', '')}"
            item = name
        if isinstance(item, str):
            for name in split_authors(item):
                if _norm(name) not in seen:
                    seen.add(_norm(name))
                    out.append(name)
    return out[:MAX_AUTHORS]


def _meta_authors(page: PageStructure) -> list[str]:
    for key in AUTHOR_META:
        value = page.meta.get(key)
        if not value:
            continue
        if key == "twitter:data1" and page.meta.get("twitter:label1", "").lower() not in (
                "written by", "author", "by"):
            continue
        names = split_authors(value)
        if names:
            return names
    return []


_BYLINE_WORDS = frozenset({"author", "authors", "byline", "by", "writer", "creator"})
_BYLINE_HINT = re.compile("author|by|writer|creator")


def _markup_authors(page: PageStructure, keep=None) -> list[str]:
    """The first ``itemprop=author`` / ``rel=author`` element, then the first short byline.

    Only one element counts, and with a content mask only one before the content's end:
    later ones are mostly comment authors.
    """
    stop = page.num_nodes
    if keep is not None and np.asarray(keep).any() and len(page.seg_text):
        kept = np.flatnonzero(np.asarray(keep, dtype=bool)[page.seg_owner])
        stop = int(page.seg_owner[kept[-1]]) + 1 if len(kept) else stop
    # a node without ``itemprop`` or ``rel`` names no author
    for i in sorted({*page_memo.attribute_nodes(page, "itemprop"),
                     *page_memo.attribute_nodes(page, "rel")}):
        if i >= stop:
            break
        values = page.attrs[i]
        prop = values.get("itemprop", "").split()
        rel = values.get("rel", "").lower().split() if page.tags[i] == "a" else []
        if "author" in prop or "creator" in prop or "author" in rel:
            text = values.get("content") if "content" in values else None
            if not text:
                names = [j for j in range(i, page.subtree_end[i])
                         if "name" in page.attrs.get(j, {}).get("itemprop", "").split()]
                text = node_full_text(page, names[0] if names else i)
            found = split_authors(text)
            if found:
                return found
    for i in range(min(stop, page.num_nodes)):
        attributes = page.class_words[i] + " " + page.id_words[i]
        if not _BYLINE_HINT.search(attributes):
            continue  # the quick test; most nodes stop here
        words = set(attributes.split())
        if not words & _BYLINE_WORDS or page.tags[i] in ("body", "html", "article", "section"):
            continue
        text = node_full_text(page, i)
        if not text or len(text.split()) > 8:
            continue
        if not _BY.match(text) and not {"author", "byline", "name"} & words:
            continue  # "by" / "writer" classes name bylines only when the text says "By"
        names = split_authors(_DATE_TAIL.sub("", text))
        if names and all(len(n.split()) <= 4 for n in names):
            return names
    return []


# ----------------------------------------------------------------------------------------------
# Dates

PUBLISHED_META = (
    "article:published_time", "og:article:published_time", "article:published",
    "datepublished", "publishdate", "publish-date", "publish_date", "pubdate", "published_time",
    "parsely-pub-date", "sailthru.date", "dc.date.issued", "dcterms.issued", "dc.date.created",
    "dcterms.created", "citation_publication_date", "citation_date", "citation_online_date",
    "dc.date", "dcterms.date", "date", "article.published", "originalpublicationdate",
    "cxenseparse:recs:publishtime", "rnews:datepublished", "og:published_time",
    "article_date_original", "date_published", "release_date", "datecreated",
)
_PUBLISHED_KEY = re.compile(r"publish|pubdate|release|issued", re.IGNORECASE)
_MONTHS = {m: i + 1 for i, names in enumerate((
    "january jan", "february feb", "march mar", "april apr", "may", "june jun", "july jul",
    "august aug", "september sep sept", "october oct", "november nov", "december dec"))
    for m in names.split()}
_MONTH_RE = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ISO_RE = re.compile(
    r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:(?:T|\s+)(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2}|[+-]\d{2}(?!\d))?)?", re.IGNORECASE)
_DMY_RE = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH_RE + r",?\s+(\d{4})\b",
                     re.IGNORECASE)
_MDY_RE = re.compile(r"\b" + _MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b",
                     re.IGNORECASE)
_NUMERIC_RE = re.compile(r"\b(\d{1,2})([/.])(\d{1,2})\2(\d{4})\b")
_URL_DATE_RE = re.compile(r"/((?:19|20)\d{2})/(\d{1,2})/(\d{1,2})(?:/|$|[-_])")
_DATE_TAIL = re.compile(r"(?:\s*[|,•·–—-]\s*|\s+(?:on|updated|published)\s+)"
                        r"(?:" + _MONTH_RE + r"|\d{1,4}[-/.]).*$", re.IGNORECASE)


def normalize_date(value) -> str | None:
    """A date or date-time in any common notation as ISO 8601, else ``None``.

    Date-only inputs give ``YYYY-MM-DD``; inputs with a time keep it, and its UTC offset when
    one is given (``Z`` becomes ``+00:00``). Unix timestamps are read as UTC.
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) or (isinstance(value, str) and re.fullmatch(
            r"\s*\d{10}(?:\d{3})?\s*", value)):
        try:
            seconds = float(value)  # a 400-digit JSON number overflows here
            seconds = seconds / 1000 if seconds > 1e11 else seconds
            moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
        return moment.isoformat() if _plausible(moment.year) else None
    text = _clean(value)
    if not text:
        return None
    m = _ISO_RE.search(text)
    if m and m.start() <= 12:
        year, month, day = int(m[1]), int(m[2]), int(m[3])
        day_only = _valid(year, month, day)
        if day_only and m[4] is not None:
            hour, minute, second = int(m[4]), int(m[5]), int(m[6] or 0)
            if hour < 24 and minute < 60 and second < 60:
                return f"{day_only}T{hour:02d}:{minute:02d}:{second:02d}{_offset(m[7])}"
        if day_only:
            return day_only
    if re.match(r"\s*(?:[a-z]{3},\s*)?\d{1,2}\s+[a-z]{3}\s+\d{4}\s+\d{1,2}:\d{2}", text, re.I):
        parsed = parsedate_tz(text)
        if parsed:
            day_only = _valid(parsed[0], parsed[1], parsed[2])
            if day_only:
                offset = re.search(r"([+-]\d{4}|GMT|UTC|Z)\s*$", text)
                tz = _offset(offset[1]) if offset else ""
                return f"{day_only}T{parsed[3]:02d}:{parsed[4]:02d}:{parsed[5]:02d}{tz}"
    return text_date(text)


def _first_date(values) -> str | None:
    """The first of ``values`` (strings, numbers, lists whose first item counts) that
    ``normalize_date`` reads, normalised; None when none does."""
    for value in values:
        if isinstance(value, list):
            value = value[0] if value else None
        found = normalize_date(value) if isinstance(value, (str, int, float)) else None
        if found:
            return found
    return None


def text_date(text: str) -> str | None:
    """The first date written out in ``text`` ("4 September 2025", "Sep. 4, 2025", "04.09.2025")."""
    best: tuple[int, str] | None = None
    for regex, order in ((_MDY_RE, "mdy"), (_DMY_RE, "dmy")):
        m = regex.search(text)
        if not m:
            continue
        if order == "mdy":
            month, day, year = _MONTHS[m[1].lower()], int(m[2]), int(m[3])
        else:
            day, month, year = int(m[1]), _MONTHS[m[2].lower()], int(m[3])
        found = _valid(year, month, day)
        if found and (best is None or m.start() < best[0]):
            best = (m.start(), found)
    if best:
        return best[1]
    m = _NUMERIC_RE.search(text)
    if m:
        a, b, year = int(m[1]), int(m[3]), int(m[4])
        if a > 12 or (b <= 12 and m[2] == "."):  # day first: 25/12/2025, 04.09.2025
            return _valid(year, b, a)
        return _valid(year, a, b)  # month first: 12/25/2025, 09/04/2025
    return None


def _plausible(year: int) -> bool:
    return 1990 <= year <= date.today().year + 1


def _valid(year: int, month: int, day: int) -> str | None:
    if not _plausible(year):
        return None
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def _offset(tz: str | None) -> str:
    if not tz:
        return ""
    tz = tz.upper()
    if tz in ("Z", "GMT", "UTC"):
        return "+00:00"
    digits = tz[1:].replace(":", "")
    digits = digits + "00" if len(digits) == 2 else digits
    return f"{tz[0]}{digits[:2]}:{digits[2:4]}"


def published(page: PageStructure, ld: _LinkedData | None = None, keep=None,
              head: int | None | str = "find") -> str | None:
    """Publication date from JSON-LD, meta tags, microdata, ``<time>``, the URL, then bylines.

    The date first published, not the last update (pages often show only "Updated ...").
    """
    ld = ld or linked_data(page)
    head = headline_node(page, keep) if head == "find" else head
    other_meta = [v for k, v in page.meta.items() if k not in PUBLISHED_META
                  and _PUBLISHED_KEY.search(k) and not _UPDATED.search(k)]
    found = _first_date((ld.field("datePublished", "dateCreated", "uploadDate"),
                         *(page.meta.get(k) for k in PUBLISHED_META), *other_meta))
    if found:
        return found
    for i in sorted(page_memo.attribute_nodes(page, "itemprop")):
        values = page.attrs[i]
        if values.get("itemprop") in ("datePublished", "dateCreated"):
            found = normalize_date(values.get("content") or values.get("datetime")
                                   or node_full_text(page, i))
            if found:
                return found
    found = _time_element_date(page, head)
    if found:
        return found
    if page.url:
        m = _URL_DATE_RE.search(url_path(page.url))
        if m:
            found = _valid(int(m[1]), int(m[2]), int(m[3]))
            if found:
                return found
    return _byline_date(page, keep, head)


def _time_element_date(page: PageStructure, head: int | None) -> str | None:
    """The first ``<time datetime>`` near the headline, or the first of the page."""
    times = [i for i in sorted(page_memo.attribute_nodes(page, "datetime"))
             if page.tags[i] == "time" and page.attrs[i].get("datetime")]
    if not times:
        return None
    if head is not None:
        after = [i for i in times if i > head] or times
        times = after + [i for i in times if i not in after]
    for i in times:
        found = normalize_date(page.attrs[i]["datetime"])
        if found:
            return found
    return None


_UPDATED = re.compile(r"\b(?:updated|modified|edited|revised)\b", re.IGNORECASE)


def _byline_date(page: PageStructure, keep, head: int | None) -> str | None:
    """A short written-out date next to the headline (the byline's dateline).

    Runs from a few before the headline (or the content start) to 15 after it are searched;
    the closest wins, and "Updated ..." dates only when no other is there.
    """
    if not len(page.seg_text):
        return None
    if head is not None:
        runs = page.subtree_runs(head)
        first, last = (int(runs[0]), int(runs[-1])) if len(runs) else (0, 0)
    elif keep is not None and np.asarray(keep).any():
        kept = np.flatnonzero(np.asarray(keep, dtype=bool)[page.seg_owner])
        if not len(kept):
            return None
        first = last = int(kept[0])
    else:
        return None
    found: list[tuple[bool, int, str]] = []
    for k in range(max(0, first - 8), min(len(page.seg_text), last + 16)):
        text = page.seg_text[k]
        if len(text) > 80:
            continue
        value = text_date(text)
        if value:
            distance = first - k if k < first else k - last
            found.append((bool(_UPDATED.search(text)), distance, value))
    return min(found)[2] if found else None


# ----------------------------------------------------------------------------------------------
# Language, canonical URL, site name

# Detection (py3langid) reads this many characters of the content: its cost grows with them.
LANGUAGE_SAMPLE_CHARS = 2000
# With no declared language, the detected one is taken at this probability or above.
DETECTED_MIN_PROBABILITY = 0.9
# A declared language is replaced by the detected one only when the text is this long and the
# detection this sure: a page's lang attribute is mostly right, and wrong mostly because a
# template says "en" over text in another language.
OVERRIDE_MIN_CHARS = 300
OVERRIDE_MIN_PROBABILITY = 0.999
# Languages a detector confuses: where the declared one is among them, it stands.
_CLOSE_LANGUAGES = ({"no", "nb", "nn", "da"}, {"id", "ms"}, {"hr", "bs", "sr", "sh"},
                    {"zh", "wuu", "yue"}, {"cs", "sk"}, {"gl", "pt", "es"}, {"ca", "es"})
_OLD_CODES = {"in": "id", "iw": "he", "ji": "yi", "jw": "jv"}  # and "wuu" (Wu) reads as "zh"


def language(page: PageStructure, ld: _LinkedData | None = None, keep=None,
             detect: bool = True) -> str | None:
    """The declared language (``<html lang>``, else ``content-language``, ``dc.language``,
    ``og:locale``, JSON-LD ``inLanguage``), checked against the language detected in the text
    (the content's runs when ``keep`` is given, else the page's): with none declared the
    detected one (at ``DETECTED_MIN_PROBABILITY``), and a declared one the text plainly
    contradicts (``OVERRIDE_*``, not a close language) gives way to the detected one.
    ``detect=False``: the declared language alone."""
    ld = ld or linked_data(page)
    declared = None
    for value in (page.lang, page.meta.get("content-language"), page.meta.get("dc.language"),
                  page.meta.get("og:locale"), _text_value(ld.field("inLanguage"))):
        declared = _language_code(value)
        if declared:
            break
    if not detect:
        return declared
    sample = _text_sample(page, keep)
    if not sample or declared is not None and len(sample) < OVERRIDE_MIN_CHARS:
        return declared  # (too short a text to override a declared language)
    found, probability = detect_language(sample)
    if not found:
        return declared
    if declared is None:
        return found if probability >= DETECTED_MIN_PROBABILITY else None
    primary = declared.split("-")[0]
    if found != primary and probability >= OVERRIDE_MIN_PROBABILITY \
            and len(sample) >= OVERRIDE_MIN_CHARS \
            and not any(found in group and primary in group for group in _CLOSE_LANGUAGES):
        return found
    return declared


def _has_letters(text: str, count: int) -> bool:
    """Whether ``text`` holds at least ``count`` letters (stops reading at the count: the
    sample is up to ``LANGUAGE_SAMPLE_CHARS`` long and usually passes in its first line)."""
    for c in text:
        if c.isalpha():
            count -= 1
            if count <= 0:
                return True
    return count <= 0


def _text_sample(page: PageStructure, keep=None) -> str:
    """Up to ``LANGUAGE_SAMPLE_CHARS`` of the content's text (the whole page's when ``keep``
    is None or keeps under 50 characters)."""
    runs: list[int] = []
    if keep is not None and len(page.seg_text):
        runs = np.flatnonzero(np.asarray(keep, dtype=bool)[page.seg_owner]).tolist()
    for candidate in (runs, range(len(page.seg_text))):
        parts, size = [], 0
        for k in candidate:
            parts.append(page.seg_text[k])
            size += len(page.seg_text[k]) + 1
            if size >= LANGUAGE_SAMPLE_CHARS:
                break
        text = " ".join(parts)[:LANGUAGE_SAMPLE_CHARS]
        if _has_letters(text, 50):
            return text
    return ""


_IDENTIFIER = None


def detect_language(text: str) -> tuple[str | None, float]:
    """``(ISO 639 code, probability)`` of ``text`` by py3langid (its model loads on first
    use, see ``language_model``); ``(None, 0.0)`` without letters."""
    global _IDENTIFIER
    if not any(c.isalpha() for c in text):
        return None, 0.0
    if _IDENTIFIER is None:
        from scrapy_grownup.output.language_model import load_identifier

        _IDENTIFIER = load_identifier()
    ranked = _IDENTIFIER.rank(text)
    code = ranked[0][0]
    group = next((g for g in _CLOSE_LANGUAGES if code in g), {code})
    # close languages share their probability ("zh" 0.6 + "wuu" 0.4 is sure of Chinese)
    probability = sum(p for c, p in ranked[:8] if c in group)
    code = _OLD_CODES.get(code, code)
    return ("zh" if code == "wuu" else code), float(probability)


def _language_code(value) -> str | None:
    """``en_us`` -> ``en-US``; anything that is not a BCP 47-ish tag -> ``None``."""
    if not value or not isinstance(value, str):
        return None
    value = value.split(",")[0].strip().replace("_", "-")
    if not re.fullmatch(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*", value):
        return None
    parts = value.split("-")
    out = [_OLD_CODES.get(parts[0].lower(), parts[0].lower())]
    for part in parts[1:]:
        out.append(part.upper() if len(part) == 2 else part.title() if len(part) == 4 else part)
    return "-".join(out)


def base_url(page: PageStructure) -> str | None:
    """The URL relative links resolve against: ``<base href>`` (itself resolved), else the URL
    (found once per page)."""
    return page_memo.memo(page, "base_url", lambda: (_base_url(page),))[0]


def _base_url(page: PageStructure) -> str | None:
    for i in page_memo.attribute_nodes(page, "href"):
        values = page.attrs[i]
        if page.tags[i] == "base" and values.get("href"):
            return join_url(page.url, values["href"]) or page.url  # a bad href is ignored
    return page.url


def canonical_url(page: PageStructure, ld: _LinkedData | None = None) -> str | None:
    """``<link rel=canonical>``, else ``og:url``, else the JSON-LD ``url``; absolute."""
    ld = ld or linked_data(page)
    attrs = page.attrs
    candidates = [attrs[i].get("href") for i in sorted(page_memo.attribute_nodes(page, "rel"))
                  if page.tags[i] == "link"
                  and "canonical" in attrs[i].get("rel", "").lower().split()]
    candidates += [page.meta.get("og:url"), _text_value(ld.field("url"))]
    entity = ld.field("mainEntityOfPage", objects=(ld.article,)) if ld.article else None
    if isinstance(entity, dict):
        entity = entity.get("@id") or entity.get("url")
    candidates.append(entity if isinstance(entity, str) else None)
    base = base_url(page) or ""
    for href in candidates:
        href = _clean(href)
        if href and not href.startswith(("javascript:", "#", "data:")):
            absolute = join_url(base, href)
            if absolute and absolute.startswith(("http://", "https://")):
                return absolute
    return None


def site_name(page: PageStructure, ld: _LinkedData | None = None) -> str | None:
    """``og:site_name``, else the JSON-LD publisher or web site name, else ``application-name``."""
    ld = ld or linked_data(page)
    publisher = ld.resolve(ld.field("publisher")) if ld.objects else None
    for value in (page.meta.get("og:site_name"), _text_value(publisher),
                  _text_value(ld.website.get("name")) if ld.website else "",
                  page.meta.get("application-name"), page.meta.get("apple-mobile-web-app-title")):
        value = _clean(value)
        if value and len(value) <= 100:
            return value
    return None


# ----------------------------------------------------------------------------------------------
# Description, main image, modification date, tags and categories

DESCRIPTION_META = ("og:description", "description", "twitter:description", "dc.description",
                    "dcterms.description", "dcterms.abstract", "citation_abstract")
_TAG = re.compile(r"<[^<>]{0,2000}>")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")


def description(page: PageStructure, ld: _LinkedData | None = None) -> str | None:
    """The page's own summary: ``og:description``, else the ``description`` meta tag,
    ``twitter:description``, Dublin Core, then JSON-LD ``description`` (the article's, then
    the web page's); entities decoded, tags and extra whitespace dropped. (``og:description``
    first: on the fundus pages it matches the publisher's lead more often than JSON-LD's,
    72.6% against 66.7%, see docs/research/metadata.md.)"""
    ld = ld or linked_data(page)
    for value in (*(page.meta.get(k) for k in DESCRIPTION_META), ld.field("description")):
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str) and v.strip()), None)
        if not isinstance(value, str):
            continue
        text = _clean(value, unescape=True)
        if _ENTITY.search(text):  # escaped twice ("Here&amp;#x27;s")
            text = _clean(text, unescape=True)
        if "<" in text:  # "<p>Summary</p>" in JSON-LD
            text = _clean(_TAG.sub(" ", text))
        if text:
            return text
    return None


IMAGE_META = ("og:image", "og:image:url", "og:image:secure_url", "twitter:image",
              "twitter:image:src")


def main_image(page: PageStructure, ld: _LinkedData | None = None) -> str | None:
    """The image the page names as its own: ``og:image``, ``twitter:image``, JSON-LD
    ``image`` / ``thumbnailUrl`` (the article's, then the web page's ``primaryImageOfPage``),
    microdata ``image``, ``<link rel=image_src>``; absolute, http(s) only. ``None`` when the
    page names none (the extractor then takes the first content image)."""
    from scrapy_grownup.output.images import safe_url

    ld = ld or linked_data(page)
    base = base_url(page)
    candidates: list = [page.meta.get(k) for k in IMAGE_META]
    candidates.append(ld.field("image", "thumbnailUrl"))
    if ld.webpage is not None:
        candidates.append(ld.webpage.get("primaryImageOfPage"))
    candidates.append(page.meta.get("image"))  # <meta itemprop="image" content="...">
    attrs = page.attrs
    candidates += [attrs[i].get("href") for i in sorted(page_memo.attribute_nodes(page, "rel"))
                   if page.tags[i] == "link" and "image_src" in attrs[i].get("rel", "").lower()]
    for value in candidates:
        url = safe_url(base, _image_value(ld, value))
        if url:
            return url
    return None


def _image_value(ld: _LinkedData, value, depth: int = 0) -> str | None:
    """A JSON-LD image value as a URL string: a string, an ``ImageObject`` (``url`` /
    ``contentUrl``; an ``@id`` reference resolved first), the first of a list that has one."""
    if depth > 3:
        return None
    if isinstance(value, list):
        for item in value[:10]:
            found = _image_value(ld, item, depth + 1)
            if found:
                return found
        return None
    if isinstance(value, dict):
        value = ld.resolve(value)  # an "@id" ("https://site/#primaryimage") names, not links
        for key in ("url", "contentUrl"):
            found = _image_value(ld, value.get(key), depth + 1)
            if found:
                return found
        return None
    return (_clean(value, unescape=True) or None) if isinstance(value, str) else None


MODIFIED_META = ("article:modified_time", "og:article:modified_time", "article:modified",
                 "og:updated_time", "datemodified", "dc.date.modified", "dcterms.modified",
                 "modified", "last-modified", "lastmod", "revised", "parsely-updated",
                 "date_modified", "updated_time")
_MODIFIED_KEY = re.compile(r"modif|updated", re.IGNORECASE)


def date_modified(page: PageStructure, ld: _LinkedData | None = None) -> str | None:
    """The date the page says it was last modified, ISO 8601 as ``published``: JSON-LD
    ``dateModified``, meta tags (``article:modified_time``, ``og:updated_time``...), microdata
    ``dateModified``. ``None`` where the page declares none (a visible "Updated ..." line is
    not read)."""
    ld = ld or linked_data(page)
    other_meta = [v for k, v in page.meta.items()
                  if k not in MODIFIED_META and _MODIFIED_KEY.search(k)]
    found = _first_date((ld.field("dateModified"), *(page.meta.get(k) for k in MODIFIED_META),
                         *other_meta))
    if found:
        return found
    for i in sorted(page_memo.attribute_nodes(page, "itemprop")):
        values = page.attrs[i]
        if values.get("itemprop") == "dateModified":
            found = normalize_date(values.get("content") or values.get("datetime")
                                   or node_full_text(page, i))
            if found:
                return found
    return None


# The most tags (and categories) kept, and the longest one: a keywords field of a thousand
# words is search-engine bait, not the page's tags.
MAX_TAGS = 50
MAX_TAG_CHARS = 100
TAG_META = ("article:tag", "og:article:tag", "parsely-tags", "sailthru.tags", "news_keywords",
            "keywords")
CATEGORY_META = ("article:section", "og:article:section", "articlesection", "parsely-section",
                 "category", "section")


def tags(page: PageStructure, ld: _LinkedData | None = None) -> list[str]:
    """The page's declared tags, from the first source that has any: ``article:tag`` (one
    per tag), JSON-LD ``keywords`` (a list, or one comma-separated string), ``parsely-tags``,
    ``news_keywords``, the ``keywords`` meta tag, links marked ``rel="tag"``. In order, each
    once (case aside); key-value pairs ("locale: US"), identifiers and prose are left out."""
    ld = ld or linked_data(page)
    sources = [(page.meta.get("article:tag"), True), (page.meta.get("og:article:tag"), True),
               (ld.field("keywords", objects=(ld.article,)) if ld.article else None, False),
               *((page.meta.get(k), True) for k in TAG_META[2:]),
               (ld.field("keywords", objects=(ld.webpage,)) if ld.webpage else None, False),
               (_rel_links(page, "tag", "category"), False)]
    for value, meta in sources:
        found = _terms(value, meta)
        if found:
            return found
    return []


def categories(page: PageStructure, ld: _LinkedData | None = None) -> list[str]:
    """The page's declared sections: ``article:section``, JSON-LD ``articleSection``,
    microdata ``articleSection``, ``parsely-section``, a ``category`` meta tag, links marked
    ``rel="category"``; the first source that has any."""
    ld = ld or linked_data(page)
    sources = [(page.meta.get("article:section"), True),
               (page.meta.get("og:article:section"), True), (ld.field("articleSection"), False),
               *((page.meta.get(k), True) for k in CATEGORY_META[2:]),
               (_rel_links(page, "category"), False)]
    for value, meta in sources:
        found = _terms(value, meta)
        if found:
            return found
    return []


def _rel_links(page: PageStructure, word: str, unless: str | None = None) -> list[str]:
    """The texts of the links whose ``rel`` names ``word`` (and not ``unless``): WordPress
    marks a post's tags ``rel="tag"`` and its categories ``rel="category tag"``."""
    out = []
    for i in page_memo.attribute_nodes(page, "rel"):
        rel = page.attrs[i].get("rel")
        if rel and page.tags[i] == "a":
            words = rel.lower().split()
            if word in words and (unless is None or unless not in words):
                out.append(node_full_text(page, i))
                if len(out) >= MAX_TAGS:
                    break
    return out


# "locale: US", "NLP Category: General": a key and its value, not a tag
_KEY_VALUE = re.compile(r"^[^\W\d][\w .-]{0,30}:\s")
# no letters, a UUID, a host name ("nationalpost.com")
_NOT_A_TERM = re.compile(r"^[\W\d_]*$|^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-|"
                         r"^[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|info|io|co|news|tv)$",
                         re.IGNORECASE)
# a sentence's end and the next one's start, in a value long enough to be prose
_SENTENCE = re.compile(r"[^\W\d_]{3}[.!?] +[A-Z][a-z]")
PROSE_MIN_CHARS = 120


def _terms(value, meta: bool = True) -> list[str]:
    """Tags from a meta value (``meta``: parts joined with "; " by ``dom``, each may be
    comma-separated) or a JSON-LD / link value (a list of strings or ``{"name"}`` objects, or
    one comma-separated string, entities not yet decoded). A value that reads as prose (a
    sentence end inside it) gives none."""
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    parts: list[str] = []
    for item in items[:MAX_TAGS * 4]:
        if isinstance(item, dict):
            item = item.get("name") or item.get("@value")
        if not isinstance(item, str):
            continue
        if not meta and "&" in item:
            item = html.unescape(item)
        if len(item) >= PROSE_MIN_CHARS and _SENTENCE.search(item):
            continue
        pieces = item.split("; ") if meta and "; " in item else [item]
        for piece in pieces:
            parts += piece.split(",") if "," in piece else [piece]
    out, seen = [], set()
    for part in parts:
        term = _clean(part, unescape=True).strip(" ;,#|")
        key = term.casefold()
        if not term or len(term) > MAX_TAG_CHARS or key in seen or _KEY_VALUE.match(term) \
                or _NOT_A_TERM.match(term):
            continue
        seen.add(key)
        out.append(term)
        if len(out) >= MAX_TAGS:
            break
    return out
