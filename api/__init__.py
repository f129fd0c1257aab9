"""Hermes's HTTP API for scripts and peers in the mesh: `/chat` (SSE), `/sessions`, `/query`, `/healthz`.

The views are thin adapters: the turn engine, the tool hub, the services and the selectors do the
work. `openapi.json` next to this file describes every route and is served at `/openapi.json`.
"""
