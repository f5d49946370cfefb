"""slurmrestd numbers: plain, wrapped as ``{set, infinite, number}``, or magic sentinels.

The same field is a bare integer in v0.0.38, a ``{"set": .., "infinite": .., "number": ..}``
object from v0.0.39 on, and in both it may carry Slurm's ``NO_VAL``/``INFINITE`` constants
(``slurm.h``). :func:`unwrap` folds all of them into one of: a number, ``None`` (not set /
unknown) or :data:`UNLIMITED`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

UNLIMITED: float = float("inf")
"""What :func:`unwrap` returns for "no limit".

Positive infinity rather than a custom singleton so that ``min(limit, x)``, ``x <= limit``
and sorting work unchanged; test for it with ``value == UNLIMITED`` or ``math.isinf``.
It must never be stored in an integer column: callers map it to their own "unlimited".
"""

# slurm.h: NO_VAL means "not set", INFINITE "unlimited"; the 64-bit pair is used for memory and
# TRES counts. 16-bit NO_VAL16/INFINITE16 are not folded: 65534 is a plausible real value.
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
NO_VAL64 = 0xFFFFFFFFFFFFFFFE
INFINITE64 = 0xFFFFFFFFFFFFFFFF
_NOT_SET = {NO_VAL, NO_VAL64}
_UNLIMITED = {INFINITE, INFINITE64}
# v0.0.37 printed some uint32 fields through a signed int, so NO_VAL became -2, INFINITE -1.
_SIGNED32_NOT_SET = -2
_SIGNED32_UNLIMITED = -1


def unwrap(value: Any, *, signed32: bool = False) -> int | float | None:
    """Return the number a slurmrestd field holds, ``None`` when unset, or :data:`UNLIMITED`.

    Accepted shapes (v0.0.36-v0.0.41 OpenAPI plugins):

    - ``int``/``float``: returned as is, except ``NO_VAL`` (4294967294) and ``NO_VAL64``
      (0xfffffffffffffffe) -> ``None``, ``INFINITE`` (4294967295) and ``INFINITE64`` ->
      :data:`UNLIMITED`; a float ``inf`` -> :data:`UNLIMITED` and ``nan`` -> ``None``.
    - ``{"set": bool, "infinite": bool, "number": n}``: ``infinite: true`` -> UNLIMITED (the
      ``number`` beside it is meaningless, often 0), ``set: false`` -> ``None``, otherwise the
      ``number`` unwrapped as above.
    - ``None`` -> ``None``.

    ``signed32=True`` is for fields that v0.0.37 printed as signed 32-bit integers
    (``free_memory``): there -2 is NO_VAL (``None``) and -1 is INFINITE.

    Raises ``ValueError`` for any other shape (strings, booleans, lists, other objects).
    """
    if value is None:
        return None
    if isinstance(value, dict):
        return _unwrap_object(value, signed32=signed32)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a slurmrestd number: {value!r}")
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return UNLIMITED if value > 0 else value
    if value in _NOT_SET:
        return None
    if value in _UNLIMITED:
        return UNLIMITED
    if signed32 and value == _SIGNED32_NOT_SET:
        return None
    if signed32 and value == _SIGNED32_UNLIMITED:
        return UNLIMITED
    return value


def _unwrap_object(value: dict[str, Any], *, signed32: bool) -> int | float | None:
    unknown_keys = set(value) - {"set", "infinite", "number"}
    if unknown_keys or not value:
        raise ValueError(f"not a slurmrestd number object: {value!r}")
    if value.get("infinite") is True:
        return UNLIMITED
    if value.get("set") is False:
        return None
    if "number" not in value:
        raise ValueError(f"slurmrestd number object has no 'number': {value!r}")
    return unwrap(value["number"], signed32=signed32)


def unwrap_timestamp(value: Any) -> datetime | None:
    """Turn a slurmrestd epoch-seconds field into an aware UTC datetime.

    Accepts everything :func:`unwrap` does. Slurm writes 0 for "never" (``boot_time`` of a node
    that never booted, ``end_time`` of a running job), so 0, unset and sentinels give ``None``;
    so does UNLIMITED (an ``infinite`` timestamp names no moment).
    Example: ``{"set": true, "infinite": false, "number": 1717200000}`` -> 2024-06-01T00:00Z.
    Raises ``ValueError`` as :func:`unwrap` does, and for seconds no datetime holds (2**63).
    """
    number = unwrap(value)
    if number is None or number == 0 or math.isinf(number):
        return None
    try:
        return datetime.fromtimestamp(number, tz=UTC)
    except (OverflowError, OSError) as exc:  # e.g. 2**63 s: no datetime holds it
        raise ValueError(f"epoch seconds out of range: {number!r}") from exc
