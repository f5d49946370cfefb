"""A finding's evidence as the pages show it: labels in words, units, counts whole."""

from __future__ import annotations

from pools.advisor.evidence import EVIDENCE, evidence_csv, evidence_rows

NNBSP, NBSP = "\u202f", "\u00a0"


def test_memory_pressure_reads_in_words_with_counts_whole():
    """The rule stores preemptions as a float sum (3456.0); a count is shown whole, grouped."""
    rows = evidence_rows(
        {"buckets": 61, "preemptions": 3456.0, "kv_full_buckets": 12, "fb_used_pct_max": 97.25}
    )

    assert rows == [
        ("Five-minute intervals", "61"),
        ("Preemptions", f"3{NNBSP}456"),
        ("Intervals with the KV cache full", "12"),
        ("Framebuffer used, most", f"97.2{NBSP}%"),
    ]


def test_memory_decay_gives_mib_and_tokens_per_second():
    rows = evidence_rows(
        {
            "days": 5,
            "fb_free_mib_per_card_first": 20480.0,
            "fb_free_mib_per_card_last": 6144.0,
            "tok_s_per_busy_card_first": 812.4,
            "tok_s_per_busy_card_last": None,
        }
    )

    assert rows == [
        ("Days", "5"),
        ("Free framebuffer per card, first day", f"20{NNBSP}480{NBSP}MiB"),
        ("Free framebuffer per card, last day", f"6{NNBSP}144{NBSP}MiB"),
        ("Tokens/s per busy card, first day", f"812.4{NBSP}tok/s"),
        ("Tokens/s per busy card, last day", "unknown"),
    ]


def test_shares_are_percent_and_lists_read_as_words():
    """cached_share 0.125 = 12.5 %; scale-ups that removed 0.3 of the latency, raised it by
    0.05, changed it by -0.0004 (-0.04 %: 0.0 % to one place, never "-0.0 %"), not measured."""
    rows = dict(
        evidence_rows(
            {
                "cached_share": 0.125,
                "triggers": ["growth", "low_cache"],
                "latency_gain_per_up": [0.3, -0.05, -0.0004, None],
                "fast_fabric": False,
                "hosts": ["gpu-01", "gpu-02"],
                "nvlink_bytes_s_max": 2_500_000.0,
            }
        )
    )

    assert rows["Input tokens from the prompt cache"] == f"12.5{NBSP}%"
    assert rows["Signs"] == "input grows call by call, few prompt-cache hits"
    assert rows["Latency removed by each scale-up"] == (
        f"30.0{NBSP}%, -5.0{NBSP}%, 0.0{NBSP}%, unknown"
    )
    assert rows["Fast fabric between the nodes"] == "no"
    assert rows["Nodes"] == "gpu-01, gpu-02"
    assert rows["NVLink traffic, most"] == f"2.5{NBSP}MB/s"


def test_a_key_without_a_label_is_shown_as_stored():
    assert evidence_rows({"new_signal": 4}) == [("new_signal", "4")]


def test_every_key_a_rule_stores_has_a_label():
    """The keys of the rules' evidence dicts, read from the rules' source (each is written
    as a ``"key": value`` entry there)."""
    import inspect
    import re

    import pools.advisor.rules as rules

    stored = set(re.findall(r'^\s+"([a-z][a-z_0-9]*)": ', inspect.getsource(rules), re.M))
    stored |= {"minutes", "util_above_pct"}
    # the prompt-bloat rule's trigger names are values, not keys
    stored -= {"growth", "tool_returns", "low_cache", "retries"}
    assert stored <= set(EVIDENCE), sorted(stored - set(EVIDENCE))


def test_the_csv_keeps_the_keys_with_whole_counts_and_units_ungrouped():
    """The CSV's cell: preemptions stored 12345.0 is the count 12345 (no ".0", no group
    separator a script would trip on); a percentage and MiB keep their unit, unknown says so."""
    cell = evidence_csv(
        {
            "preemptions": 12345.0,
            "fb_used_pct_max": 97.25,
            "fb_free_mib_per_card_last": 20480.0,
            "ttft_p95_s_max": None,
            "cached_share": 0.125,
        }
    )

    assert cell == (
        "preemptions=12345; fb_used_pct_max=97.2 %; fb_free_mib_per_card_last=20480 MiB; "
        "ttft_p95_s_max=unknown; cached_share=12.5 %"
    )
