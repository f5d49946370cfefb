"""Migration 0051: jobs queued under the sync tasks' names from before they left
``pools.capacity`` are renamed to the names the workers register; other jobs are untouched."""

from __future__ import annotations

import importlib

import pytest
from celery import current_app
from django.apps import apps

from pools import jobs
from pools.jobs.models import QueuedJob

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("pools.migrations.0051_queued_jobs_follow_moved_tasks")


def test_old_names_are_renamed_to_the_registered_ones_and_back():
    old = [
        "pools.capacity.tasks.recurring_sync_task",
        "pools.capacity.tasks.maintenance_sync_task",
        "pools.capacity.tasks.override_sync_task",
    ]
    for name in old:
        QueuedJob.objects.create(task_name=name, args=[7])
    other = QueuedJob.objects.create(task_name=jobs.SIZING_ESTIMATE, args=[1])

    MIGRATION.forwards(apps, None)

    renamed = set(QueuedJob.objects.exclude(pk=other.pk).values_list("task_name", flat=True))
    assert renamed == {jobs.RECURRING_SYNC, jobs.MAINTENANCE_SYNC, jobs.OVERRIDE_SYNC}
    assert renamed <= set(current_app.tasks)
    assert QueuedJob.objects.get(pk=other.pk).task_name == jobs.SIZING_ESTIMATE

    MIGRATION.backwards(apps, None)

    assert set(QueuedJob.objects.exclude(pk=other.pk).values_list("task_name", flat=True)) == set(
        old
    )
