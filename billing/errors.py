"""Billing's domain errors (codes and HTTP statuses via
:class:`pools.common.errors.DomainError`)."""

from pools.common.errors import Conflict, InvalidInput, InvalidTransition


class StatementFinal(InvalidTransition):
    """A final statement never changes (data: ``statement``, ``month``)."""

    code = "statement_final"


class RateCardConflict(Conflict):
    """Rate cards overlap or mix currencies within one month (data: ``cards``)."""

    code = "rate_card_conflict"


class UsageRejected(InvalidInput):
    """A usage batch that cannot be used at all (data: ``errors``)."""

    code = "usage_rejected"
