"""`python -m bench --keep-data DIR` (bench/kept_data.py): the Llama-scale data set is reused
only by a run of the same scale and generator; any other run starts DIR afresh."""

from __future__ import annotations

import json

from bench import kept_data


def test_a_kept_data_set_is_reused_at_its_scale_and_dropped_at_another(tmp_path):
    # given a directory a first run loaded the full scale into
    directory = tmp_path / "kept"
    pg = kept_data.pg_dir(directory, 1.0)
    assert pg == directory / "pg" and directory.is_dir()
    assert kept_data.kept(directory, 1.0) is None  # nothing loaded yet
    pg.mkdir()
    (pg / "PG_VERSION").write_text("15\n")
    kept_data.remember(directory, 1.0, summary="run 1 (llama3/...)", run_id=1)

    # when a later run asks for the same scale, then it gets the loaded run and its database
    found = kept_data.kept(directory, 1.0)
    assert found is not None
    assert (found["summary"], found["run_id"]) == ("run 1 (llama3/...)", 1)
    assert kept_data.pg_dir(directory, 1.0) == pg and (pg / "PG_VERSION").exists()

    # when a run asks for another scale, then nothing is reused and the directory is emptied
    assert kept_data.kept(directory, 0.01) is None
    assert kept_data.pg_dir(directory, 0.01) == pg and not pg.exists()


def test_a_changed_generator_makes_the_kept_data_set_stale(tmp_path):
    # given a directory whose marker was written by another version of the generator
    directory = tmp_path / "kept"
    kept_data.pg_dir(directory, 1.0)
    kept_data.remember(directory, 1.0, summary="run 1", run_id=1)
    marker = json.loads((directory / kept_data.MARKER).read_text())
    marker["generator"] = "0" * 16
    (directory / kept_data.MARKER).write_text(json.dumps(marker))
    # then it is not reused
    assert kept_data.kept(directory, 1.0) is None
    assert kept_data.fingerprint(1.0)["generator"] != marker["generator"]
