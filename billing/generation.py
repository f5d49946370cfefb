"""A generation of the statements, for readers that keep sums of them in the shared cache (the
finance month's totals, per cost centre, by team and by model: :func:`billing.selectors.
finance_month`, issue #29 item 7), a token of :mod:`pools.common.generation` as the
allocations' generation is (:mod:`pools.capacity.generation`): read it with
:func:`statements_generation`, bump it with :func:`statements_changed`.

At 100,800 GPUs a month has ~10,000 statements and ~20,000 lines, and the finance month's five
sums over them took ~100 ms of its page; they change only when a statement is written.

Generation: a random token in the cache, replaced once a transaction that wrote a statement or
its lines commits. It is connected to ``post_save`` and ``post_delete`` of
:class:`~billing.models.Statement`, ``post_save`` of :class:`~billing.models.StatementLine`
(the admin's inline) and ``post_save`` of :class:`~pools.tenancy.models.Team` (the sums name
teams, ordered by name) in :mod:`billing.apps`; the writers that bypass them call it
themselves: :func:`billing.services.statements.statement_build` (its lines' ``bulk_create``
and delete), the month close's ``bulk_create`` / ``bulk_update`` / ``COPY``, the benchmarks'
bulk loads. Not ``post_delete`` of the lines: a receiver there would make every delete of a
month's lines read them first. GPU model names the sums show are keyed by the inventory's
generation beside this one. After the commit, for the reason the allocations' module gives.
"""

from __future__ import annotations

from pools.common.generation import changed, generation

GENERATION_KEY = "billing:statements-generation"


def statements_generation() -> str:
    """The current generation token (32 hex digits); a new one when the cache has none (first
    use, cleared, evicted), so no entry stored under an earlier token is read again."""
    return generation(GENERATION_KEY)


def statements_changed(**_signal_kwargs) -> None:
    """Statements were written: a new generation once the transaction commits (at once
    outside one)."""
    changed(GENERATION_KEY)
