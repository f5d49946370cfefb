"""The inventory import form fills an empty node field with the chosen file's name without its
extension only when that is a node name the importer takes (pools/common/validators.py: at most
63 characters between dots, 253 in all); a longer label is left for the user to type, not put
in the field for the server to refuse."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

CAPTURE = b"GPU 0: NVIDIA L40S (UUID: GPU-5f3c2a91-0d4e-4b7a-9c1e-2a6b8d0f4e13)\n"


@pytest.mark.parametrize(
    "stem,filled",
    [
        ("gpu-node-07", "gpu-node-07"),
        ("a" * 63, "a" * 63),
        ("a" * 64, ""),  # one over RFC 1123's 63 a label: the server would refuse it
        (f"gpu-07.{'b' * 64}", ""),
    ],
)
def test_the_file_name_fills_the_node_field_only_when_it_is_a_node_name(
    signed_in, live_server, stem, filled
):
    page = signed_in
    page.goto(f"{live_server.url}/inventory/import/")
    page.set_input_files(
        "input[type=file]", files=[{"name": f"{stem}.txt", "mimeType": "text/plain",
                                    "buffer": CAPTURE}]
    )  # fmt: skip
    expect(page.locator("input[name=node]")).to_have_value(filled)
