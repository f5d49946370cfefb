"""The audit table is append-only on PostgreSQL (issue 27, item 8): a trigger refuses any UPDATE
or DELETE of an event, from the ORM or raw SQL; a user with events cannot be deleted (PROTECT)
and so cannot rewrite them through SET NULL."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import ProtectedError
from factories import AuditEventFactory, TeamFactory

from pools.audit.models import AuditEvent
from pools.audit.services import audit_event_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def event(django_user_model):
    actor = django_user_model.objects.create_user("alice", password="pw")
    return audit_event_record(actor=actor, action="team.changed", obj=TeamFactory(), reason="x")


@pytest.mark.parametrize(
    "change",
    [
        lambda e: AuditEvent.objects.filter(pk=e.pk).update(reason="rewritten"),
        lambda e: AuditEvent.objects.filter(pk=e.pk).delete(),
        lambda e: e.delete(),
        lambda e: connection.cursor().execute(
            "UPDATE pools_auditevent SET actor_id = NULL WHERE id = %s", [e.pk]
        ),
        lambda e: connection.cursor().execute("DELETE FROM pools_auditevent"),
    ],
)
def test_an_audit_event_cannot_be_changed_or_deleted(event, change):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        change(event)
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.reason, stored.actor.username) == ("x", "alice")


def test_new_events_are_still_written(event):
    AuditEventFactory(action="team.created")
    assert AuditEvent.objects.count() == 2


def test_a_user_with_audit_events_cannot_be_deleted(event):
    with pytest.raises((ProtectedError, IntegrityError)), transaction.atomic():
        event.actor.delete()
    assert AuditEvent.objects.get(pk=event.pk).actor.username == "alice"
