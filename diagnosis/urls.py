"""Diagnosis pages, in the "diagnosis" namespace."""

from django.urls import path

from diagnosis import views

app_name = "diagnosis"

urlpatterns = [
    path("slowdowns/", views.slowdown_list, name="slowdowns"),
    path("slowdowns/<int:slowdown_id>/decide/", views.slowdown_decide, name="slowdown-decide"),
]
