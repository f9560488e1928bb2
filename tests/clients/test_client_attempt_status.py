"""The client's finish() records how the attempt ended: failed (killed if planned) once the
job reported its own interruption, completed otherwise (clients/python/README.md)."""

from __future__ import annotations

from typing import Any

import pytest

from telemetry.models import Attempt
from tests.clients.test_python_client import FAST, ClientRun, _all_batches_done


@pytest.mark.django_db(transaction=True)
def test_finish_after_the_jobs_own_interruption_files_the_attempt_failed(
    live_server, celery_worker, ingest_token, wait, tmp_path
):
    # given three jobs: one reports its own crash, one a planned stop, one an earlier
    # attempt's crash, and each then calls finish() with no status
    def job(name: str, **interruption: Any) -> None:
        run = ClientRun(name, url=live_server.url, token=ingest_token, attempt=2,
                        host="node-a", spool_dir=tmp_path / name, **FAST)  # fmt: skip
        run.log({"loss": 2.0}, step=10)
        run.interruption("faulty-gpu", message="Xid 79", step=10, **interruption)
        assert run.finish(timeout=20)

    job("own-crash")
    job("own-stop", planned=True)
    job("earlier-crash", attempt=1)

    # then each attempt 2 is filed as what happened to it
    wait(_all_batches_done, what="the worker")
    status = {
        name: Attempt.objects.get(run__name=name, number=2).status
        for name in ("own-crash", "own-stop", "earlier-crash")
    }
    assert status == {"own-crash": "failed", "own-stop": "killed", "earlier-crash": "completed"}
