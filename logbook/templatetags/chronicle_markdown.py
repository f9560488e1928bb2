from django import template
from django.utils.safestring import SafeString

from logbook.markdown import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    """{{ entry.body|markdown }}: Markdown without raw HTML, sanitized."""
    return render_markdown(text)
