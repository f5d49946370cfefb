"""CSV formula injection (issue 27, item 7): every CSV export goes through one writer
(pools.web.csv_cells) that prefixes a ``'`` to text starting with ``=``, ``+``, ``-``, ``@``, a tab
or a CR (OWASP's rule), and leaves plain numbers (a negative amount) numbers.

The world below holds hostile names where the QA found them (imported GPU names, pool names, cost
centres, decision reasons); every export is opened and every cell read back."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from factories import (
    AllocationFactory,
    GpuFactory,
    IdleFindingFactory,
    NodeFactory,
    PoolFactory,
    SchedulerDriftFactory,
    StatementLineFactory,
    TeamFactory,
)

from pools.common.choices import AllocationStatus, RequestStatus
from pools.web.csv_cells import csv_cell

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LEADS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-12.50", "-12.50"),  # a credit stays a number
        ("+3", "+3"),
        ("-1e3", "-1e3"),
        (Decimal("-12.50"), Decimal("-12.50")),
        (-4, -4),
        (None, ""),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_csv_cell_escapes_formula_leads_and_keeps_numbers(value, cell):
    assert csv_cell(value) == cell


def test_no_module_writes_csv_but_the_safe_writer():
    """Every export must route through pools.web.csv_cells: no other csv.writer / DictWriter."""
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("pools", "billing", "portal")
        for path in (ROOT / package).rglob("*.py")
        if path.name != "csv_cells.py"
        and re.search(r"csv\.(writer|DictWriter)\(", path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.fixture
def hostile(db):
    now = timezone.now()
    month = now.date().replace(day=1)
    team = TeamFactory(
        slug="evil", name='=HYPERLINK("http://x.test","team")', cost_centre="@SUM(1+1)"
    )
    pool = PoolFactory(slug="evil-pool", name="+cmd|' /C calc'!A0")
    node = NodeFactory(hostname="evil-01", pool=pool)
    GpuFactory(node=node, index=0, gpu_model=None, raw_model_name="-2+3+cmd|' /C calc'!A0")
    allocation = AllocationFactory(
        team=team, pool=pool, status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=6),
    )  # fmt: skip
    request = allocation.request
    request.decision_reason = "=1+1"
    request.status = RequestStatus.APPROVED
    request.save()
    IdleFindingFactory(allocation=allocation, note="=2+2")
    SchedulerDriftFactory(subject="\t=3+3", expected="=4", found="-5+5")
    StatementLineFactory(statement__team=team, statement__month=month,
                         statement__cost_centre="@SUM(1+1)", served_model="\r=6+6",
                         kind="adjustment", amount=Decimal("-12.50"))  # fmt: skip
    return {"team": team, "month": f"{month:%Y-%m}", "node": node}


def _exports(world) -> list[str]:
    team, month = world["team"].slug, world["month"]
    dashboard = [
        f"/dashboard/?export={part}"
        for part in ("capacity", "stranded", "plan", "forecast", "teams-cards", "teams-cost",
                     "alerts", "heatmap")
    ]  # fmt: skip
    return [
        "/?export=csv",
        "/nodes/?export=csv",
        f"/nodes/{world['node'].hostname}/?export=csv",
        "/gpus/?export=csv",
        "/gpu-models/?export=csv",
        "/unrecognised-models/?export=csv",
        "/scheduler/drift/?export=csv",
        "/idle/?export=csv",
        "/requests/?export=csv",
        "/allocations/?export=csv",
        "/sizing/estimates/?export=csv",
        *dashboard,
        f"/teams/{team}/dashboard/?export=allocations",
        f"/teams/{team}/dashboard/?export=spend",
        f"/costs/{team}/{month}/?export=csv",
        f"/costs/finance/{month}/?export=csv",
        f"/costs/{team}/{month}/?export=focus",
        f"/costs/finance/{month}/?export=focus",
        "/api/v1/statements/focus/",
    ]


def _cells(response) -> list[str]:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return [cell for row in csv.reader(io.StringIO(body.decode())) for cell in row]


def test_every_export_escapes_hostile_names(admin_page, hostile):
    escaped = {}
    for url in _exports(hostile):
        response = admin_page.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"].startswith("text/csv"), url
        cells = _cells(response)
        unsafe = [c for c in cells if c.startswith(LEADS) and not PLAIN_NUMBER.match(c)]
        assert unsafe == [], url
        escaped[url] = sorted({c for c in cells if c.startswith("'")})
    month, team = hostile["month"], hostile["team"].slug
    pool, gpu = "'+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"
    # where each hostile value is shown (the other exports name things by slug), escaped
    assert {url: cells for url, cells in escaped.items() if cells} == {
        "/?export=csv": [pool],
        "/nodes/evil-01/?export=csv": [gpu],
        "/gpus/?export=csv": [gpu],
        "/unrecognised-models/?export=csv": [gpu],
        "/scheduler/drift/?export=csv": ["'\t=3+3", "'-5+5", "'=4"],
        "/requests/?export=csv": ["'=1+1"],
        "/dashboard/?export=capacity": [pool],
        "/dashboard/?export=alerts": ["'\t=3+3", gpu],
        f"/costs/{team}/{month}/?export=csv": ["'\r=6+6", "'@SUM(1+1)"],
        f"/costs/finance/{month}/?export=csv": ["'\r=6+6", "'@SUM(1+1)"],
        # FOCUS: the served model (SkuId), the team's name (SubAccountName), its cost centre
        # (BillingAccountId/Name)
        **dict.fromkeys(
            [
                f"/costs/{team}/{month}/?export=focus",
                f"/costs/finance/{month}/?export=focus",
                "/api/v1/statements/focus/",
            ],
            ["'\r=6+6", '\'=HYPERLINK("http://x.test","team")', "'@SUM(1+1)"],
        ),  # fmt: skip
    }


def test_a_negative_amount_stays_a_number_in_the_statement_csv(admin_page, hostile):
    response = admin_page.get(f"/costs/finance/{hostile['month']}/?export=csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["amount"] for r in rows] == ["-12.50"]  # to the minor unit (issue 37)
