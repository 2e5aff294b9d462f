"""Visibility (``page/visibility.py``): markup-hidden elements are flagged, or removed with
``visibility=True``."""

from scrapy_grownup.page.dom import parse_page


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
