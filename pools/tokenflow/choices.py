from django.db import models


class CallOutcome(models.TextChoices):
    """What a call came to, as the gateway or agent said (``""``: not said, unknown)."""

    OK = "ok", "ok"
    RETRY = "retry", "retry (redoes an earlier step: wasted)"
    ERROR = "error", "error"
