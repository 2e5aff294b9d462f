"""Charset resolution: header, BOM, meta, detection; wrong declarations never crash."""

import codecs

import pytest

from scrapy_grownup.page.decoding import candidate_encodings, decode_html, looks_like_html, \
    resolve_encoding, sniff_binary
from scrapy_grownup.errors import NotHTMLError

CAFE_UTF8 = "<html><body><p>café naïve</p></body></html>".encode("utf-8")
CAFE_1252 = "<html><body><p>café naïve</p></body></html>".encode("cp1252")


def test_header_charset_wins_when_it_decodes():
    text, enc = decode_html(CAFE_1252, "text/html; charset=ISO-8859-1")
    assert enc == "cp1252" and "café naïve" in text


def test_bom_then_meta():
    body = codecs.BOM_UTF8 + CAFE_UTF8
    assert decode_html(body)[1] == "utf-8" and decode_html(body)[0].startswith("<html>")
    utf16 = "<p>héllo</p>".encode("utf-16-le")
    assert decode_html(codecs.BOM_UTF16_LE + utf16) == ("<p>héllo</p>", "utf-16-le")
    meta = b'<html><head><meta charset="windows-1252"></head><body>caf\xe9</body></html>'
    assert decode_html(meta) == (meta.decode("cp1252"), "cp1252")
    equiv = (b'<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
             + "привет".encode("koi8-r"))
    assert "привет" in decode_html(equiv)[0]


def test_order_header_bom_meta():
    body = codecs.BOM_UTF8 + b'<meta charset="iso-8859-1">x'
    assert candidate_encodings(body, "text/html; charset=utf-8") == ["utf-8", "cp1252"]
    assert candidate_encodings(body, None) == ["utf-8", "cp1252"]
    assert candidate_encodings(b'<meta charset="koi8-r">', "text/html; charset=latin1") == \
        ["cp1252", "koi8-r"]


@pytest.mark.parametrize("content_type,body,expected", [
    ("text/html; charset=utf-8", CAFE_1252, "café naïve"),  # header lies: bytes are cp1252
    ("text/html; charset=no-such-codec", CAFE_UTF8, "café naïve"),
    (None, b'<meta charset="utf-16"><p>caf\xc3\xa9</p>', "café"),  # meta can't be utf-16
    (None, b'<meta charset="bogus"><p>caf\xe9</p>', "café"),
    (None, CAFE_UTF8, "café naïve"),  # detection: utf-8
    (None, CAFE_1252, "café naïve"),  # detection: cp1252
])
def test_wrong_or_missing_declarations(content_type, body, expected):
    text, _ = decode_html(body, content_type)
    assert expected in text


def test_invalid_utf8_mostly_utf8_keeps_the_good_characters():
    body = ("<p>" + "ünïcödé " * 20 + "</p>").encode("utf-8") + b"\xff\xfe"
    text, enc = decode_html(body, "text/html; charset=utf-8")
    assert enc == "utf-8" and "ünïcödé" in text and "\ufffd" in text


def test_resolve_encoding_aliases():
    assert resolve_encoding("latin-1") == "cp1252"
    assert resolve_encoding(" UTF8 ") == "utf-8"
    assert resolve_encoding("x-unknown") is None
    assert resolve_encoding(None) is None


@pytest.mark.parametrize("body", [b"%PDF-1.7\n%...", b"\x89PNG\r\n\x1a\n\x00\x00",
                                  b"\x1f\x8b\x08\x00compressed", bytes(64)])
def test_binary_sniffing(body):
    with pytest.raises(NotHTMLError):
        sniff_binary(body)


@pytest.mark.parametrize("body", [b"Hello", b"plain text; a < b > c; <me@x.org>", b'{"a": "<p>"}',
                                  b"[1, 2]", bytes(range(256)) * 4,
                                  "plain".encode("utf-16")])
def test_text_and_json_without_markup_are_not_html(body):
    with pytest.raises(NotHTMLError):
        sniff_binary(body)


@pytest.mark.parametrize("body", [b"<p>Hello</p>", b"text then </p>", b"<br/>", b"<!-- c -->",
                                  b"<!DOCTYPE html>", b"<a\nhref='x'>x</a>", b"[<b>not json</b>]",
                                  "<p>x</p>".encode("utf-16"), b"<p>a\x00b\x01c</p>"])
def test_markup_is_html(body):
    sniff_binary(body)


def test_looks_like_html():
    assert looks_like_html(b"  <!DOCTYPE html><html>")
    assert looks_like_html(b"<div>fragment</div>")
    assert not looks_like_html(b'{"json": true}')


def test_utf16_declared_in_the_header_without_a_bom_is_html():
    """UTF-16 bytes without a BOM but with ``charset=utf-16le`` in the header were rejected as
    binary (their NUL bytes) before the charset was read."""
    body = "<html><body><p>Wide text, no byte-order mark.</p></body></html>".encode("utf-16-le")
    with pytest.raises(NotHTMLError):
        sniff_binary(body)  # undeclared, it is indistinguishable from binary data
    sniff_binary(body, "text/html; charset=utf-16le")
    sniff_binary(body.decode("utf-16-le").encode("utf-16-be"), b"text/html; charset=UTF-16BE")
    # Declared wide, but plain text or JSON: still not HTML.
    for text in ("plain words only", '{"a": "<p>"}'):
        with pytest.raises(NotHTMLError):
            sniff_binary(text.encode("utf-16-le"), "text/html; charset=utf-16le")
    # A lying header over UTF-8 markup is judged on the bytes, as before.
    sniff_binary(b"<p>Hello</p>", "text/html; charset=utf-16")


@pytest.mark.parametrize("text", ["Hello", "plain text; a < b > c", '{"a": "<p>"}', "[1, 2]"])
def test_str_bodies_are_sniffed_like_bytes(text):
    with pytest.raises(NotHTMLError):
        sniff_binary(text)
    sniff_binary("<p>" + text + "</p>")
