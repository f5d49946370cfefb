"""Slurm QOS the portal owns (one per workload class, issue #36) and the QOS an account's
association may use, through slurmrestd's slurmdbd side: what
:class:`~scheduler_adapters.slurm.client.SlurmRestAdapter`'s ``ensure_qos``, ``get_qos``,
``set_account_qos`` and ``get_account_qos`` do. Every write is read back.

Shapes (the OpenAPI each test cluster serves at ``/openapi/v3`` and what it did):

- ``POST /slurmdb/<v>/qos`` upserts a QOS: the list key is ``"QOS"`` in v0.0.38 (22.05.8;
  ``"qos"`` answers 9200) and ``"qos"`` from v0.0.40 (24.11.5, 26.05.5), ``priority`` bare in
  v0.0.38 and ``{set, number}`` later; ``preempt.list`` replaces the QOS's whole list and
  ``preempt.mode`` is a list of words.
- ``POST /slurmdb/<v>/associations`` with ``qos`` and ``default.qos`` sets the account
  association's ``QOS`` and ``DefaultQOS``. 24.11.5 and 26.05.5 clear the GrpTRES / GrpTRESMins
  the body leaves out, so they go along unchanged. 22.05.8 applied the first such modify of a
  fresh account and silently dropped later ones (also with the sentinel account touched first),
  so on v0.0.38 the change goes through ``sacctmgr`` when the fallback is configured and is
  otherwise refused with that reason, never half-applied.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler_adapters.errors import NotFound, SchedulerRejected
from scheduler_adapters.records import AccountQos, QosSpec, check_name
from scheduler_adapters.slurm.associations import Associations
from scheduler_adapters.slurm.replies import NOTHING_FOUND
from scheduler_adapters.slurm.sacctmgr import SacctmgrFallback
from scheduler_adapters.slurm.transport import RestTransport


class QualitiesOfService:
    """QOS records of ``cluster``'s slurmdbd and accounts' QOS lists, over ``rest``."""

    def __init__(
        self,
        rest: RestTransport,
        associations: Associations,
        *,
        cluster: str,
        sacctmgr: SacctmgrFallback | None,
    ) -> None:
        self._rest = rest
        self._associations = associations
        self._cluster = cluster
        self._sacctmgr = sacctmgr

    def get_qos(self, name: str) -> QosSpec | None:
        """The QOS ``name`` as slurmdbd holds it, ``None`` when there is none."""
        check_name("QOS", name)
        return self._read("get_qos", name)

    def ensure_qos(self, spec: QosSpec) -> bool:
        """Create or update ``spec`` (priority, preempt list, preempt mode); ``True`` when
        something was written. Every QOS it preempts must exist first (slurmdbd would store a
        list naming nothing): NotFound names the missing one. SchedulerRejected when the read
        back differs."""
        spec.check_writable()
        operation = "ensure_qos"
        found = self._read(operation, spec.name)
        for other in spec.preempts:
            if self._read(operation, other) is None:
                raise NotFound("QOS", other, operation=operation)
        if found is not None and _settings(found) == _settings(spec):
            return False
        dialect = self._rest.dialect
        self._rest.request(operation, "POST", dialect.QOS, body=dialect.qos_body(spec))
        read_back = self._read(operation, spec.name)
        if read_back is None or _settings(read_back) != _settings(spec):
            raise SchedulerRejected(
                f"slurmdbd accepted QOS {spec.name!r} but shows "
                f"{'nothing' if read_back is None else read_back}",
                operation=operation,
            )
        return True

    def get_account_qos(self, account: str) -> AccountQos:
        """The QOS the account's own association allows and its default. NotFound: no
        account association on this cluster."""
        check_name("account", account)
        association = self._associations.account_association("get_account_qos", account)
        if association is None:
            raise NotFound("account", account, operation="get_account_qos")
        default = association.default_qos
        return AccountQos(
            account,
            association.qos,
            default if default in association.qos else None,
        )

    def set_account_qos(self, wanted: AccountQos) -> bool:
        """Make the account association's ``QOS`` list exactly ``wanted.allowed`` and its
        ``DefaultQOS`` ``wanted.default``; ``True`` when something was written. Each QOS must
        exist (NotFound names the first missing one). GrpTRES / GrpTRESMins stay as they are."""
        operation = "set_account_qos"
        for name in wanted.allowed:
            if self._read(operation, name) is None:
                raise NotFound("QOS", name, operation=operation)
        association = self._associations.account_association(operation, wanted.account)
        if association is None:
            raise NotFound("account", wanted.account, operation=operation)
        if (association.qos, association.default_qos) == (wanted.allowed, wanted.default):
            return False
        dialect = self._rest.dialect
        if self._sacctmgr is not None:
            self._sacctmgr.set_qos(
                wanted.account, wanted.allowed, wanted.default, operation=operation
            )
        elif (refusal := self.account_qos_refusal()) is not None:
            raise SchedulerRejected(refusal, operation=operation)
        else:
            self._rest.request(
                operation,
                "POST",
                dialect.ASSOCIATIONS,
                body=dialect.association_qos_body(
                    wanted.account,
                    cluster=self._cluster,
                    qos=wanted,
                    grp_tres=association.grp_tres,
                    grp_tres_mins=association.grp_tres_mins,
                ),
            )
        self._verify(operation, wanted, association.grp_tres, association.grp_tres_mins)
        return True

    def account_qos_refusal(self) -> str | None:
        """Why an account's QOS list cannot be written on this cluster, ``None`` when it can:
        v0.0.38 (22.05) over REST without the sacctmgr fallback (it drops the change, see the
        module docstring). Asked before anything is written, so a caller refuses whole."""
        dialect = self._rest.dialect
        if self._sacctmgr is None and dialect.LEGACY_ASSOCIATION_WORKAROUNDS:
            return (
                f"API {dialect.VERSION} does not apply association QOS changes reliably over "
                "REST (22.05 drops them); enable the sacctmgr fallback"
            )
        return None

    def _verify(
        self,
        operation: str,
        wanted: AccountQos,
        grp_tres: Mapping[str, int],
        grp_tres_mins: Mapping[str, int],
    ) -> None:
        found = self._associations.account_association(operation, wanted.account)
        shows = None if found is None else (found.qos, found.default_qos)
        limits = None if found is None else (dict(found.grp_tres), dict(found.grp_tres_mins))
        if shows != (wanted.allowed, wanted.default) or limits != (
            dict(grp_tres),
            dict(grp_tres_mins),
        ):
            raise SchedulerRejected(
                f"slurmdbd did not apply QOS {list(wanted.allowed)} (default {wanted.default}) "
                f"to account {wanted.account!r} with its limits unchanged: read back {shows}, "
                f"limits {limits}",
                operation=operation,
                transient=True,
            )

    def _read(self, operation: str, name: str) -> QosSpec | None:
        reply = self._rest.request(
            operation, "GET", self._rest.dialect.qos_path(name), handles={NOTHING_FOUND}
        )
        if reply.errors:
            return None
        for found in self._rest.dialect.read_qos(reply.payload):
            if found.name == name:
                return found
        return None


def _settings(spec: QosSpec) -> tuple[int, tuple[str, ...], str]:
    return spec.priority, spec.preempts, spec.preempt_mode
