"""The host page's GPUs: each GPU's index, PCI bus id and UUID (so "PCI 3b" in a kernel log
finds its GPU), its newest readings, its energy in kWh, and temperature, power, SM clock and
utilisation over time, a line per GPU, from the pushes dcgm-exporter sent."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from logbook.views.host_gpus import short_bus_id
from telemetry import dcgm
from telemetry.models import Device

SHOTS = Path("/work/notes/shots/host")
GPUS = 8
URL = "/api/v1/ingest/prometheus?host=node-07"


def uuid_of(gpu: int) -> str:
    return f"GPU-0c1d2e3f-4a5b-4c6d-8e7f-{gpu:012d}"


def bus_of(gpu: int) -> str:
    return f"00000000:{(0x18, 0x2A, 0x3A, 0x3B, 0x9A, 0xAB, 0xBA, 0xDB)[gpu]:02X}:00.0"


def scrape(minute: int, at_ms: int) -> str:
    """An 8-GPU H100 node's scrape at minute `minute`: GPU 3 runs hot and slows."""
    lines = []
    for gpu in range(GPUS):
        labels = (
            f'gpu="{gpu}",UUID="{uuid_of(gpu)}",pci_bus_id="{bus_of(gpu)}",device="nvidia{gpu}",'
            'modelName="NVIDIA H100 80GB HBM3",Hostname="node-07"'
        )
        hot = gpu == 3 and minute >= 60
        values = {
            "DCGM_FI_DEV_GPU_TEMP": (84 if hot else 64) + gpu % 3 + 2 * math.sin(minute / 9),
            "DCGM_FI_DEV_POWER_USAGE": (520 if hot else 640) + 15 * math.sin(minute / 7 + gpu),
            "DCGM_FI_DEV_SM_CLOCK": 1605 if hot else 1980,
            "DCGM_FI_DEV_GPU_UTIL": 100 if minute % 20 else 35,
            # 640 W for a minute is 38.4 kJ = 38,400,000 mJ
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 8_000_000_000 + 38_400_000 * minute,
            "DCGM_FI_DEV_XID_ERRORS": 0,
        }
        lines += [f"{name}{{{labels}}} {value} {at_ms}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def pushed(client: Any, ingest_token: str) -> Any:
    """Two hours of pushes, one a minute."""
    start = timezone.now() - timedelta(hours=2)
    for minute in range(0, 121):
        at_ms = int((start + timedelta(minutes=minute)).timestamp() * 1000)
        answer = client.post(
            URL, data=scrape(minute, at_ms).encode(), content_type="text/plain",
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )  # fmt: skip
        assert answer.status_code == 200, answer.content
    return start


def test_energy_in_kwh_through_a_counter_reset() -> None:
    assert dcgm.kwh(3.6e9) == 1.0
    # 1 kWh, then a driver reload (the counter starts again), then 0.5 kWh more
    assert dcgm.energy_used_kwh([0.0, 3.6e9, 1.8e9]) == pytest.approx(1.5)
    assert dcgm.energy_used_kwh([5.0]) is None
    assert short_bus_id("00000000:3B:00.0") == "3B:00.0"


@pytest.mark.django_db
def test_host_page_lists_each_gpu_by_index_bus_id_and_uuid_with_kwh(
    client: Any, alice: Any, pushed: Any
) -> None:
    client.force_login(alice)
    # when the host page is opened
    html = client.get("/fleet/hosts/node-07/").content.decode()
    # then a row per GPU with its index, PCI bus id and UUID
    assert Device.objects.get(uuid=uuid_of(3)).pci_bus_id == "00000000:3B:00.0"
    for gpu in range(GPUS):
        assert f'<tr data-gpu="{uuid_of(gpu)}"><td class="num">{gpu}</td>' in html
        assert f"<code>{bus_of(gpu)}</code>" in html
    # energy: the counter as kWh (8e9 + 120 x 38.4e6 = 12.608e9 mJ = 3.502 kWh), each GPU's
    # use over the 24-hour window (2 h at 640 W = 1.28 kWh), summed over the 8
    assert "3.50</td>" in html
    assert "1.280</td>" in html
    assert '<td class="num" id="host-gpu-kwh">10.240</td>' in html
    # and four charts, a line per GPU named by index and bus id
    for position in range(4):
        assert f'id="chart-gpu-{position}"' in html
    assert "GPU 3 \\u00b7 3B:00.0" in html  # in the charts' JSON
    # and a bad window is said, not a 500
    bad = client.get("/fleet/hosts/node-07/", {"hours": "forever"})
    assert bad.status_code == 200 and "hours: a whole number from 1 to 720" in bad.content.decode()


@pytest.mark.django_db
def test_host_page_gpu_part_costs_a_fixed_number_of_queries(
    client: Any, alice: Any, pushed: Any, django_assert_max_num_queries: Any
) -> None:
    client.force_login(alice)
    client.get("/fleet/hosts/node-07/")  # warm the caches
    with django_assert_max_num_queries(40):
        assert client.get("/fleet/hosts/node-07/").status_code == 200


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_host_page_draws_each_gpus_curves(
    browser: Any, live_server: Any, alice: Any, login_page: Any, console_errors: Any, pushed: Any
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/fleet/hosts/node-07/")
    page.wait_for_function(
        "() => [0, 1, 2, 3].every(i => (document.getElementById('chart-gpu-' + i) || {}).data)"
    )
    lines = page.evaluate("document.getElementById('chart-gpu-0').data.map(t => t.name)")
    assert len(lines) == GPUS and "GPU 3 · 3B:00.0" in lines
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "host-page.png"), full_page=True)
    assert errors == []
    page.close()
