"""Production settings (config.settings) with one module more for the Celery worker to import:
tests.stack.stuck_task, whose task gets a pool child stuck in C code. A demo started with
DJANGO_SETTINGS_MODULE naming this module is `make demo` as it runs (config.demo passes its
environment to every child), its worker able to run that one task more
(tests/stack/test_demo_stop.py). Django's and Celery's own mechanisms; no hook in the product."""

from config.settings import *  # noqa: F403

CELERY_IMPORTS = ["tests.stack.stuck_task"]
