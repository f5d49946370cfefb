"""Slurm accounts, their associations and GPU limits (GrpTRES) through slurmrestd's slurmdbd
side: what :class:`~scheduler_adapters.slurm.client.SlurmRestAdapter`'s ``ensure_account``,
``ensure_user_association`` and ``*_gpu_limit(s)`` do, with the 22.05 workarounds (the
sentinel account, the two-step clear) and the read-back after every write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler_adapters.errors import NotFound, SchedulerRejected
from scheduler_adapters.records import GRES_TYPE, Association, GpuLimit, check_name
from scheduler_adapters.slurm.readers import share_usage_minutes
from scheduler_adapters.slurm.replies import NOTHING_FOUND
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback
from scheduler_adapters.slurm.transport import RestTransport

UNLIMITED_STAND_IN = 2**63 - 1
"""What slurmdbd stores for a GrpTRES of INFINITE64; no GPU count comes near it, so an entry
holding it is read as "no limit" (it is left behind only when a removal was interrupted)."""


class Associations:
    """Accounts under ``parent_account`` of ``cluster`` and their limits, over ``rest``.

    ``sentinel_account`` is an empty sibling used to work around a 22.05 bug (see
    :meth:`set_gpu_limit`); ``sacctmgr`` routes limit changes through the command line when the
    portal runs next to the cluster. Raises ``ValueError`` for an unusable account name.
    """

    def __init__(
        self,
        rest: RestTransport,
        *,
        cluster: str,
        parent_account: str,
        sentinel_account: str,
        sacctmgr: SacctmgrFallback | None,
    ) -> None:
        self._rest = rest
        self._cluster = cluster
        self._parent = check_name("account", parent_account)
        self._sentinel = check_name("account", sentinel_account)
        self._sacctmgr = sacctmgr
        self._sentinel_ready = False

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
        reply = self._rest.request(
            operation, "GET", self._rest.dialect.account_path(account), handles={NOTHING_FOUND}
        )
        found = (
            None
            if reply.errors
            else self._rest.dialect.read_account(reply.payload, cluster=self._cluster)
        )
        if self._rest.dialect.ACCOUNTS_ASSOCIATION:
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
            self._rest.request(
                operation,
                "POST",
                self._rest.dialect.ACCOUNTS_ASSOCIATION,
                body=self._rest.dialect.accounts_association_body(
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
        self._rest.request(
            operation,
            "POST",
            self._rest.dialect.ACCOUNTS,
            body=self._rest.dialect.account_body(
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
        if self._rest.dialect.USERS_ASSOCIATION:
            # v0.0.40+: one call, which also creates a user slurmdbd does not know; it answers
            # 200 and creates nothing in some cases (no account association), so read back
            self._rest.request(
                operation,
                "POST",
                self._rest.dialect.USERS_ASSOCIATION,
                body=self._rest.dialect.users_association_body(
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
        reply = self._rest.request(
            operation, "GET", self._rest.dialect.user_path(user), handles={NOTHING_FOUND}
        )
        if reply.errors:
            # only when missing: re-posting an existing user could reset its admin level
            self._rest.request(
                operation, "POST", self._rest.dialect.USERS, body=self._rest.dialect.user_body(user)
            )
        self._rest.request(
            operation,
            "POST",
            self._rest.dialect.ASSOCIATIONS,
            body=self._rest.dialect.user_association_body(
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

    def set_gpu_minutes(self, account: str, gres_type: str | None, minutes: int | None) -> bool:
        """Set (``minutes`` a count) or drop (``None``) ``GrpTRESMins=gres/gpu[:<type>]=<minutes>``
        on the account's association: what the account's jobs may still use of that TRES, in
        card-minutes, before slurmctld holds new ones (``AssocGrpGRESMinutes``). Other
        GrpTRES / GrpTRESMins entries stay; read back like every limit write.

        Slurm counts against it the association's accrued usage, which decays with
        ``PriorityDecayHalfLife`` unless the QOS has ``NoDecay`` (the test clusters: 7 days, no
        NoDecay). Raises NotFound (no account), SchedulerRejected (TRES not accounted; 22.05
        over REST without the sacctmgr fallback), SchedulerUnavailable, SchedulerAuthError.
        """
        check_name("account", account)
        if gres_type is not None:
            check_name("GRES type", gres_type, GRES_TYPE)
        if minutes is not None and minutes < 0:
            raise ValueError(f"GrpTRESMins of {minutes} minutes: 0 or more")
        operation = "set_gpu_minutes"
        key = "gres/gpu" if gres_type is None else f"gres/gpu:{gres_type}"
        association = self._account_association(operation, account)
        if association is None:
            raise NotFound("account", account, operation=operation)
        desired = {n: c for n, c in association.grp_tres_mins.items() if n != key}
        if minutes is not None:
            self._check_tres_known(operation, key)
            desired[key] = int(minutes)
        if desired == dict(association.grp_tres_mins):
            return False
        self._apply_grp_tres(operation, association, dict(association.grp_tres), minutes=desired)
        return True

    def get_gpu_minutes(self, account: str) -> dict[str, int]:
        """The account's ``gres/gpu[:<type>]`` GrpTRESMins entries in card-minutes by TRES
        name (``{"gres/gpu:a100": 120000}``). Raises NotFound (no account)."""
        check_name("account", account)
        association = self._account_association("get_gpu_minutes", account)
        if association is None:
            raise NotFound("account", account, operation="get_gpu_minutes")
        return {
            name: minutes
            for name, minutes in association.grp_tres_mins.items()
            if name == "gres/gpu" or name.startswith("gres/gpu:")
        }

    def get_gpu_minutes_used(self, account: str) -> dict[str, float] | None:
        """What slurmctld counts against the account's GPU GrpTRESMins now, in card-minutes
        by TRES name (``sshare``'s decayed TRES usage, ``GET /slurm/.../shares``); ``None``
        where slurmrestd has no such endpoint (22.05)."""
        check_name("account", account)
        if self._rest.dialect.SHARES is None:
            return None
        reply = self._rest.request(
            "get_gpu_minutes_used", "GET", self._rest.dialect.SHARES, params={"accounts": account}
        )
        used = share_usage_minutes(reply.payload, account)
        return {n: m for n, m in used.items() if n == "gres/gpu" or n.startswith("gres/gpu:")}

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

    # ------------------------------------------------------------------ associations

    def _associations(self, operation: str, account: str) -> list[Association]:
        reply = self._rest.request(
            operation,
            "GET",
            self._rest.dialect.ASSOCIATIONS,
            params={"account": account, "cluster": self._cluster},
            handles={NOTHING_FOUND},
        )
        if reply.errors:
            return []
        return [
            a for a in self._rest.dialect.read_associations(reply.payload) if a.account == account
        ]

    def account_association(self, operation: str, account: str) -> Association | None:
        """The account's own association on the cluster (no user, no partition), or ``None``."""
        return self._account_association(operation, account)

    def _account_association(self, operation: str, account: str) -> Association | None:
        for association in self._associations(operation, account):
            if association.user is None and association.partition is None:
                return association
        return None

    def _create_account_association(self, operation: str, account: str) -> None:
        self._rest.request(
            operation,
            "POST",
            self._rest.dialect.ASSOCIATIONS,
            body=self._rest.dialect.account_association_body(
                account, cluster=self._cluster, parent=self._parent
            ),
            tolerate=self._rest.dialect.is_missing_user_notice,
        )
        if self._account_association(operation, account) is None:
            raise SchedulerRejected(
                f"slurmdbd accepted the association of account {account!r} but does not show it",
                operation=operation,
            )

    def _check_tres_known(self, operation: str, name: str) -> None:
        """v0.0.40+ reads a GrpTRES entry naming a TRES the cluster does not account as "clear
        every GPU limit" (200, no error): refuse before writing."""
        if not self._rest.dialect.CHECKS_TRES_BEFORE_WRITE:
            return
        reply = self._rest.request(operation, "GET", self._rest.dialect.TRES)
        known = self._rest.dialect.read_tres_names(reply.payload)
        if name not in known:
            gpus = sorted(n for n in known if n.startswith("gres/gpu"))
            raise SchedulerRejected(
                f"cluster {self._cluster!r} does not account TRES {name!r} (it accounts "
                f"{', '.join(gpus) or 'no GPU TRES'}; see AccountingStorageTRES in slurm.conf)",
                operation=operation,
            )

    def _apply_grp_tres(
        self,
        operation: str,
        association: Association,
        desired: Mapping[str, int],
        *,
        minutes: Mapping[str, int] | None = None,
    ) -> None:
        """Make the association's GrpTRES ``desired`` and its GrpTRESMins ``minutes`` (``None``:
        as they are); every path sends both, as a REST modify clears a list it leaves out."""
        account = association.account
        current = dict(association.grp_tres)
        cleared = [name for name in current if name not in desired]
        now_mins = dict(association.grp_tres_mins)
        want_mins = now_mins if minutes is None else dict(minutes)
        cleared_mins = [name for name in now_mins if name not in want_mins]
        if self._sacctmgr is not None:
            changes = {n: c for n, c in desired.items() if current.get(n) != c}
            changes |= {name: -1 for name in cleared}
            mins = {n: c for n, c in want_mins.items() if now_mins.get(n) != c}
            mins |= {name: -1 for name in cleared_mins}
            self._sacctmgr.set_grp_tres(account, changes, operation=operation, minutes=mins)
            self._verify_grp_tres(operation, account, desired, attempts=1, minutes=want_mins)
            return
        if not self._rest.dialect.MODIFIES_ASSOCIATIONS:
            raise SchedulerRejected(
                f"API {self._rest.dialect.VERSION} cannot modify associations over REST; "
                "enable the sacctmgr fallback",
                operation=operation,
            )
        if not self._rest.dialect.LEGACY_ASSOCIATION_WORKAROUNDS:
            # the list replaces the whole set; a lone -1 clears every GPU limit, which is
            # what removing the last entry means
            send = dict(desired) or ({cleared[0]: -1} if cleared else {})
            send_mins = dict(want_mins) or ({cleared_mins[0]: -1} if cleared_mins else {})
            self._rest.request(
                operation,
                "POST",
                self._rest.dialect.ASSOCIATIONS,
                body=self._rest.dialect.grp_tres_body(
                    account, cluster=self._cluster, grp_tres=send, grp_tres_mins=send_mins
                ),
            )
            self._verify_grp_tres(operation, account, desired, attempts=1, minutes=want_mins)
            return
        if want_mins != now_mins:
            raise SchedulerRejected(
                f"API {self._rest.dialect.VERSION} cannot set GrpTRESMins reliably over REST "
                "(22.05 drops modifies); enable the sacctmgr fallback",
                operation=operation,
            )
        if cleared:
            # 22.05.8: a clear (-1) over REST reaches slurmdbd but not always slurmctld, which
            # then keeps enforcing the old cap until it restarts (seen on a real cluster when
            # the last entry was cleared; with other entries sent along it did arrive). A raise
            # always arrives, so entries are first raised to a stand-in for "unlimited".
            raised = dict(desired) | {name: UNLIMITED_STAND_IN for name in cleared}
            self._modify_grp_tres(operation, account, send=raised, expect=raised, minutes=now_mins)
        cleared_too = dict(desired) | {name: -1 for name in cleared}
        self._modify_grp_tres(
            operation, account, send=cleared_too, expect=desired, minutes=now_mins
        )

    def _modify_grp_tres(
        self,
        operation: str,
        account: str,
        *,
        send: Mapping[str, int],
        expect: Mapping[str, int],
        minutes: Mapping[str, int],
    ) -> None:
        def attempt() -> None:
            self._touch_sentinel(operation)
            self._rest.request(
                operation,
                "POST",
                self._rest.dialect.ASSOCIATIONS,
                body=self._rest.dialect.grp_tres_body(
                    account, cluster=self._cluster, grp_tres=send, grp_tres_mins=minutes
                ),
            )

        self._verify_grp_tres(
            operation, account, expect, attempts=3, before_each=attempt, minutes=minutes
        )

    def _verify_grp_tres(
        self,
        operation: str,
        account: str,
        expect: Mapping[str, int],
        *,
        attempts: int,
        before_each: Callable[[], None] | None = None,
        minutes: Mapping[str, int] | None = None,
    ) -> None:
        """Read the association back after each attempt; slurmdbd may drop a change silently.
        ``minutes``: the GrpTRESMins expected too (``None``: not checked)."""
        read_back: tuple[dict[str, int], dict[str, int]] | None = None
        want = (dict(expect), None if minutes is None else dict(minutes))
        for _ in range(attempts):
            if before_each is not None:
                before_each()
            found = self._account_association(operation, account)
            read_back = None if found is None else (dict(found.grp_tres), dict(found.grp_tres_mins))
            if (
                read_back is not None
                and read_back[0] == want[0]
                and want[1] in (None, read_back[1])
            ):
                return
        raise SchedulerRejected(
            f"slurmdbd did not apply GrpTRES {want[0]} / GrpTRESMins {want[1]} to account "
            f"{account!r} (read back {read_back}) after {attempts} attempt(s)",
            operation=operation,
            transient=True,
        )

    def _touch_sentinel(self, operation: str) -> None:
        """Modify the empty sentinel account so that it, not the target, is the first child."""
        if not self._sentinel_ready:
            if self._account_association(operation, self._sentinel) is None:
                self._rest.request(
                    operation,
                    "POST",
                    self._rest.dialect.ACCOUNTS,
                    body=self._rest.dialect.account_body(
                        self._sentinel,
                        description="gpu-pool-portal: keep empty (works around a slurmdbd bug)",
                        organization="gpu-pool-portal",
                    ),
                )
                self._create_account_association(operation, self._sentinel)
            self._sentinel_ready = True
        # clearing gres/gpu on an association that has none changes nothing but its position
        self._rest.request(
            operation,
            "POST",
            self._rest.dialect.ASSOCIATIONS,
            body=self._rest.dialect.grp_tres_body(
                self._sentinel, cluster=self._cluster, grp_tres={"gres/gpu": -1}
            ),
        )

    # ------------------------------------------------------------------ partitions

    def _partition_gpus(
        self, operation: str, *, require: str | None = None
    ) -> dict[str, dict[str, int]]:
        reply = self._rest.request(operation, "GET", self._rest.dialect.PARTITIONS)
        gpus = self._rest.dialect.read_partition_gpus(reply.payload)
        if require is not None and require not in gpus:
            raise NotFound("partition", require, operation=operation)
        return gpus
