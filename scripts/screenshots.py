"""Take full-page screenshots of the portal's pages in Debian's chromium (headless).

Usage: python scripts/screenshots.py [BASE_URL] [OUT_DIR]; signs in as admin/demo.
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"
OUT = Path(sys.argv[2] if len(sys.argv) > 2 else "screenshots")
PAGES = [
    ("fleet", "/"),
    ("nodes", "/nodes/"),
    ("nodes-filtered", "/nodes/?pool=train-slurm&ordering=-gpus"),
    ("node-detail-mig", "/nodes/lab-h100-mig/"),
    ("node-detail", "/nodes/trn-a100-01/"),
    ("gpus", "/gpus/"),
    ("gpu-models", "/gpu-models/"),
    ("pools", "/pools/?cuda=12.4"),
    ("unrecognised", "/unrecognised-models/"),
    ("import", "/inventory/import/"),
    ("api-docs", "/api/docs/"),
    ("my-teams", "/teams/mine/"),
    ("requests", "/requests/"),
    ("request-new", "/requests/new/?gpu_model=l40s&workload_kind=inference&card_count=2"),
    ("approval-queue", "/requests/queue/"),
    ("request-detail-submitted", "/requests/4/"),
    ("request-detail-approved", "/requests/3/"),
    ("allocations", "/allocations/"),
    ("timeline", "/timeline/"),
    ("sizing", "/sizing/"),
    ("costs", "/costs/"),
    ("finance-month", "/costs/finance/2026-10/"),
    ("team-month", "/costs/vision/2026-10/"),
    ("scheduler-drift", "/scheduler/drift/"),
    ("api-nodes", "/api/v1/nodes/"),
]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

OUT.mkdir(parents=True, exist_ok=True)
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{BASE}/login/")
    page.screenshot(path=OUT / "login.png")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    for name, path in PAGES:
        page.goto(f"{BASE}{path}")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=OUT / f"{name}.png", full_page=True)
        print(name, page.title())
    browser.close()
