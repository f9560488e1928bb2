"""render_markdown reuses one converter per thread and caches by text: neither may carry
one text's state into another's rendering."""

from __future__ import annotations

import threading

from logbook.markdown import render_markdown


def test_a_reference_defined_in_one_text_does_not_link_in_the_next() -> None:
    first = render_markdown("See [runbook][rb].\n\n[rb]: https://wiki.example/runbook")
    second = render_markdown("See [runbook][rb] again.")
    assert 'href="https://wiki.example/runbook"' in first
    assert "href" not in second
    assert "[runbook][rb]" in second


def test_raw_html_stays_text_after_reuse() -> None:
    render_markdown("| a | b |\n|---|---|\n| 1 | 2 |")
    html = render_markdown("<script>alert(1)</script> and <b>bold</b>")
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html


def test_threads_render_their_own_texts() -> None:
    texts = [f"entry **{n}**\n\n- item {n}" for n in range(200)]
    results: dict[int, str] = {}

    def render(offset: int) -> None:
        for n in range(offset, len(texts), 4):
            results[n] = str(render_markdown.__wrapped__(texts[n]))

    threads = [threading.Thread(target=render, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for n, html in results.items():
        assert f"<strong>{n}</strong>" in html and f"<li>item {n}</li>" in html
