"""``SlurmRestAdapter``: the :class:`~scheduler_adapters.base.SchedulerAdapter` for Slurm,
over slurmrestd's REST API (https://slurm.schedmd.com/rest.html) with httpx.

Auth is JWT (https://slurm.schedmd.com/jwt.html): every request carries
``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` (22.05 needs both). Tokens come from a
provider called with the user name, or are minted here from the cluster's HS256 key exactly as
``scontrol token`` does. Admin calls (accounts, limits, cancel, reads) act as the configured
``user`` (an AdminLevel=Administrator slurmdb user); :meth:`SlurmRestAdapter.submit_job` acts as
the job's own user, so the provider must hand out tokens for team members (or a SlurmUser token,
which slurmrestd lets act as any user named in the header).

slurmrestd's HTTP status is unreliable: errors arrive as 500, 400 or even 200, always as an
``errors`` list. Every response's list is read and mapped onto :mod:`scheduler_adapters.errors`:

- transport failures, timeouts, HTTP 502-504, Slurm 1000-1004, 1800-1804 (controller
  unreachable), 5005 and 7000/7008 (database) -> :class:`SchedulerUnavailable` (transient);
- 1007 (token refused), HTTP 401 -> a fresh token and one retry, then :class:`SchedulerAuthError`;
  a bad token may look exactly like a daemon that is down (22.05's slurmctld: -1 or 5005; 26.05's
  slurmdbd: 7000, while 24.11's adds "authentication error"), so those are told apart by asking
  the other daemon with the same token; 2002 (permission denied) -> :class:`SchedulerAuthError`;
- 2017 (job id) and 9003 (nothing found) -> :class:`NotFound` where the call names an object;
- everything else -> :class:`SchedulerRejected` with the Slurm numbers kept.

The API version is discovered from ``GET /openapi/v3`` (or by probing ``/slurm/<v>/ping``),
and the version's JSON is in one module per version (:data:`DIALECTS`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import jwt

from scheduler_adapters.errors import (
    NotFound,
    RemoteError,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
    UnsupportedApiVersion,
)
from scheduler_adapters.records import (
    GRES_TYPE,
    Association,
    GpuLimit,
    JobPlacement,
    JobRecord,
    JobSpec,
    ReservationRecord,
    ReservationSpec,
    check_name,
)
from scheduler_adapters.slurm import v0_0_38, v0_0_40, v0_0_41, v0_0_42, v0_0_43, v0_0_44, v0_0_45
from scheduler_adapters.slurm.nodes import parse_slurm_nodes
from scheduler_adapters.slurm.reservations import ScontrolReservations
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback
from scheduler_adapters.types import ParseResult

TokenProvider = Callable[[str], str]
"""Called with a user name, returns a JWT slurmrestd accepts for that user."""

DIALECTS: dict[str, Any] = {
    v0_0_38.VERSION: v0_0_38,
    **{
        module.DIALECT.VERSION: module.DIALECT
        for module in (v0_0_40, v0_0_41, v0_0_42, v0_0_43, v0_0_44, v0_0_45)
    },
}
"""API versions this adapter speaks: the module :mod:`.v0_0_38` (Slurm 22.05-23.11) and one
:class:`~scheduler_adapters.slurm.modern.ModernDialect` per v0.0.40+ version (Slurm 23.11-26.05),
each with the same names (paths, ``*_body`` builders, ``read_*`` readers, ``PLUGINS``, flags).
Discovery picks the newest version that both the server and this dict know."""

# slurm_errno.h
_AUTH_REFUSED = {1007}  # SLURM_PROTOCOL_AUTHENTICATION_ERROR
_PERMISSION_DENIED = {2002}  # ESLURM_ACCESS_DENIED
_UNREACHABLE = {1000, 1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 1804, 5005, 7000, 7008}
# 24.11's slurmdbd side reports a refused token as 7000 "Unable to connect to database" with
# this description (HTTP 502); a slurmdbd that is down gives 7000 without it. 26.05 drops the
# description, so there a bare 7000 is ambiguous (the dialect's AMBIGUOUS_ERRORS) and the other
# daemon is asked (AUTH_PROBE).
_DBD_AUTH_MARKER = "authentication error"
_INVALID_JOB_ID = 2017
_INVALID_PARTITION = 2000
_NOTHING_FOUND = 9003
UNLIMITED_STAND_IN = 2**63 - 1
"""What slurmdbd stores for a GrpTRES of INFINITE64; no GPU count comes near it, so an entry
holding it is read as "no limit" (it is left behind only when a removal was interrupted)."""
_VERSION_IN_PATH = re.compile(r"^/slurm(?:db)?/(v\d+\.\d+\.\d+)/")


def mint_token(key: bytes, user: str, *, lifespan_s: int, now: float | None = None) -> str:
    """An HS256 JWT with the claims ``scontrol token`` writes: ``iat``, ``exp``, ``sun`` (user),
    signed by PyJWT.

    ``key`` is the cluster's ``jwt_hs256.key`` (AuthAltParameters=jwt_key=...).
    """
    issued = int(time.time() if now is None else now)
    claims = {"iat": issued, "exp": issued + lifespan_s, "sun": user}
    return jwt.encode(claims, key, algorithm="HS256")


@dataclass
class _CachedToken:
    token: str
    renew_at: float | None  # monotonic seconds; None: keep until refused


@dataclass(frozen=True)
class _Reply:
    status: int
    payload: dict[str, Any]
    errors: tuple[RemoteError, ...]  # only the ones the caller said it handles


class SlurmRestAdapter:
    """Slurm through slurmrestd; see the module docstring for auth and error mapping.

    ``url`` is slurmrestd's base URL; ``user`` the admin identity; ``cluster`` the
    ClusterName. Give ``token_provider`` or ``jwt_key`` (bytes of the HS256 key; tokens are then
    minted for ``token_lifespan_s`` seconds and renewed before they expire). ``api_version``
    skips discovery. ``timeout_s`` bounds each read: slurmrestd itself waits about 9 s before it
    reports an unreachable controller, so keep it above that. ``parent_account`` is where team
    accounts are created; ``sentinel_account`` an empty sibling used to work around a 22.05 bug
    (see :meth:`set_gpu_limit`). ``time_zone`` is the slurmdbd host's zone, in which 22.05 reads
    accounting query times. ``sacctmgr`` routes limit changes through the command line when the
    portal runs next to the cluster; ``reservations`` (``scontrol`` there) makes placement
    shapes real as advance reservations. ``transport`` is for tests (``httpx.MockTransport``).
    """

    def __init__(
        self,
        *,
        url: str,
        user: str,
        cluster: str,
        token_provider: TokenProvider | None = None,
        jwt_key: bytes | None = None,
        token_lifespan_s: int = 900,
        api_version: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        parent_account: str = "root",
        sentinel_account: str = "zz-portal-sentinel",
        time_zone: str = "UTC",
        sacctmgr: SacctmgrFallback | None = None,
        reservations: ScontrolReservations | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if (token_provider is None) == (jwt_key is None):
            raise ValueError("give exactly one of token_provider and jwt_key")
        if api_version is not None and api_version not in DIALECTS:
            raise UnsupportedApiVersion(
                f"API version {api_version} is not one this adapter speaks ({_known()})"
            )
        self._user = check_name("user", user)
        self._cluster = cluster
        self._parent = check_name("account", parent_account)
        self._sentinel = check_name("account", sentinel_account)
        self._time_zone = ZoneInfo(time_zone)
        self._sacctmgr = sacctmgr
        self._reservations = reservations
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lifespan_s = token_lifespan_s
        if jwt_key is not None:
            key = jwt_key
            self._provider: TokenProvider = lambda name: mint_token(
                key, name, lifespan_s=token_lifespan_s
            )
            self._self_minted = True
        else:
            self._provider = token_provider  # type: ignore[assignment]
            self._self_minted = False
        self._tokens: dict[str, _CachedToken] = {}
        self._dialect_module = DIALECTS[api_version] if api_version else None
        self._sentinel_ready = False
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            transport=transport,
            headers={"Accept": "application/json"},
        )

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SlurmRestAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def api_version(self) -> str:
        """The API version in use (discovered on first use)."""
        return self._dialect.VERSION

    # ------------------------------------------------------------------ operations

    def list_nodes(self) -> ParseResult:
        """``GET /slurm/<v>/nodes``, read by
        :func:`scheduler_adapters.slurm.nodes.parse_slurm_nodes` (one GPU per card of each
        node's ``gres``, model = GRES type)."""
        reply = self._request("list_nodes", "GET", self._dialect.NODES)
        if not isinstance(reply.payload.get("nodes"), list):
            raise UnexpectedResponse(
                f"{self._dialect.VERSION} nodes response has no 'nodes' list",
                operation="list_nodes",
            )
        return parse_slurm_nodes(reply.payload)

    def ensure_account(self, account: str, *, description: str, organization: str) -> bool:
        """Create or update the account record, then its association under ``parent_account``.

        v0.0.40+: one ``POST accounts_association`` creates both (it also adds the association
        to an existing record); ``POST /accounts`` updates a description. 22.05: two calls,
        ``POST /accounts`` for the record and ``POST /associations`` for the association
        (https://slurm.schedmd.com/sacctmgr.html, "add account"). Read back either way.
        """
        check_name("account", account)
        operation = "ensure_account"
        changed = False
        reply = self._request(
            operation, "GET", self._dialect.account_path(account), handles={_NOTHING_FOUND}
        )
        found = (
            None
            if reply.errors
            else self._dialect.read_account(reply.payload, cluster=self._cluster)
        )
        if self._dialect.ACCOUNTS_ASSOCIATION:
            return self._ensure_account_in_one_call(account, found, description, organization)
        if found is None or found[:2] != (description, organization):
            self._post_account_record(operation, account, description, organization)
            changed = True
        if found is None or not found[2]:
            self._create_account_association(operation, account)
            changed = True
        return changed

    def _ensure_account_in_one_call(
        self,
        account: str,
        found: tuple[str | None, str | None, bool | None] | None,
        description: str,
        organization: str,
    ) -> bool:
        operation = "ensure_account"
        changed = False
        if self._account_association(operation, account) is None:
            self._request(
                operation,
                "POST",
                self._dialect.ACCOUNTS_ASSOCIATION,
                body=self._dialect.accounts_association_body(
                    account,
                    description=description,
                    organization=organization,
                    cluster=self._cluster,
                    parent=self._parent,
                ),
            )
            association = self._account_association(operation, account)
            if association is None or association.parent_account != self._parent:
                raise SchedulerRejected(
                    f"slurmdbd accepted account {account!r} under {self._parent!r} but shows "
                    f"{'no association' if association is None else association}",
                    operation=operation,
                )
            changed = True
        if found is not None and found[:2] != (description, organization):
            self._post_account_record(operation, account, description, organization)
            changed = True
        return changed

    def _post_account_record(
        self, operation: str, account: str, description: str, organization: str
    ) -> None:
        """``POST /accounts``: create or update the record (no association)."""
        self._request(
            operation,
            "POST",
            self._dialect.ACCOUNTS,
            body=self._dialect.account_body(
                account, description=description, organization=organization
            ),
        )

    def ensure_user_association(self, account: str, user: str, partition: str) -> bool:
        """Create the user in slurmdbd if missing, then the association (account, user,
        partition). The partition is checked against slurmctld first: slurmdbd accepts any
        partition name and the association would never match a job."""
        check_name("account", account)
        check_name("user", user)
        check_name("partition", partition, GRES_TYPE)
        operation = "ensure_user_association"
        self._partition_gpus(operation, require=partition)
        associations = self._associations(operation, account)
        if not any(a.user is None and a.partition is None for a in associations):
            raise NotFound("account", account, operation=operation)
        if any(a.user == user and a.partition == partition for a in associations):
            return False
        if self._dialect.USERS_ASSOCIATION:
            # v0.0.40+: one call, which also creates a user slurmdbd does not know; it answers
            # 200 and creates nothing in some cases (no account association), so read back
            self._request(
                operation,
                "POST",
                self._dialect.USERS_ASSOCIATION,
                body=self._dialect.users_association_body(
                    account, user, cluster=self._cluster, partition=partition
                ),
            )
            if not any(
                a.user == user and a.partition == partition
                for a in self._associations(operation, account)
            ):
                raise SchedulerRejected(
                    f"slurmdbd accepted user {user!r} in account {account!r} on partition "
                    f"{partition!r} but does not show the association",
                    operation=operation,
                )
            return True
        reply = self._request(
            operation, "GET", self._dialect.user_path(user), handles={_NOTHING_FOUND}
        )
        if reply.errors:
            # only when missing: re-posting an existing user could reset its admin level
            self._request(
                operation, "POST", self._dialect.USERS, body=self._dialect.user_body(user)
            )
        self._request(
            operation,
            "POST",
            self._dialect.ASSOCIATIONS,
            body=self._dialect.user_association_body(
                account, user, cluster=self._cluster, partition=partition
            ),
        )
        return True

    def set_gpu_limit(self, limit: GpuLimit) -> bool:
        """Set ``GrpTRES=gres/gpu:<type>=<cards>`` on the account's association, keeping its
        other GrpTRES entries.

        Slurm has no per-partition account limits (see :class:`GpuLimit`): the partition is
        only checked to exist and offer the type. Pitfalls handled (22.05.8, found on a real
        cluster, ../shared/research/slurm/NOTES.md): a modify replaces the whole GrpTRES list,
        so the full list is sent; slurmdbd silently drops a modify of the association that is
        its parent's first child (every account just created or modified), so an empty sibling
        (``sentinel_account``) is modified first to take that slot, and the change is read back
        and retried up to 3 times before raising a transient :class:`SchedulerRejected`.
        With ``sacctmgr`` configured the change goes through ``sacctmgr modify account``
        instead (no such bug), and is read back the same way.
        """
        operation = "set_gpu_limit"
        gpus = self._partition_gpus(operation, require=limit.partition)
        if limit.partition is not None and limit.gres_type not in gpus[limit.partition]:
            raise SchedulerRejected(
                f"partition {limit.partition!r} has no GPUs of type {limit.gres_type!r} "
                f"(it has {sorted(gpus[limit.partition]) or 'none'})",
                operation=operation,
            )
        association = self._account_association(operation, limit.account)
        if association is None:
            raise NotFound("account", limit.account, operation=operation)
        self._check_tres_known(operation, f"gres/gpu:{limit.gres_type}")
        desired = dict(association.grp_tres)
        desired[f"gres/gpu:{limit.gres_type}"] = limit.cards
        if desired == dict(association.grp_tres):
            return False
        self._apply_grp_tres(operation, association, desired)
        return True

    def remove_gpu_limit(self, account: str, partition: str | None, gres_type: str) -> bool:
        """Drop ``gres/gpu:<type>`` from the account's GrpTRES (other entries stay).

        Over REST in 22.05.8 a clear (``count: -1``; an empty list crashes slurmrestd) is
        stored by slurmdbd but never reaches slurmctld, which keeps enforcing the old cap: a job
        pending on ``AssocGrpGRES`` would stay pending. So the entry is first raised to
        :data:`UNLIMITED_STAND_IN` (that does reach slurmctld), then cleared; both steps are read
        back. ``sacctmgr`` (when configured) clears in one step and has no such bug.
        """
        check_name("account", account)
        check_name("GRES type", gres_type, GRES_TYPE)
        operation = "remove_gpu_limit"
        association = self._account_association(operation, account)
        key = f"gres/gpu:{gres_type}"
        if association is None or key not in association.grp_tres:
            return False
        desired = {name: count for name, count in association.grp_tres.items() if name != key}
        self._apply_grp_tres(operation, association, desired)
        return True

    def get_gpu_limits(self, account: str) -> tuple[GpuLimit, ...]:
        """The account's ``gres/gpu:<type>`` GrpTRES entries. An untyped ``gres/gpu`` cap is
        not a per-type limit and is left out."""
        check_name("account", account)
        operation = "get_gpu_limits"
        association = self._account_association(operation, account)
        if association is None:
            raise NotFound("account", account, operation=operation)
        typed = {
            name.removeprefix("gres/gpu:"): cards
            for name, cards in association.grp_tres.items()
            if name.startswith("gres/gpu:") and cards < UNLIMITED_STAND_IN
        }
        if not typed:
            return ()
        gpus = self._partition_gpus(operation)
        limits = []
        for gres_type in sorted(typed):
            offering = [name for name, types in gpus.items() if gres_type in types]
            partition = offering[0] if len(offering) == 1 else None
            limits.append(GpuLimit(account, partition, gres_type, typed[gres_type]))
        return tuple(limits)

    def submit_job(self, spec: JobSpec) -> int:
        """``POST /slurm/<v>/job/submit`` as ``spec.user`` (its token comes from the provider)."""
        reply = self._request(
            "submit_job",
            "POST",
            self._dialect.JOB_SUBMIT,
            user=spec.user,
            body=self._dialect.job_submit_body(spec),
        )
        return self._dialect.read_submitted_job_id(reply.payload)

    def cancel_job(self, job_id: int) -> None:
        """``DELETE /slurm/<v>/job/{id}`` (SIGKILL). A job slurmctld has already forgotten
        (finished more than MinJobAge ago) is looked up in accounting: found means done."""
        operation = "cancel_job"
        reply = self._request(
            operation, "DELETE", self._dialect.job_path(job_id), handles={_INVALID_JOB_ID}
        )
        if reply.errors:
            self._accounting_job(operation, job_id)  # NotFound when it never existed

    def get_job(self, job_id: int) -> JobRecord:
        """``GET /slurm/<v>/job/{id}``, then ``/slurmdb/<v>/job/{id}`` once slurmctld has
        forgotten it."""
        operation = "get_job"
        reply = self._request(
            operation, "GET", self._dialect.job_path(job_id), handles={_INVALID_JOB_ID}
        )
        if not reply.errors:
            jobs = self._dialect.read_controller_jobs(reply.payload, now=self._clock())
            if jobs:
                return jobs[0]
        return self._accounting_job(operation, job_id)

    # ------------------------------------------------------------------ reservations

    def create_reservation(self, spec: ReservationSpec) -> bool:
        """Reserve whole nodes for an account (``scontrol``; see
        :mod:`scheduler_adapters.slurm.reservations` for why not REST)."""
        return self._reservation_tool("create_reservation").create_reservation(spec)

    def delete_reservation(self, name: str) -> bool:
        return self._reservation_tool("delete_reservation").delete_reservation(name)

    def get_reservation(self, name: str) -> ReservationRecord | None:
        return self._reservation_tool("get_reservation").get_reservation(name)

    def _reservation_tool(self, operation: str) -> ScontrolReservations:
        if self._reservations is None:
            raise SchedulerError(
                "reservations need scontrol next to the cluster: enable SCONTROL in the Slurm "
                "adapter settings (slurmrestd up to v0.0.42 cannot write reservations)",
                operation=operation,
            )
        return self._reservations

    def running_gpu_jobs(self, partition: str | None = None) -> tuple[JobPlacement, ...]:
        """``GET /slurm/<v>/jobs``: the jobs holding GPUs now (running, suspended or
        completing), optionally only those of ``partition``, with the cards each holds
        (node and device index); sorted by job id."""
        if partition is not None:
            check_name("partition", partition, GRES_TYPE)
        reply = self._request("running_gpu_jobs", "GET", self._dialect.JOBS)
        return tuple(
            sorted(
                (
                    job
                    for job in self._dialect.read_job_placements(reply.payload)
                    if partition is None or job.partition == partition
                ),
                key=lambda j: j.job_id,
            )
        )

    def jobs_from_accounting(
        self, start: datetime, end: datetime, *, accounts: Sequence[str] | None = None
    ) -> tuple[JobRecord, ...]:
        """``GET /slurmdb/<v>/jobs`` for sacct's window ``-S start -E end`` (jobs in any state
        at some time in it; https://slurm.schedmd.com/sacct.html). 22.05 has no user filter
        and no usage report endpoint: card-seconds are summed from these records."""
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be aware datetimes")
        if end < start:
            raise ValueError("end is before start")
        names = tuple(check_name("account", name) for name in accounts) if accounts else None
        reply = self._request(
            "jobs_from_accounting",
            "GET",
            self._dialect.ACCOUNTING_JOBS,
            params=self._dialect.accounting_jobs_params(
                start.astimezone(self._time_zone), end.astimezone(self._time_zone), names
            ),
            handles={_NOTHING_FOUND},
        )
        if reply.errors:
            return ()
        return tuple(
            sorted(self._dialect.read_accounting_jobs(reply.payload), key=lambda j: j.job_id)
        )

    # ------------------------------------------------------------------ associations

    def _associations(self, operation: str, account: str) -> list[Association]:
        reply = self._request(
            operation,
            "GET",
            self._dialect.ASSOCIATIONS,
            params={"account": account, "cluster": self._cluster},
            handles={_NOTHING_FOUND},
        )
        if reply.errors:
            return []
        return [a for a in self._dialect.read_associations(reply.payload) if a.account == account]

    def _account_association(self, operation: str, account: str) -> Association | None:
        for association in self._associations(operation, account):
            if association.user is None and association.partition is None:
                return association
        return None

    def _create_account_association(self, operation: str, account: str) -> None:
        self._request(
            operation,
            "POST",
            self._dialect.ASSOCIATIONS,
            body=self._dialect.account_association_body(
                account, cluster=self._cluster, parent=self._parent
            ),
            tolerate=self._dialect.is_missing_user_notice,
        )
        if self._account_association(operation, account) is None:
            raise SchedulerRejected(
                f"slurmdbd accepted the association of account {account!r} but does not show it",
                operation=operation,
            )

    def _check_tres_known(self, operation: str, name: str) -> None:
        """v0.0.40+ reads a GrpTRES entry naming a TRES the cluster does not account as "clear
        every GPU limit" (200, no error): refuse before writing."""
        if not self._dialect.CHECKS_TRES_BEFORE_WRITE:
            return
        reply = self._request(operation, "GET", self._dialect.TRES)
        known = self._dialect.read_tres_names(reply.payload)
        if name not in known:
            gpus = sorted(n for n in known if n.startswith("gres/gpu"))
            raise SchedulerRejected(
                f"cluster {self._cluster!r} does not account TRES {name!r} (it accounts "
                f"{', '.join(gpus) or 'no GPU TRES'}; see AccountingStorageTRES in slurm.conf)",
                operation=operation,
            )

    def _apply_grp_tres(
        self, operation: str, association: Association, desired: Mapping[str, int]
    ) -> None:
        account = association.account
        current = dict(association.grp_tres)
        cleared = [name for name in current if name not in desired]
        if self._sacctmgr is not None:
            changes = {n: c for n, c in desired.items() if current.get(n) != c}
            changes |= {name: -1 for name in cleared}
            self._sacctmgr.set_grp_tres(account, changes, operation=operation)
            self._verify_grp_tres(operation, account, desired, attempts=1)
            return
        if not self._dialect.MODIFIES_ASSOCIATIONS:
            raise SchedulerRejected(
                f"API {self._dialect.VERSION} cannot modify associations over REST; "
                "enable the sacctmgr fallback",
                operation=operation,
            )
        if not self._dialect.LEGACY_ASSOCIATION_WORKAROUNDS:
            # the list replaces the whole set; a lone -1 clears every GPU limit, which is
            # what removing the last entry means
            send = dict(desired) if desired else {cleared[0]: -1}
            self._request(
                operation,
                "POST",
                self._dialect.ASSOCIATIONS,
                body=self._dialect.grp_tres_body(account, cluster=self._cluster, grp_tres=send),
            )
            self._verify_grp_tres(operation, account, desired, attempts=1)
            return
        if cleared:
            # 22.05.8: a clear (-1) over REST reaches slurmdbd but not always slurmctld, which
            # then keeps enforcing the old cap until it restarts (seen on a real cluster when
            # the last entry was cleared; with other entries sent along it did arrive). A raise
            # always arrives, so entries are first raised to a stand-in for "unlimited".
            raised = dict(desired) | {name: UNLIMITED_STAND_IN for name in cleared}
            self._modify_grp_tres(operation, account, send=raised, expect=raised)
        cleared_too = dict(desired) | {name: -1 for name in cleared}
        self._modify_grp_tres(operation, account, send=cleared_too, expect=desired)

    def _modify_grp_tres(
        self, operation: str, account: str, *, send: Mapping[str, int], expect: Mapping[str, int]
    ) -> None:
        def attempt() -> None:
            self._touch_sentinel(operation)
            self._request(
                operation,
                "POST",
                self._dialect.ASSOCIATIONS,
                body=self._dialect.grp_tres_body(account, cluster=self._cluster, grp_tres=send),
            )

        self._verify_grp_tres(operation, account, expect, attempts=3, before_each=attempt)

    def _verify_grp_tres(
        self,
        operation: str,
        account: str,
        expect: Mapping[str, int],
        *,
        attempts: int,
        before_each: Callable[[], None] | None = None,
    ) -> None:
        """Read the association back after each attempt; slurmdbd may drop a change silently."""
        read_back: dict[str, int] | None = None
        for _ in range(attempts):
            if before_each is not None:
                before_each()
            found = self._account_association(operation, account)
            read_back = None if found is None else dict(found.grp_tres)
            if read_back == dict(expect):
                return
        raise SchedulerRejected(
            f"slurmdbd did not apply GrpTRES {dict(expect)} to account {account!r} "
            f"(read back {read_back}) after {attempts} attempt(s)",
            operation=operation,
            transient=True,
        )

    def _touch_sentinel(self, operation: str) -> None:
        """Modify the empty sentinel account so that it, not the target, is the first child."""
        if not self._sentinel_ready:
            if self._account_association(operation, self._sentinel) is None:
                self._request(
                    operation,
                    "POST",
                    self._dialect.ACCOUNTS,
                    body=self._dialect.account_body(
                        self._sentinel,
                        description="gpu-pool-portal: keep empty (works around a slurmdbd bug)",
                        organization="gpu-pool-portal",
                    ),
                )
                self._create_account_association(operation, self._sentinel)
            self._sentinel_ready = True
        # clearing gres/gpu on an association that has none changes nothing but its position
        self._request(
            operation,
            "POST",
            self._dialect.ASSOCIATIONS,
            body=self._dialect.grp_tres_body(
                self._sentinel, cluster=self._cluster, grp_tres={"gres/gpu": -1}
            ),
        )

    # ------------------------------------------------------------------ jobs, partitions

    def _accounting_job(self, operation: str, job_id: int) -> JobRecord:
        reply = self._request(
            operation,
            "GET",
            self._dialect.accounting_job_path(job_id),
            handles={_NOTHING_FOUND},
        )
        jobs = [] if reply.errors else self._dialect.read_accounting_jobs(reply.payload)
        if not jobs:
            raise NotFound("job", job_id, operation=operation)
        return jobs[0]

    def _partition_gpus(
        self, operation: str, *, require: str | None = None
    ) -> dict[str, dict[str, int]]:
        reply = self._request(operation, "GET", self._dialect.PARTITIONS)
        gpus = self._dialect.read_partition_gpus(reply.payload)
        if require is not None and require not in gpus:
            raise NotFound("partition", require, operation=operation)
        return gpus

    # ------------------------------------------------------------------ HTTP

    @property
    def _dialect(self) -> Any:
        if self._dialect_module is None:
            self._dialect_module = DIALECTS[self._discover_version()]
        return self._dialect_module

    def _discover_version(self) -> str:
        """Newest version both sides know: from the OpenAPI document's paths, else by probing
        ``/slurm/<v>/ping`` (404 means not served)."""
        served: set[str] = set()
        response = self._send("discover_api_version", "GET", "/openapi/v3", self._user)
        if response.status_code == 401:
            raise SchedulerAuthError(
                "slurmrestd refused the request (HTTP 401): both X-SLURM-USER-NAME and "
                "X-SLURM-USER-TOKEN are needed",
                operation="discover_api_version",
                http_status=401,
            )
        document = _json_or_none(response)
        if response.status_code == 200 and isinstance(document, dict):
            paths = document.get("paths")
            for path in paths if isinstance(paths, dict) else ():
                match = _VERSION_IN_PATH.match(path)
                if match:
                    served.add(match[1])
        else:
            for version in sorted(DIALECTS, key=_version_key, reverse=True):
                probe = self._send(
                    "discover_api_version", "GET", f"/slurm/{version}/ping", self._user
                )
                if probe.status_code != 404:
                    served.add(version)
        usable = sorted(served & DIALECTS.keys(), key=_version_key)
        if not usable:
            raise UnsupportedApiVersion(
                f"slurmrestd at {self._http.base_url} serves "
                f"{', '.join(sorted(served, key=_version_key)) or 'no recognisable version'}; "
                f"this adapter speaks {_known()}",
                operation="discover_api_version",
            )
        return usable[-1]

    def _request(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        user: str | None = None,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        handles: frozenset[int] | set[int] = frozenset(),
        tolerate: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> _Reply:
        """Send, read the ``errors`` list, re-mint a refused token once.

        ``handles``: error numbers the caller deals with itself (returned in the reply);
        ``tolerate``: a test for harmless notices that are dropped.
        """
        name = user or self._user
        for attempt in (1, 2):
            token = self._token(name)
            response = self._send(operation, method, path, name, token, params=params, body=body)
            if response.status_code == 401:
                refused = True
                errors: tuple[RemoteError, ...] = (RemoteError(None, response.text.strip()),)
            elif response.status_code == 304:
                # v0.0.4x: a delete or users_association that matched or added nothing
                return _Reply(304, {}, ())
            else:
                payload = self._payload(operation, response, path)
                raw = payload.get("errors") or []
                if not isinstance(raw, list):
                    raise UnexpectedResponse(
                        f"'errors' is {type(raw).__name__}, not a list", operation=operation
                    )
                kept = [e for e in raw if not (tolerate and isinstance(e, dict) and tolerate(e))]
                errors = tuple(_remote_error(entry) for entry in kept)
                if not errors:
                    self._check_plugin(operation, payload)
                    self._check_warnings(operation, payload, method, path)
                    return _Reply(response.status_code, payload, ())
                numbers = {error.number for error in errors}
                if numbers and numbers <= set(handles):
                    return _Reply(response.status_code, payload, errors)
                refused = (
                    bool(numbers & _AUTH_REFUSED)
                    or _dbd_refused(errors)
                    or (
                        numbers <= self._dialect.AMBIGUOUS_ERRORS
                        and self._token_refused(operation, name, token)
                    )
                )
                if not refused:
                    raise _classify(operation, errors, response.status_code)
            self._tokens.pop(name, None)
            if attempt == 2:
                raise SchedulerAuthError(
                    f"slurmrestd refused a freshly issued token for user {name!r}",
                    operation=operation,
                    errors=errors,
                    http_status=response.status_code,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _token(self, user: str) -> str:
        cached = self._tokens.get(user)
        if cached is not None and (cached.renew_at is None or time.monotonic() < cached.renew_at):
            return cached.token
        token = self._provider(user)
        renew_at = None
        if self._self_minted:
            renew_at = time.monotonic() + max(1.0, self._lifespan_s - min(60, self._lifespan_s / 2))
        self._tokens[user] = _CachedToken(token, renew_at)
        return token

    def _token_refused(self, operation: str, user: str, token: str) -> bool:
        """Ask the other daemon whether it accepts ``token`` (the dialect's ``AUTH_PROBE``):
        22.05's slurmdbd says 1007 where its slurmctld says only -1; 26.05's slurmctld says
        1007 (HTTP 511) where its slurmdbd says only 7000, as for a database that is down."""
        response = self._send(operation, "GET", self._dialect.AUTH_PROBE, user, token)
        if response.status_code == 401:
            return True
        payload = _json_or_none(response)
        errors = payload.get("errors") if isinstance(payload, dict) else None
        remote = [_remote_error(e) for e in errors or () if isinstance(e, dict)]
        return any(e.number in _AUTH_REFUSED for e in remote) or _dbd_refused(tuple(remote))

    def _send(
        self,
        operation: str,
        method: str,
        path: str,
        user: str,
        token: str | None = None,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> httpx.Response:
        headers = {
            "X-SLURM-USER-NAME": user,
            "X-SLURM-USER-TOKEN": token if token is not None else self._token(user),
        }
        try:
            return self._http.request(method, path, params=params, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise SchedulerUnavailable(
                f"slurmrestd did not answer {method} {path} in time ({type(exc).__name__})",
                operation=operation,
            ) from exc
        except httpx.TransportError as exc:
            raise SchedulerUnavailable(
                f"cannot reach slurmrestd at {self._http.base_url}: {exc or type(exc).__name__}",
                operation=operation,
            ) from exc

    def _payload(self, operation: str, response: httpx.Response, path: str) -> dict[str, Any]:
        payload = _json_or_none(response)
        if isinstance(payload, dict):
            return payload
        status = response.status_code
        if status in (502, 503, 504):
            raise SchedulerUnavailable(
                f"HTTP {status} from slurmrestd", operation=operation, http_status=status
            )
        if status == 404:
            raise UnsupportedApiVersion(
                f"slurmrestd does not serve {path} (HTTP 404): is API {self._dialect.VERSION} "
                "loaded (slurmrestd -s)?",
                operation=operation,
                http_status=status,
            )
        raise UnexpectedResponse(
            f"HTTP {status} from slurmrestd with a body that is not a JSON object: "
            f"{response.text[:120]!r}",
            operation=operation,
            http_status=status,
        )

    def _check_warnings(
        self, operation: str, payload: Mapping[str, Any], method: str, path: str
    ) -> None:
        """v0.0.4x runs a request with a field it does not know and only warns: a body this
        adapter built is then wrong for the version, and saying nothing would hide it (a
        submit's ``gres`` ignored this way runs the job without GPUs)."""
        unknown = getattr(self._dialect, "is_unknown_field_warning", None)
        warnings = payload.get("warnings")
        if unknown is None or not isinstance(warnings, list):
            return
        ignored = [w for w in warnings if isinstance(w, dict) and unknown(w)]
        if ignored:
            raise UnexpectedResponse(
                f"{method} {path}: slurmrestd {self._dialect.VERSION} ignored fields of the "
                f"request: {'; '.join(str(w.get('description')) for w in ignored)}",
                operation=operation,
            )

    def _check_plugin(self, operation: str, payload: Mapping[str, Any]) -> None:
        plugin = self._dialect.plugin_type(payload)
        if plugin is not None and plugin not in self._dialect.PLUGINS:
            raise UnexpectedResponse(
                f"answered by plugin {plugin!r}, but this adapter speaks "
                f"{self._dialect.VERSION} ({', '.join(self._dialect.PLUGINS)})",
                operation=operation,
            )


def _dbd_refused(errors: tuple[RemoteError, ...]) -> bool:
    return any(
        error.number == 7000 and _DBD_AUTH_MARKER in (error.description or "").lower()
        for error in errors
    )


def _classify(operation: str, errors: tuple[RemoteError, ...], status: int) -> SchedulerError:
    numbers = {error.number for error in errors}
    kwargs = {"operation": operation, "errors": errors, "http_status": status}
    if numbers & _PERMISSION_DENIED:
        return SchedulerAuthError("permission denied", **kwargs)
    if numbers & _UNREACHABLE or (numbers <= {-1} and status >= 500):
        return SchedulerUnavailable("a Slurm daemon behind slurmrestd is unreachable", **kwargs)
    if numbers & {_INVALID_JOB_ID}:
        return NotFound("job", None, **kwargs)
    if numbers & {_INVALID_PARTITION}:
        return SchedulerRejected("invalid partition", **kwargs)
    return SchedulerRejected("Slurm refused the request", **kwargs)


def _remote_error(entry: Any) -> RemoteError:
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


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("."))


def _known() -> str:
    return ", ".join(sorted(DIALECTS, key=_version_key))
