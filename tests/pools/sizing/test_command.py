"""``manage.py estimate --json FILE``: estimates per row; bad input gives errors, no traceback."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from django.core.management import call_command

DATASET = Path(__file__).resolve().parents[2] / "fixtures" / "sizing_dataset.json"
REQUEST_KEYS = (
    "model",
    "gpu",
    "gpu_count",
    "tp",
    "precision",
    "kv_cache_dtype",
    "input_len",
    "output_len",
    "concurrency",
)

# The command reads the calibration records (measured_on_fleet).
pytestmark = pytest.mark.django_db


def measurement(row_id: str) -> dict:
    rows = json.loads(DATASET.read_text(encoding="utf-8"))["measurements"]
    row = next(row for row in rows if row["id"] == row_id)
    return {key: row[key] for key in REQUEST_KEYS} | {"model": row["model_ref"]}


def estimate(payload, tmp_path: Path, *, stdin: str | None = None) -> tuple[int, object]:
    """Run the command in-process on ``payload``; return (exit status, parsed stdout)."""
    out = io.StringIO()
    if stdin is not None:
        arguments = {"stdin": io.StringIO(stdin)}
        path = "-"
    else:
        arguments = {}
        path = tmp_path / "in.json"
        path.write_text(json.dumps(payload), encoding="utf-8")
    try:
        call_command("estimate", "--json", str(path), stdout=out, stderr=io.StringIO(), **arguments)
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    text = out.getvalue()
    return status, json.loads(text) if text else None


def test_two_measurement_rows_are_estimated(tmp_path):
    rows = [
        measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048"),
        measurement("mr_mistral7b_v03_4090_c4") | {"precision": "FP16", "kv_cache_dtype": "FP16"},
    ]

    status, results = estimate(rows, tmp_path)

    assert status == 0
    assert [result["input"] for result in results] == rows
    llama, mistral = results
    assert llama["weights_bytes"] == 8_030_261_248 * 2
    assert llama["fits"] is True
    assert llama["batch_limit"] == "memory"  # concurrency null: as many as fit
    assert mistral["kv_cache_bytes"] == 4 * (256 + 128) * 131_072  # concurrency 4
    assert mistral["batch"] == 4
    for result in results:
        for key in ("output_tok_s_total", "tpot_ms", "ttft_ms"):
            assert math.isfinite(result[key]) and result[key] > 0
        assert result["warnings"] == []
        assert result["memory"]["kv_bytes_per_token"] == 131_072
        assert result["throughput"]["decode_ceiling_batch1_tok_s"] > 0


def test_one_object_on_stdin_gives_one_object(tmp_path):
    row = measurement("trt014_mixtral_8x7b_h100_sxm_fp16_tp2_1000_1000")

    status, result = estimate(None, tmp_path, stdin=json.dumps(row))

    assert status == 0
    assert isinstance(result, dict)
    assert result["tp"] == 2
    assert result["output_tok_s_total"] > 0


def test_fp8_on_a100_is_estimated_as_weight_only_with_a_warning(tmp_path):
    row = measurement("trt014_llama3_70b_a100_80g_sxm_fp16_tp8_1000_1000") | {"precision": "FP8"}

    status, result = estimate(row, tmp_path)

    assert status == 0
    assert result["precision"] == "FP8-WO"
    # The FP8 checkpoint, 8 bits per layer weight; embedding and head (2 x 128,256 x 8,192)
    # stay 16 bit: 70,553,706,496 + 2,101,346,304 more bytes.
    assert result["weights_bytes"] == 70_553_706_496 + 2 * 128_256 * 8_192 == 72_655_052_800
    assert [warning["code"] for warning in result["warnings"]] == ["fp8_weight_only"]


def test_traffic_adds_the_replicas_and_cards_needed(tmp_path):
    row = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048") | {
        "requests_per_day": 100_000,
        "peak_hours": 4,
        "concurrency": 64,
    }

    status, result = estimate(row, tmp_path)
    replica_rps = result["throughput"]["requests_per_s"]

    assert status == 0
    assert result["demand"]["peak_window_s"] == 14_400
    assert result["replicas_needed"] == math.ceil(100_000 / 14_400 / replica_rps)
    assert result["cards_needed"] == result["replicas_needed"]


def test_bad_inputs_give_an_error_object_each_and_exit_1(tmp_path):
    good = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048")
    rows = [
        good | {"model": "gpt5"},
        good | {"gpu": "tpu_v5"},
        good | {"input_len": 0},
        good | {"output_len": -10},
        good | {"input_len": 200_000},
        good | {"requests_per_day": 10**12},
        good | {"concurrency": "many"},
        "not an object",
        good,
    ]

    status, results = estimate(rows, tmp_path)

    assert status == 1
    reasons = [result.get("error", {}).get("reason") for result in results]
    assert reasons == [
        "unknown_model",
        "unknown_gpu",
        "not_positive",
        "not_positive",
        "context_too_long",
        "absurd_traffic",
        "not_positive",
        "not_an_object",
        None,
    ]
    assert all(result["error"]["message"] for result in results[:-1])
    assert results[-1]["fits"] is True


@pytest.mark.parametrize("text", ["{not json", '{"input_len": NaN}', ""])
def test_malformed_json_is_an_error_object(tmp_path, text):
    status, result = estimate(None, tmp_path, stdin=text)

    assert status == 1
    assert result["error"]["reason"] == "invalid_json"


def test_an_unreadable_file_exits_2(tmp_path):
    err = io.StringIO()

    with pytest.raises(SystemExit) as exit_:
        call_command("estimate", "--json", str(tmp_path / "missing.json"), stderr=err)

    assert exit_.value.code == 2
    assert "cannot read" in err.getvalue()


def test_the_band_brackets_the_rate_and_its_low_end_sets_the_pessimistic_cards(tmp_path):
    row = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048") | {
        "requests_per_day": 1_000_000,
        "peak_hours": 4,
        "concurrency": 64,
    }

    status, result = estimate(row, tmp_path)
    band = result["band"]
    replica_rps = result["throughput"]["requests_per_s"]
    peak_rps = 1_000_000 / 14_400

    assert status == 0
    # 64 sequences of FP16 on an H100: the throughput, 16-bit, Hopper regime of the bands.
    assert band["regime"].startswith("throughput|16-bit")
    # The command prints six significant digits.
    rate = result["output_tok_s_total"]
    assert band["low_tok_s"] == pytest.approx(rate * band["low_factor"], rel=1e-5)
    assert band["high_tok_s"] == pytest.approx(rate * band["high_factor"], rel=1e-5)
    assert result["cards_needed"] == math.ceil(peak_rps / replica_rps)
    assert result["cards_needed_pessimistic"] == max(
        result["cards_needed"], math.ceil(peak_rps / (replica_rps * band["low_factor"]))
    )


def test_a_custom_architecture_from_a_config_file_is_estimated(tmp_path):
    """Issue 34: ``estimate`` takes ``"model": "custom"``; Qwen3-30B-A3B's published config.json
    (tests/fixtures/hf_configs) read from its file gives the preset's numbers: weights = every
    expert's parameters x 2 B at BF16."""
    from pools.sizing.presets import model_preset

    path = Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
    common = {"gpu": "h100_sxm", "precision": "BF16", "input_len": 1000, "output_len": 200,
              "concurrency": 8}  # fmt: skip
    status, (custom, preset) = estimate(
        [
            {"model": "custom", "custom_model": {"config_path": str(path)}, **common},
            {"model": "qwen3_30b_a3b", **common},
        ],
        tmp_path,
    )

    assert status == 0
    assert custom["weights_bytes"] == model_preset("qwen3_30b_a3b").total_params * 2
    assert custom["output_tok_s_total"] == preset["output_tok_s_total"]


def test_a_custom_architecture_missing_fields_names_the_first(tmp_path):
    status, (result,) = estimate(
        [
            {
                "model": "custom",
                "custom_model": {"num_layers": 2},
                "gpu": "h100_sxm",
                "input_len": 10,
                "output_len": 10,
            }
        ],  # fmt: skip
        tmp_path,
    )

    assert status == 1
    assert result["error"]["field"] == "custom_model.hidden_size"
    assert result["error"]["reason"] == "missing"


def test_pipeline_stages_count_in_the_cards_needed_and_a_slow_nic_is_refused(tmp_path):
    """Llama-3-70B FP16 as TP 8 x PP 2 on H100: a replica is 16 cards, so the cards needed
    are 16 x the replicas; TP 16 across two nodes on a 200 Gb/s NIC is refused (000 §4.1)."""
    row = {
        "model": "llama3_70b",
        "gpu": "NVIDIA H100 80GB HBM3",
        "tp": 8,
        "pp": 2,
        "nic_gbps": 400,
        "input_len": 1_000,
        "output_len": 200,
        "concurrency": 32,
        "requests_per_day": 1_000_000,
        "peak_hours": 4,
    }

    status, results = estimate([row, row | {"tp": 16, "pp": 1, "nic_gbps": 200}], tmp_path)

    assert status == 1
    assert (results[0]["tp"], results[0]["pp"], results[0]["replicas"]) == (8, 2, 1)
    assert results[0]["cards_needed"] == 16 * results[0]["replicas_needed"]
    assert results[1]["error"]["reason"] == "nic_too_slow"
    assert results[1]["error"]["field"] == "nic_gbps"


def test_expert_and_attention_data_parallel_through_the_command(tmp_path):
    """DeepSeek-V3 FP8 on 16 H200 (named as nvidia-smi prints them) at EP 16 and 16 attention
    DP ranks: per card the experts' 653,908,770,816 B / 16 and the other 17,117,633,536 B whole
    (tests/pools/sizing/test_parallelism.py counts them); the MoE all-to-all is costed and no
    all-reduce is left. Attention DP without EP = TP is refused naming dp_attention."""
    row = {
        "model": "deepseek_v3",
        "gpu": "NVIDIA H200",
        "tp": 16,
        "ep": 16,
        "dp_attention": 16,
        "nic_gbps": 400,
        "precision": "FP8",
        "kv_cache_dtype": "FP8",
        "engine": "sglang",
        "input_len": 1_000,
        "output_len": 1_000,
        "concurrency": 64,
    }

    status, results = estimate([row, row | {"ep": 8}], tmp_path)

    assert status == 1
    first = results[0]
    assert first["dp_attention"] == 16
    # Embedding and head (2 x 129,280 x 7,168 = 1,853,358,080) at 16 bit, the rest at 8.
    assert first["memory"]["weights_bytes_per_gpu"] == (
        653_908_770_816 // 16 + 17_117_633_536 + 1_853_358_080
    )
    assert first["throughput"]["all_to_all_ms"] > 0
    assert first["throughput"]["allreduce_ms"] == 0
    assert results[1]["error"]["field"] == "dp_attention"


def test_a_field_the_command_does_not_read_is_refused_by_name(tmp_path):
    """The API's plan target ``output_tok_s`` given to the command would have been ignored
    (an estimate at saturation, exit 0); it is refused and named as the API's, a misspelling
    too, and a good row beside them is still estimated."""
    good = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048")

    status, results = estimate(
        [good | {"output_tok_s": 500}, good | {"concurency": 8}, good], tmp_path
    )

    assert status == 1
    first, second, third = results
    assert first["error"]["reason"] == "unknown_field"
    assert first["error"]["field"] == "output_tok_s"
    assert "sizing page and API" in first["error"]["errors"]["output_tok_s"]
    assert second["error"]["field"] == "concurency"
    assert second["error"]["errors"] == {"concurency": "concurency is not a field of this command"}
    assert third["fits"] is True


def test_an_unknown_model_and_a_missing_gpu_are_named_together(tmp_path):
    status, result = estimate({"model": "nope", "input_len": 1, "output_len": 1}, tmp_path)

    assert status == 1
    assert result["error"]["reason"] == "unknown_model"
    assert result["error"]["field"] == "model"
    assert set(result["error"]["errors"]) == {"model", "gpu"}


def test_the_command_sizes_on_the_catalogue_admins_keep_as_the_page_does(tmp_path):
    """The catalogue is data pool admins keep (README, *Importing inventory*): the page and the
    API read the ``GpuModel`` rows, edits included, but ``estimate`` read the shipped JSON, so
    the two gave different figures for one card and the command knew no model an admin added.
    An admin-set HBM bandwidth of half the H100 SXM's 3,350 GB/s must halve the command's
    bandwidth-bound batch-1 ceiling, and a model added under its own nvidia-smi name must be
    estimated by that name."""
    from factories import GpuModelAliasFactory, GpuModelFactory

    from pools.common.choices import AliasKind
    from pools.inventory.models import GpuModel

    row = {"model": "llama3_8b", "gpu": "h100_sxm", "tp": 1, "precision": "BF16",
           "input_len": 1000, "output_len": 100, "concurrency": 1}  # fmt: skip
    _, before = estimate(row, tmp_path)
    GpuModel.objects.filter(slug="h100_sxm").update(memory_bandwidth_gbps=1675)
    h100 = GpuModel.objects.get(slug="h100_sxm")
    added = GpuModelFactory(
        slug="h100_lab", name="H100 lab sample", **{
            field: getattr(h100, field)
            for field in ("memory_gib", "fp16_dense_tflops", "bf16_dense_tflops",
                          "fp8_dense_tflops", "int8_dense_tops", "nvlink_gbps", "architecture")
        }, memory_bandwidth_gbps=3350,
    )  # fmt: skip
    GpuModelAliasFactory(gpu_model=added, value="NVIDIA H100 Lab Sample", kind=AliasKind.NVIDIA_SMI)

    status, (edited, by_name) = estimate([row, {**row, "gpu": "NVIDIA H100 Lab Sample"}], tmp_path)

    assert status == 0
    ceiling = before["throughput"]["decode_ceiling_batch1_tok_s"]
    assert edited["throughput"]["decode_ceiling_batch1_tok_s"] == pytest.approx(ceiling / 2, 1e-3)
    assert by_name["gpu"] == "h100_lab"
    assert by_name["throughput"]["decode_ceiling_batch1_tok_s"] == pytest.approx(ceiling, 1e-3)


def test_a_shared_nvidia_smi_name_is_still_refused_with_its_candidates(tmp_path):
    row = {"model": "llama3_8b", "gpu": "NVIDIA H100", "tp": 1, "precision": "BF16",
           "input_len": 1000, "output_len": 100, "concurrency": 1}  # fmt: skip

    status, result = estimate(row, tmp_path)

    assert status == 1
    assert result["error"]["reason"] == "ambiguous_gpu"
    assert result["error"]["field"] == "gpu"
    assert result["error"]["candidates"] == ["h100_sxm", "h100_pcie", "h100_nvl"]


def test_every_bad_field_of_a_row_is_named_and_a_good_row_beside_it_is_unchanged(tmp_path):
    """Issue 34, the brief's row: tp 0, input_len -5, precision FP7 and no output_len, named
    in one error (the first, tp, leads as it did alone); the good row after it gives the same
    answer as alone, and the list still exits 1."""
    good = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048")
    bad = {"model": "llama3_8b", "gpu": "h100_sxm", "tp": 0, "input_len": -5, "precision": "FP7"}

    status, (refused, estimated) = estimate([bad, good], tmp_path)
    alone_status, alone = estimate(good, tmp_path)

    assert (status, alone_status) == (1, 0)
    assert refused["input"] == bad
    error = refused["error"]
    assert (error["reason"], error["field"]) == ("not_positive", "tp")
    assert error["message"] == "tp must be a positive integer, got 0"
    assert list(error["errors"]) == ["tp", "input_len", "output_len", "precision"]
    assert error["errors"]["input_len"] == "input_len must be a positive integer, got -5"
    assert error["errors"]["output_len"] == "output_len is required"
    assert error["errors"]["precision"].startswith("unknown precision 'FP7'; use one of FP16, ")
    assert estimated == alone


HF_CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs"


def test_a_number_beyond_a_float_is_refused_in_its_row_and_the_others_are_estimated(tmp_path):
    """``1e400`` reads as infinity (float('1e400') == inf): it reached ``_write``'s
    ``json.dumps(allow_nan=False)`` and the whole batch ended in a traceback. Now each row
    holding one is refused naming where, with the number as written; the good row is kept."""
    good = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048")
    config = json.loads((HF_CONFIGS / "qwen3_30b_a3b.json").read_text(encoding="utf-8"))
    config["rope_theta"] = 1_000_000
    custom = {"model": "custom", "custom_model": {"config": config}} | {
        k: good[k] for k in ("gpu", "precision", "input_len", "output_len", "concurrency")
    }
    rows = [
        json.dumps(good | {"input_len": 1}).replace('"input_len": 1', '"input_len": 1e400'),
        json.dumps(custom).replace('"rope_theta": 1000000', '"rope_theta": 1e999'),
        json.dumps(good | {"colour": 1}).replace('"colour": 1', '"colour": -1e999'),
        json.dumps(good),
    ]
    assert '"rope_theta": 1e999' in rows[1]

    status, results = estimate(None, tmp_path, stdin="[" + ", ".join(rows) + "]")

    assert status == 1
    first, second, third, fourth = results
    assert first["error"]["reason"] == "not_finite"
    assert first["error"]["field"] == "input_len"
    assert first["error"]["message"].startswith("input_len = 1e400: beyond a float's range")
    assert first["input"]["input_len"] == "1e400"  # echoed as written
    assert second["error"]["field"] == "custom_model.config"
    assert second["error"]["message"].startswith(
        "custom_model.config.rope_theta = 1e999: beyond a float's range"
    )
    assert third["error"]["reason"] == "unknown_field"
    assert set(third["error"]["errors"]) == {"colour"}
    assert fourth["fits"] is True and "error" not in fourth


def test_a_config_file_with_a_number_beyond_a_float_is_unreadable(tmp_path):
    config = json.loads((HF_CONFIGS / "qwen3_30b_a3b.json").read_text(encoding="utf-8"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "rope_theta": "@"}).replace('"@"', "1e999"))
    assert "1e999" in path.read_text()
    row = {"model": "custom", "custom_model": {"config_path": str(path)}, "gpu": "h100_sxm",
           "input_len": 1000, "output_len": 200, "concurrency": 8}  # fmt: skip

    status, result = estimate(row, tmp_path)

    assert status == 1
    assert result["error"]["reason"] == "unreadable_config"
    assert result["error"]["field"] == "custom_model.config"
    assert "1e999 is beyond a float's range" in result["error"]["message"]


def test_a_custom_models_unknown_field_is_refused_by_name(tmp_path):
    """``custom_model.bogus_field`` was ignored: an estimate of the config alone, exit 0."""
    row = {"model": "custom", "gpu": "h100_sxm", "input_len": 1000, "output_len": 200,
           "custom_model": {"config_path": str(HF_CONFIGS / "qwen3_30b_a3b.json"),
                            "bogus_field": 1}}  # fmt: skip

    status, result = estimate(row, tmp_path)

    assert status == 1
    assert result["error"]["reason"] == "unknown_field"
    assert result["error"]["field"] == "custom_model.bogus_field"
    message = result["error"]["errors"]["custom_model.bogus_field"]
    assert message.startswith("custom_model.bogus_field is not a field of a custom model; it reads")
    assert "config_path" in message and "hidden_size" in message


def test_a_bad_typed_field_comes_with_the_config_jsons_contradiction(tmp_path):
    """Qwen3-30B-A3B's config.json (32 attention heads) edited to 5 KV heads under a typed
    hidden size of -3: only ``custom_model.num_kv_heads`` was named (the typed fault dropped),
    while the page and the API name both. 32 % 5 = 2: the KV check reads no hidden size."""
    config = json.loads((HF_CONFIGS / "qwen3_30b_a3b.json").read_text(encoding="utf-8"))
    row = {"model": "custom", "gpu": "h100_sxm", "input_len": 1000, "output_len": 200,
           "custom_model": {"hidden_size": -3,
                            "config": {**config, "num_key_value_heads": 5}}}  # fmt: skip

    status, result = estimate(row, tmp_path)

    assert status == 1
    assert result["error"]["field"] == "custom_model.hidden_size"
    assert result["error"]["errors"] == {
        "custom_model.hidden_size": "hidden_size must be a positive integer, got -3",
        "custom_model.num_kv_heads": "5 KV heads do not divide the 32 attention heads evenly.",
    }


def test_every_bad_traffic_field_is_named_at_once(tmp_path):
    """The demand checks one field at a time: ``peak_share`` 0 hid ``peak_hours`` 25 (a day
    has 24) and ``input_weight`` -1 (the bounds of demand_from_traffic)."""
    row = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048") | {
        "requests_per_day": 1000, "peak_share": 0, "peak_hours": 25, "input_weight": -1,
    }  # fmt: skip

    status, result = estimate(row, tmp_path)

    assert status == 1
    assert result["error"]["reason"] == "out_of_range"
    assert result["error"]["field"] == "peak_share"
    assert result["error"]["errors"] == {
        "peak_share": "peak_share must be a number in (0.0, 1.0], got 0",
        "peak_hours": "peak_hours must be a number in (0.0, 24.0], got 25",
        "input_weight": "input_weight must be a number in [0.0, 4.0], got -1",
    }


def test_an_engine_version_without_a_number_is_refused_beside_the_other_faults(tmp_path):
    """``"banana"`` holds no digits: it was read as no version (current vLLM), exit 0."""
    row = measurement("trt014_llama3_8b_h100_sxm_fp16_tp1_128_2048")

    status, (banana, both, fine) = estimate(
        [row | {"engine_version": "banana"},
         row | {"engine_version": "banana", "gpu": "nope"},
         row | {"engine_version": "0.6.3"}],
        tmp_path,
    )  # fmt: skip

    assert status == 1
    assert banana["error"]["field"] == "engine_version"
    assert banana["error"]["message"].startswith(
        "engine_version 'banana' is no release number; give the engine's version"
    )
    assert both["error"]["field"] == "gpu"
    assert set(both["error"]["errors"]) == {"gpu", "engine_version"}
    assert "error" not in fine
