"""``|break_at_marks``: an identifier may wrap before a dot and after a hyphen, slash,
underscore, colon, equals sign or comma, nowhere else; escaped."""

from __future__ import annotations

import pytest

from pools.templatetags.portal import break_at_marks


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("nvidia.com/gpu.product", "nvidia<wbr>.com/<wbr>gpu<wbr>.product"),
        ("GPU-3f1a2b4c-5d6e", "GPU-<wbr>3f1a2b4c-<wbr>5d6e"),
        ("vllm:num_requests", "vllm:<wbr>num_<wbr>requests"),
        ("gres/gpu=600", "gres/<wbr>gpu=<wbr>600"),
        ("QOSGrpGRES", "QOSGrpGRES"),  # no mark: one run, never cut
        ("a<b>.c&d", "a&lt;b&gt;<wbr>.c&amp;d"),
        (".hidden", ".hidden"),  # no break point before the start
        ("", ""),
    ],
)
def test_breaks_only_at_marks_and_escapes(code, shown):
    assert str(break_at_marks(code)) == shown
