"""Domain errors. Each carries a machine-readable ``code`` and ``data`` for the API's 4xx body."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error a service raises on purpose.

    ``code`` is a stable snake_case identifier; ``data`` is JSON-serialisable detail;
    ``status`` is the HTTP status the API answers with (400, 403, 404, 409 or 422).
    """

    code = "domain_error"
    status = 400

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class InvalidInput(DomainError):
    """Input that cannot be used at all (bad file, wrong format, empty upload)."""

    code = "invalid_input"


class ClusterNameTaken(InvalidInput):
    """Another cluster already has this display name, ignoring case: two clusters of one name
    could not be told apart in any list (data: ``field`` = ``"name"``, ``cluster``: the other
    cluster's slug)."""

    code = "cluster_name_taken"


class UnsupportedFormat(InvalidInput):
    """A file in a format version the portal does not read (a slurmrestd data-parser version it
    does not know): refused as a whole, never read as if it had no cards."""


class UploadTooLarge(InvalidInput):
    code = "upload_too_large"


class PermissionDenied(DomainError):
    code = "permission_denied"
    status = 403


class Conflict(DomainError):
    code = "conflict"
    status = 409


class InvalidTransition(Conflict):
    """The object is not in a state that allows this action (data: ``status``, ``action``)."""

    code = "invalid_transition"


class InsufficientCapacity(Conflict):
    """Not enough free cards in the pool for the window (data: ``free``, ``requested``)."""

    code = "insufficient_capacity"


class PoolInUse(Conflict):
    """The pool still has allocations or requests (data: ``holding_allocations``,
    ``allocations``, ``requests`` and, for an edit, ``fields``)."""

    code = "pool_in_use"


class NotFound(DomainError):
    """The object does not exist or the caller may not see it (never leaks which)."""

    code = "not_found"
    status = 404


class BudgetExceeded(Conflict):
    """The request would take the team beyond a budget that refuses it, or that needs a pool
    admin where no person decides (data: ``budget``, ``period``, ``dimension``, ``limit``,
    ``used``, ``requested``, ``unit``, ``enforcement``; ``errors`` names ``card_count``)."""

    code = "budget_exceeded"


class ClusterInUse(Conflict):
    """The cluster still holds pools (data: ``pools``, their slugs)."""

    code = "cluster_in_use"


class ClusterTaken(Conflict):
    """Another cluster already has this Slurm ClusterName or Kubernetes API URL (data:
    ``field``, ``cluster``: the other cluster's slug)."""

    code = "cluster_taken"


class NodeNameShared(Conflict):
    """Several clusters have a node of this name (names are unique per cluster only); the
    caller names one (data: ``hostname``, ``clusters``: their slugs, ``""`` for the
    environment's)."""

    code = "node_name_shared"


class ClusterUnreachable(Conflict):
    """The pool's cluster was unreachable at its last check: its pools are read-only until it
    answers again (data: ``cluster``, ``reason``, ``checked_at``)."""

    code = "cluster_unreachable"


class IdempotencyKeyReused(DomainError):
    """An ``Idempotency-Key`` the caller already used, within its window, for a request that
    asked for something else (data: ``request``, that request's id; ``fields``, the names that
    differ). 422, as the IETF draft on the header says for a key reused with another body."""

    code = "idempotency_key_reused"
    status = 422
