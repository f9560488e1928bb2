"""Hover templates are chart code, kept as markup by figure_text_escape; a name put into one
(run, rank section, host, root-cause group) must come through charts.hover_template, which
escapes it (issue 42, finding 7: a run name in the host page's rank-score chart and a
section name in the ranks heat map were live markup in Chromium)."""

from __future__ import annotations

import ast
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from logbook import charts as logbook_charts
from telemetry import charts, rank_charts
from telemetry.selectors.ranks import Heatmap, SpreadPoint

ROOT = Path(__file__).resolve().parents[2]
# A live link, a tag, and a Plotly variable a name could smuggle into a template.
MARKUP = '<a href="https://evil.example/">x</a><b>%{x}</b>'
_TEMPLATE_KEYS = {"hovertemplate", "texttemplate"}


def _template_values(tree: ast.AST) -> list[tuple[int, ast.expr]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found += [
                (value.lineno, value)
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and key.value in _TEMPLATE_KEYS
            ]
        elif isinstance(node, ast.Call):
            found += [
                (kw.value.lineno, kw.value) for kw in node.keywords if kw.arg in _TEMPLATE_KEYS
            ]
    return found


def _is_helper_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and (
        getattr(node.func, "id", None) == "hover_template"
        or getattr(node.func, "attr", None) == "hover_template"
    )


def test_every_hover_template_is_a_constant_or_built_by_hover_template():
    # A template written as an f-string or a concatenation puts a name in unescaped.
    offenders = []
    for app in ("telemetry", "logbook", "dashboard"):
        for path in sorted((ROOT / app).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for line, value in _template_values(tree):
                plain = isinstance(value, ast.Constant | ast.Name) or _is_helper_call(value)
                if not plain:
                    offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


def _strings(value: Any, key: str = "") -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(key, value)]
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _strings(v, k)]
    if isinstance(value, list | tuple):
        return [pair for item in value for pair in _strings(item, key)]
    return []


def _embedded(figure: Any) -> list[tuple[str, str]]:
    script = str(charts.charts_script([{"id": "c", "figure": charts.as_payload(figure)}]))
    body = re.fullmatch(r'<script id="charts-data" type="application/json">(.*)</script>', script)
    assert body is not None
    return _strings(json.loads(body.group(1)))


def _figures_naming(name: str) -> dict[str, Any]:
    """Every chart that shows a run, section, host or root-cause name, each named `name`."""
    moment = datetime(2026, 11, 20, tzinfo=UTC)
    heatmap = Heatmap(
        times=[moment], row_labels=["0"], values_s=[[0.5]], ranks=[[0]], hosts=[[name]],
        ranks_per_row=1, bucket_s=600,
    )  # fmt: skip
    spread = [SpreadPoint(1, 10, 0.1, 0.2, 0.3, 0.4, 0.5, 3, name)]
    scores = [{"run": name, "attempt": 1, "rank": 3, "time": moment, "score": 0.8}]
    breakdown = pd.DataFrame(
        {"component": [name], "group": [name], "count": [2], "percent": [100.0]}
    )
    return {
        "ranks heat map": rank_charts.heatmap_figure(heatmap, section=name),
        "rank spread": rank_charts.spread_figure(spread, section=name),
        "host rank scores": rank_charts.host_scores_figure(scores, threshold=0.9),
        "failures breakdown": logbook_charts.breakdown_figure(breakdown),
    }


def test_markup_in_a_name_reaches_no_chart_as_markup():
    for chart, figure in _figures_naming(MARKUP).items():
        strings = _embedded(figure)
        # then no string of the figure, template or not, keeps the name's tags
        live = [(key, text) for key, text in strings if "<a " in text or "<b>" in text]
        assert live == [], chart
        # and the name's %{x} is text in a template, not a variable Plotly would fill
        templates = [text for key, text in strings if key in _TEMPLATE_KEYS]
        named = [text for text in templates if "evil.example" in text]
        assert all("&#37;{x}" in text and "%{x}</b>" not in text for text in named), chart
    # The two charts of finding 7 do put the name in a template.
    heat = _embedded(_figures_naming(MARKUP)["ranks heat map"])
    scores = _embedded(_figures_naming(MARKUP)["host rank scores"])
    for strings in (heat, scores):
        assert any(key == "hovertemplate" and "&lt;a href" in text for key, text in strings)


def test_hover_template_escapes_only_the_names():
    template = charts.hover_template("$run<br>%{y:.3f}<extra></extra>", run="a<b>&%{x}")
    assert template == "a&lt;b&gt;&amp;&#37;{x}<br>%{y:.3f}<extra></extra>"
