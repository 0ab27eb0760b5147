"""Safe Markdown of the annotation pages: raw HTML shown as text, only http(s)/mailto links, code and tables kept."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from markupsafe import Markup

from cheems.annotate.markdown import render


class _Elements(HTMLParser):
    """Every start tag of a fragment with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.found


HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<svg onload=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript:alert(1))",
    "[x](java&#x09;script:alert(1))",
    "[x](javascript&colon;alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](data:image/png;base64,iVBORw0KGgo=)",
    "![x](javascript:alert(1))",
    "<javascript:alert(1)>",
    "<JAVASCRIPT:alert(1)>",
    "[x][r]\n\n[r]: javascript:alert(1)",
    "[x](/logout)",
    "[x](//evil.example/)",
    '[x](https://a.example/"onmouseover="alert(1))',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_markdown_renders_no_script_handler_or_unsafe_url(text):
    html = render(text)
    for tag, attrs in elements(html):
        assert tag in {"p", "a", "img", "br"}, (text, html)
        assert not [a for a in attrs if a.startswith("on")], (text, html)
        for url_attr in ("href", "src"):
            if url_attr in attrs:
                assert attrs[url_attr].startswith(("https://", "http://", "mailto:")), (text, html)


def test_raw_html_is_shown_as_text():
    assert render("<img src=x onerror=alert(1)>") == "<p>&lt;img src=x onerror=alert(1)&gt;</p>\n"
    assert render("<script>alert(1)</script>") == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"


def test_refused_links_stay_literal_text():
    assert render("[x](JaVaScRiPt:alert(1))") == "<p>[x](JaVaScRiPt:alert(1))</p>\n"
    # the entity is decoded before the check, so it is refused like the plain word
    assert render("[x](&#106;avascript:alert(1))") == "<p>[x](javascript:alert(1))</p>\n"
    assert render("<javascript:alert(1)>") == "<p>&lt;javascript:alert(1)&gt;</p>\n"
    assert render("[x](/logout)") == "<p>[x](/logout)</p>\n"


def test_allowed_links_open_in_a_new_tab_without_referrer():
    assert render("[文档](https://example.com/a?b=1&c=2)") == (
        '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">'
        "文档</a></p>\n"
    )
    assert render("<a@example.com>") == (
        '<p><a href="mailto:a@example.com" target="_blank" rel="noopener noreferrer nofollow">a@example.com</a></p>\n'
    )
    assert render("![图](HTTP://example.com/a.png)") == (
        '<p><img src="HTTP://example.com/a.png" alt="图" referrerpolicy="no-referrer" /></p>\n'
    )
    # a quote cannot break out of the attribute: it is percent-encoded
    assert 'href="https://a.example/%22onmouseover=%22alert(1)"' in render(
        '[x](https://a.example/"onmouseover="alert(1))'
    )


def test_code_blocks_tables_and_line_breaks_render():
    assert render('```python\nprint("<b>")\n```') == (
        '<pre><code class="language-python">print(&quot;&lt;b&gt;&quot;)\n</code></pre>\n'
    )
    assert render("| 甲 | 乙 |\n|---|---|\n| 1 | 2 |") == (
        "<table>\n<thead>\n<tr>\n<th>甲</th>\n<th>乙</th>\n</tr>\n</thead>\n"
        "<tbody>\n<tr>\n<td>1</td>\n<td>2</td>\n</tr>\n</tbody>\n</table>\n"
    )
    assert render("第一行\n第二行") == "<p>第一行<br />\n第二行</p>\n"


def test_render_returns_markup_that_jinja_does_not_escape_again():
    out = render("**粗**")
    assert isinstance(out, Markup)
    assert out == "<p><strong>粗</strong></p>\n"
