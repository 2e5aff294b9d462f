"""A generated sample news site: article pages wrapped in realistic boilerplate.

Pages come from templates filled with the stories below; layouts vary per section (class names,
nesting, sidebars, comments) so that an extractor cannot key on one fixed wrapper. Each story
page is what a news site serves: a headline, a byline with its date, six paragraphs, and the
head a publisher writes (``og:type`` article, author and publication date, schema.org
``NewsArticle`` JSON-LD), so the page-type classifier reads it as the article it is. Used by
``make demo``, the crawl tests and ``benchmarks/crawl.py``.
"""

from __future__ import annotations

import html
import json
import random
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STORIES = [
    ("City council approves new bike lanes downtown",
     ["The city council voted seven to two on Tuesday night to approve a network of protected "
      "bike lanes through the downtown core, ending a debate that has lasted nearly three years.",
      "Supporters packed the chamber wearing green scarves, and several parents described "
      "riding with children on streets where delivery trucks routinely block the curb.",
      "Opponents, mostly shop owners along Market Street, argued that removing forty parking "
      "spaces would drive customers to suburban malls. The council added a loading-zone "
      "study to the plan as a compromise.",
      "Construction is expected to begin in the spring and to cost about 4.2 million dollars, "
      "most of it covered by a state transportation grant awarded last year.",
      "\"This is about making the street work for everyone, not just for cars,\" said council "
      "member Priya Desai, who introduced the proposal. She pointed to a similar project across "
      "the river that cut injuries at its busiest crossing by a third.",
      "The transportation department will hold two open evenings at the public library next "
      "month, where residents can see the final designs and comment on where the new loading "
      "zones should go."]),
    ("Local bakery wins national bread competition",
     ["A family bakery on Elm Avenue took first prize at the national artisan bread "
      "competition this weekend, beating more than two hundred entries from across the country.",
      "The winning loaf, a rye sourdough with caraway and a crust baked dark, was judged on "
      "crumb, flavour and the skill of its scoring.",
      "Owner Maria Lindqvist said the starter came from her grandmother and has been fed "
      "every day for thirty-one years. She plans to use the prize money to hire two apprentices.",
      "The bakery opens at six in the morning and, on the strength of the news, sold out of "
      "rye before eight on Monday.",
      "Judges praised the loaf's even, open crumb and its balance of sourness and spice. "
      "\"You can taste the patience in it,\" one of them wrote on the score sheet, which now "
      "hangs framed beside the till.",
      "Lindqvist, who took over the bakery from her parents in 2011, said winning had not "
      "changed her plans: the ovens will still be lit at three in the morning, and every rye "
      "loaf will still be shaped by hand."]),
    ("Researchers track rare owls with tiny radio tags",
     ["Biologists at the state university have fitted twelve northern saw-whet owls with radio "
      "tags lighter than a paper clip, hoping to learn where the birds spend the winter.",
      "The owls, which are about the size of a soda can, are rarely seen because they hunt "
      "at night and roost in dense conifers during the day.",
      "Early data show that two of the birds travelled more than three hundred kilometres "
      "south in a single week, much farther than the team expected.",
      "The project relies on volunteers who drive rural roads with handheld receivers. "
      "Anyone interested in joining can attend a training evening at the nature centre.",
      "\"Every bird is telling us something we did not know a month ago,\" said Hannah "
      "Okafor, the ecologist who leads the study. The tags weigh less than two grams and fall "
      "off on their own after about ninety days.",
      "The team plans to publish its first results next autumn and hopes to tag another "
      "twenty owls next season, helped by a grant from the state wildlife fund."]),
    ("School district expands free breakfast program",
     ["Every elementary school in the district will serve free breakfast starting next month, "
      "the school board announced on Thursday after a pilot at four schools.",
      "Teachers at the pilot schools reported fewer visits to the nurse's office and better "
      "attendance during the first class period, according to a district survey.",
      "The program will be funded through a federal reimbursement scheme, and the district "
      "says no local tax increase is needed.",
      "Menus will include oatmeal, fruit, yoghurt and whole-grain muffins, with a hot option "
      "twice a week.",
      "\"A hungry child cannot concentrate on fractions,\" superintendent Laura Mendes told "
      "the board. Parents at the pilot schools said mornings at home had become calmer, with "
      "fewer breakfasts eaten in a rush.",
      "Families do not need to apply. Breakfast will be served in classrooms during the first "
      "fifteen minutes of the day, so that pupils who arrive by bus do not miss out."]),
    ("Heavy rain floods river trail, closes footbridge",
     ["Two days of heavy rain pushed the river over its banks on Sunday, flooding the lower "
      "section of the river trail and forcing the closure of the wooden footbridge at Mill Park.",
      "Park staff said the water rose nearly a metre overnight and carried branches and debris "
      "against the bridge supports.",
      "Engineers will inspect the bridge once the water recedes. Until then, walkers are "
      "asked to use the upper trail, which remains open.",
      "The weather service expects drier conditions by Wednesday, though another storm "
      "system could arrive at the end of the week.",
      "Residents of the houses along Mill Lane spent Monday morning clearing mud from their "
      "gardens. \"We have lived here twenty years and never seen it this high,\" said one "
      "homeowner, pointing to a line of silt on her fence.",
      "The city has opened a hotline for flood damage reports and is handing out free "
      "sandbags at the public works yard on Station Road until the end of the week."]),
    ("Volunteers restore historic lighthouse lens",
     ["After eighteen months of careful work, a team of volunteers has finished restoring the "
      "glass lens of the Point Harbor lighthouse, which had been cracked in a storm in 1998.",
      "The lens, made in France in 1872, is built from more than three hundred prisms held in "
      "a brass frame. Each prism was cleaned, and eleven broken pieces were recast.",
      "The lighthouse museum will display the lens in its original tower from next Saturday, "
      "with guided tours every hour.",
      "Organisers hope the project will encourage younger residents to take an interest in the "
      "town's maritime history.",
      "\"Some of the prisms had not been cleaned since the lamp was electrified,\" said "
      "project leader Tomas Berg, a retired engineer. The team used archive photographs to "
      "match the recast pieces to the original curvature.",
      "The work was paid for by donations from more than four hundred residents and a grant "
      "from the maritime heritage trust, which covered the cost of the specialist glass."]),
]
SECTIONS = ["local", "science", "education", "weather", "culture"]
COMMENTS = ["Great news, long overdue.", "I disagree with this decision entirely.",
            "Does anyone know when this starts?", "Thanks for covering this story!"]

LAYOUTS = [
    # (article wrapper class, text container tag, nav class, sidebar class)
    ("article-body", "div", "main-nav", "sidebar most-read"),
    ("story__content", "section", "topNav", "rail rail--related"),
    ("post-entry", "article", "menu primary-menu", "widget-area"),
]


def _nav(cls: str) -> str:
    links = "".join(f'<li><a href="/{s}/index.html">{s.title()}</a></li>' for s in SECTIONS)
    return (f'<header class="site-header"><a class="logo" href="/index.html">The Daily Sample'
            f'</a><nav class="{cls}"><ul>{links}</ul></nav>'
            '<form class="search"><input name="q" placeholder="Search"></form></header>')


def _sidebar(cls: str, rng: random.Random, exclude: int) -> str:
    picks = [i for i in range(len(STORIES)) if i != exclude]
    rng.shuffle(picks)
    items = "".join(f'<li><a href="/story-{i}.html">{html.escape(STORIES[i][0])}</a></li>'
                    for i in picks[:4])
    return f'<aside class="{cls}"><h3>Most read</h3><ol>{items}</ol></aside>'


def _footer() -> str:
    return ('<footer><p>&copy; 2026 The Daily Sample. All rights reserved.</p>'
            '<ul class="footer-links"><li><a href="/about.html">About us</a></li>'
            '<li><a href="/privacy.html">Privacy policy</a></li></ul>'
            '<div class="cookie-banner">We use cookies to improve your experience. '
            '<button>Accept</button></div></footer>')


def article_page(index: int, variant: int = 0) -> tuple[str, str]:
    """Return ``(html, gold_text)`` for a story in a layout chosen by ``variant``."""
    rng = random.Random(index * 31 + variant)
    title, paragraphs = STORIES[index % len(STORIES)]
    wrapper, container, nav, side = LAYOUTS[variant % len(LAYOUTS)]
    section = SECTIONS[index % len(SECTIONS)]
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    comments = "".join(f'<li class="comment"><b>reader{k}</b> {html.escape(c)}</li>'
                       for k, c in enumerate(rng.sample(COMMENTS, 2)))
    date = f"2026-03-0{1 + index % 9}"
    schema = json.dumps({"@context": "https://schema.org", "@type": "NewsArticle",
                         "headline": title, "datePublished": date, "articleSection":
                         section.title(), "author": {"@type": "Person", "name": "Staff Reporter"},
                         "publisher": {"@type": "Organization", "name": "The Daily Sample"}}
                        ).replace("</", "<\\/")  # no "</script>" inside the script
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} | The Daily Sample</title>
<meta property="og:type" content="article">
<meta property="og:title" content="{html.escape(title)}">
<meta property="og:site_name" content="The Daily Sample">
<meta name="author" content="Staff Reporter">
<meta property="article:published_time" content="{date}">
<meta property="article:section" content="{section.title()}">
<script type="application/ld+json">{schema}</script>
<script>window.dataLayer = [];</script><style>.sidebar{{float:right}}</style></head>
<body>{_nav(nav)}
<main class="layout-{variant}"><div class="breadcrumbs"><a href="/index.html">Home</a> &rsaquo;
<a href="/{section}/index.html">{section.title()}</a></div>
<{container} class="{wrapper}"><h1 class="headline">{html.escape(title)}</h1>
<div class="byline">By Staff Reporter &middot; <time datetime="{date}">March
{1 + index % 9}, 2026</time></div>{body}</{container}>
<section class="comments"><h4>Comments</h4><ul>{comments}</ul></section>
{_sidebar(side, rng, index % len(STORIES))}</main>{_footer()}</body></html>"""
    gold = "\n".join([title] + paragraphs)
    return page, gold


def index_page(count: int) -> str:
    items = "".join(f'<li><a href="/story-{i}.html">{html.escape(STORIES[i % len(STORIES)][0])}'
                    f"</a></li>" for i in range(count))
    return (f"<!DOCTYPE html><html><head><title>The Daily Sample</title></head><body>"
            f"{_nav('main-nav')}<main><h1>Latest news</h1><ul class='story-list'>{items}</ul>"
            f"<p><a href='/about.html'>About</a></p></main>{_footer()}</body></html>")


def write_site(root: Path, count: int = 12) -> list[Path]:
    """Write ``count`` article pages, an index and an about page; returns the article paths."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        page, _ = article_page(i, variant=i // len(STORIES))
        path = root / f"story-{i}.html"
        path.write_text(page, encoding="utf-8")
        paths.append(path)
    (root / "index.html").write_text(index_page(count), encoding="utf-8")
    (root / "about.html").write_text(
        "<html><head><title>About</title></head><body>" + _nav("main-nav") +
        "<main><h1>About us</h1><p>The Daily Sample is a made-up newspaper used to demonstrate "
        "scrapy_grownup.</p></main>" + _footer() + "</body></html>", encoding="utf-8")
    return paths


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test and demo output readable
        pass


def serve(root: Path, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``root`` on loopback in a daemon thread; returns the server and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
