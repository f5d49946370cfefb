"""Enumerations of elastic capacity stored in the database."""

from django.db import models


class QuotaBackend(models.TextChoices):
    """Where a Kubernetes pool's elastic decisions land (scheduler_adapters.kubernetes_elastic)."""

    RESOURCE_QUOTA = "resourcequota", "ResourceQuota (the portal's own loop)"
    KUEUE = "kueue", "Kueue ClusterQueue (nominalQuota + borrowingLimit in a cohort)"
    VOLCANO = "volcano", "Volcano Queue (guarantee / deserved / capability)"
    KOORDINATOR = "koordinator", "Koordinator ElasticQuota (min / max)"


class ScaleAction(models.TextChoices):
    UP = "up", "Scale up"
    DOWN = "down", "Scale down"
    HOLD = "hold", "Hold"


class ScaleSource(models.TextChoices):
    LOOP = "loop", "Scaling loop"
    HAND_BACK = "hand_back", "Handed back for a guaranteed approval"
    POLICY = "policy", "Policy edited"
