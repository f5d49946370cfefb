"""The page, the API and the ``estimate`` command refuse the same bad input alike: the page and
the API with the same ``{field: message}`` (both run ``pools.sizing.inputs.sizing_inputs_clean``,
plain Python since issue 29), the command naming the same field (its rows are the measurement
rows' format, checked by the core ``estimate_from_fields``, so its wording is the core's)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from factories import inference_fleet

from pools.sizing.models import SizingEstimate

pytestmark = pytest.mark.django_db

# Qwen2.5-72B (64 heads, 80 layers, dense, 32,768 tokens of context) at 2,000 output tok/s.
PAGE_AND_API = {
    "model": "qwen2_5_72b",
    "precision": "FP8",
    "kv_cache_dtype": "FP8",
    "input_len": "1000",
    "output_len": "200",
    "demand_kind": "output_rate",
    "output_tok_s": "2000",
}
# The same model as a measurement row for the command: 8 H100 SXM, TP 8, 8 sequences.
COMMAND = {
    "model": "qwen2_5_72b",
    "precision": "FP8",
    "kv_cache_dtype": "FP8",
    "input_len": 1000,
    "output_len": 200,
    "gpu": "h100_sxm",
    "gpu_count": 8,
    "tp": 8,
    "concurrency": 8,
}

# (change, the page's and the API's errors, written out by hand from the messages in
# pools/sizing/inputs.py, the field the command names)
CASES = [
    ({"input_len": "0"}, {"input_len": "Must be at least 1."}, "input_len"),
    ({"output_len": "-1"}, {"output_len": "Must be at least 1."}, "output_len"),
    (
        {"model": "gpt5"},
        {"model": "Unknown model 'gpt5'; choose a preset or 'custom'."},
        "model",
    ),
    (
        {"input_len": "40000"},
        {
            "input_len": "Input + output = 40,200 tokens exceeds Qwen2.5-72B's maximum context "
            "of 32,768."
        },
        "input_len",
    ),
    (
        {"ep": "2"},
        {"ep": "Expert parallelism needs a mixture of experts; Qwen2.5-72B is dense."},
        "ep",
    ),
]


def _page_errors(client, data) -> dict[str, str]:
    response = client.get("/sizing/", data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return {item["field"]: item["message"] for item in response.context["errors"]}


def _api_errors(client, data) -> dict[str, str]:
    response = client.post("/api/v1/estimates/", data, format="json")
    assert response.status_code == 400
    assert not SizingEstimate.objects.exists()
    return {field: messages[0] for field, messages in response.json()["errors"].items()}


def _command_field(row: dict, tmp_path) -> str:
    path = tmp_path / "row.json"
    path.write_text(json.dumps(row), encoding="utf-8")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("estimate", "--json", str(path), stdout=out, stderr=io.StringIO())
    assert exit_.value.code == 1
    return json.loads(out.getvalue())["error"]["field"]


@pytest.mark.parametrize(("change", "errors", "command_field"), CASES)
def test_the_page_the_api_and_the_command_refuse_alike(
    member, member_page, api_as, tmp_path, change, errors, command_field
):
    inference_fleet()
    data = {**PAGE_AND_API, **change}
    row = {**COMMAND, **{k: int(v) if v.lstrip("-").isdigit() else v for k, v in change.items()}}

    assert _page_errors(member_page, data) == errors
    assert _api_errors(api_as(member), data) == errors
    assert _command_field(row, tmp_path) == command_field
