"""Errors every scheduler adapter raises, real or fake, so callers can act on them alike.

Callers decide by class and by :attr:`SchedulerError.transient`: a Celery task retries only a
transient error (the scheduler is down, timed out, or accepted a change it then dropped), and
records a permanent one on the allocation with its message and the scheduler's own errors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteError:
    """One entry of a scheduler's own error list.

    For slurmrestd this is one element of the response's ``errors`` list: ``number`` is the
    Slurm error number (``error_number``, ``error_code`` or ``errno`` depending on the plugin;
    ``slurm_errno.h``, e.g. 2045 "Invalid account or account/partition combination specified"),
    ``text`` the error string and ``description``/``source`` Slurm's detail and the function
    that failed. ``number`` is ``None`` when the scheduler gave none.
    """

    number: int | None
    text: str
    description: str | None = None
    source: str | None = None

    def __str__(self) -> str:
        detail = (
            f" ({self.description})" if self.description and self.description != self.text else ""
        )
        return (
            f"{self.number}: {self.text}{detail}" if self.number is not None else self.text + detail
        )


class SchedulerError(Exception):
    """Base of every adapter error.

    ``code`` is a stable machine-readable name for API bodies and audit events;
    ``operation`` names the adapter call (``"set_gpu_limit"``); ``errors`` carries the
    scheduler's own error entries; ``http_status`` the HTTP status when there was a response.
    ``transient`` is ``True`` when the same call may succeed later without any change.
    """

    code = "scheduler_error"
    transient = False

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        errors: tuple[RemoteError, ...] = (),
        http_status: int | None = None,
        transient: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.errors = errors
        self.http_status = http_status
        if transient is not None:
            self.transient = transient

    @property
    def error_numbers(self) -> tuple[int, ...]:
        """The scheduler's error numbers, in the order it gave them."""
        return tuple(error.number for error in self.errors if error.number is not None)

    def __str__(self) -> str:
        where = f"{self.operation}: " if self.operation else ""
        remote = "; ".join(str(error) for error in self.errors)
        return f"{where}{self.message}" + (f" [{remote}]" if remote else "")


class SchedulerUnavailable(SchedulerError):
    """The scheduler could not be reached or did not answer in time (transient).

    Connection refused, timeouts, a dropped connection, HTTP 502/503/504, and Slurm errors
    that mean a daemon behind slurmrestd is down (1800-1804 "Unable to contact slurm
    controller", 7000 "Unable to connect to database").
    """

    code = "scheduler_unavailable"
    transient = True


class CredentialsUnreadable(SchedulerError):
    """The credentials file a cluster names (a JWT key, a token, a kubeconfig) could not be
    read: a Secret not mounted yet, a file being rotated, a wrong path. Nothing was sent to the
    scheduler. Transient: the same call may succeed once the file is readable."""

    code = "credentials_unreadable"
    transient = True


class SchedulerAuthError(SchedulerError):
    """The scheduler refused who we are: a token it does not accept even after a fresh one,
    or an identity without the permission (Slurm 2002 "Access/permission denied")."""

    code = "scheduler_auth"


class SchedulerRejected(SchedulerError):
    """The scheduler understood the request and refused it; :attr:`errors` says why.

    Example: a job for an account the user has no association with gives Slurm error 2045.
    """

    code = "scheduler_rejected"


class ReservationQosUnsupported(SchedulerRejected):
    """slurmctld refused a reservation's ``QOS=`` as an unknown parameter (22.05, 24.11; 26.05
    takes it) and created nothing."""


class NotFound(SchedulerError):
    """The named object does not exist: ``kind`` is ``"account"``, ``"job"``,
    ``"partition"``...; ``key`` its name or id."""

    code = "scheduler_not_found"

    def __init__(self, kind: str, key: object, **kwargs) -> None:
        super().__init__(f"{kind} {key!r} not found", **kwargs)
        self.kind = kind
        self.key = key


class UnexpectedResponse(SchedulerError):
    """The scheduler answered with something this adapter cannot read: a JSON shape from
    another API version, a missing field, or a body that is not JSON. Not transient: retrying
    will not change the server's version."""

    code = "scheduler_unexpected_response"


class UnsupportedApiVersion(UnexpectedResponse):
    """The server serves no API version this adapter speaks."""

    code = "scheduler_unsupported_api_version"
