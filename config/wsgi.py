import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# Import every view now, then move everything start-up made (~150,000 objects: modules,
# models, URL patterns) out of the collector's sight: they live as long as the process, yet
# every full collection walked them again. A page that builds a Llama-scale run's charts or
# goodput triggers one in about half of its first views, at 120-190 ms each; after the
# freeze the same collection takes 10-30 ms (bench.first_view, 2026-11-25). Before the fork,
# when gunicorn preloads, it also keeps the shared pages shared.
get_resolver().url_patterns  # noqa: B018 (imports the URLconf and every view)
gc.collect()
gc.freeze()
