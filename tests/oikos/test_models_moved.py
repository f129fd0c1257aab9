"""The approval audit and the target-context cache moved from `controlroom` to `oikos` without a row moving.

Migrated back to before the move, a decision is recorded (and its content type made, as the admin
would); migrated forward, the same row is read through `oikos.models`, and its content type (so its
permissions and admin history) now belongs to `oikos`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from oikos.models import ApprovalDecision, TargetContext

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("controlroom", "0004_stored_redact"), ("oikos", None)]


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.fixture
def before_the_move() -> Iterator[None]:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate(BEFORE)
    yield
    _migrate(latest)


@pytest.mark.usefixtures("before_the_move")
def test_rows_and_content_types_follow_the_models_to_oikos() -> None:
    old = _migrate(BEFORE).loader.project_state(("controlroom", "0004_stored_redact")).apps
    OldDecision = old.get_model("controlroom", "ApprovalDecision")
    OldDecision.objects.create(
        approval_id="apr-1", decision="approve", operator="ana", outcome="decided", reason="disk full"
    )
    old.get_model("controlroom", "TargetContext").objects.create(target="service:caddy", fetched_at="2026-12-06T10:00Z")
    ContentType.objects.filter(app_label="oikos").delete()
    content_type_id = ContentType.objects.get_or_create(app_label="controlroom", model="approvaldecision")[0].id

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    decision = ApprovalDecision.objects.get(approval_id="apr-1")
    assert (decision.operator, decision.reason, decision.outcome) == ("ana", "disk full", "decided")
    assert TargetContext.objects.filter(target="service:caddy").exists()
    ContentType.objects.clear_cache()
    moved = ContentType.objects.get(id=content_type_id)
    assert (moved.app_label, moved.model) == ("oikos", "approvaldecision")
    assert ContentType.objects.get_for_model(ApprovalDecision).id == content_type_id


def test_the_tables_keep_their_names() -> None:
    assert ApprovalDecision._meta.db_table == "controlroom_approval_decisions"
    assert TargetContext._meta.db_table == "controlroom_target_contexts"
    assert {"controlroom_approval_decisions", "controlroom_target_contexts"} <= set(
        connection.introspection.table_names()
    )
