"""API tokens, kept as django-rest-knox keeps them: only a SHA-512 digest of the token and its
first 15 characters (to find the row) are stored; the token itself is shown once, when made."""

from __future__ import annotations

from django.db import models
from knox.models import AbstractAuthToken
from knox.settings import CONSTANTS

from pools.common.validators import single_line_text_validator


class ApiToken(AbstractAuthToken):
    """One client's token (a CI pipeline, an inference gateway): ``client`` names it, ``expiry``
    ends it (``API_TOKEN_TTL_DAYS``), deleting it revokes it. knox authenticates with it
    (``KNOX_TOKEN_MODEL``). A number is the key, not the 128-character digest, so audit events
    can name the token."""

    id = models.BigAutoField(primary_key=True)
    digest = models.CharField(max_length=CONSTANTS.DIGEST_LENGTH, unique=True)
    client = models.CharField(
        max_length=80,
        blank=True,
        validators=[single_line_text_validator],
        help_text="What uses the token, e.g. 'ci-pipeline' or 'gateway-eu'.",
    )

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.user} · {self.client or 'token'} #{self.pk}"
