"""Operator Markdown, rendered safely: raw HTML is escaped by the Markdown step, then the
output is sanitized with nh3 (Ammonia), so a `<script>`, an event handler or a
`javascript:` link never reaches the page as code."""

from __future__ import annotations

import markdown as markdown_lib
import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown.extensions import Extension

ALLOWED_TAGS = {
    "p", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "a", "h1", "h2", "h3",
    "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "hr", "br",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}}
ALLOWED_URL_SCHEMES = {"http", "https", "mailto"}


class _EscapeRawHtml(Extension):
    """Markdown passes raw HTML through by default; treat it as text instead."""

    def extendMarkdown(self, md: markdown_lib.Markdown) -> None:  # Markdown API name
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


def render_markdown(text: str) -> SafeString:
    html = markdown_lib.markdown(
        text or "", extensions=[_EscapeRawHtml(), "tables", "fenced_code", "sane_lists"]
    )
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=ALLOWED_URL_SCHEMES,
        link_rel="noopener noreferrer",
    )
    return mark_safe(clean)  # sanitized just above
