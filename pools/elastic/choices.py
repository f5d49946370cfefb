"""Enumerations of elastic capacity stored in the database."""

from django.db import models


class ScaleAction(models.TextChoices):
    UP = "up", "Scale up"
    DOWN = "down", "Scale down"
    HOLD = "hold", "Hold"


class ScaleSource(models.TextChoices):
    LOOP = "loop", "Scaling loop"
    HAND_BACK = "hand_back", "Handed back for a guaranteed approval"
    POLICY = "policy", "Policy edited"
