"""Advance reservations of whole nodes for a team's account, through ``scontrol``.

Why the command line: slurmrestd serves reservations read-only up to v0.0.42 (Slurm 24.11's
OpenAPI document has ``GET /slurm/v0.0.4x/reservations/`` and ``.../reservation/{name}`` and no
write; ``research/slurm-modern/openapi-24.11.5.json``); a ``POST /slurm/v0.0.43/reservation``
appears with v0.0.43 (26.05's ``/openapi/v3`` lists it, ``tests/fixtures/slurm/rest_v0.0.45/
openapi_paths.json``) but its request body has not been recorded here, so it is not used yet.
Reservations can be created and deleted only by root or SlurmUser
(https://slurm.schedmd.com/reservations.html), i.e. by ``scontrol`` run next to the cluster, the
way :mod:`scheduler_adapters.slurm.sacctmgr` runs ``sacctmgr``: ``prefix`` says how
(``("chroot", "/opt/portal-slurm-modern")``, ``("ssh", "slurm-head")``).

Commands (https://slurm.schedmd.com/scontrol.html, "RESERVATIONS"):

- create: ``scontrol create reservation ReservationName=N Accounts=A Nodes=n1,n2
  StartTime=YYYY-MM-DDTHH:MM:SS EndTime=... [PartitionName=P] [Flags=DAILY|WEEKDAY|WEEKLY]``.
  scontrol reads the times as wall-clock time in slurmctld's zone, so aware datetimes are
  converted to ``time_zone`` first. With a recurrence flag the window is the first occurrence;
  slurmctld moves it forward each time it ends (a day; the next Monday-Friday day; a week) and
  never stops on its own. The same flags on 22.05, 24.11 and 26.05 (``Flags=`` in ``show``).
  A maintenance window is ``Flags=MAINT,IGNORE_JOBS`` (may overlap other reservations, made
  over running jobs without killing them).
- delete: ``scontrol delete ReservationName=N``. slurmctld refuses while a job is tied to it,
  running or still pending (``Requested reservation is in use``, ESLURM_RESERVATION_BUSY; seen
  on 22.05.8, 24.11.5 and 26.05.5 with a running and with a pending job), so the reservation is
  ended instead: ``scontrol update ReservationName=N EndTime=now``. The running jobs go on; no
  new job starts in it, the node is free for others once they end, and slurmctld purges the
  ended reservation once no job is tied to it (within seconds of the last one ending here; a
  job left pending for it keeps it, ``INACTIVE``, holding nothing).
  slurmctld keeps whole seconds and refuses an end at or before the start: while its "now" is
  the reservation's first second, or before its start, ``EndTime=now`` answers ``Invalid time
  specified`` (exit 1; 22.05 prefixes ``Error updating the reservation:``) and the reservation
  keeps its planned end. Then ``EndTime=now+1`` (scontrol counts ``now+N`` in seconds): accepted
  in the first second, the reservation ends one second after it started. Before the start
  that is refused the same way, and ``StartTime=now EndTime=now+1`` moves the window to the
  coming second, which ends it (``StartTime=`` on a started reservation answers ``Reservation
  already started``). All three answers seen on 22.05.8, 24.11.5 and 26.05.5. A job pending
  for a window that had not started stays pending on 24.11 and 26.05; on 22.05 it was started
  in that one second (and, as every job in an ended reservation, runs on).
- read: ``scontrol show reservation N --oneliner`` (``Key=value`` pairs on one line).
- QOS (issue 36): ``QOS=q1,q2`` on create admits only jobs of the account that also run under
  one of those QOS (26.05.5: a job of the account under ``normal`` was refused "Problem using
  reservation", under the listed QOS it was queued). 22.05.8 and 24.11.5 answer ``Unknown
  parameter QOS=`` and create nothing (:class:`ReservationQosUnsupported`), and their ``show``
  has no ``QOS=`` (the record's ``qos`` is ``None``).

Writes are idempotent like the rest of the adapter: creating a reservation that already exists
with the same account, nodes and window changes nothing and returns ``False``; one that exists
with other values raises :class:`SchedulerRejected` (a name is one allocation's); deleting a
missing one returns ``False``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from scheduler_adapters.errors import (
    ReservationQosUnsupported,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)
from scheduler_adapters.records import ReservationRecord, ReservationSpec
from scheduler_adapters.slurm.hostlist import expand_hostlist

Runner = Callable[..., subprocess.CompletedProcess[str]]

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
# scontrol's words for a slurmctld it cannot reach (src/scontrol; slurm_strerror texts)
_UNREACHABLE = ("unable to contact slurm controller", "connection refused", "socket timed out")
_NOT_FOUND = ("not found", "invalid reservation", "reservation is invalid")
_NO_QOS = "unknown parameter qos="  # 22.05 and 24.11's scontrol; nothing is created
_IN_USE = "reservation is in use"  # ESLURM_RESERVATION_BUSY's text (slurm_errno.c)
# slurmctld's refusals of an end at or before the start, or of a new start once started
_TOO_EARLY = ("invalid time specified", "reservation already started")
# Ways to end a reservation that is in use, each tried when slurmctld refuses the one before for
# its timing (module docstring, "delete"); the last: it started between the two before it.
_ENDINGS = (
    ("EndTime=now",),
    ("EndTime=now+1",),
    ("StartTime=now", "EndTime=now+1"),
    ("EndTime=now+1",),
)
_PAIR = re.compile(r"(?P<key>[A-Za-z]+)=(?P<value>\S*)")


class ScontrolReservations:
    """Create, read and delete reservations with ``scontrol`` (module docstring)."""

    def __init__(
        self,
        *,
        executable: str = "scontrol",
        prefix: Sequence[str] = (),
        time_zone: str = "UTC",
        timeout_s: float = 30.0,
        run: Runner = subprocess.run,
    ) -> None:
        self._executable = executable
        self._prefix = tuple(prefix)
        self._zone = ZoneInfo(time_zone)
        self._timeout_s = timeout_s
        self._run = run

    def create_reservation(self, spec: ReservationSpec) -> bool:
        """Reserve ``spec.nodes`` for ``spec.account``; ``True`` when it was created."""
        operation = "create_reservation"
        existing = self.get_reservation(spec.name)
        if existing is not None:
            if self._same(existing, spec):
                return False
            raise SchedulerRejected(
                f"reservation {spec.name} exists with other values "
                f"(accounts {','.join(existing.accounts)}, nodes {','.join(existing.nodes)})",
                operation=operation,
            )
        arguments = [
            "create",
            "reservation",
            f"ReservationName={spec.name}",
            f"Accounts={spec.account}",
            f"Nodes={','.join(spec.nodes)}",
            f"StartTime={self._wall_clock(spec.starts_at)}",
            f"EndTime={self._wall_clock(spec.ends_at)}",
        ]
        if spec.partition:
            arguments.append(f"PartitionName={spec.partition}")
        if spec.flags:
            arguments.append(f"Flags={','.join(spec.flags)}")
        if spec.qos:
            arguments.append(f"QOS={','.join(spec.qos)}")
        try:
            self._scontrol(arguments, operation=operation)
        except SchedulerRejected as exc:
            if spec.qos and _NO_QOS in exc.message.lower():
                raise ReservationQosUnsupported(
                    f"this Slurm's reservations take no QOS ({exc.message})", operation=operation
                ) from exc
            raise
        return True

    def delete_reservation(self, name: str) -> bool:
        """Remove the reservation, or, while a job is tied to it, end it now, or within the
        coming second when it has not started or started this second (module docstring);
        ``False`` when there was none."""
        operation = "delete_reservation"
        if self.get_reservation(name) is None:
            return False
        try:
            self._scontrol(["delete", f"ReservationName={name}"], operation=operation)
        except SchedulerRejected as exc:
            if _IN_USE not in exc.message.lower():
                raise
            self._end_now(name, operation=operation)
        return True

    def get_reservation(self, name: str) -> ReservationRecord | None:
        """The reservation as slurmctld has it, ``None`` when there is none by that name."""
        output = self._scontrol(
            ["show", "reservation", name, "--oneliner"],
            operation="get_reservation",
            missing_ok=True,
        )
        if output is None:
            return None
        for line in output.splitlines():
            fields = {m["key"]: m["value"] for m in _PAIR.finditer(line)}
            if fields.get("ReservationName") == name:
                return self._record(fields)
        return None

    @property
    def time_zone(self) -> str:
        """slurmctld's zone, as configured (an IANA name)."""
        return self._zone.key

    # ------------------------------------------------------------------ internals

    def _end_now(self, name: str, *, operation: str) -> None:
        last = len(_ENDINGS) - 1
        for attempt, times in enumerate(_ENDINGS):
            try:
                self._scontrol(["update", f"ReservationName={name}", *times], operation=operation)
                return
            except SchedulerRejected as exc:
                if attempt == last or not any(t in exc.message.lower() for t in _TOO_EARLY):
                    raise

    def _wall_clock(self, moment: datetime) -> str:
        return moment.astimezone(self._zone).strftime(_TIME_FORMAT)

    def _parse_time(self, value: str | None) -> datetime | None:
        if not value or value in {"(null)", "N/A", "Unknown"}:
            return None
        try:
            return datetime.strptime(value, _TIME_FORMAT).replace(tzinfo=self._zone)
        except ValueError:
            return None

    def _record(self, fields: dict[str, str]) -> ReservationRecord:
        def listed(key: str) -> tuple[str, ...]:
            value = fields.get(key, "")
            return () if value in {"", "(null)"} else tuple(value.split(","))

        nodes = fields.get("Nodes", "")
        return ReservationRecord(
            name=fields["ReservationName"],
            accounts=listed("Accounts"),
            nodes=tuple(sorted(expand_hostlist(nodes))) if nodes not in {"", "(null)"} else (),
            starts_at=self._parse_time(fields.get("StartTime")),
            ends_at=self._parse_time(fields.get("EndTime")),
            partition=fields.get("PartitionName") or None,
            state=fields.get("State") or None,
            flags=listed("Flags"),
            qos=tuple(sorted(listed("QOS"))) if "QOS" in fields else None,
        )

    def _same(self, existing: ReservationRecord, spec: ReservationSpec) -> bool:
        """Same account, nodes, recurrence and window; a repeating reservation slurmctld has
        already moved forward is the same when it keeps the window's length and has not moved
        back before the spec's start."""
        if (existing.accounts, existing.nodes, existing.repeat, existing.maintenance) != (
            (spec.account,),
            spec.nodes,
            spec.repeat,
            spec.maintenance,
        ):
            return False
        if existing.qos is not None and existing.qos != spec.qos:
            return False  # a Slurm without reservation QOS (None) was written without it
        starts_at = spec.starts_at.replace(microsecond=0)
        ends_at = spec.ends_at.replace(microsecond=0)
        if spec.repeat is None or existing.starts_at is None or existing.ends_at is None:
            return (existing.starts_at, existing.ends_at) == (starts_at, ends_at)
        return (
            existing.ends_at - existing.starts_at == ends_at - starts_at
            and existing.starts_at >= starts_at
        )

    def _scontrol(
        self, arguments: Sequence[str], *, operation: str, missing_ok: bool = False
    ) -> str | None:
        command = [*self._prefix, self._executable, *arguments]
        try:
            done = self._run(
                command, capture_output=True, text=True, timeout=self._timeout_s, check=False
            )
        except FileNotFoundError as exc:
            raise SchedulerError(
                f"reservations need {self._executable!r}, which is not installed here",
                operation=operation,
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SchedulerUnavailable(
                f"scontrol did not finish within {self._timeout_s:g}s", operation=operation
            ) from exc
        output = f"{done.stdout}\n{done.stderr}".strip()
        lowered = output.lower()
        if done.returncode == 0:
            if missing_ok and any(marker in lowered for marker in _NOT_FOUND):
                return None
            return output
        if missing_ok and any(marker in lowered for marker in _NOT_FOUND):
            return None
        if "permission denied" in lowered or "access/permission" in lowered:
            raise SchedulerAuthError(f"scontrol: {output}", operation=operation)
        if any(marker in lowered for marker in _UNREACHABLE):
            raise SchedulerUnavailable(f"scontrol: {output}", operation=operation)
        raise SchedulerRejected(
            f"scontrol exited {done.returncode}: {output or 'no output'}", operation=operation
        )
