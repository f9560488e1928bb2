from django.urls import path

from ingest import views

app_name = "ingest"

urlpatterns = [
    path("projects/<slug:slug>/tokens/", views.project_tokens, name="project-tokens"),
    path("projects/<slug:slug>/batches/", views.project_batches, name="project-batches"),
]
