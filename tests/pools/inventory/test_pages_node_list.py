"""/nodes/ (and /gpus/): one URL for the page, its htmx fragment and its CSV export."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import GpuFactory, PoolFactory, node_with_gpus

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def fleet():
    train = PoolFactory(slug="train", name="Train")
    dev = PoolFactory(slug="dev", name="Dev")
    node_with_gpus(4, hostname="trn-01", pool=train)
    node_with_gpus(
        2,
        hostname="trn-02",
        pool=train,
        state="drain",
        driver_version="535.129.03",
        state_reason="ECC errors",
    )
    dev1 = node_with_gpus(2, hostname="dev-01", pool=dev, gpu_model="rtx4090")
    GpuFactory(node=dev1, index=2, gpu_model=None, raw_model_name="v100")


def csv_rows(response) -> list[dict[str, str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_full_page(member_page, fleet):
    response = member_page.get("/nodes/")

    content = response.content.decode()
    assert response.status_code == 200
    assert "<html" in content and 'id="table"' in content
    assert [n.hostname for n in response.context["page"]] == ["dev-01", "trn-01", "trn-02"]
    assert "HX-Request" in response["Vary"]


def test_an_htmx_request_gets_only_the_table_fragment(member_page, fleet):
    response = member_page.get("/nodes/", {"pool": "train"}, headers=HTMX)

    content = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in content and "<body" not in content
    assert content.lstrip().startswith("<") and "<table" in content
    assert "trn-01" in content and "trn-02" in content and "dev-01" not in content
    assert "HX-Request" in response["Vary"]


def test_csv_export_has_a_header_and_one_row_per_node(member_page, fleet):
    response = member_page.get("/nodes/", {"export": "csv"})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="nodes.csv"'
    rows = csv_rows(response)
    assert [
        (
            r["hostname"],
            r["pool"],
            r["state"],
            r["driver_version"],
            r["driver_branch"],
            r["gpus"],
            r["unrecognised_gpus"],
        )
        for r in rows
    ] == [
        ("dev-01", "dev", "up", "550.54.15", "550", "3", "1"),
        ("trn-01", "train", "up", "550.54.15", "550", "4", "0"),
        ("trn-02", "train", "drain", "535.129.03", "535", "2", "0"),
    ]
    assert rows[2]["state_reason"] == "ECC errors"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"pool": "train"}, ["trn-01", "trn-02"]),
        ({"state": "drain"}, ["trn-02"]),
        ({"q": "v100"}, ["dev-01"]),
        ({"gpu_model": "rtx4090"}, ["dev-01"]),
        ({"ordering": "-gpus"}, ["trn-01", "dev-01", "trn-02"]),
    ],
)
def test_csv_export_is_filtered_like_the_page(member_page, fleet, params, expected):
    page = member_page.get("/nodes/", params)
    export = member_page.get("/nodes/", {**params, "export": "csv"})

    assert [n.hostname for n in page.context["page"]] == expected
    assert [r["hostname"] for r in csv_rows(export)] == expected


def test_an_invalid_filter_shows_its_error_and_no_rows(member_page, fleet):
    page = member_page.get("/nodes/", {"pool": "nope"})
    export = member_page.get("/nodes/", {"pool": "nope", "export": "csv"})

    assert page.status_code == 400
    assert "pool" in page.context["filterset"].errors
    assert list(page.context["page"]) == []
    assert export.status_code == 400 and export["Content-Type"].startswith("text/plain")
    assert export.content.decode().startswith('The filters are invalid: Pool "nope": ')


def test_pages_of_the_node_list(member_page, fleet):
    for number in range(30):
        node_with_gpus(1, hostname=f"bulk-{number:02d}")

    first = member_page.get("/nodes/", {"page_size": 25})
    second = member_page.get("/nodes/", {"page_size": 25, "page": 2})

    assert first.context["page"].paginator.count == 33
    assert len(first.context["page"]) == 25 and len(second.context["page"]) == 8
    assert second.context["page"][7].hostname == "trn-02"


def test_gpu_list_page_fragment_and_csv(member_page, fleet):
    fragment = member_page.get("/gpus/", {"recognised": "false"}, headers=HTMX)
    export = member_page.get("/gpus/", {"pool": "dev", "export": "csv"})

    assert b"<html" not in fragment.content and b"v100" in fragment.content
    assert [
        (r["node"], r["index"], r["gpu_model"], r["raw_model_name"]) for r in csv_rows(export)
    ] == [
        ("dev-01", "0", "rtx4090", "NVIDIA GeForce RTX 4090"),
        ("dev-01", "1", "rtx4090", "NVIDIA GeForce RTX 4090"),
        ("dev-01", "2", "", "v100"),
    ]


def queries_for(client, url: str, **params) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, {"page_size": 200, **params})
        if response.streaming:
            b"".join(response.streaming_content)
    assert response.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize(
    ("url", "params"),
    [
        ("/nodes/", {}),
        ("/nodes/", {"export": "csv"}),
        ("/gpus/", {}),
        ("/gpus/", {"export": "csv"}),
        ("/", {}),
        ("/pools/", {"cuda": "12.4"}),
        ("/gpu-models/", {}),
    ],
)
def test_list_page_query_count_does_not_grow_with_the_fleet(member_page, url, params):
    pool = PoolFactory(slug="bulk")
    for number in range(3):
        node_with_gpus(8, hostname=f"bulk-{number:03d}", pool=pool)
    small = queries_for(member_page, url, **params)
    for number in range(3, 30):
        node_with_gpus(
            8,
            hostname=f"bulk-{number:03d}",
            pool=pool,
            driver_version="535.129.03" if number % 2 else "550.54.15",
        )

    large = queries_for(member_page, url, **params)

    assert large == small
