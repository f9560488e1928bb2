"""Topology as data: where hosts sit (rack, pod, cluster, site), from an attempt_started
event's placement, the DCGM push's labels and an admin's CSV import, per project, with
unknown levels kept unknown; read at GET /api/v1/fleet/topology."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ingest.models import IngestBatch
from telemetry.models import Host
from telemetry.services.topology import host_placements_set
from telemetry.topology_csv import CsvProblem, placements_parse

TOPOLOGY = "/api/v1/fleet/topology"
IMPORT = "/api/v1/fleet/topology/import"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rows(client: Client, **params: str) -> dict[str, dict[str, Any]]:
    response = client.get(TOPOLOGY, params)
    assert response.status_code == 200, response.content
    return {row["host"]: row for row in response.json()["hosts"]}


def _started(batch_id: str, attempt: int, placement: dict[str, Any]) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "run": "placed",
        "events": [
            {
                "type": "attempt_started",
                "time": f"2026-12-01T10:0{attempt}:00Z",
                "attempt": attempt,
                "hosts": sorted(placement),
                "placement": placement,
            }
        ],
    }


@pytest.mark.django_db
def test_an_attempts_placement_places_its_hosts_and_unknown_levels_stay_unknown(
    post_batch, process_batch, bob, project
):
    # given a job that knows its hosts' racks, pods and site, and one host it knows nothing of
    placement = {
        "n1": {"rack": "r07", "pod": "p1", "cluster": "c1", "site": "sjc"},
        "n2": {"rack": "r07", "site": "sjc"},
        "n3": {},
    }
    response = post_batch(_started("placed-1", 1, placement))
    assert response.status_code == 202, response.content
    process_batch(IngestBatch.objects.get(batch_id="placed-1").pk)

    # then the topology says what was said and nothing else
    rows = _rows(_client(bob))
    assert rows["n1"] == {"project": project.slug, "host": "n1", "rack": "r07", "pod": "p1",
                          "cluster": "c1", "site": "sjc"}  # fmt: skip
    assert (rows["n2"]["rack"], rows["n2"]["pod"], rows["n2"]["cluster"]) == ("r07", None, None)
    assert [rows["n3"][level] for level in ("rack", "pod", "cluster", "site")] == [None] * 4

    # when the next attempt names only n1's rack (it moved), the rest of what was known stays
    assert post_batch(_started("placed-2", 2, {"n1": {"rack": "r08"}})).status_code == 202
    process_batch(IngestBatch.objects.get(batch_id="placed-2").pk)
    rows = _rows(_client(bob))
    assert (rows["n1"]["rack"], rows["n1"]["pod"], rows["n1"]["site"]) == ("r08", "p1", "sjc")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ({"n1": {"row": "3"}}, "the levels are rack, pod, cluster, site"),
        ({"n1": "r07"}, "must be an object of rack, pod, cluster, site"),
        ({"n 1": {"rack": "r07"}}, "host 'n 1'"),
        ({"n1": {"rack": "x" * 101}}, "the limit is 100"),
        (["n1"], "must be an object of host name to its levels"),
    ],
)
def test_a_bad_placement_is_a_clear_400(post_batch, placement, message):
    response = post_batch(_started("bad-placement", 1, {}) | {"events": [
        {"type": "attempt_started", "time": "2026-12-01T10:00:00Z", "placement": placement}
    ]})  # fmt: skip
    assert response.status_code == 400
    assert message in response.content.decode()


@pytest.mark.django_db
def test_a_cluster_needs_its_site_and_a_new_site_drops_the_old_sites_cluster(project):
    outcome = host_placements_set(project=project, placements={"n1": {"cluster": "c1"}})
    assert outcome.clusters_without_site == ["n1"]
    assert Host.objects.get(name="n1").cluster is None
    host_placements_set(project=project, placements={"n1": {"cluster": "c1", "site": "a"}})
    host = Host.objects.get(name="n1")
    assert (host.cluster.name, host.site.name) == ("c1", "a")
    # a cluster sent alone later is in the site known
    host_placements_set(project=project, placements={"n1": {"cluster": "c2"}})
    assert Host.objects.get(name="n1").cluster.site.name == "a"
    host_placements_set(project=project, placements={"n1": {"site": "b"}})
    host = Host.objects.get(name="n1")
    assert (host.cluster, host.site.name) == (None, "b")


@pytest.mark.django_db
def test_a_push_that_moves_nothing_writes_nothing(project, django_assert_max_num_queries):
    host_placements_set(project=project, placements={"n1": {"rack": "r1", "site": "a"}})
    version = type(project).objects.get(pk=project.pk).fleet_version
    with django_assert_max_num_queries(1):
        outcome = host_placements_set(project=project, placements={"n1": {"rack": "r1"}})
    assert outcome.changed == 0
    assert type(project).objects.get(pk=project.pk).fleet_version == version


PLACED = 'rack="r3",superpod="sp2",site="ams"'
LABELLED = f"""# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-topo-0",Hostname="lab1",{PLACED}}} 40
"""


@pytest.mark.django_db
def test_dcgm_push_labels_and_a_pushgateway_path_place_the_host(client, ingest_token, bob):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    response = client.post("/api/v1/ingest/prometheus", data=LABELLED,
                           content_type="text/plain", **auth)  # fmt: skip
    assert response.status_code == 200, response.content
    unlabelled = LABELLED.replace(f",{PLACED}", "").replace("lab1", "lab2")
    path = "/api/v1/ingest/prometheus/metrics/job/dcgm/hostname/lab2/cluster/c9/site/ams"
    response = client.post(path, data=unlabelled.replace("topo-0", "topo-1"),
                           content_type="text/plain", **auth)  # fmt: skip
    assert response.status_code == 200, response.content
    rows = _rows(_client(bob))
    assert (rows["lab1"]["rack"], rows["lab1"]["pod"], rows["lab1"]["site"]) == ("r3", "sp2", "ams")
    assert (rows["lab2"]["cluster"], rows["lab2"]["site"], rows["lab2"]["rack"]) == (
        "c9",
        "ams",
        None,
    )


CSV = "host,rack,pod,cluster,site\nn1,r1,p1,c1,sjc\nn2,r1,,,sjc\n"


@pytest.mark.django_db
def test_the_csv_import_is_for_project_admins_and_names_the_bad_line(
    project, other_project, dave, bob, charlie
):
    url = f"{IMPORT}?project={project.slug}"
    assert _client(bob).post(url, data=CSV, content_type="text/csv").status_code == 403
    assert _client(charlie).post(url, data=CSV, content_type="text/csv").status_code == 404
    response = _client(dave).post(url, data=CSV, content_type="text/csv")
    assert response.status_code == 200, response.content
    assert response.json() == {"hosts": 2, "changed": 2, "clusters_without_site": []}
    rows = _rows(_client(dave), project=project.slug)
    assert rows["n2"]["pod"] is None and rows["n1"]["pod"] == "p1"

    bad = "host,rack,cluster\nn1,r1,c1\nn 2,r2,\n"
    response = _client(dave).post(url, data=bad, content_type="text/csv")
    assert response.status_code == 400
    problems = response.json()["csv"]
    assert problems[0].startswith("line 2: a cluster is named within its site")
    assert problems[1].startswith("line 3:")

    # replace=true: empty cells clear
    response = _client(dave).post(url + "&replace=true", data="host,rack,site\nn1,,sjc\n",
                                  content_type="text/csv")  # fmt: skip
    assert response.status_code == 200
    assert _rows(_client(dave))["n1"]["rack"] is None


@pytest.mark.django_db
def test_topology_is_per_project(project, other_project, bob, charlie):
    host_placements_set(project=project, placements={"secret-host": {"rack": "secret-rack"}})
    host_placements_set(project=other_project, placements={"theirs": {"rack": "r9"}})
    assert set(_rows(_client(charlie))) == {"theirs"}
    assert "secret" not in _client(charlie).get(TOPOLOGY).content.decode()
    assert _client(charlie).get(TOPOLOGY, {"project": project.slug}).status_code == 404
    assert set(_rows(_client(bob), project=project.slug)) == {"secret-host"}


def test_csv_header_and_rows_are_checked():
    assert placements_parse("Hostname,Superpod\nn1,sp1\n") == {"n1": {"pod": "sp1"}}
    with pytest.raises(CsvProblem, match="the header must name host"):
        placements_parse("rack,site\nr1,a\n")
    with pytest.raises(CsvProblem, match="line 3: host 'n1' is on an earlier line"):
        placements_parse("host,rack\nn1,r1\nn1,r2\n")
