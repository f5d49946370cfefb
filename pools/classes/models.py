"""Workload classes (issue 36): what a request's work is (production, internal, batch,
development), which GPU models it may run on, whether its cards are its own, and how it is
scheduled against the others."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from pools.choices import CardClass
from pools.classes.rules import ClassRule
from pools.inventory.models import GpuModel
from pools.validators import single_line_text_validator, slug_validator


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
    card_classes = ArrayField(
        models.CharField(max_length=12, choices=CardClass.choices), default=list, blank=True
    )
    gpu_models = models.ManyToManyField(GpuModel, blank=True, related_name="workload_classes")
    exclusive = models.BooleanField(default=False)
    priority = models.PositiveIntegerField()
    preemption_order = models.PositiveSmallIntegerField(unique=True)

    class Meta:
        ordering = ["-preemption_order"]
        verbose_name_plural = "workload classes"
        constraints = [
            models.CheckConstraint(
                condition=Q(card_classes__contained_by=CardClass.values),
                name="workloadclass_card_classes_known",
            )
        ]

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
