"""The sizing pages' numbers are grouped as money is: thousands with a narrow no-break space
(U+202F), never a comma; the CSV keeps plain numbers."""

from __future__ import annotations

import pytest

from pools.templatetags.sizing import gb, gib, pct, qty, tflop

NNBSP = "\u202f"


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (lambda: qty(1343.4), "1" + NNBSP + "343"),
        (lambda: qty("671026404352"), "671" + NNBSP + "026" + NNBSP + "404" + NNBSP + "352"),
        (lambda: qty(52560, 2), "52" + NNBSP + "560.00"),
        (lambda: qty(999), "999"),
        (lambda: qty(-1500), "-1" + NNBSP + "500"),
        # 1 384 520 000 000 B = 1 384.52 GB; 2**30 x 2 048 B = 2 048 GiB
        (lambda: gb(1_384_520_000_000, 2), "1" + NNBSP + "384.52"),
        (lambda: gib(2**30 * 2048), "2" + NNBSP + "048"),
        # 1 979 x 10**12 FLOP = 1 979.0 TFLOP
        (lambda: tflop(1_979 * 10**12), "1" + NNBSP + "979.0"),
        (lambda: pct(12.5), "1" + NNBSP + "250 %"),
        (lambda: qty(None), "—"),
    ],
)
def test_sizing_numbers_group_thousands_with_a_narrow_no_break_space(shown, expected):
    assert shown() == expected
