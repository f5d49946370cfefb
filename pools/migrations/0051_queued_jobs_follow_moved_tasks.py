"""Jobs waiting in the outbox under the names the recurring, override and maintenance sync tasks
had before they moved out of ``pools.capacity`` (issue #29 item 2) are renamed, so the drain sends
them under the names the workers register. Reversible."""

from django.db import migrations

MOVED = {
    "pools.capacity.tasks.recurring_sync_task": "pools.recurring.tasks.recurring_sync_task",
    "pools.capacity.tasks.maintenance_sync_task": "pools.maintenance.tasks.maintenance_sync_task",
    "pools.capacity.tasks.override_sync_task": "pools.overrides.tasks.override_sync_task",
}


def _rename(apps, names: dict[str, str]) -> None:
    queued = apps.get_model("pools", "QueuedJob").objects
    for old, new in names.items():
        queued.filter(task_name=old).update(task_name=new)


def forwards(apps, schema_editor):
    _rename(apps, MOVED)


def backwards(apps, schema_editor):
    _rename(apps, {new: old for old, new in MOVED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0050_whatif_runs_share_queued_run"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
