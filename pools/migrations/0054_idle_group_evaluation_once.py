"""A group's idle evaluation stored once (IdleGroupEvaluation) and referenced by its findings,
instead of a copy in every finding's ``detail`` (issue #29 item 7). Each existing finding's
detail moves to an evaluation of its own, dated when the finding was last seen."""

import django.db.models.deletion
from django.db import migrations, models


def details_to_evaluations(apps, schema_editor):
    IdleFinding = apps.get_model("pools", "IdleFinding")
    IdleGroupEvaluation = apps.get_model("pools", "IdleGroupEvaluation")
    for finding in IdleFinding.objects.exclude(detail={}).iterator():
        finding.evaluation = IdleGroupEvaluation.objects.create(
            evaluated_at=finding.last_seen_at, detail=finding.detail
        )
        finding.save(update_fields=["evaluation"])


def evaluations_to_details(apps, schema_editor):
    IdleFinding = apps.get_model("pools", "IdleFinding")
    for finding in IdleFinding.objects.filter(evaluation__isnull=False).select_related(
        "evaluation"
    ):
        finding.detail = finding.evaluation.detail
        finding.save(update_fields=["detail"])


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0053_team_name_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="IdleGroupEvaluation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("evaluated_at", models.DateTimeField()),
                ("detail", models.JSONField(blank=True, default=dict)),
            ],
        ),
        migrations.AddField(
            model_name="idlefinding",
            name="evaluation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="findings",
                to="pools.idlegroupevaluation",
            ),
        ),
        migrations.RunPython(details_to_evaluations, evaluations_to_details),
        migrations.RemoveField(
            model_name="idlefinding",
            name="detail",
        ),
    ]
