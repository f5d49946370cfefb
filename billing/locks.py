"""Named locks for billing's runs that write many rows at once: closing a month, importing
usage. Two runs at the same time (beat and an admin's button, two workers given the same
message) queue on the lock instead of both inserting the same rows, so the second one finds
the first one's work (statements already final, records already there) and reports it, rather
than failing on a unique constraint.

PostgreSQL: a transaction-scoped advisory lock (``pg_advisory_xact_lock``), released at commit
or rollback; keys are ``hashtext`` of the name (the one other advisory lock is the GPU
catalogue's, ``hashtext('gpu-catalogue')`` in pools/inventory/services/gpu_models.py).
SQLite (the demo) has none and needs none: its write transactions lock the database
(``transaction_mode: IMMEDIATE``).
"""

from __future__ import annotations

from django.db import connection


def billing_lock(name: str) -> None:
    """Wait for and take the lock ``name`` until the current transaction ends. Call inside
    ``transaction.atomic()`` (raises ``RuntimeError`` outside one: the lock would be released
    at once)."""
    if not connection.in_atomic_block:
        raise RuntimeError(f"billing_lock({name!r}) needs a transaction")
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])


# The lock of writing rate cards (:func:`billing.services.rates.rate_card_check`): two cards
# written at once would each be checked without the other and could together mix a month's
# currencies.
RATE_CARDS_LOCK = "rate-cards"


def month_close_lock_name(month) -> str:
    """The lock of closing the statements of ``month`` (a date, first of the month)."""
    return f"statements-close:{month:%Y-%m}"


def usage_source_lock_name(source: str) -> str:
    """The lock of writing usage records of ``source`` (slurm, kubernetes, tokens …)."""
    return f"usage-import:{source}"
