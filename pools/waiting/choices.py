"""What a piece of waiting work waits for, in the portal's terms (one value per sentence of
:mod:`pools.waiting.translate`)."""

from django.db import models


class WaitKind(models.TextChoices):
    CAP_FULL = "cap_full", "Team cap full"
    CARD_MINUTES = "card_minutes", "Card-hours used up"
    USER_LIMIT = "user_limit", "Per-user limit"
    JOB_LIMIT = "job_limit", "Larger than allowed"
    OTHER_LIMIT = "other_limit", "Other limit"
    RESOURCES = "resources", "No free cards"
    PRIORITY = "priority", "Behind higher priority"
    DEPENDENCY = "dependency", "Waits for other jobs"
    BEGIN_TIME = "begin_time", "Starts later"
    HELD = "held", "Held"
    RESERVATION = "reservation", "Waits for its reservation"
    NODES_UNAVAILABLE = "nodes_unavailable", "Nodes unavailable"
    PARTITION = "partition", "Partition down"
    NEVER = "never", "Cannot start as submitted"
    QUOTA_FULL = "quota_full", "Team quota in use"
    QUOTA_EXCEEDED = "quota_exceeded", "Above the team's quota"
    NO_FLAVOR = "no_flavor", "No matching GPU flavour"
    TOPOLOGY = "topology", "No room in one NVLink domain"
    ADMISSION_CHECK = "admission_check", "Admission check pending"
    PREEMPTED = "preempted", "Preempted, queued again"
    QUEUE_PROBLEM = "queue_problem", "Queue missing or stopped"
    NOT_TRIED = "not_tried", "Not tried yet"
    OTHER = "other", "Other"
