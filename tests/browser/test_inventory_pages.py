"""Click through the inventory as a pool admin would, in headless chromium."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from pools.inventory.services.import_files import inventory_import_file
from scheduler_adapters.types import InventorySource

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _slurm_fleet(count: int) -> bytes:
    nodes = [
        {"name": f"gpu-{i:02d}", "state": "idle", "gres": "gpu:rtx4090:4", "partitions": ["dev"]}
        for i in range(count)
    ]
    nodes.append({"name": "odd-one", "state": "idle", "gres": "gpu:p100:2", "partitions": ["dev"]})
    return json.dumps({"nodes": nodes}).encode()


def test_search_filters_the_node_table_without_a_full_reload(signed_in, live_server):
    inventory_import_file(data=_slurm_fleet(12), source=InventorySource.SLURM)
    page = signed_in
    page.goto(f"{live_server.url}/nodes/")
    expect(page.locator("#table tbody tr")).to_have_count(13)
    page.evaluate("window.__marker = 'still here'")
    page.fill("input[name=q]", "odd")
    expect(page.locator("#table tbody tr")).to_have_count(1)
    expect(page.locator("#table tbody")).to_contain_text("odd-one")
    # htmx swapped the table: the page (and the marker set on it) survived.
    assert page.evaluate("window.__marker") == "still here"
    assert "q=odd" in page.url

    page.click("text=odd-one")
    expect(page.locator("h2")).to_contain_text("odd-one")
    expect(page.locator("table tbody")).to_contain_text("? p100")


def test_sorting_by_gpu_count_toggles_ascending_and_descending(signed_in, live_server):
    inventory_import_file(data=_slurm_fleet(3), source=InventorySource.SLURM)
    page = signed_in
    page.goto(f"{live_server.url}/nodes/")
    first_row = page.locator("#table tbody tr").first
    page.click("th >> text=GPUs")  # ascending: odd-one has 2 cards, the others 4
    expect(first_row).to_contain_text("odd-one")
    expect(page.locator("th >> text=GPUs")).to_contain_text("▲")
    page.click("th >> text=GPUs")  # descending
    expect(first_row).not_to_contain_text("odd-one")
    expect(page.locator("th >> text=GPUs")).to_contain_text("▼")


def test_uploading_a_capture_shows_the_report_and_the_node(signed_in, live_server, fixtures_dir):
    page = signed_in
    page.goto(f"{live_server.url}/inventory/import/")
    page.select_option("select[name=source]", "nvidia-smi")
    page.fill("input[name=node]", "lab-h200")
    page.set_input_files(
        "input[name=file]",
        str(fixtures_dir / "nvidia-smi" / "linux-x86_64__nvidia-h200__590.48.01.txt"),
    )
    page.click("main button[type=submit]")
    report = page.locator("#report")
    expect(report).to_contain_text("1 created")
    report.get_by_role("link", name="lab-h200").click()
    expect(page.locator("table tbody")).to_contain_text("H200")


def test_mapping_an_unrecognised_model(signed_in, live_server):
    inventory_import_file(data=_slurm_fleet(1), source=InventorySource.SLURM)
    page = signed_in
    page.goto(f"{live_server.url}/unrecognised-models/")
    expect(page.locator("tbody")).to_contain_text("p100")
    page.select_option("select[name=gpu_model]", label="A100 SXM4 80GB")
    page.click("button:has-text('Map')")
    expect(page.locator(".messages")).to_contain_text("2 cards recognised")
    expect(page.locator("tbody")).to_contain_text("Every card in the fleet matches the catalogue.")


def test_the_file_suggests_the_node_and_stays_chosen_after_an_error(
    signed_in, live_server, tmp_path
):
    """Choosing ``gpu-a100-01.csv`` fills the empty node field with ``gpu-a100-01``; after an
    answer with an error (a node name with a space) the file is still chosen (hx-preserve), so
    correcting the name and importing again needs no second trip to the file picker."""
    from factories import nvidia_smi_csv

    capture = tmp_path / "gpu-a100-01.csv"
    capture.write_bytes(nvidia_smi_csv(2))
    page = signed_in
    page.goto(f"{live_server.url}/inventory/import/")
    page.select_option("select[name=source]", "nvidia-smi")
    page.set_input_files("input[name=file]", str(capture))
    expect(page.locator("input[name=node]")).to_have_value("gpu-a100-01")
    page.fill("input[name=node]", "gpu a100")
    page.click("main button[type=submit]")
    expect(page.locator(".errorlist")).to_contain_text("A node name is letters")
    assert page.eval_on_selector("input[name=file]", "e => e.files.length") == 1
    page.fill("input[name=node]", "gpu-a100-01")
    page.click("main button[type=submit]")
    expect(page.locator("#report")).to_contain_text("1 created")
