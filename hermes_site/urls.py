from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("ui/", include("controlroom.urls")),
    # The control room is the product's face: the bare host opens it.
    path("", RedirectView.as_view(pattern_name="controlroom:home", permanent=False)),
]
