"""Workload classes (issue 36): what a request's work is (production, internal, batch,
development), which GPU models it may run on, whether its cards are its own, and how it is
scheduled against the others."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from pools.classes.rules import ClassRule
from pools.common.choices import CardClass
from pools.common.validators import single_line_text_validator, slug_validator
from pools.inventory.models import GpuModel


def card_classes_validator(value: object) -> None:
    """A list of distinct :class:`pools.common.choices.CardClass` values, else ValidationError. Kept
    as JSON (not a PostgreSQL array) so the embedded SQLite demo migrates too; the admin's form is
    the only writer and runs this."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError('a list of card classes, e.g. ["datacentre"]', code="invalid")
    unknown = sorted(set(value) - set(CardClass.values))
    if unknown:
        raise ValidationError(
            f"unknown card class {', '.join(unknown)}: use {', '.join(CardClass.values)}",
            code="invalid_choice",
        )
    if len(set(value)) != len(value):
        raise ValidationError("each card class once", code="duplicate")


class WorkloadClass(models.Model):
    """A class of work and its placement rule (:class:`pools.classes.rules.ClassRule`).

    ``card_classes``: the GPU model capability classes it may use; ``gpu_models``: models it
    may use whatever their class. ``exclusive``: whole cards of its own, never over-committed
    or shared. ``priority``: the Slurm QOS / Kubernetes PriorityClass value, higher first.
    ``preemption_order``: classes are preempted lowest first; a class may preempt every class
    of a lower order. Edited by pool admins in the Django admin, audited there.
    """

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=60, validators=[single_line_text_validator])
    description = models.TextField(blank=True)
    card_classes = models.JSONField(default=list, blank=True, validators=[card_classes_validator])
    gpu_models = models.ManyToManyField(GpuModel, blank=True, related_name="workload_classes")
    exclusive = models.BooleanField(default=False)
    priority = models.PositiveIntegerField()
    preemption_order = models.PositiveSmallIntegerField(unique=True)

    class Meta:
        ordering = ["-preemption_order"]
        verbose_name_plural = "workload classes"

    def __str__(self) -> str:
        return self.name

    def rule(self) -> ClassRule:
        """Its placement rule as plain data (reads ``gpu_models``: prefetch it for lists)."""
        return ClassRule(
            slug=self.slug,
            name=self.name,
            card_classes=frozenset(self.card_classes),
            model_slugs=frozenset(m.slug for m in self.gpu_models.all()),
            exclusive=self.exclusive,
        )
