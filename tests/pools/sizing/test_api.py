"""/api/v1/estimates/: create answers 202 with the estimate's URL, polling shows the job's
status, progress and results; bad input is a 400 with field errors and writes nothing; a caller
sees their own and their teams' estimates only (others are 404)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import inference_fleet

from pools.audit.models import AuditEvent
from pools.sizing.models import SizingEstimate

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/"

QWEN_72B = {
    "model": "qwen2_5_72b",
    "precision": "FP8",
    "kv_cache_dtype": "FP8",
    "input_len": 1000,
    "output_len": 200,
    "demand_kind": "output_rate",
    "output_tok_s": 2000,
    "tpot_target_ms": 50,
    "ttft_target_ms": 2000,
}


@pytest.fixture
def fleet(db):
    return inference_fleet()


def _create(client, body, capture):
    with capture(execute=False) as callbacks:
        response = client.post(URL, body, format="json")
    return response, callbacks


def test_create_is_202_with_the_location_then_polling_reaches_done(
    fleet, team, team_member, api_as, django_capture_on_commit_callbacks
):
    client = api_as(team_member)

    response, callbacks = _create(
        client, {**QWEN_72B, "team": "nlp"}, django_capture_on_commit_callbacks
    )

    assert response.status_code == 202
    estimate = SizingEstimate.objects.get()
    assert response["Location"] == f"http://testserver/api/v1/estimates/{estimate.pk}/"
    assert response.json()["url"] == response["Location"]
    assert response.json()["page_url"] == f"/sizing/estimates/{estimate.pk}/"
    assert (response.json()["status"], response.json()["progress"]) == ("pending", 0)
    assert response.json()["team"] == "nlp"

    pending = client.get(response["Location"]).json()
    assert pending["status"] == "pending"
    assert pending["results"] is None and pending["request_url"] is None

    for callback in callbacks:  # the worker (eager without a broker) runs the job
        callback()
    done = client.get(response["Location"]).json()

    assert (done["status"], done["progress"], done["error"]) == ("done", 100, "")
    # 22 A100 PCIe would do but the pool holds 8: capacity to add, and the reason in words
    assert done["results"]["request"]["kind"] == "growth"
    assert done["results"]["recommended_in_free_capacity"] is None
    assert done["results"]["request_lacks"].startswith("no inference pool has B200 SXM 180GB cards")
    assert done["request_url"].startswith("/requests/new/?workload_kind=inference&gpu_model=")
    assert "&kind=growth&" in done["request_url"]
    recommended = next(
        row for row in done["results"]["rows"] if row["gpu_model"] == done["results"]["recommended"]
    )
    # The recommendation carries its band: the modelled rate times the regime's P10 / P90.
    band = done["recommendation"]["band"]
    assert done["recommendation"]["cards"] == recommended["cards"]
    assert band["low_tok_s"] == pytest.approx(
        recommended["output_tok_s_per_replica"] * band["low_factor"], abs=0.01
    )  # results keep two decimals
    assert band["high_tok_s"] == pytest.approx(
        recommended["output_tok_s_per_replica"] * band["high_factor"], abs=0.01
    )
    assert done["recommendation"]["cards_pessimistic"] >= done["recommendation"]["cards"]
    assert done["inputs"]["output_tok_s"] == 2000.0


def test_the_location_header_is_a_plain_str_as_wsgi_servers_require(
    fleet, team, team_member, api_as, django_capture_on_commit_callbacks
):
    """PEP 3333: header values are native strings, and wsgiref (``manage.py runserver``, the
    demo) asserts ``type(value) is str``: DRF's ``Hyperlink`` (a str subclass) made it answer
    500 after the estimate was saved."""
    response, _ = _create(
        api_as(team_member), {**QWEN_72B, "team": "nlp"}, django_capture_on_commit_callbacks
    )

    assert response.status_code == 202
    [value] = [v for k, v in response.items() if k == "Location"]
    assert type(value) is str
    assert value == f"http://testserver/api/v1/estimates/{SizingEstimate.objects.get().pk}/"


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"input_len": 0, "output_len": -5}, {"input_len", "output_len"}),
        ({"input_len": 32_000, "output_len": 1_000}, {"input_len"}),
        ({"demand_kind": "traffic", "requests_per_day": 1e12}, {"requests_per_day"}),
        ({"model": "llama-9000"}, {"model"}),
        ({"gpu_models": ["h100_sxm", "nope"]}, {"gpu_models"}),
        ({"custom_model": {"num_layers": 2}, "model": "custom"}, None),
        # speculative decoding: gamma and alpha without a cost ratio or a draft model
        (
            {"speculative_draft_tokens": 4, "speculative_acceptance_rate": 0.7},
            {"speculative_draft_cost_ratio"},
        ),
        ({"speculative_draft_tokens": 17}, {"speculative_draft_tokens"}),
        # attention data parallelism on a dense model (QWEN_72B), or without EP = TP
        ({"tp": 8, "dp_attention": 8}, {"dp_attention"}),
        (
            {"model": "deepseek_v3", "tp": 8, "ep": 4, "dp_attention": 8},
            {"dp_attention"},
        ),
        ({"dp_attention": 0}, {"dp_attention"}),
        ({"speculative_acceptance_rate": 1}, {"speculative_acceptance_rate"}),
        (
            {
                "speculative_draft_tokens": 4,
                "speculative_acceptance_rate": 0.7,
                "speculative_draft_model": "gpt5",
            },
            {"speculative_draft_model"},
        ),
    ],
)
def test_bad_input_is_400_with_field_errors_and_writes_nothing(
    fleet, member, api_as, change, fields, django_capture_on_commit_callbacks
):
    response, callbacks = _create(
        api_as(member), {**QWEN_72B, **change}, django_capture_on_commit_callbacks
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input"
    if fields is not None:
        assert set(body["errors"]) == fields
    else:
        assert "custom_model.hidden_size" in body["errors"]
    assert all(isinstance(v, list) for v in body["errors"].values())
    assert not SizingEstimate.objects.exists() and not AuditEvent.objects.exists()
    assert callbacks == []


def test_absurd_traffic_says_why(fleet, member, api_as):
    body = {**QWEN_72B, "demand_kind": "traffic", "requests_per_day": 10**12}

    response = api_as(member).post(URL, body, format="json")

    assert "beyond any real deployment" in response.json()["errors"]["requests_per_day"][0]


def test_a_body_that_is_not_an_object_is_400(member, api_as):
    response = api_as(member).post(URL, [1, 2], format="json")

    assert response.status_code == 400


def test_a_foreign_team_answers_like_an_unknown_one(fleet, other_member, team, api_as):
    # The same 400 either way, so a member cannot tell which other teams exist.
    unknown = api_as(other_member).post(URL, {**QWEN_72B, "team": "nope"}, format="json")
    foreign = api_as(other_member).post(URL, {**QWEN_72B, "team": "nlp"}, format="json")

    assert (unknown.status_code, list(unknown.json()["errors"])) == (400, ["team"])
    assert (foreign.status_code, list(foreign.json()["errors"])) == (400, ["team"])
    assert foreign.json()["errors"]["team"] == ["No team you can see has this slug."]
    assert not SizingEstimate.objects.exists()


def test_anonymous_callers_are_refused(api_as):
    assert api_as(None).post(URL, QWEN_72B, format="json").status_code == 401
    assert api_as(None).get(URL).status_code == 401


@pytest.fixture
def estimates(team, team_member, team_manager, other_member, db):
    def make(user, team=None):
        return SizingEstimate.objects.create(
            inputs={**QWEN_72B, "model": "llama3_8b"}, created_by=user, team=team
        )

    return {
        "alice_private": make(team_member),
        "alice_for_nlp": make(team_member, team),
        "mia_private": make(team_manager),
        "victor_private": make(other_member),
    }


@pytest.mark.parametrize(
    ("who", "visible"),
    [
        ("alice", {"alice_private", "alice_for_nlp"}),
        ("mia", {"alice_for_nlp", "mia_private"}),
        ("victor", {"victor_private"}),
        ("admin", {"alice_private", "alice_for_nlp", "mia_private", "victor_private"}),
    ],
)
def test_a_caller_sees_their_own_and_their_teams_estimates(
    estimates, team_member, team_manager, other_member, pool_admin, api_as, who, visible
):
    user = {"alice": team_member, "mia": team_manager, "victor": other_member}.get(who, pool_admin)
    client = api_as(user)

    listed = {row["id"] for row in client.get(URL).json()["results"]}

    assert listed == {estimates[name].pk for name in visible}
    for name, estimate in estimates.items():
        expected = 200 if name in visible else 404
        assert client.get(f"{URL}{estimate.pk}/").status_code == expected


def test_list_rows_carry_the_recommendation_not_the_whole_results(estimates, team_member, api_as):
    row = api_as(team_member).get(URL).json()["results"][0]

    assert "results" not in row and "inputs" not in row
    assert row["model"] == "llama3_8b" and row["recommendation"] is None


def test_the_list_filters_by_status(estimates, pool_admin, api_as):
    SizingEstimate.objects.filter(pk=estimates["mia_private"].pk).update(status="failed")

    rows = api_as(pool_admin).get(URL, {"status": "failed"}).json()["results"]

    assert [row["id"] for row in rows] == [estimates["mia_private"].pk]


def test_the_list_does_not_grow_queries_with_rows(team, team_member, api_as):
    client = api_as(team_member)
    SizingEstimate.objects.create(inputs=QWEN_72B, created_by=team_member, team=team)
    with CaptureQueriesContext(connection) as one:
        client.get(URL)
    for _ in range(10):
        SizingEstimate.objects.create(inputs=QWEN_72B, created_by=team_member, team=team)
    with CaptureQueriesContext(connection) as eleven:
        client.get(URL)

    assert len(eleven) == len(one)


def test_the_schema_documents_every_input_with_its_bounds(admin_api):
    schema = admin_api.get("/api/schema/?format=json").json()
    body = schema["paths"]["/api/v1/estimates/"]["post"]["requestBody"]["content"]
    ref = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = schema["components"]["schemas"][ref]["properties"]

    assert set(fields) >= {"model", "input_len", "output_len", "output_tok_s", "team", "prices"}
    assert fields["input_len"] == {"type": "integer", "minimum": 1, "maximum": 10_000_000}
    # (0, 1) for a share of a day's requests at the peak, [0, 1) for the cache hit rate
    assert (fields["peak_share"]["exclusiveMinimum"], fields["peak_share"]["maximum"]) == (True, 1)
    assert fields["prompt_cache_hit_rate"]["exclusiveMaximum"] is True
    assert (
        fields["tpot_target_ms"]["nullable"] is True and fields["tpot_target_ms"]["default"] == 50
    )
    (precision,) = fields["precision"]["allOf"]  # a named enum component
    assert "FP8" in schema["components"]["schemas"][precision["$ref"].rsplit("/", 1)[-1]]["enum"]


def test_speculation_through_the_api_counts_the_draft(
    fleet, team_member, api_as, django_capture_on_commit_callbacks
):
    """Llama-3.1-70B, one sequence, Llama-3.1-8B as draft (gamma 4, alpha 0.7, cost ratio left
    to the draft: 8,030,261,248 / 70,553,706,496 = 0.1138): (1 - 0.7^5) / 0.3 = 2.7731 tokens
    a pass; draft weights 8,030,261,248 x 2 B = 16,060,522,496 B, / TP on every row's cards."""
    body = {
        **QWEN_72B,
        "model": "llama3_70b",
        "precision": "BF16",
        "kv_cache_dtype": "FP16",
        "demand_kind": "concurrency",
        "concurrency": 1,
        "gpu_models": ["h100_sxm"],
        "speculative_draft_tokens": 4,
        "speculative_acceptance_rate": 0.7,
        "speculative_draft_model": "llama3_8b",
    }
    client = api_as(team_member)
    response, callbacks = _create(client, body, django_capture_on_commit_callbacks)
    for callback in callbacks:
        callback()
    done = client.get(response["Location"]).json()

    speculation = done["results"]["speculation"]
    assert speculation["tokens_per_step"] == pytest.approx(2.7731, abs=1e-4)
    assert speculation["draft_cost_ratio"] == pytest.approx(0.1138, abs=1e-4)
    assert speculation["draft_weights_bytes"] == 16_060_522_496
    (row,) = done["results"]["rows"]
    assert row["draft_weights_bytes_per_gpu"] == -(-16_060_522_496 // row["tp"])
    assert row["speculative_credited"] is True


def test_images_through_the_api_are_input_tokens_with_the_encoders_cost(
    fleet, team_member, api_as, django_capture_on_commit_callbacks
):
    """Qwen2.5-VL-7B, one 1,024 x 1,024 image: 1,369 visual tokens on top of the 1,000 of
    text, 7,707,810,125,312 encoder FLOPs (tests/pools/sizing/test_vision.py); the encoder's
    676,550,144 x 2 B = 1,353,100,288 B on the one card of a TP 1 row."""
    body = {
        **QWEN_72B,
        "model": "qwen2_5_vl_7b",
        "precision": "BF16",
        "gpu_models": ["h100_sxm"],
        "images_per_request": 1,
        "tp": 1,
    }
    client = api_as(team_member)
    response, callbacks = _create(client, body, django_capture_on_commit_callbacks)
    for callback in callbacks:
        callback()
    done = client.get(response["Location"]).json()

    multimodal = done["results"]["multimodal"]
    assert (multimodal["tokens"], multimodal["input_len"]) == (1_369, 2_369)
    assert multimodal["encoder_flops"] == pytest.approx(7_707_810_125_312, rel=1e-6)  # rounded
    (row,) = done["results"]["rows"]
    assert row["vision_weights_bytes_per_gpu"] == 1_353_100_288


def test_each_choice_defaults_to_a_value_its_schema_offers():
    """The schema gives a choice's ``allowed`` as its enum: a default outside it (KV cache
    ``auto`` beside ``AUTO``) made openapi-python-client drop POST /api/v1/estimates/."""
    from pools.sizing.inputs import INPUTS, ParsedChoice

    choices = {name: field for name, field in INPUTS.items() if isinstance(field, ParsedChoice)}
    assert {"precision", "kv_cache_dtype", "engine"} <= set(choices)
    for name, field in choices.items():
        assert field.default in field.allowed, name
    assert choices["kv_cache_dtype"].default == "auto"  # as vLLM's --kv-cache-dtype spells it


QWEN3_30B_A3B_CONFIG = json.loads(
    (
        Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
    ).read_text(encoding="utf-8")
)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("head_dim", "128"),  # text where the arithmetic adds it to a number
        ("hidden_size", {}),
        ("moe_intermediate_size", [768]),
        ("decoder_sparse_step", "1"),
        ("num_hidden_layers", True),
        ("num_key_value_heads", -4),
    ],
)
def test_a_config_value_that_is_no_whole_number_is_400_naming_it(
    fleet, member, api_as, key, value, django_capture_on_commit_callbacks
):
    """Each was a 500 (TypeError in the parameter count) before the estimate was written,
    or, for the negative, a refusal that did not name the key."""
    client = api_as(member)
    client.raise_request_exception = False
    body = {
        **QWEN_72B,
        "model": "custom",
        "custom_model": {"config": {**QWEN3_30B_A3B_CONFIG, key: value}},
    }

    response, callbacks = _create(client, body, django_capture_on_commit_callbacks)

    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "invalid_input"
    assert list(answer["errors"]) == ["custom_model.config"]
    assert key in answer["errors"]["custom_model.config"][0]
    assert not SizingEstimate.objects.exists() and not AuditEvent.objects.exists()
    assert callbacks == []


def test_a_gpu_name_several_skus_share_asks_which_and_writes_nothing(fleet, member, api_as):
    """Issue 34, *Bad input*: "a GPU name that matches several SKUs asks which". nvidia-smi
    prints ``NVIDIA H100`` for device 0x2339 beside the SXM5, PCIe and NVL names (the
    catalogue's ``ambiguous_names``): the API named it an unknown model instead of asking."""
    body = {**QWEN_72B, "gpu_models": ["NVIDIA H100", "l40s"]}

    response = api_as(member).post(URL, body, format="json")

    assert response.status_code == 400
    (message,) = response.json()["errors"]["gpu_models"]
    assert message == (
        "'NVIDIA H100' names several GPU models: h100_sxm, h100_pcie, h100_nvl; choose one of them."
    )
    assert not SizingEstimate.objects.exists()


def test_gpu_models_take_the_name_nvidia_smi_prints_as_estimate_does(
    fleet, member, api_as, django_capture_on_commit_callbacks
):
    body = {**QWEN_72B, "gpu_models": ["NVIDIA H100 80GB HBM3", "l40s", "nvidia l40s"]}

    response, _ = _create(api_as(member), body, django_capture_on_commit_callbacks)

    assert response.status_code == 202
    assert SizingEstimate.objects.get().inputs["gpu_models"] == ["h100_sxm", "l40s"]


def test_a_gpu_name_that_matches_nothing_is_still_unknown(fleet, member, api_as):
    body = {**QWEN_72B, "gpu_models": ["NVIDIA H999", "l40s"]}

    response = api_as(member).post(URL, body, format="json")

    assert response.json()["errors"]["gpu_models"] == ["Unknown GPU models: NVIDIA H999."]


# A custom architecture typed field by field with three contradictions: 10 experts per token of
# 8 experts, 5 KV heads for 32 attention heads, 1,000 total parameters below 2,000 active.
CONTRADICTORY_CUSTOM = {
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_kv_heads": 5,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_context_tokens": 8192,
    "total_params": 1000,
    "active_params": 2000,
    "num_experts": 8,
    "experts_per_token": 10,
}


def _without(body: dict, *keys: str) -> dict:
    return {key: value for key, value in body.items() if key not in keys}


def test_plain_and_custom_model_errors_are_answered_in_one_400(
    fleet, member, api_as, django_capture_on_commit_callbacks
):
    """Issue 34: bad input "is refused field by field". The custom architecture's
    contradictions were answered only once the plain fields were fixed (a second 400 for the
    same request): one answer names every field at fault, each under its own name."""
    body = {
        **_without(QWEN_72B, "output_tok_s"),  # the peak left out
        "input_len": "many",
        "model": "custom",
        "custom_model": CONTRADICTORY_CUSTOM,
    }

    response, callbacks = _create(api_as(member), body, django_capture_on_commit_callbacks)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert response.json()["errors"] == {
        "input_len": ["Enter a whole number."],
        "output_tok_s": ["This field is required."],
        "custom_model.experts_per_token": ["10 experts per token is more than the 8 experts."],
        "custom_model.num_kv_heads": ["5 KV heads do not divide the 32 attention heads evenly."],
        "custom_model.total_params": ["The total (1,000) is below the active parameters (2,000)."],
    }
    assert not SizingEstimate.objects.exists() and not AuditEvent.objects.exists()
    assert callbacks == []


def test_a_pasted_config_jsons_contradictions_come_with_the_plain_fields_errors(
    fleet, member, api_as, django_capture_on_commit_callbacks
):
    """Qwen3-30B-A3B's config.json (32 attention heads, 128 experts) edited to 200 experts per
    token and 5 KV heads, sent with a peak of -5 tok/s: the three refusals in one answer."""
    config = {**QWEN3_30B_A3B_CONFIG, "num_experts_per_tok": 200, "num_key_value_heads": 5}
    body = {
        **QWEN_72B,
        "output_tok_s": -5,
        "model": "custom",
        "custom_model": {"config": json.dumps(config)},
    }

    response, callbacks = _create(api_as(member), body, django_capture_on_commit_callbacks)

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "output_tok_s": ["Must be in (0, 1e+12]."],
        "custom_model.experts_per_token": ["200 experts per token is more than the 128 experts."],
        "custom_model.num_kv_heads": ["5 KV heads do not divide the 32 attention heads evenly."],
    }
    assert not SizingEstimate.objects.exists() and callbacks == []


def test_a_bad_typed_field_comes_with_the_pasted_config_jsons_contradiction(
    fleet, member, api_as, django_capture_on_commit_callbacks
):
    """Issue 34: a typed hidden size of -3 hid the pasted config.json's own contradiction
    (Qwen3-30B-A3B's config edited to 10 experts per token of 8 experts): the whole
    architecture was checked only once every typed field passed. The experts' check reads
    neither the hidden size nor anything typed, so it is answered beside it."""
    config = {**QWEN3_30B_A3B_CONFIG, "num_experts": 8, "num_experts_per_tok": 10}
    body = {
        **QWEN_72B,
        "model": "custom",
        "custom_model": {"hidden_size": -3, "config": json.dumps(config)},
    }

    response, callbacks = _create(api_as(member), body, django_capture_on_commit_callbacks)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert response.json()["errors"] == {
        "custom_model.hidden_size": ["Must be at least 1."],
        "custom_model.experts_per_token": ["10 experts per token is more than the 8 experts."],
    }
    assert not SizingEstimate.objects.exists() and not AuditEvent.objects.exists()
    assert callbacks == []


def test_beside_a_bad_typed_field_only_the_checks_that_do_not_read_it_are_answered(
    fleet, member, api_as
):
    """Typed attention heads of -3 over Qwen3-30B-A3B's config.json (32 heads) edited to 5 KV
    heads and 200 experts per token of its 128: whether 5 KV heads divide the heads depends on
    the heads the user meant, so it waits; the experts' contradiction is the config's own."""
    config = {**QWEN3_30B_A3B_CONFIG, "num_key_value_heads": 5, "num_experts_per_tok": 200}
    body = {
        **QWEN_72B,
        "model": "custom",
        "custom_model": {"num_attention_heads": "-3", "config": config},
    }

    response = api_as(member).post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "custom_model.num_attention_heads": ["Must be at least 1."],
        "custom_model.experts_per_token": ["200 experts per token is more than the 128 experts."],
    }
    assert not SizingEstimate.objects.exists()


def test_a_bad_typed_field_comes_with_a_config_json_of_state_space_layers(fleet, member, api_as):
    """A config.json with Mamba layers (``mamba_d_state``) is refused whatever is typed: its
    refusal came only once the typed hidden size "wide" was fixed."""
    config = {**QWEN3_30B_A3B_CONFIG, "mamba_d_state": 16}
    body = {
        **QWEN_72B,
        "model": "custom",
        "custom_model": {"hidden_size": "wide", "config": config},
    }

    response = api_as(member).post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "custom_model.hidden_size": ["Enter a whole number."],
        "custom_model.config": [
            "the config.json's mamba_d_state mark state-space or linear-attention layers, which "
            "this sizing model cannot cost (it counts attention KV caches and weight streams)"
        ],
    }
    assert not SizingEstimate.objects.exists()


def test_every_missing_speculation_input_is_answered_at_once(
    fleet, member, api_as, django_capture_on_commit_callbacks
):
    """Four draft tokens without the acceptance rate or the draft's cost ratio (nor a draft
    model): both are missing, and the API named only the first."""
    body = {**QWEN_72B, "speculative_draft_tokens": 4}

    response, callbacks = _create(api_as(member), body, django_capture_on_commit_callbacks)

    needs = (
        "speculative decoding needs the draft tokens, the acceptance rate and the draft's cost "
        "ratio (or draft model) together; "
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "speculative_acceptance_rate": [needs + "speculative_acceptance_rate is missing"],
        "speculative_draft_cost_ratio": [needs + "speculative_draft_cost_ratio is missing"],
    }
    assert not SizingEstimate.objects.exists() and callbacks == []


def test_the_speculations_own_faults_come_beside_a_refused_model(fleet, member, api_as):
    """Qwen3-30B-A3B's config.json edited to 200 experts per token of its 128, with four draft
    tokens alone: there is no model to speculate for, but the two inputs missing need none;
    they were answered only once the config was fixed."""
    config = {**QWEN3_30B_A3B_CONFIG, "num_experts_per_tok": 200}
    body = {
        **QWEN_72B,
        "model": "custom",
        "custom_model": {"config": config},
        "speculative_draft_tokens": 4,
    }

    response = api_as(member).post(URL, body, format="json")

    needs = (
        "speculative decoding needs the draft tokens, the acceptance rate and the draft's cost "
        "ratio (or draft model) together; "
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "custom_model.experts_per_token": ["200 experts per token is more than the 128 experts."],
        "speculative_acceptance_rate": [needs + "speculative_acceptance_rate is missing"],
        "speculative_draft_cost_ratio": [needs + "speculative_draft_cost_ratio is missing"],
    }
    assert not SizingEstimate.objects.exists()


def test_every_check_of_the_whole_answers_at_once(fleet, member, api_as):
    """Qwen2.5-72B (dense, 64 heads, 32,768 tokens of context): 40,000 + 200 tokens, TP 3 and
    EP 2 are three faults the model tells; the first alone was answered."""
    body = {**QWEN_72B, "input_len": 40_000, "tp": 3, "ep": 2}

    response = api_as(member).post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "input_len": [
            "Input + output = 40,200 tokens exceeds Qwen2.5-72B's maximum context of 32,768."
        ],
        "tp": ["TP 3 does not divide Qwen2.5-72B's 64 heads."],
        "ep": ["Expert parallelism needs a mixture of experts; Qwen2.5-72B is dense."],
    }
    assert not SizingEstimate.objects.exists()


def test_a_custom_fields_bad_value_and_the_missing_required_ones_come_together(
    fleet, member, api_as
):
    """Without a config.json the first eight fields are required: a bad layer count hid that
    the other seven were missing."""
    body = {**QWEN_72B, "model": "custom", "custom_model": {"num_layers": "many"}}

    response = api_as(member).post(URL, body, format="json")

    required = ["Required for a custom architecture (or give its config.json)."]
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "custom_model.num_layers": ["Enter a whole number."],
        "custom_model.hidden_size": required,
        "custom_model.num_attention_heads": required,
        "custom_model.num_kv_heads": required,
        "custom_model.head_dim": required,
        "custom_model.intermediate_size": required,
        "custom_model.vocab_size": required,
        "custom_model.max_context_tokens": required,
    }
    assert not SizingEstimate.objects.exists()


def test_the_api_names_inputs_by_their_field_names_in_its_messages(fleet, member, api_as):
    """The page words a message with the form's labels; the API keeps its own names, in the
    errors' keys and in the message."""
    body = {**QWEN_72B, "speculative_draft_tokens": 4, "speculative_acceptance_rate": 0.7}

    response = api_as(member).post(URL, body, format="json")

    assert response.json()["errors"] == {
        "speculative_draft_cost_ratio": [
            "speculative decoding needs the draft tokens, the acceptance rate and the draft's "
            "cost ratio (or draft model) together; speculative_draft_cost_ratio is missing"
        ]
    }


def _post_text(client, text: str, capture):
    """A body sent as written: the test client's JSON renderer refuses an infinity itself."""
    with capture(execute=False) as callbacks:
        response = client.post(URL, text, content_type="application/json")
    return response, callbacks


@pytest.mark.parametrize(
    ("config_text", "where"),
    [
        ('"rope_theta": 1e999', "rope_theta"),
        ('"rope_scaling": {"factor": -1e400}', "rope_scaling.factor"),
    ],
)
def test_a_config_number_beyond_a_float_is_400_and_writes_nothing(
    fleet, member, api_as, config_text, where, django_capture_on_commit_callbacks
):
    """``1e999`` parses as infinity (float('1e999') == inf), which the JSON column refuses on
    save: a 500 (IntegrityError, JSON_VALID) after the inputs had passed."""
    client = api_as(member)
    client.raise_request_exception = False
    config = json.dumps(QWEN3_30B_A3B_CONFIG)[:-1] + ", " + config_text + "}"
    body = json.dumps({**QWEN_72B, "model": "custom", "custom_model": {"config": "@"}})
    text = body.replace('"@"', config)

    response, callbacks = _post_text(client, text, django_capture_on_commit_callbacks)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    (message,) = response.json()["errors"]["custom_model.config"]
    assert message.startswith(f"The config.json holds a number that is not finite at {where}:")
    assert list(response.json()["errors"]) == ["custom_model.config"]
    assert not SizingEstimate.objects.exists() and not AuditEvent.objects.exists()
    assert callbacks == []


def test_a_pasted_config_text_with_infinity_is_400_naming_it(fleet, member, api_as):
    """The config.json as text: Python's reader takes ``Infinity`` and ``1e999`` alike."""
    for spelled in ("1e999", "Infinity", "NaN"):
        config = json.dumps(QWEN3_30B_A3B_CONFIG)[:-1] + f', "rope_theta": {spelled}}}'
        body = {**QWEN_72B, "model": "custom", "custom_model": {"config": config}}

        response = api_as(member).post(URL, body, format="json")

        assert response.status_code == 400
        (message,) = response.json()["errors"]["custom_model.config"]
        assert message.startswith("the config.json holds a number that is not finite at rope_theta")
    assert not SizingEstimate.objects.exists()


def test_an_unknown_team_is_named_beside_the_inputs_faults(fleet, member, api_as):
    """``team_named`` ran before the inputs were checked: a bad slug hid every input's fault."""
    body = {**QWEN_72B, "team": "nope", "input_len": 0, "tpot_target_ms": -1}

    response = api_as(member).post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "team": ["No team you can see has this slug."],
        "input_len": ["Must be at least 1."],
        "tpot_target_ms": ["Must be in (0, 3.6e+06]."],
    }
    assert not SizingEstimate.objects.exists()


def test_unknown_fields_are_refused_by_name_and_write_nothing(fleet, member, api_as):
    """``colour`` and a misspelt TPOT target were ignored: 202, an estimate saved with the
    default 50 ms target instead of the 20 ms meant. Each is named, with what is read."""
    config = QWEN3_30B_A3B_CONFIG
    body = {
        **QWEN_72B,
        "colour": "blue",
        "tpot_taget_ms": 20,
        "model": "custom",
        "custom_model": {"config": config, "bogus_field": 1},
    }

    response = api_as(member).post(URL, body, format="json")

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert set(errors) == {"colour", "tpot_taget_ms", "custom_model.bogus_field"}
    (message,) = errors["colour"]
    assert message.startswith("Not an input of an estimate; the inputs are: model, custom_model, ")
    assert message.endswith(", seed_per_card_tok_s, team.")
    assert "tpot_target_ms" in message
    (message,) = errors["custom_model.bogus_field"]
    assert message.startswith(
        "Not a field of a custom architecture; its fields are: name, config, num_layers, "
    )
    assert not SizingEstimate.objects.exists() and not AuditEvent.objects.exists()


def test_a_custom_model_beside_a_preset_is_still_ignored(fleet, member, api_as):
    """The page's form sends its custom fields with any preset; the API takes that too."""
    body = {**QWEN_72B, "custom_model": {"whatever": 1}}

    assert api_as(member).post(URL, body, format="json").status_code == 202
