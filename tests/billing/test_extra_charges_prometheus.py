"""Storage and egress charges from Prometheus through the real adapter over HTTP, with answers
recorded in Prometheus' own JSON (``httpx.MockTransport``): GB-months and GB worked out by
hand, the same rows a CSV of the same numbers writes, re-import replacing the month's figure,
and bad answers reported with the rest kept, never read as 0. The real server's answer to the
same queries: tests/integration/prometheus/test_extra_charges_prometheus.py."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from urllib.parse import parse_qs

import httpx
import pytest
from django.test import override_settings
from factories import TeamFactory

from billing.choices import ChargeBasis, UsageSource, UsageUnit
from billing.models import UsageImport, UsageRecord
from billing.services.extra_charges import extra_charges_import
from billing.services.extra_charges_prometheus import extra_charges_import_prometheus
from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.prometheus import PrometheusAdapter

pytestmark = pytest.mark.django_db

STORAGE = "kube_persistentvolumeclaim_resource_requests_storage_bytes"
EGRESS = 'container_network_transmit_bytes_total{interface="eth0"}'
PROMQL = {"EXTRA_CHARGES_STORAGE_PROMQL": STORAGE, "EXTRA_CHARGES_EGRESS_PROMQL": EGRESS,
          "EXTRA_CHARGES_STEP_S": 300}  # fmt: skip
NOV = datetime(2026, 11, 1, tzinfo=UTC)  # November 2026: 30 days = 2,592,000 s
GB = 10**9


@pytest.fixture(autouse=True)
def _promql():
    with override_settings(**PROMQL):
        yield


def matrix(rows: dict[str, list[tuple[datetime, str]]], extra=()) -> dict:
    """A range query's answer: per namespace label (``""``: no label) its ``(t, value)``."""
    result = [{"metric": {"namespace": ns} if ns else {},
               "values": [[t.timestamp(), v] for t, v in points]}
              for ns, points in rows.items()]  # fmt: skip
    return {"status": "success", "data": {"resultType": "matrix", "result": [*result, *extra]}}


def vector(rows: dict[str, str], at: datetime) -> dict:
    result = [{"metric": {"namespace": ns}, "value": [at.timestamp(), v]} for ns, v in rows.items()]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def steps(start: datetime, end: datetime, value: str, every: int = 300):
    out, t = [], start
    while t < end:
        out.append((t, value))
        t += timedelta(seconds=every)
    return out


class Recorded:
    """Answers ``query_range`` (storage) and ``query`` (egress) with the given bodies (a
    ``(status, body)`` pair, a body, or a callable of the parameters), keeping every request's
    parameters."""

    def __init__(self, storage, egress) -> None:
        self.answers = {"/api/v1/query_range": storage, "/api/v1/query": egress}
        self.asked: list[tuple[str, dict[str, str]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        params = {k: v[0] for k, v in parse_qs(request.url.query.decode()).items()}
        self.asked.append((request.url.path, params))
        answer = self.answers[request.url.path]
        answer = answer(params) if callable(answer) else answer
        status, body = answer if isinstance(answer, tuple) else (200, answer)
        text = body if isinstance(body, str) else json.dumps(body)
        return httpx.Response(status, text=text, headers={"content-type": "application/json"})

    def adapter(self) -> PrometheusAdapter:
        return PrometheusAdapter("http://prometheus.test", transport=httpx.MockTransport(self))


def rows(source=UsageSource.EXTRA_CHARGES_PROMETHEUS):
    found = UsageRecord.objects.filter(source=source).order_by("basis", "team__slug")
    return [(r.team.slug, r.basis, r.unit, r.month, r.quantity, r.period_start, r.period_end,
             r.pool_id) for r in found]  # fmt: skip


def test_storage_and_egress_per_team_are_the_rows_a_csv_of_the_same_numbers_writes():
    """Now 1 Nov 02:00 UTC. Storage: team-nlp holds 500 GB at each of the 24 steps of 300 s
    (00:00 ... 01:55) -> 500 x 7,200 s / 2,592,000 s = 1.388889 GB-months; team-vision 1 TB
    for the first hour only (12 steps, then absent: counted 0) -> 1,000 x 3,600 / 2,592,000 =
    1.388889 as well. Egress: the per-namespace increase over the 7,200 s, in bytes:
    12.5e9 -> 12.5 GB and 3e8 -> 0.3 GB. The CSV of those GB over the same period writes
    the same quantities, units, bases, months, periods and (no) pool."""
    TeamFactory(slug="nlp")
    TeamFactory(slug="vision")
    now = NOV + timedelta(hours=2)
    recorded = Recorded(
        matrix({"team-nlp": steps(NOV, now, "500000000000"),
                "team-vision": steps(NOV, NOV + timedelta(hours=1), "1e+12")}),
        vector({"team-nlp": "12500000000", "team-vision": "300000000"}, now),
    )  # fmt: skip
    imported = extra_charges_import_prometheus(
        metrics=recorded.adapter(), start=now - timedelta(hours=1), end=now, now=now
    )
    assert imported.issues == []
    assert (imported.records_created, imported.records_updated) == (4, 0)
    range_params = recorded.asked[0][1]
    assert range_params["query"] == f"sum by (namespace) ({STORAGE})"
    assert (float(range_params["start"]), float(range_params["end"]), range_params["step"]) == (
        NOV.timestamp(), (now - timedelta(seconds=300)).timestamp(), "300")  # fmt: skip
    instant = recorded.asked[1][1]
    assert instant["query"] == f"sum by (namespace) (increase({EGRESS}[7200s]))"
    assert float(instant["time"]) == now.timestamp()
    nov = date(2026, 11, 1)
    gbm, gb = UsageUnit.GB_MONTHS, UsageUnit.GB
    assert rows() == [
        ("nlp", ChargeBasis.EGRESS, gb, nov, Decimal("12.5"), NOV, now, None),
        ("vision", ChargeBasis.EGRESS, gb, nov, Decimal("0.3"), NOV, now, None),
        ("nlp", ChargeBasis.STORAGE, gbm, nov, Decimal("1.388889"), NOV, now, None),
        ("vision", ChargeBasis.STORAGE, gbm, nov, Decimal("1.388889"), NOV, now, None),
    ]
    csv = (
        "team,pool,charge,quantity,start,end\n"
        "nlp,,storage,500,2026-11-01T00:00:00+00:00,2026-11-01T02:00:00+00:00\n"
        "vision,,storage,1000,2026-11-01T00:00:00+00:00,2026-11-01T01:00:00+00:00\n"
        "nlp,,egress,12.5,2026-11-01T00:00:00+00:00,2026-11-01T02:00:00+00:00\n"
        "vision,,egress,0.3,2026-11-01T00:00:00+00:00,2026-11-01T02:00:00+00:00\n"
    )
    assert extra_charges_import(text=csv, now=now).rejected == []
    from_csv = rows(UsageSource.EXTRA_CHARGES_CSV)
    # the vision storage line ends at 01:00 in the CSV (held for an hour), the import's period
    # is the month so far: every other field is the same
    assert [r[:5] for r in from_csv] == [r[:5] for r in rows()]
    assert [r[5:] for r in from_csv if r[0] == "nlp"] == [r[5:] for r in rows() if r[0] == "nlp"]


def test_importing_again_replaces_the_months_figure():
    """Same answers again: 2 unchanged. An hour later (36 steps of 500 GB): 500 x 10,800 /
    2,592,000 = 2.083333 GB-months and egress 20 GB, the same two rows updated in place."""
    TeamFactory(slug="nlp")
    now = NOV + timedelta(hours=2)

    def answers(at):
        return Recorded(matrix({"team-nlp": steps(NOV, at, "500000000000")}),
                        lambda p: vector({"team-nlp": "12500000000" if float(p["time"]) ==
                                          now.timestamp() else "20000000000"}, at))  # fmt: skip

    extra_charges_import_prometheus(metrics=answers(now).adapter(), start=NOV, end=now, now=now)
    again = extra_charges_import_prometheus(
        metrics=answers(now).adapter(), start=NOV, end=now, now=now
    )
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 2)
    later = now + timedelta(hours=1)
    moved = extra_charges_import_prometheus(
        metrics=answers(later).adapter(), start=NOV, end=later, now=later
    )
    assert (moved.records_created, moved.records_updated) == (0, 2)
    assert [(r[1], r[4], r[6]) for r in rows()] == [
        (ChargeBasis.EGRESS, Decimal("20"), later),
        (ChargeBasis.STORAGE, Decimal("2.083333"), later),
    ]


def test_bad_values_are_reported_and_the_rest_kept_never_zero():
    """Storage: nlp has a NaN step (its storage not written: the record of the import at
    00:30, 6 steps of 500 GB = 500 x 1,800 / 2,592,000 = 0.347222, stays),
    vision is good (12 steps of 2 TB = 2,000 x 3,600 / 2,592,000 = 2.777778), kube-system is
    no team's, one series has no namespace, search reads -1 bytes. Egress: the answer carries
    a value that is not a number ("abc"): the whole egress answer is unreadable and reported;
    storage is still imported."""
    nlp = TeamFactory(slug="nlp")
    TeamFactory(slug="vision")
    TeamFactory(slug="search")
    now = NOV + timedelta(hours=1)
    half = NOV + timedelta(minutes=30)
    good = Recorded(matrix({"team-nlp": steps(NOV, half, "500000000000")}), vector({}, half))
    extra_charges_import_prometheus(metrics=good.adapter(), start=NOV, end=half, now=half)
    earlier = UsageRecord.objects.get(team=nlp)
    nan_step = steps(NOV, now, "500000000000")
    nan_step[5] = (nan_step[5][0], "NaN")
    recorded = Recorded(
        matrix({"team-nlp": nan_step, "team-vision": steps(NOV, now, "2000000000000"),
                "kube-system": steps(NOV, now, "1"), "": steps(NOV, now, "7"),
                "team-search": steps(NOV, now, "-1")}),
        vector({"team-nlp": "abc"}, now),
    )  # fmt: skip
    imported = extra_charges_import_prometheus(
        metrics=recorded.adapter(), start=NOV, end=now, now=now
    )
    codes = sorted((i["charge"], i.get("namespace", ""), i["code"]) for i in imported.issues)
    assert codes == [
        ("egress", "", "unreadable_answer"),
        ("storage", "", "no_namespace"),
        ("storage", "kube-system", "unknown_namespace"),
        ("storage", "team-nlp", "not_a_number"),
        ("storage", "team-search", "negative_value"),
    ]
    nan_issue = next(i for i in imported.issues if i["code"] == "not_a_number")
    assert "2026-11-01T00:25:00+00:00" in nan_issue["detail"]
    assert [(r[0], r[1], r[4]) for r in rows()] == [
        ("nlp", ChargeBasis.STORAGE, Decimal("0.347222")),  # the last good figure, not 0
        ("vision", ChargeBasis.STORAGE, Decimal("2.777778")),
    ]
    earlier.refresh_from_db()
    assert earlier.period_end == NOV + timedelta(minutes=30)
    assert UsageImport.objects.get(pk=imported.pk).issues == imported.issues


def test_a_refused_query_skips_that_charge_only():
    """A PromQL Prometheus refuses (HTTP 400, bad_data) for storage: reported; egress kept."""
    TeamFactory(slug="nlp")
    now = NOV + timedelta(hours=1)
    refused = (400, {"status": "error", "errorType": "bad_data",
                     "error": '1:1: parse error: unexpected "}"'})  # fmt: skip
    recorded = Recorded(refused, vector({"team-nlp": "4000000000"}, now))
    imported = extra_charges_import_prometheus(
        metrics=recorded.adapter(), start=NOV, end=now, now=now
    )
    assert [(i["charge"], i["code"]) for i in imported.issues] == [("storage", "query_refused")]
    assert [(r[1], r[4]) for r in rows()] == [(ChargeBasis.EGRESS, Decimal("4"))]


def test_prometheus_down_writes_nothing_and_raises_for_a_retry():
    TeamFactory(slug="nlp")

    def down(request):
        raise httpx.ConnectError("connection refused", request=request)

    adapter = PrometheusAdapter("http://prometheus.test", transport=httpx.MockTransport(down))
    now = NOV + timedelta(hours=1)
    with pytest.raises(SchedulerUnavailable):
        extra_charges_import_prometheus(metrics=adapter, start=NOV, end=now, now=now)
    assert not UsageRecord.objects.exists()
    assert not UsageImport.objects.exists()


def test_a_month_in_a_zone_with_a_dst_change_is_its_real_length():
    """Europe/Berlin, October 2026: DST ends on the 25th, so the month is 31 x 24 + 1 = 745 h
    = 2,682,000 s. 745 GB held for the first 10 hours (120 steps, the month starting at
    30 Sep 22:00 UTC): 745 x 36,000 / 2,682,000 = 10 GB-months."""
    TeamFactory(slug="nlp")
    start = datetime(2026, 9, 30, 22, tzinfo=UTC)
    now = start + timedelta(hours=10)
    recorded = Recorded(matrix({"team-nlp": steps(start, now, "745000000000")}),
                        vector({}, now))  # fmt: skip
    with override_settings(BILLING_TIME_ZONE="Europe/Berlin"):
        extra_charges_import_prometheus(metrics=recorded.adapter(), start=start, end=now, now=now)
    assert float(recorded.asked[0][1]["start"]) == start.timestamp()
    assert [(r[3], r[4]) for r in rows()] == [(date(2026, 10, 1), Decimal("10"))]


def test_a_step_that_does_not_divide_an_hour_is_refused():
    with override_settings(EXTRA_CHARGES_STEP_S=420), pytest.raises(ValueError, match="3600"):
        extra_charges_import_prometheus(metrics=None, start=NOV, end=NOV + timedelta(hours=1))


def test_the_beat_task_imports_the_months_of_the_last_two_days(monkeypatch):
    """The task: no PromQL configured -> nothing asked; configured -> the records, and a second
    run the same hour writes nothing."""
    from billing import tasks
    from billing.services import prometheus_meters as meters

    TeamFactory(slug="nlp")
    now = NOV + timedelta(days=1, hours=3)  # the last 48 h touch October and November
    recorded = Recorded(
        lambda p: matrix({"team-nlp": [(NOV, "1000000000")]}),
        lambda p: vector({"team-nlp": "1000000000"}, now),
    )
    monkeypatch.setattr(meters, "metrics_adapter", lambda url: recorded.adapter())
    monkeypatch.setattr(tasks.timezone, "now", lambda: now)
    with override_settings(EXTRA_CHARGES_STORAGE_PROMQL="", EXTRA_CHARGES_EGRESS_PROMQL=""):
        assert tasks.extra_charges_prometheus_task() == {}
    assert recorded.asked == []
    with override_settings(PROMETHEUS_URL="http://prometheus.test"):
        first = tasks.extra_charges_prometheus_task()
        assert first == {"created": 4, "updated": 0, "unchanged": 0, "issues": 0}
        months = sorted({r[3] for r in rows()})
        assert months == [date(2026, 10, 1), date(2026, 11, 1)]
        assert tasks.extra_charges_prometheus_task()["unchanged"] == 4


def test_the_command_imports_a_month_from_prometheus_and_exits_1_on_issues(monkeypatch, capsys):
    """``import_extra_charges --prometheus --month 2026-10``: October whole (31 days), storage
    of nlp 1 GB at the first step only (1 x 300 / 2,678,400 = 0.000112 GB-months), egress of
    an unknown namespace reported -> exit 1. No file and no --prometheus -> exit 2."""
    from django.core.management import call_command

    from billing.management.commands import import_extra_charges as command

    TeamFactory(slug="nlp")
    oct1, nov1 = datetime(2026, 10, 1, tzinfo=UTC), NOV
    recorded = Recorded(matrix({"team-nlp": [(oct1, "1000000000")]}),
                        vector({"team-gone": "5"}, nov1))  # fmt: skip
    monkeypatch.setattr(command, "metrics_adapter", lambda url: recorded.adapter())
    with pytest.raises(SystemExit) as exit_, override_settings(PROMETHEUS_URL="http://p.test"):
        call_command("import_extra_charges", "--prometheus", "--month", "2026-10")
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert "2026-10 from Prometheus (storage, egress): 1 record(s) created" in out
    assert "egress team-gone: unknown_namespace" in out
    assert float(recorded.asked[1][1]["time"]) == nov1.timestamp()  # the month's end
    assert [(r[3], r[4], r[6]) for r in rows()] == [(date(2026, 10, 1), Decimal("0.000112"), nov1)]
    with pytest.raises(SystemExit) as exit_:
        call_command("import_extra_charges")
    assert exit_.value.code == 2


def test_prometheus_charges_are_priced_on_the_statement(team):
    """October 2026 (31 days), imported on 2 Nov: nlp held 500 GB from 1 Oct to 16 Oct 12:00
    (4,464 steps of 300 s = 15.5 days) -> 500 x 15.5 / 31 = 250 GB-months x 0.02 = 5.00 EUR;
    egress 120e9 bytes = 120 GB x 0.09 = 10.80 EUR; total 15.80 EUR."""
    from billing.choices import RateKind
    from billing.services.rates import rate_card_create
    from billing.services.statements import statement_build

    rate_card_create(
        name="extras", currency="EUR", effective_from=date(2026, 1, 1), gpu_prices={},
        pool_prices={(RateKind.STORAGE_GB_MONTH, None, None): Decimal("0.02"),
                     (RateKind.EGRESS_GB, None, None): Decimal("0.09")},
    )  # fmt: skip
    oct1 = datetime(2026, 10, 1, tzinfo=UTC)
    held = steps(oct1, oct1 + timedelta(days=15, hours=12), "500000000000")
    recorded = Recorded(matrix({"team-nlp": held}), vector({"team-nlp": "120000000000"}, NOV))
    extra_charges_import_prometheus(
        metrics=recorded.adapter(), start=oct1, end=NOV, now=datetime(2026, 11, 2, tzinfo=UTC)
    )
    statement = statement_build(team=team, month=date(2026, 10, 1))
    lines = {line.basis: (line.quantity, line.unit_price, line.amount)
             for line in statement.lines.all()}  # fmt: skip
    assert lines == {
        ChargeBasis.STORAGE: (Decimal(250), Decimal("0.02"), Decimal("5.00")),
        ChargeBasis.EGRESS: (Decimal(120), Decimal("0.09"), Decimal("10.80")),
    }
    assert statement.total_amount == Decimal("15.80")
