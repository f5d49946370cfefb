"""HTTP to slurmrestd (https://slurm.schedmd.com/rest.html) with httpx: JWT auth, the API version
in use, and the reading of every response's ``errors`` list (:mod:`.replies`).

Auth is JWT (https://slurm.schedmd.com/jwt.html): every request carries
``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` (22.05 needs both). Tokens come from a
provider called with the user name, or are minted here from the cluster's HS256 key exactly as
``scontrol token`` does. Requests act as the configured admin ``user`` unless the call names
another (a job's own user, see
:meth:`~scheduler_adapters.slurm.client.SlurmRestAdapter.submit_job`). A refused token (1007,
HTTP 401, or an ambiguous error the other daemon confirms) is re-minted once, then
:class:`SchedulerAuthError`.

The API version is discovered from ``GET /openapi/v3`` (or by probing ``/slurm/<v>/ping``),
and the version's JSON is in one module per version (:data:`.dialects.DIALECTS`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from scheduler_adapters.errors import (
    RemoteError,
    SchedulerAuthError,
    SchedulerUnavailable,
    UnexpectedResponse,
    UnsupportedApiVersion,
)
from scheduler_adapters.records import check_name
from scheduler_adapters.slurm.dialects import DIALECTS, known_versions, version_key
from scheduler_adapters.slurm.replies import (
    AUTH_REFUSED,
    Reply,
    classify,
    dbd_refused,
    json_or_none,
    remote_error,
)

TokenProvider = Callable[[str], str]
"""Called with a user name, returns a JWT slurmrestd accepts for that user."""

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


class RestTransport:
    """Requests to one slurmrestd as ``user``, with tokens cached per user, in the API version
    given (``api_version``) or discovered on first use.

    ``url`` is slurmrestd's base URL; ``user`` the admin identity. Give ``token_provider`` or
    ``jwt_key`` (bytes of the HS256 key; tokens are then minted for ``token_lifespan_s`` seconds
    and renewed before they expire). ``timeout_s`` bounds each read, ``connect_timeout_s`` each
    connect. ``transport`` is for tests (``httpx.MockTransport``). Raises ``ValueError`` unless
    exactly one of ``token_provider`` and ``jwt_key`` is given, or for an unusable ``user``;
    :class:`UnsupportedApiVersion` for an ``api_version`` not in :data:`DIALECTS`.
    """

    def __init__(
        self,
        *,
        url: str,
        user: str,
        token_provider: TokenProvider | None = None,
        jwt_key: bytes | None = None,
        token_lifespan_s: int = 900,
        api_version: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if (token_provider is None) == (jwt_key is None):
            raise ValueError("give exactly one of token_provider and jwt_key")
        if api_version is not None and api_version not in DIALECTS:
            raise UnsupportedApiVersion(
                f"API version {api_version} is not one this adapter speaks ({known_versions()})"
            )
        self._user = check_name("user", user)
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
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            transport=transport,
            headers={"Accept": "application/json"},
        )

    def close(self) -> None:
        self._http.close()

    @property
    def dialect(self) -> Any:
        """The module or :class:`~scheduler_adapters.slurm.modern.ModernDialect` of the API
        version in use (:data:`DIALECTS`; discovered on first use)."""
        if self._dialect_module is None:
            self._dialect_module = DIALECTS[self._discover_version()]
        return self._dialect_module

    # ------------------------------------------------------------------ version discovery

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
        document = json_or_none(response)
        if response.status_code == 200 and isinstance(document, dict):
            paths = document.get("paths")
            for path in paths if isinstance(paths, dict) else ():
                match = _VERSION_IN_PATH.match(path)
                if match:
                    served.add(match[1])
        else:
            for version in sorted(DIALECTS, key=version_key, reverse=True):
                probe = self._send(
                    "discover_api_version", "GET", f"/slurm/{version}/ping", self._user
                )
                if probe.status_code != 404:
                    served.add(version)
        usable = sorted(served & DIALECTS.keys(), key=version_key)
        if not usable:
            raise UnsupportedApiVersion(
                f"slurmrestd at {self._http.base_url} serves "
                f"{', '.join(sorted(served, key=version_key)) or 'no recognisable version'}; "
                f"this adapter speaks {known_versions()}",
                operation="discover_api_version",
            )
        return usable[-1]

    # ---------------------------------------------------- requests, tokens, response checks

    def request(
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
    ) -> Reply:
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
                return Reply(304, {}, ())
            else:
                payload = self._payload(operation, response, path)
                raw = payload.get("errors") or []
                if not isinstance(raw, list):
                    raise UnexpectedResponse(
                        f"'errors' is {type(raw).__name__}, not a list", operation=operation
                    )
                kept = [e for e in raw if not (tolerate and isinstance(e, dict) and tolerate(e))]
                errors = tuple(remote_error(entry) for entry in kept)
                if not errors:
                    self._check_plugin(operation, payload)
                    self._check_warnings(operation, payload, method, path)
                    return Reply(response.status_code, payload, ())
                numbers = {error.number for error in errors}
                if numbers and numbers <= set(handles):
                    return Reply(response.status_code, payload, errors)
                refused = (
                    bool(numbers & AUTH_REFUSED)
                    or dbd_refused(errors)
                    or (
                        numbers <= self.dialect.AMBIGUOUS_ERRORS
                        and self._token_refused(operation, name, token)
                    )
                )
                if not refused:
                    raise classify(operation, errors, response.status_code)
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
        response = self._send(operation, "GET", self.dialect.AUTH_PROBE, user, token)
        if response.status_code == 401:
            return True
        payload = json_or_none(response)
        errors = payload.get("errors") if isinstance(payload, dict) else None
        if not isinstance(errors, list):
            return False  # an answer that says nothing readable refuses nothing
        remote = [remote_error(e) for e in errors if isinstance(e, dict)]
        return any(e.number in AUTH_REFUSED for e in remote) or dbd_refused(tuple(remote))

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
        payload = json_or_none(response)
        if isinstance(payload, dict):
            return payload
        status = response.status_code
        if status in (500, 502, 503, 504):
            # no JSON: a proxy's or gateway's own page, not slurmrestd refusing the request
            raise SchedulerUnavailable(
                f"HTTP {status} from slurmrestd with a body that is not JSON",
                operation=operation,
                http_status=status,
            )
        if status == 404:
            raise UnsupportedApiVersion(
                f"slurmrestd does not serve {path} (HTTP 404): is API {self.dialect.VERSION} "
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
        unknown = getattr(self.dialect, "is_unknown_field_warning", None)
        warnings = payload.get("warnings")
        if unknown is None or not isinstance(warnings, list):
            return
        ignored = [w for w in warnings if isinstance(w, dict) and unknown(w)]
        if ignored:
            raise UnexpectedResponse(
                f"{method} {path}: slurmrestd {self.dialect.VERSION} ignored fields of the "
                f"request: {'; '.join(str(w.get('description')) for w in ignored)}",
                operation=operation,
            )

    def _check_plugin(self, operation: str, payload: Mapping[str, Any]) -> None:
        plugin = self.dialect.plugin_type(payload)
        if plugin is not None and plugin not in self.dialect.PLUGINS:
            raise UnexpectedResponse(
                f"answered by plugin {plugin!r}, but this adapter speaks "
                f"{self.dialect.VERSION} ({', '.join(self.dialect.PLUGINS)})",
                operation=operation,
            )
