"""Static files as production and `make demo` serve them: hashed names, immutable caching
(ten years) and a compressed copy (issue 15: plotly.js was re-validated on every page load)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FETCH = """
import django, json
django.setup()
from django.templatetags.static import static
from django.test import Client
url = static("vendor/plotly-cartesian.min.js")
answer = Client().get(url, HTTP_ACCEPT_ENCODING="gzip")
print(json.dumps({"url": url, "status": answer.status_code,
                  "cache": answer.headers.get("Cache-Control", ""),
                  "encoding": answer.headers.get("Content-Encoding", "")}))
"""


def test_the_demo_serves_hashed_immutable_compressed_static_files(tmp_path: Path) -> None:
    # given the demo's settings (DEBUG on, STATIC_HASHED as config.demo sets it) and a collect
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env |= {"DEBUG": "1", "STATIC_HASHED": "1", "STATIC_ROOT": str(tmp_path)}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert collect.returncode == 0, collect.stderr

    # when plotly.js is asked for by the name the pages use
    fetch = subprocess.run(
        [sys.executable, "-c", FETCH], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert fetch.returncode == 0, fetch.stderr
    answer = json.loads(fetch.stdout.strip().splitlines()[-1])

    # then the name carries the content's hash, and the file comes compressed and cached for
    # ten years as immutable (a browser never asks again)
    assert answer["url"].startswith("/static/vendor/plotly-cartesian.min.")
    assert answer["url"].count(".") == 3
    assert answer["status"] == 200
    assert "immutable" in answer["cache"] and "max-age=315360000" in answer["cache"]
    assert answer["encoding"] in ("gzip", "br")


def test_plotly_is_loaded_only_by_pages_with_charts(db, client, project, alice) -> None:
    from telemetry.services import run_upsert

    run = run_upsert(project=project, name="charted")
    client.force_login(alice)
    with_charts = client.get(f"/runs/{run.pk}/").content.decode()
    pages = ("/", "/incidents/", "/taxonomy/", f"/runs/{run.pk}/logbook/")
    without = {url: client.get(url).content.decode() for url in pages}
    assert "plotly-cartesian.min" in with_charts
    for url, html in without.items():
        assert "plotly" not in html, url


BUNDLE = ROOT / "static" / "vendor" / "plotly-cartesian.min.js"
APPS = ("dashboard", "ingest", "logbook", "telemetry")


def test_the_vendored_plotly_bundle_is_plotly_pys_version_and_draws_every_trace_we_emit() -> None:
    """plotly.js's cartesian bundle (1.5 MB; the full one plotly.py ships is 4.8 MB), taken
    from the npm package plotly.js-cartesian-dist-min. After upgrading plotly, replace it
    with the same version: `npm pack plotly.js-cartesian-dist-min@<version>`."""
    import re

    import plotly
    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseTraceType

    bundle = BUNDLE.read_text()
    full = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()[:200]
    version = re.search(r"plotly\.js v(\S+)", full).group(1)
    assert f"plotly.js (cartesian - minified) v{version}\n" in bundle[:200]
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    # every trace type the chart code builds, as go.<Trace>(...) or {"type": "<trace>"}
    classes = [getattr(go, name) for name in go.__all__]  # go imports its classes lazily
    traces = {
        cls.__name__.lower() for cls in classes
        if isinstance(cls, type) and issubclass(cls, BaseTraceType)
    }  # fmt: skip
    used = set()
    for source in (path for app in APPS for path in (ROOT / app).rglob("*.py")):
        text = source.read_text()
        used |= {name.lower() for name in re.findall(r"\bgo\.([A-Z]\w*)\(", text)}
        used |= set(re.findall(r'"type": "(\w+)"', text))
    used &= traces
    assert {"scatter", "bar", "heatmap"} <= used
    assert used <= registered, used - registered
