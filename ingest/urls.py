from django.urls import path

from ingest import views

app_name = "ingest"

urlpatterns = [
    path("projects/<slug:slug>/tokens/", views.project_tokens, name="project-tokens"),
]
