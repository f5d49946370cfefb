"""A budget's settings stored in the database (values are the field's own words)."""

from django.db import models


class BudgetPeriod(models.TextChoices):
    MONTH = "month", "Month"
    QUARTER = "quarter", "Quarter"
    YEAR = "year", "Year"


class Rollover(models.TextChoices):
    NONE = "none", "None: every period starts at the limit"
    CARRY = "carry", "Unused carries over to the next period, up to a cap"
    DEDUCT = "deduct", "Overage is deducted from the next period"


class Enforcement(models.TextChoices):
    WARN = "warn", "Warn: the request goes on, the reason is shown"
    NEEDS_ADMIN = "needs_admin", "Beyond the budget a pool admin decides (no auto-approval)"
    REFUSE = "refuse", "Refuse requests beyond the budget"
