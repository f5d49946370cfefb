"""The four workload classes the portal starts with (issue 36), as data: the migration that
creates the table writes them, and the demo writes them again where a test flushed the table.
No Django here: callers pass the model."""

from __future__ import annotations

from typing import Any

# The four classes of issue 36 as the 004 seed article §3.2 places them: production services on
# data-centre cards (L40S, A100, H800), internal tools and non-core batch on consumer cards (RTX
# 4090), development and testing on consumer cards; "never let tasks of different priorities
# share one card" (§3.2) and "important models get whole cards" (000 §5.4): production is
# exclusive. Priorities are Slurm QOS priorities (higher first); batch is preempted first.
SEED_CLASSES = [
    (
        "production",
        "Production",
        ["datacentre"],
        True,
        1000,
        40,
        "Production services: data-centre cards, whole cards of their own.",
    ),
    ("internal", "Internal", ["consumer"], False, 500, 30, "Internal tools on consumer cards."),
    (
        "development",
        "Development",
        ["consumer"],
        False,
        200,
        20,
        "Development, testing and prototypes on consumer cards.",
    ),
    (
        "batch",
        "Batch",
        ["consumer"],
        False,
        100,
        10,
        "Non-core batch work on consumer cards; preempted first.",
    ),
]


def seed_classes(workload_class: Any) -> None:
    """Create or update the :data:`SEED_CLASSES` rows of ``workload_class`` (the model, or the
    migration's historical model) by slug."""
    for slug, name, card_classes, exclusive, priority, order, description in SEED_CLASSES:
        workload_class.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "card_classes": card_classes,
                "exclusive": exclusive,
                "priority": priority,
                "preemption_order": order,
                "description": description,
            },
        )
