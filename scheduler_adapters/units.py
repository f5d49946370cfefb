"""Unit parsing for the strings schedulers print: Kubernetes quantities and Slurm memory sizes.

Everything returns :class:`~decimal.Decimal` so that ``2.1Gi`` stays exactly 2,254,857,830.4
bytes and ``500m`` stays exactly 0.5; callers round where their own unit demands it.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow

# Kubernetes quantity grammar (k8s.io/apimachinery/pkg/api/resource, quantity.go):
#   <quantity> ::= <signedNumber><suffix>
#   <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix>   ::= <binarySI> | <decimalExponent> | <decimalSI>
# The exponent branch is tried before decimal SI so that "1E3" is 1000 while a bare "1E" is exa.
_K8S_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)"
    r"|[eE](?P<exponent>[+-]?\d+)"
    r"|(?P<decimal>[mkMGTPE]?))"
)
_K8S_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_K8S_DECIMAL_EXPONENT = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# Plenty for any real quantity; the Inexact trap turns a silently rounded result into an error.
_EXACT = Context(prec=64, traps=[Inexact, Overflow, InvalidOperation])

# Slurm sizes (str_to_mbytes in src/common/proc_args.c; convert_num_unit output): a bare number
# is MiB and K/M/G/T/P are powers of 1024, case-insensitive.
_SLURM_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<suffix>[KMGTP]?)", re.IGNORECASE)
_SLURM_MIB_PER_UNIT = {
    "K": Decimal(1) / 1024,
    "": Decimal(1),
    "M": Decimal(1),
    "G": Decimal(1024),
    "T": Decimal(1024**2),
    "P": Decimal(1024**3),
}
_SLURM_UNKNOWN = {"", "N/A", "(null)"}


def parse_k8s_quantity(text: str) -> Decimal:
    """Read a Kubernetes quantity string into its exact value in base units.

    Base units are whatever the resource counts: bytes for ``memory``, cores for ``cpu``,
    devices for extended resources. Suffixes are case-sensitive, following the Kubernetes
    quantity grammar (``resource.Quantity`` in k8s.io/apimachinery): decimal SI
    ``m k M G T P E`` (``m`` is milli, ``M`` is mega), binary ``Ki Mi Gi Ti Pi Ei`` and
    exponents ``e``/``E`` (``129e6`` is 129,000,000; ``1E`` alone is 10^18). Examples:
    ``"123Mi"`` -> 128974848, ``"128974848000m"`` -> 128974848, ``"500m"`` -> 0.5.

    Raises ``ValueError`` for anything outside that grammar (including surrounding
    whitespace, which the API server rejects too) and for results that cannot be held exactly.
    """
    if not isinstance(text, str):
        raise ValueError(f"Kubernetes quantity must be a string, got {type(text).__name__}")
    match = _K8S_QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a Kubernetes quantity "
            "(expected a number with an optional suffix such as 500m, 129e6, 64Gi or 64G)"
        )
    number = Decimal(match["number"])
    try:
        if match["binary"] is not None:
            return _EXACT.multiply(number, Decimal(_K8S_BINARY[match["binary"]]))
        if match["exponent"] is not None:
            return _EXACT.scaleb(number, Decimal(match["exponent"]))
        return _EXACT.scaleb(number, Decimal(_K8S_DECIMAL_EXPONENT[match["decimal"]]))
    except (Inexact, Overflow, InvalidOperation) as exc:
        raise ValueError(f"Kubernetes quantity {text!r} is too large to hold exactly") from exc


def parse_k8s_extended_count(text: str) -> int:
    """Read an extended-resource quantity (``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``).

    Kubernetes only accepts whole, non-negative quantities for extended resources, so ``"4"``,
    ``"4e0"`` and ``"1k"`` are fine while ``"500m"`` or ``"-1"`` raise ``ValueError`` instead of
    being rounded to 0 or 1.
    """
    value = parse_k8s_quantity(text)
    if value < 0 or value != value.to_integral_value():
        raise ValueError(
            f"extended resource quantity {text!r} must be a whole non-negative number of devices"
        )
    return int(value)


def parse_slurm_memory_mib(text: str | None) -> Decimal | None:
    """Read a Slurm memory size into MiB.

    Slurm reads a bare number as MiB and ``K``/``M``/``G``/``T``/``P`` as powers of 1024 in
    either case (``--mem``, ``RealMemory``, the ``mem=`` TRES): ``"64G"`` -> 65536,
    ``"515456M"`` -> 515456, ``"1.50G"`` -> 1536, ``"512K"`` -> 0.5 (kept exact; Slurm itself
    rounds K up to whole MiB). ``None``, ``""``, ``"N/A"`` and ``"(null)"`` mean unknown and
    give ``None``. A ``c``/``n`` per-CPU/per-node marker (older sacct's ``ReqMem``) is not a
    size. Raises ``ValueError`` for anything else.
    """
    if text is None or text.strip() in _SLURM_UNKNOWN:
        return None
    match = _SLURM_SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} is not a Slurm memory size (expected MiB with an optional K/M/G/T/P suffix)"
        )
    return Decimal(match["number"]) * _SLURM_MIB_PER_UNIT[match["suffix"].upper()]
