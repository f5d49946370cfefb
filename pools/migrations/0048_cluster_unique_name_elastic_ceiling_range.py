"""Two clusters may no longer share a display name (ignoring case): lists and filters show
clusters by name. Clusters already named alike keep the oldest's name; each later one gets its
slug added, ``"Train (train-b)"``, so the constraint can be created. An elastic policy's
ceiling is validated to 2**31 - 1 on every database (SQLite stored any size)."""

import django.core.validators
import django.db.models.functions.text
from django.db import migrations, models


def name_namesakes_apart(apps, schema_editor):
    Cluster = apps.get_model("pools", "Cluster")
    seen: set[str] = set()
    for cluster in Cluster.objects.order_by("pk"):
        key = cluster.name.lower()
        if key in seen:
            suffix = f" ({cluster.slug})"
            cluster.name = cluster.name[: 100 - len(suffix)] + suffix
            cluster.save(update_fields=["name"])
            key = cluster.name.lower()
        seen.add(key)


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0047_clusterwork"),
    ]

    operations = [
        migrations.RunPython(name_namesakes_apart, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="cluster",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.Lower("name"),
                name="cluster_unique_name",
                violation_error_message="Another cluster has this name.",
            ),
        ),
        migrations.AlterField(
            model_name="elasticpolicy",
            name="ceiling_cards",
            field=models.PositiveIntegerField(
                validators=[django.core.validators.MaxValueValidator(2147483647)]
            ),
        ),
    ]
