"""The demo's data: `demo.batches` generates the seeded 70B run that `manage.py load_demo` sends
through ingest. Not an app (no models): pure Python and numpy, imported only by the command
that loads it and by tests."""
