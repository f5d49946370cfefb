"""Field validators billing's models share."""

from django.core.validators import RegexValidator

currency_validator = RegexValidator(r"^[A-Z]{3}$", "An ISO 4217 code: three capital letters.")
