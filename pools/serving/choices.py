from django.db import models


class Resolution(models.IntegerChoices):
    """A rollup's bucket length, seconds."""

    FIVE_MINUTES = 300, "5 min"
    HOUR = 3600, "1 h"
