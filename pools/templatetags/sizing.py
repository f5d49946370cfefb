"""Number formats of the sizing pages: bytes as GB, quantities with a fixed number of decimals,
thousands grouped as money is (:func:`pools.web.numbers.grouped`, a narrow no-break space)."""

from decimal import Decimal

from django import template

from pools.sizing.labels import page_message
from pools.web.numbers import grouped

register = template.Library()


def _number(value):
    if value is None or value == "":
        return None
    try:
        return float(Decimal(str(value)))
    except ArithmeticError:
        return None


@register.filter
def gb(value, decimals: int = 1):
    """Bytes as GB (10**9 B) with ``decimals`` places, thousands grouped; ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return grouped(number / 1e9, int(decimals))


@register.filter
def gib(value, decimals: int = 0):
    """Bytes as GiB (2**30 B, the unit engines and nvidia-smi report); ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return grouped(number / 2**30, int(decimals))


@register.filter
def tflop(value, decimals: int = 1):
    """FLOPs as TFLOP (10**12 FLOPs) with ``decimals`` places; ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return grouped(number / 1e12, int(decimals))


@register.filter
def qty(value, decimals: int = 0):
    """A number with ``decimals`` places, thousands grouped; ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return grouped(number, int(decimals))


@register.filter
def pct(value, decimals: int = 0):
    """A share (0.25) as a percentage ("25 %"); ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return f"{grouped(number * 100, int(decimals))} %"


WARNING_LABELS = {
    "does_not_fit": "does not fit",
    "cannot_estimate": "cannot estimate",
    "no_nvlink_tp": "TP without NVLink",
    "cross_node_tp": "TP across nodes",
    "layout_refused": "Layout refused",
    "tpot_over_target": "TPOT over target",
    "ttft_over_target": "TTFT over target",
    "fewer_free_cards": "not enough free cards",
    "not_in_inference_pools": "no inference pool has it",
    "bandwidth_unknown": "bandwidth unknown",
    "compute_unknown": "compute unknown",
    "fp8_weight_only": "FP8 weights only",
    "fp8_support_unknown": "FP8 support unknown",
    "context_too_long": "context too long",
    "engine_version": "engine version",
    "speculation_not_credited": "speculation not credited",
    "chunked_decode_mmha": "slow chunked-attention decode",
}
"""Readable names of :class:`pools.sizing.SizingWarning` codes (the code stays in the API, the
CSV and the badge's ``data-code``)."""


@register.filter
def warning_label(code: str) -> str:
    """``"no_nvlink_tp"`` -> ``"TP without NVLink"``; an unlisted code reads with spaces."""
    return WARNING_LABELS.get(code, code.replace("_", " "))


@register.filter
def page_words(message: str) -> str:
    """A service's message as the page words it: input names as the form labels them
    (:func:`pools.sizing.labels.page_message`; ``nic_gbps`` -> "NIC per card")."""
    return page_message(message) if isinstance(message, str) else message
