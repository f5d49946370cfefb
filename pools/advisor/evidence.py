"""A finding's evidence as pages show it: each number the rules store (:mod:`pools.advisor.rules`,
keys in their units: ``_pct`` 0-100, ``_s`` seconds, ``_mib`` MiB, ``_share`` 0-1) under a label
in words with its unit, counts as whole numbers. The API keeps the rules' keys and values; the
CSV their keys with the page's values. Pure: no ORM."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pools.web.numbers import grouped

Shown = Callable[[object], str]


def _count(value: object) -> str:
    return grouped(round(value), 0)


def _unit(unit: str, places: int) -> Shown:
    """``places`` decimals, then the unit after a no-break space (none when ``unit`` is "")."""
    return lambda value: grouped(value, places) + (f"\u00a0{unit}" if unit else "")


def _share(value: object) -> str:
    """A share 0-1 as a percentage: 0.125 -> "12.5 %"."""
    return f"{grouped(round(value * 100, 1) + 0.0, 1)}\u00a0%"  # + 0.0: no "-0.0 %"


def _times(value: object) -> str:
    return f"{grouped(value, 2)}×"


def _yes_no(value: object) -> str:
    return "yes" if value else "no"


def _words(value: object) -> str:
    return str(value)


# short: "1 424.9 tok/s" is one unbreakable run (no-break spaces) in the evidence column
TOKENS_PER_S = "tok/s"

TRIGGERS = {
    "growth": "input grows call by call",
    "tool_returns": "long tool returns",
    "low_cache": "few prompt-cache hits",
    "retries": "many retries",
}


def _triggers(names: object) -> str:
    return ", ".join(TRIGGERS.get(name, name) for name in names)


def _gains(gains: object) -> str:
    """Latency removed by each scale-up, a share 0-1 (negative: it rose); ``None`` unknown."""
    return ", ".join("unknown" if g is None else _share(g) for g in gains)


# key: (label, how its value is shown). Labels say what the number is over: "mean", "max".
EVIDENCE: dict[str, tuple[str, Shown]] = {
    "minutes": ("Lasting", _unit("min", 0)),
    "buckets": ("Five-minute intervals", _count),
    "days": ("Days", _count),
    "gpu_util_pct_mean": ("GPU utilisation, mean", _unit("%", 1)),
    "util_above_pct": ("Utilisation above", _unit("%", 0)),
    "requests_waiting_mean": ("Requests waiting, mean", _unit("", 1)),
    "requests_waiting_max": ("Requests waiting, most", _count),
    "kv_cache_usage_pct_max": ("KV cache used, most", _unit("%", 1)),
    "kv_full_buckets": ("Intervals with the KV cache full", _count),
    "preemptions": ("Preemptions", _count),
    "fb_used_pct_max": ("Framebuffer used, most", _unit("%", 1)),
    "fb_free_mib_per_card_first": ("Free framebuffer per card, first day", _unit("MiB", 0)),
    "fb_free_mib_per_card_last": ("Free framebuffer per card, last day", _unit("MiB", 0)),
    "tok_s_per_busy_card_first": ("Tokens/s per busy card, first day", _unit(TOKENS_PER_S, 1)),
    "tok_s_per_busy_card_last": ("Tokens/s per busy card, last day", _unit(TOKENS_PER_S, 1)),
    "spikes": ("Latency spikes", _count),
    "coinciding": ("Spikes while a neighbour was busy", _count),
    "itl_p95_s_median": ("Inter-token latency p95, median", _unit("s", 3)),
    "itl_p95_s_max": ("Inter-token latency p95, most", _unit("s", 3)),
    "neighbours": ("Neighbouring workloads", _count),
    "shared": ("Neighbours share its", _words),
    "hosts": ("Nodes", lambda hosts: ", ".join(hosts)),
    "nodes": ("Node count", _count),
    "fast_fabric": ("Fast fabric between the nodes", _yes_no),
    "nvlink_bytes_s_max": ("NVLink traffic, most", lambda v: _unit("MB/s", 1)(v / 1e6)),
    "tasks": ("Agent tasks", _count),
    "calls_per_task_mean": ("Calls per task, mean", _unit("", 1)),
    "input_growth": ("Input tokens, last call ÷ first", _times),
    "tool_return_tokens_mean": ("Tool-return tokens, mean", _unit("tokens", 0)),
    "cached_share": ("Input tokens from the prompt cache", _share),
    "retry_share": ("Calls that were retries", _share),
    "triggers": ("Signs", _triggers),
    "events": ("Scale events", _count),
    "reversals": ("Reversed within twice the cooldown", _count),
    "cooldown_s": ("Cooldown", _unit("s", 0)),
    "scale_ups": ("Scale-ups", _count),
    "latency_gain_per_up": ("Latency removed by each scale-up", _gains),
    "ttft_p95_s_after": ("Time to first token p95 after, most", _unit("s", 2)),
    "ttft_p95_s_baseline": ("Time to first token p95 before", _unit("s", 2)),
    "ttft_p95_s_max": ("Time to first token p95, most", _unit("s", 1)),
    "error_share_after": ("Requests failing after", _share),
    "window_s": ("Looked at for", _unit("s", 0)),
    "e2e_p95_s_mean": ("End-to-end latency p95, mean", _unit("s", 1)),
}


def _shown(key: str, value: object) -> tuple[str, str]:
    """``(label, text)`` of one stored number (see :func:`evidence_rows`)."""
    label, shown = EVIDENCE.get(key, (key, _words))
    try:
        return label, "unknown" if value is None else shown(value)
    except (TypeError, ValueError):
        return label, str(value)


def evidence_rows(numbers: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(label, value)`` of each stored number, in the rule's order: ``None`` is "unknown", a
    key with no label is shown as it is stored (a rule newer than this map)."""
    return [_shown(key, value) for key, value in numbers.items()]


def evidence_csv(numbers: Mapping[str, object]) -> str:
    """The CSV's evidence cell: ``key=value`` per stored number, "; " between, the rule's keys
    kept (as the API's) and each value as the page shows it — counts whole, the unit after it —
    without the group separator, so a script reads the digits: ``{"preemptions": 2874.0,
    "fb_used_pct_max": 97.25}`` -> ``preemptions=2874; fb_used_pct_max=97.2 %``."""
    cells = []
    for key, value in numbers.items():
        text = _shown(key, value)[1].replace("\u202f", "").replace("\u00a0", " ")
        cells.append(f"{key}={text}")
    return "; ".join(cells)
