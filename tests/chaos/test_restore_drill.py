"""The restore drill (`make restore-drill`) at a small scale: the Llama-scale data set backed
up, restored into a fresh cluster, and every page's JSON twin answering the same; and the
comparison catching a restored database that differs in one row."""

from __future__ import annotations

from chaos import restore_drill
from chaos.restore_drill import Drill, differences, drill_root, non_answers

SCALE = 0.003


def test_a_restored_database_answers_every_twin_as_the_original_did() -> None:
    with drill_root() as root, Drill(root, SCALE) as drill:
        drill.load()
        before = drill.read(drill.original)
        drill.backup_and_restore()
        assert drill.restored is not None
        after = drill.read(drill.restored)

        assert non_answers(before) == []
        assert differences(before, after) == []
        # Every page's twin was read, with real content: incidents with suggestions, the
        # logbook, the fleet and the SDC ledger among them.
        paths = set(before)
        assert any(p.startswith("/api/v1/runs/") and "series?name=loss" in p for p in paths)
        incidents = [v for p, (_, v) in before.items() if p.startswith("/api/v1/incidents/")]
        assert incidents and any(i["incident"]["suggestion"] for i in incidents)
        assert any(p.endswith("logbook.md") and "##" in before[p][1] for p in paths)
        fleet = [v for p, (_, v) in before.items() if p.startswith("/api/v1/fleet/hosts?")]
        assert fleet and fleet[0]["hosts_count"] > 0
        assert "/api/v1/sdc" in paths
        assert drill.figures.dump_bytes > 0 and drill.figures.restore_s > 0

        # A restore that lost one incident's root cause is caught, on the incident's answer.
        [(incident_id,)] = drill.restored.rows(
            "SELECT id FROM logbook_interruption ORDER BY id LIMIT 1", database="chronicle"
        )
        drill.restored.rows(
            "UPDATE logbook_interruption SET lost_steps = coalesce(lost_steps, 0) + 1 "
            "WHERE id = %s RETURNING id",
            [incident_id],
            database="chronicle",
        )
        tampered = drill.read(drill.restored)
        found = differences(before, tampered)
        assert any(line.startswith(f"/api/v1/incidents/{incident_id}:") for line in found), found


def test_floats_compare_to_their_last_digits_and_everything_else_exactly() -> None:
    before = {"/a": [200, {"sum": 391.63705167686567, "n": 3, "xs": [1.0, "x"]}]}
    assert (
        differences(before, {"/a": [200, {"sum": 391.6370516768656, "n": 3, "xs": [1.0, "x"]}]})
        == []
    )
    assert differences(before, {"/a": [200, {"sum": 391.637, "n": 3, "xs": [1.0, "x"]}]}) == [
        "/a: [1].sum 391.63705167686567 -> 391.637"
    ]
    assert differences(before, {"/a": [200, {"sum": 391.63705167686567, "n": 3, "xs": [1.0]}]})
    assert differences(before, {}) == ["/a: missing after the restore"]


def test_the_verdict_line_says_pass_or_fail_with_the_figures() -> None:
    figures = restore_drill.Figures(scale=1.0, points=10, answers=5, dump_bytes=2_000_000)
    assert figures.verdict().startswith("restore drill: PASS at scale 1 (10 points): 5 API")
    assert "backup 2.0 MB" in figures.verdict()
    figures.differences = ["/api/v1/sdc: answer 1 -> 2"]
    assert figures.verdict().startswith("restore drill: FAIL")
    assert "first: /api/v1/sdc" in figures.verdict()
