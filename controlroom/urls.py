from __future__ import annotations

from django.urls import path

from controlroom.views import (
    approvals,
    changes,
    chat,
    elicitations,
    investigations,
    note_proposals,
    pages,
    search,
    servers,
)

app_name = "controlroom"

urlpatterns = [
    path("", chat.home, name="home"),
    path("s/<uuid:session_id>/", chat.home, name="session"),
    path("ask/", chat.ask, name="ask"),
    path("turns/<uuid:turn_id>/stop/", chat.turn_stop, name="turn_stop"),
    path("drawer/new/", chat.drawer_new, name="drawer_new"),
    path("sessions/", pages.sessions_page, name="sessions"),
    path("sessions/nav/", chat.sessions_nav, name="sessions_nav"),
    path("ledger/", pages.ledger, name="ledger"),
    path("investigations/", investigations.investigations_page, name="investigations"),
    path("investigations/list/", investigations.investigations_list, name="investigations_list"),
    path("search/", search.search_page, name="search"),
    path("budget/meter/", pages.budget_meter, name="budget_meter"),
    path("approvals/", approvals.approvals_page, name="approvals"),
    path("approvals/decide/", approvals.decide, name="approval_decide"),
    path("executions/<str:execution_id>/record/", approvals.execution_record, name="execution_record"),
    path("executions/undo/", approvals.execution_undo, name="execution_undo"),
    path("elicitations/<uuid:elicitation_id>/", elicitations.answer, name="elicitation_answer"),
    path("proposals/<uuid:proposal_id>/decide/", approvals.proposal_decide, name="proposal_decide"),
    path("note-proposals/decide/", note_proposals.decide, name="note_proposal_decide"),
    path("changes/", changes.changes_view, name="changes"),
    path("changes/list/", changes.changes_list_view, name="changes_list"),
    path("servers/", servers.servers_page, name="servers"),
    path("servers/callback/", servers.server_callback, name="server_callback"),
    path("servers/<str:name>/connect/", servers.server_connect, name="server_connect"),
]
