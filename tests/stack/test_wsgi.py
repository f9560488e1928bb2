"""The WSGI entry point gunicorn loads."""

from __future__ import annotations

import gc
import importlib


def test_start_up_objects_are_frozen_out_of_the_collector():
    gc.unfreeze()
    assert gc.get_freeze_count() == 0

    wsgi = importlib.reload(importlib.import_module("config.wsgi"))

    assert callable(wsgi.application)
    assert gc.get_freeze_count() > 10_000
    gc.unfreeze()
