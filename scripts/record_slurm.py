"""Record a real slurmrestd's answers for the fast tests (``tests/fixtures/slurm/rest_<version>/``).

    .venv/bin/python scripts/record_slurm.py ENV_FILE VERSION [OUT_DIR]

``ENV_FILE`` describes the cluster as the integration tier's env files do (``SLURMRESTD_URL``,
``SLURM_JWT_KEY``, ``SLURM_CLUSTER``, ``SLURM_ADMIN_USER``, ``SLURM_MODERN_ROOT`` …); it must be
a test cluster with partition ``gpu`` holding ``gpu:a100`` cards and the user ``alice``.
Each exchange becomes ``<name>.json``:
``{"request": "METHOD /path?query", "status": N, "body": {...} or "text", "request_body": ...}``,
unedited except that ``openapi_paths`` keeps only the path names. The scenario creates the
account ``fx-team`` (deleted again at the end) and runs two short jobs as alice.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_adapters.registry import read_env_file  # noqa: E402
from scheduler_adapters.slurm.transport import mint_token  # noqa: E402

ACCOUNT = "fx-team"


class Recorder:
    def __init__(self, env: dict[str, str], version: str, out: Path) -> None:
        self.url = env["SLURMRESTD_URL"].rstrip("/")
        self.key = Path(env["SLURM_JWT_KEY"]).read_bytes()
        self.admin = env["SLURM_ADMIN_USER"]
        self.cluster = env["SLURM_CLUSTER"]
        self.ctld = f"/slurm/{version}"
        self.dbd = f"/slurmdb/{version}"
        self.out = out
        self.http = httpx.Client(timeout=60)

    def call(
        self,
        name: str | None,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        user: str | None = None,
        token: str | None = None,
    ) -> httpx.Response:
        user = user or self.admin
        headers = {
            "X-SLURM-USER-NAME": user,
            "X-SLURM-USER-TOKEN": token or mint_token(self.key, user, lifespan_s=300),
        }
        if token == "":
            headers = {}
        response = self.http.request(
            method, self.url + path, params=params, json=body, headers=headers
        )
        if name is not None:
            query = f"?{urlencode(params)}" if params else ""
            try:
                answer: Any = response.json()
            except ValueError:
                answer = response.text
            record = {"request": f"{method} {path}{query}", "status": response.status_code,
                      "body": answer}  # fmt: skip
            if body is not None:
                record["request_body"] = body
            (self.out / f"{name}.json").write_text(
                json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8"
            )
        return response

    def wait_job(self, job_id: int, accept: set[str]) -> None:
        for _ in range(120):
            jobs = self.call(None, "GET", f"{self.ctld}/job/{job_id}").json().get("jobs") or []
            if jobs and set(jobs[0]["job_state"]) & accept:
                return
            time.sleep(0.5)
        raise SystemExit(f"job {job_id} never reached {accept}")

    def submit(self, name: str, gpus: int, sleep_s: int) -> int:
        body = {
            "job": {
                "name": name,
                "account": ACCOUNT,
                "partition": "gpu",
                "time_limit": {"set": True, "number": 5},
                "memory_per_node": {"set": True, "number": 100},
                "current_working_directory": "/tmp",
                "standard_output": "/dev/null",
                "environment": ["PATH=/usr/bin:/bin"],
                "script": f"#!/bin/bash\nsleep {sleep_s}\n",
                "tres_per_node": f"gres/gpu:a100:{gpus}",
            }
        }
        return self.call(name, "POST", f"{self.ctld}/job/submit", body=body, user="alice").json()[
            "job_id"
        ]

    def run(self) -> None:
        ctld, dbd, cluster = self.ctld, self.dbd, self.cluster
        started = int(time.time()) - 5
        document = self.call(None, "GET", "/openapi/v3").json()
        (self.out / "openapi_paths.json").write_text(
            json.dumps({"request": "GET /openapi/v3", "status": 200,
                        "body": {"paths": {p: {} for p in sorted(document["paths"])}}},
                       indent=1) + "\n", encoding="utf-8")  # fmt: skip
        self.call(None, "DELETE", f"{dbd}/account/{ACCOUNT}")  # a previous run's leftovers
        self.call("nodes", "GET", f"{ctld}/nodes")
        self.call("partitions", "GET", f"{ctld}/partitions")
        self.call("tres", "GET", f"{dbd}/tres")
        self.call("account_missing", "GET", f"{dbd}/account/{ACCOUNT}")
        self.call("associations_missing", "GET", f"{dbd}/associations",
                  params={"account": ACCOUNT, "cluster": cluster})  # fmt: skip
        self.call("user_missing", "GET", f"{dbd}/user/nobody-here")
        self.call("accounts_association", "POST", f"{dbd}/accounts_association", body={
            "association_condition": {"accounts": [ACCOUNT], "clusters": [cluster],
                                      "association": {"parent": "root"}},
            "account": {"description": "Fixture team", "organization": "acme"}})  # fmt: skip
        self.call("account", "GET", f"{dbd}/account/{ACCOUNT}")
        self.call(
            "accounts_post",
            "POST",
            f"{dbd}/accounts",
            body={
                "accounts": [
                    {
                        "name": ACCOUNT,
                        "description": "Fixture team, renamed",
                        "organization": "acme",
                    }
                ]
            },
        )
        self.call("account_renamed", "GET", f"{dbd}/account/{ACCOUNT}")
        self.call("associations_account_only", "GET", f"{dbd}/associations",
                  params={"account": ACCOUNT, "cluster": cluster})  # fmt: skip
        self.call("users_association", "POST", f"{dbd}/users_association", body={
            "association_condition": {"users": ["alice"], "accounts": [ACCOUNT],
                                      "clusters": [cluster], "partitions": ["gpu"]},
            "user": {}})  # fmt: skip
        self.call("users_association_again", "POST", f"{dbd}/users_association", body={
            "association_condition": {"users": ["alice"], "accounts": [ACCOUNT],
                                      "clusters": [cluster], "partitions": ["gpu"]},
            "user": {}})  # fmt: skip
        grp = {
            "associations": [
                {
                    "account": ACCOUNT,
                    "cluster": cluster,
                    "user": "",
                    "max": {"tres": {"total": [{"type": "gres", "name": "gpu:a100", "count": 1}]}},
                }
            ]
        }
        self.call("association_modify_grp_tres", "POST", f"{dbd}/associations", body=grp)
        self.call("associations", "GET", f"{dbd}/associations",
                  params={"account": ACCOUNT, "cluster": cluster})  # fmt: skip
        running = self.submit("job_submit", 1, 3)
        pending = self.submit("job_submit_over_cap", 2, 60)
        self.wait_job(running, {"RUNNING", "COMPLETED"})
        self.call("jobs", "GET", f"{ctld}/jobs")
        self.call("job_running", "GET", f"{ctld}/job/{running}")
        for _ in range(30):
            reason = self.call(None, "GET", f"{ctld}/job/{pending}").json()["jobs"][0]
            if reason["state_reason"] == "AssocGrpGRES":
                break
            time.sleep(0.5)
        self.call("job_pending_assoc_grp_gres", "GET", f"{ctld}/job/{pending}")
        self.call("job_cancel", "DELETE", f"{ctld}/job/{pending}")
        self.call("job_missing", "GET", f"{ctld}/job/999999")
        self.wait_job(running, {"COMPLETED"})
        for _ in range(60):  # slurmdbd learns of the end a moment later
            jobs = self.call(None, "GET", f"{dbd}/job/{running}").json().get("jobs") or []
            if jobs and jobs[0]["state"]["current"] == ["COMPLETED"]:
                break
            time.sleep(0.5)
        self.call("accounting_job", "GET", f"{dbd}/job/{running}")
        window = {"start_time": str(started), "end_time": str(int(time.time()) + 60),
                  "account": ACCOUNT, "skip_steps": "true"}  # fmt: skip
        self.call("accounting_jobs_epoch_time", "GET", f"{dbd}/jobs", params=window)
        text_window = window | {
            "start_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started)),
            "end_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 60)),
        }
        self.call("accounting_jobs_text_time", "GET", f"{dbd}/jobs", params=text_window)
        # errors
        bad = {
            "job": {
                "name": "bad",
                "account": "no-such-team",
                "partition": "gpu",
                "current_working_directory": "/tmp",
                "environment": ["PATH=/bin"],
                "script": "#!/bin/bash\ntrue\n",
                "tres_per_node": "gres/gpu:a100:1",
            }
        }
        self.call("job_submit_bad_account", "POST", f"{ctld}/job/submit", body=bad, user="alice")
        legacy_gres = {"job": bad["job"] | {"account": ACCOUNT, "gres": "gpu:a100:1"}}
        del legacy_gres["job"]["tres_per_node"]
        self.call("job_submit_unknown_key", "POST", f"{ctld}/job/submit", body=legacy_gres,
                  user="alice")  # fmt: skip
        foreign = mint_token(b"not the cluster key" * 2, self.admin, lifespan_s=300)
        self.call("bad_token_ctld_diag", "GET", f"{ctld}/diag", token=foreign)
        self.call("bad_token_dbd_tres", "GET", f"{dbd}/tres", token=foreign)
        self.call("no_auth_headers", "GET", f"{ctld}/ping", token="", user="")
        self.call(
            "permission_denied",
            "POST",
            f"{dbd}/accounts",
            user="alice",
            body={"accounts": [{"name": "fx-alice", "description": "x", "organization": "x"}]},
        )
        self.call("association_delete_nothing", "DELETE", f"{dbd}/association",
                  params={"account": ACCOUNT, "user": "bob", "cluster": cluster,
                          "partition": "gpu"})  # fmt: skip
        self.call("version_not_served", "GET", "/slurm/v0.0.38/ping")
        for _ in range(60):  # "Job(s) active" (7001) until the cancelled jobs are gone
            if self.call("account_delete", "DELETE", f"{dbd}/account/{ACCOUNT}").status_code == 200:
                break
            time.sleep(1)


def main() -> None:
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    env = read_env_file(sys.argv[1])
    version = sys.argv[2]
    root = Path(__file__).resolve().parents[1]
    out = Path(sys.argv[3]) if len(sys.argv) == 4 else root / f"tests/fixtures/slurm/rest_{version}"
    out.mkdir(parents=True, exist_ok=True)
    Recorder(env, version, out).run()
    print(f"recorded {len(list(out.glob('*.json')))} exchanges in {out}")


if __name__ == "__main__":
    main()
