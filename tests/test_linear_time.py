"""No quadratic paths on hostile markup, and caches that stay small (issue 15).

The inline-style and Markdown regexes used to rescan a long run of letters or whitespace from
each of its characters: a 40,000-letter ``style`` took 14 s, 40,000 spaces in ``<pre>`` 10 s,
a 40,000-digit ``font-size`` 58 s. The rewritten ones must give the same results (checked
against the former patterns) and handle megabyte-sized values at once; the timing check runs
in a child process with a timeout, so a regression fails in a minute instead of hanging.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from hypothesis import given, settings, strategies as st

from scrapy_grownup.page import fonts
from scrapy_grownup.output import markdown

# The former patterns, as references for the results.
OLD_DECL = re.compile(r"([a-zA-Z-]+)\s*:\s*([^;]+)")
OLD_LENGTH = re.compile(r"^([0-9]*\.?[0-9]+)\s*(px|pt|pc|in|cm|mm|em|rem|%|ex|ch)?$")
OLD_GAP = re.compile(r"[ \n\x00\x01\x02]*[\x00\x01\x02][ \n\x00\x01\x02]*")
OLD_EDGES = re.compile(r"^([ \n\x00\x01\x02]*)(.*?)([ \n\x00\x01\x02]*)$", re.S)

CSS = st.text(alphabet=st.sampled_from(list("aZ-:; \t\n9.5%px!é")), max_size=60)
GAPS = st.text(alphabet=st.sampled_from(list(" \n\x00\x01\x02ab`")), max_size=60)


@settings(max_examples=300, derandomize=True, database=None)
@given(CSS)
def test_style_patterns_match_the_former_ones(text):
    assert fonts._DECL.findall(text) == OLD_DECL.findall(text)
    old = OLD_LENGTH.match(text)
    new = fonts._LENGTH.fullmatch(text)
    assert (old and old.groups()) == (new and new.groups())


@settings(max_examples=300, derandomize=True, database=None)
@given(GAPS)
def test_markdown_patterns_match_the_former_ones(text):
    assert markdown._GAP.sub("|", text) == OLD_GAP.sub("|", text)
    assert markdown._edges(text) == OLD_EDGES.match(text).groups()
    fence = "```"
    while fence in text:
        fence += "`"
    assert "`" * max(3, markdown._longest_run(text, "`") + 1) == fence


# Each case: a value of SIZE characters where the former code took minutes (seconds at 40,000).
CHILD = r"""
import json, sys, time
import numpy as np
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.page.fonts import font_features
from scrapy_grownup.output.markdown import to_markdown

SIZE = int(sys.argv[1])
out = {}

def timed(name, fn, *args):
    start = time.perf_counter()
    fn(*args)
    out[name] = time.perf_counter() - start

for name, style in (("style_letters", "a" * SIZE), ("style_dashes", "-" * SIZE),
                    ("style_spaces", "a" + " " * SIZE), ("font_size_digits",
                    "font-size:" + "9" * SIZE + "x"), ("font_shorthand", "font:" + "9" * SIZE)):
    timed(name, font_features, "b", style, None)
for name, inner in (("pre_spaces", " " * SIZE), ("pre_newlines", "\n" * SIZE),
                    ("pre_space_newline", " \n" * (SIZE // 2)), ("pre_backticks", "`" * SIZE),
                    ("pre_tabs", "\t" * (SIZE // 4))):
    page = parse_page(("<html><body><p>before <code>a" + inner[:SIZE // 10] + "b</code></p><pre>x"
                       + inner + "y</pre><p><a href='/x'> " + inner[:SIZE // 10]
                       + " link</a></p></body></html>").encode())
    timed(name, to_markdown, page, np.ones(page.num_nodes, bool))
from scrapy_grownup.graph.signals import page_signals
for name, text in (("signals_digits", "9" * SIZE), ("signals_dotted", "1." * (SIZE // 2)),
                   ("signals_month", "jan" + "a" * SIZE), ("signals_dates", "2020-" * (SIZE // 5))):
    page = parse_page(("<html><body><p>" + text + " eur</p></body></html>").encode(),
                      positions=False)
    timed(name, page_signals, page)
print(json.dumps(out))
"""


def test_megabyte_values_take_milliseconds():
    size = 200_000  # the former code: minutes for each case
    done = subprocess.run([sys.executable, "-c", CHILD, str(size)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seconds = json.loads(done.stdout)
    assert len(seconds) == 14
    # Each takes a few milliseconds here; 2 s leaves room for any load, and is still ~100x
    # below what the quadratic patterns took at this size.
    assert max(seconds.values()) < 2.0, seconds


def test_long_styles_and_classes_are_not_cached():
    """A unique 100,000-character style or class on every element of many pages used to stay
    in the caches (16,384 and 65,536 entries of any size); values over ``MAX_CACHED_CHARS``
    are no longer kept, short ones still are."""
    from scrapy_grownup.page import attributes
    from scrapy_grownup.page.dom import parse_page

    fonts._cached_font_features.cache_clear()
    attributes._cached_words.cache_clear()
    for k in range(20):
        body = "".join(f'<b style="font-weight:bold;{k}-{j}:{"x" * 100_000}" '
                       f'class="c{k}-{j} {"y" * 100_000}">text</b>' for j in range(3))
        parse_page(f"<html><body>{body}</body></html>".encode(), positions=False)
    # the plain html, body and b entries (``dom._tag_info``), none per page
    assert fonts._cached_font_features.cache_info().currsize <= 3
    assert attributes._cached_words.cache_info().currsize == 0
    parse_page(b'<html><body><b style="font-weight:400" class="a-b">t</b></body></html>',
               positions=False)
    assert fonts._cached_font_features.cache_info().currsize >= 1
    assert attributes._cached_words.cache_info().currsize == 1
