"""Reading slurmrestd's answers: the ``errors`` list of every response, and what each Slurm
error number means for the caller.

slurmrestd's HTTP status is unreliable: errors arrive as 500, 400 or even 200, always as an
``errors`` list. Every response's list is read (:func:`remote_error`) and mapped onto
:mod:`scheduler_adapters.errors` (:func:`classify`; the token handling is
:meth:`~scheduler_adapters.slurm.transport.RestTransport.request`'s):

- transport failures, timeouts, HTTP 502-504, Slurm 1000-1004, 1800-1804 (controller
  unreachable), 5005 and 7000/7008 (database) -> :class:`SchedulerUnavailable` (transient);
  so is an HTTP 5xx that is no definite refusal: a body that is not JSON (a proxy's error
  page), or only unspecified numbers (-1 ``SLURM_ERROR``, 1, none at all);
- 1007 (token refused), HTTP 401 -> a fresh token and one retry, then :class:`SchedulerAuthError`;
  a bad token may look exactly like a daemon that is down (22.05's slurmctld: -1 or 5005; 26.05's
  slurmdbd: 7000, while 24.11's adds "authentication error"), so those are told apart by asking
  the other daemon with the same token; 2002 (permission denied) -> :class:`SchedulerAuthError`;
- 2017 (job id) and 9003 (nothing found) -> :class:`NotFound` where the call names an object;
- everything else -> :class:`SchedulerRejected` with the Slurm numbers kept.

Numbers from ``slurm_errno.h``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)

# slurm_errno.h
AUTH_REFUSED = {1007}  # SLURM_PROTOCOL_AUTHENTICATION_ERROR
_PERMISSION_DENIED = {2002}  # ESLURM_ACCESS_DENIED
_UNREACHABLE = {1000, 1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 1804, 5005, 7000, 7008}
# Numbers that say only "it failed": -1 is SLURM_ERROR; slurmrestd answers 1 when a handler
# fails without a Slurm error of its own; None is an entry without a number. With a 5xx they
# are no refusal of the request, so the call may succeed later.
_UNSPECIFIED = {None, -1, 1}
# 24.11's slurmdbd side reports a refused token as 7000 "Unable to connect to database" with
# this description (HTTP 502); a slurmdbd that is down gives 7000 without it. 26.05 drops the
# description, so there a bare 7000 is ambiguous (the dialect's AMBIGUOUS_ERRORS) and the other
# daemon is asked (AUTH_PROBE).
_DBD_AUTH_MARKER = "authentication error"
INVALID_JOB_ID = 2017
_INVALID_PARTITION = 2000
NOTHING_FOUND = 9003


@dataclass(frozen=True)
class Reply:
    """A response whose ``errors`` list held nothing, or only numbers the caller handles."""

    status: int
    payload: dict[str, Any]
    errors: tuple[RemoteError, ...]  # only the ones the caller said it handles


def dbd_refused(errors: tuple[RemoteError, ...]) -> bool:
    """True when slurmdbd's 7000 says it refused the token, not that the database is down."""
    return any(
        error.number == 7000 and _DBD_AUTH_MARKER in (error.description or "").lower()
        for error in errors
    )


def classify(operation: str, errors: tuple[RemoteError, ...], status: int) -> SchedulerError:
    """The adapter error for ``errors`` that are not a refused token (see the module docstring);
    returned, not raised."""
    numbers = {error.number for error in errors}
    kwargs = {"operation": operation, "errors": errors, "http_status": status}
    if numbers & _PERMISSION_DENIED:
        return SchedulerAuthError("permission denied", **kwargs)
    if numbers & _UNREACHABLE:
        return SchedulerUnavailable("a Slurm daemon behind slurmrestd is unreachable", **kwargs)
    if numbers <= _UNSPECIFIED and status >= 500:
        return SchedulerUnavailable(f"slurmrestd answered {status} with no refusal", **kwargs)
    if numbers & {INVALID_JOB_ID}:
        return NotFound("job", None, **kwargs)
    if numbers & {_INVALID_PARTITION}:
        return SchedulerRejected("invalid partition", **kwargs)
    return SchedulerRejected("Slurm refused the request", **kwargs)


def remote_error(entry: Any) -> RemoteError:
    """One entry of an ``errors`` list (its number under whichever key the plugin uses)."""
    if not isinstance(entry, dict):
        return RemoteError(None, str(entry))
    number = next(
        (
            entry[key]
            for key in ("error_number", "error_code", "errno")
            if isinstance(entry.get(key), int)
        ),
        None,
    )
    description = entry.get("description")
    text = entry.get("error") or description or "no error text"
    source = entry.get("source")
    return RemoteError(
        number,
        str(text),
        str(description) if description else None,
        str(source) if source else None,
    )


def json_or_none(response: httpx.Response) -> Any:
    """The response's JSON, or ``None`` when its body is not JSON."""
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
