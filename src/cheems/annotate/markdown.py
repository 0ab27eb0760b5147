"""Safe Markdown for the annotation pages: model responses rendered as HTML that cannot run anything.

A response is untrusted text (a model may have been prompted to write ``<script>``). The renderer
is markdown-it-py's CommonMark preset plus tables, with raw HTML switched off (it is shown as
text), and links and images limited to http, https and mailto: markdown-it's own check only
refuses ``javascript:``, ``vbscript:``, ``file:`` and non-image ``data:`` and lets relative links
through; here anything not starting with an allowed scheme is refused and stays literal text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

# Checked on the URL markdown-it has already normalised: entities decoded (``&#106;avascript:`` is
# ``javascript:``) and control characters and spaces percent-encoded (``java\tscript:`` has no scheme).
_ALLOWED_URL = re.compile(r"(?:https?://|mailto:)", re.IGNORECASE)


class _SafeMarkdown(MarkdownIt):
    def validateLink(self, url: str) -> bool:  # markdown-it's name
        """Only absolute http(s) and mailto URLs become links or images."""
        return _ALLOWED_URL.match(url) is not None


def _link_open(renderer, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    # A link opens in a new tab, so following it never leaves an unsaved annotation; without opener/referrer.
    tokens[idx].attrSet("target", "_blank")
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    return cast("str", renderer.renderToken(tokens, idx, options, env))


def _image(renderer, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    # An image from a response's URL must not tell its host which page (and task) it was shown on.
    tokens[idx].attrSet("referrerpolicy", "no-referrer")
    return cast("str", renderer.image(tokens, idx, options, env))


_md = _SafeMarkdown("commonmark", {"html": False, "breaks": True}).enable("table")
_md.add_render_rule("link_open", _link_open)
_md.add_render_rule("image", _image)


def render(text: str) -> Markup:
    """``text`` (Markdown) as HTML safe to put in a page: no raw HTML, links only to http(s) and mailto."""
    return Markup(_md.render(text))
