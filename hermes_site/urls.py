from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from agent.metrics_view import metrics

urlpatterns = [
    # The control room is the product's face: the bare host opens it.
    path("", RedirectView.as_view(pattern_name="controlroom:home", permanent=False)),
    # The approval audit's admin pages moved with their models to the `oikos` app: old links still work.
    re_path(
        r"^admin/controlroom/(?P<page>(approvaldecision|targetcontext)/.*)$",
        RedirectView.as_view(url="/admin/oikos/%(page)s", permanent=True, query_string=True),
    ),
    path("admin/", admin.site.urls),
    # The sign-in form of HERMES_AUTH=django (the other modes never show it).
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("ui/", include("controlroom.urls")),
    # Prometheus scrapes this process's metrics here.
    path("metrics", metrics, name="metrics"),
    # The HTTP API for scripts and peers: /chat, /sessions, /query, /healthz, /openapi.json.
    path("", include("api.urls")),
]
