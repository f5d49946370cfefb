"""``sacctmgr`` for what slurmrestd 22.05 does badly: changing an association's GrpTRES.

Over REST (dbv0.0.38) a modify is silently dropped when the association is its parent's first
child, replaces the whole GrpTRES list, and two shapes of it crash slurmrestd; dbv0.0.37
cannot modify at all. ``sacctmgr modify account`` has none of these problems: it merges
(``=-1`` clears one entry) and reports what it changed
(https://slurm.schedmd.com/sacctmgr.html, "GrpTRES").

It needs the Slurm client, munge and the cluster's munge key on the portal's host, so it is
off unless configured (``SACCTMGR = {"ENABLED": True}`` in the adapter settings).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

from scheduler_adapters.errors import (
    NotFound,
    SchedulerAuthError,
    SchedulerError,
    SchedulerRejected,
    SchedulerUnavailable,
)

Runner = Callable[..., subprocess.CompletedProcess[str]]

# sacctmgr's own words for a slurmdbd it cannot reach (src/sacctmgr, slurmdbd_agent.c)
_UNREACHABLE_MARKERS = ("unable to connect", "connection refused", "slurmdbd", "problem talking")


class SacctmgrFallback:
    """Run ``sacctmgr --immediate`` for one cluster; ``run`` is for tests.

    ``prefix`` is put before the command: how to reach the cluster's own client from here
    (``("chroot", "/opt/portal-slurm-modern")``, ``("ssh", "slurm-head")``); empty runs the
    local ``executable``.
    """

    def __init__(
        self,
        *,
        cluster: str,
        executable: str = "sacctmgr",
        prefix: Sequence[str] = (),
        timeout_s: float = 30.0,
        run: Runner = subprocess.run,
    ) -> None:
        self._cluster = cluster
        self._executable = executable
        self._prefix = tuple(prefix)
        self._timeout_s = timeout_s
        self._run = run

    def set_grp_tres(
        self,
        account: str,
        changes: Mapping[str, int],
        *,
        operation: str,
        minutes: Mapping[str, int] | None = None,
    ) -> None:
        """``sacctmgr -i modify account where name=A cluster=C set GrpTRES=k=v,...
        GrpTRESMins=k=v,...``.

        ``changes`` maps TRES names (``gres/gpu:a100``) to counts, ``minutes`` to TRES-minutes
        (``GrpTRESMins``), -1 to clear; entries not named keep their value. Only the account's
        own association changes, not its users'.
        """
        settings = [
            f"{option}={','.join(f'{name}={count}' for name, count in values.items())}"
            for option, values in (("GrpTRES", changes), ("GrpTRESMins", minutes or {}))
            if values
        ]
        if not settings:
            return
        self._sacctmgr(
            [
                "modify",
                "account",
                "where",
                f"name={account}",
                f"cluster={self._cluster}",
                "set",
                *settings,
            ],
            operation=operation,
            account=account,
        )

    def set_qos(
        self, account: str, allowed: Sequence[str], default: str | None, *, operation: str
    ) -> None:
        """``sacctmgr -i modify account where name=A cluster=C set QOS=a,b DefaultQOS=b`` (an
        empty list: ``QOS=''``; no default: ``DefaultQOS=-1``). Only the account's own
        association changes; its users' inherit the list unless they set their own."""
        self._sacctmgr(
            [
                "modify",
                "account",
                "where",
                f"name={account}",
                f"cluster={self._cluster}",
                "set",
                f"QOS={','.join(allowed)}",
                f"DefaultQOS={default or -1}",
            ],
            operation=operation,
            account=account,
        )

    def _sacctmgr(self, arguments: Sequence[str], *, operation: str, account: str) -> str:
        command = [*self._prefix, self._executable, "--immediate", *arguments]
        try:
            done = self._run(
                command, capture_output=True, text=True, timeout=self._timeout_s, check=False
            )
        except FileNotFoundError as exc:
            raise SchedulerError(
                f"sacctmgr fallback is enabled but {self._executable!r} is not installed",
                operation=operation,
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SchedulerUnavailable(
                f"sacctmgr did not finish within {self._timeout_s:g}s", operation=operation
            ) from exc
        output = f"{done.stdout}\n{done.stderr}".strip()
        if done.returncode == 0:
            return output
        lowered = output.lower()
        if "nothing modified" in lowered:
            raise NotFound("account", account, operation=operation)
        if "permission denied" in lowered or "access/permission" in lowered:
            raise SchedulerAuthError(f"sacctmgr: {output}", operation=operation)
        if any(marker in lowered for marker in _UNREACHABLE_MARKERS):
            raise SchedulerUnavailable(f"sacctmgr: {output}", operation=operation)
        raise SchedulerRejected(
            f"sacctmgr exited {done.returncode}: {output or 'no output'}", operation=operation
        )
