"""PrometheusAdapter over canned HTTP answers (httpx.MockTransport, no network) and the pure
dcgm-exporter label handling (tricky input C21 and the traps listed in issue 7)."""

from __future__ import annotations

import gc
import socket
from datetime import UTC, datetime

import httpx
import pytest

from scheduler_adapters.errors import (
    SchedulerAuthError,
    SchedulerRejected,
    SchedulerUnavailable,
    UnexpectedResponse,
)
from scheduler_adapters.prometheus import (
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    PrometheusAdapter,
    Sample,
    Series,
    dcgm_labels,
    device_usage_from_series,
)

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def adapter(handler) -> tuple[PrometheusAdapter, list[httpx.Request]]:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return handler(request)

    return PrometheusAdapter(
        "http://prom.test:9090/", timeout_s=7, transport=httpx.MockTransport(record)
    ), sent


def ok(data) -> httpx.Response:
    return httpx.Response(200, json={"status": "success", "data": data})


@pytest.mark.parametrize(("compress", "asked"), [(False, "identity"), (True, "gzip")])
def test_answers_are_plain_json_unless_compression_is_asked_for(compress, asked, settings):
    """Plain JSON by default (compressing the idle scan's ~100 MiB cost Prometheus ~1.3 s of
    CPU a scan at 100,800 GPUs); gzip with PROMETHEUS_COMPRESS, through metrics_adapter too."""
    from pools.clusters.adapters import metrics_adapter

    sent = []
    answer = {"resultType": "vector", "result": []}
    prom = PrometheusAdapter(
        "http://prom.test:9090",
        compress=compress,
        transport=httpx.MockTransport(lambda r: sent.append(r) or ok(answer)),
    )
    prom.query(GPU_UTIL, at=AT)
    assert sent[0].headers["Accept-Encoding"] == asked
    settings.PROMETHEUS_COMPRESS = compress
    built = metrics_adapter(url="http://prom.test:9090")
    assert built._http.headers["Accept-Encoding"] == asked
    built.close()


def test_instant_query_sends_time_and_timeout_and_reads_vector():
    prom, sent = adapter(
        lambda r: ok(
            {
                "resultType": "vector",
                "result": [
                    {"metric": {"__name__": GPU_UTIL, "UUID": "GPU-a"}, "value": [1.5, "37"]},
                    {"metric": {"UUID": "GPU-b"}, "value": [1.5, "NaN"]},
                ],
            }
        )
    )
    result = prom.query(GPU_UTIL, at=AT)
    assert result == (
        Series(GPU_UTIL, (("UUID", "GPU-a"),), (Sample(1.5, 37.0),)),
        Series("", (("UUID", "GPU-b"),), (Sample(1.5, None),)),  # NaN is unknown, not 0
    )
    assert sent[0].url.path == "/api/v1/query"
    assert sent[0].url.params["time"] == f"{AT.timestamp():.3f}"
    assert sent[0].url.params["timeout"] == "7s"


def test_range_query_reads_matrix_and_step():
    prom, sent = adapter(
        lambda r: ok(
            {
                "resultType": "matrix",
                "result": [{"metric": {"UUID": "GPU-a"}, "values": [[0, "1"], [60, "+Inf"]]}],
            }
        )
    )
    (series,) = prom.query_range("x", start=AT, end=AT, step_s=60)
    assert series.samples == (Sample(0.0, 1.0), Sample(60.0, None))
    assert sent[0].url.params["step"] == "60"


def test_scalar_result():
    prom, _ = adapter(lambda r: ok({"resultType": "scalar", "result": [3, "2"]}))
    assert prom.query("1+1", at=AT) == (Series("scalar", (), (Sample(3.0, 2.0),)),)


def test_naive_datetime_and_bad_range_refused_before_sending():
    prom, sent = adapter(lambda r: ok({"resultType": "vector", "result": []}))
    with pytest.raises(ValueError, match="naive"):
        prom.query("x", at=datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        prom.query_range("x", start=AT, end=AT, step_s=0)
    assert sent == []


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (
            httpx.Response(
                400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}
            ),
            SchedulerRejected,
        ),
        (
            httpx.Response(
                422, json={"status": "error", "errorType": "execution", "error": "too many"}
            ),
            SchedulerRejected,
        ),
        (
            httpx.Response(
                503, json={"status": "error", "errorType": "timeout", "error": "query timed out"}
            ),
            SchedulerUnavailable,
        ),
        (httpx.Response(502, text="bad gateway"), SchedulerUnavailable),
        (httpx.Response(401, text="no"), SchedulerAuthError),
        (httpx.Response(200, text="<html>proxy login</html>"), UnexpectedResponse),
        (httpx.Response(200, json={"status": "success", "data": {"x": 1}}), UnexpectedResponse),
        (
            httpx.Response(200, json={"status": "success", "data": {"resultType": "string"}}),
            UnexpectedResponse,
        ),
    ],
)
def test_errors_map_to_adapter_classes(response, error):
    prom, _ = adapter(lambda r: response)
    with pytest.raises(error) as caught:
        prom.query("up", at=AT)
    assert caught.value.operation == "query"


def test_parse_error_keeps_prometheus_message():
    prom, _ = adapter(
        lambda r: httpx.Response(
            400, json={"status": "error", "errorType": "bad_data", "error": "unexpected }"}
        )
    )
    with pytest.raises(SchedulerRejected) as caught:
        prom.query("up}", at=AT)
    assert "unexpected }" in str(caught.value)
    assert caught.value.http_status == 400
    assert not caught.value.transient


def test_nothing_listening_is_unavailable_and_transient():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    prom = PrometheusAdapter(f"http://127.0.0.1:{port}", timeout_s=2, connect_timeout_s=2)
    with pytest.raises(SchedulerUnavailable) as caught:
        prom.query("up", at=AT)
    assert caught.value.transient
    assert not prom.ready()


def test_timeout_is_unavailable():
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    prom, _ = adapter(slow)
    with pytest.raises(SchedulerUnavailable, match="in time"):
        prom.query_range("up", start=AT, end=AT, step_s=15)


# ---------------------------------------------------------------------- dcgm label traps


def test_hostname_label_old_and_new_exporters():
    assert dcgm_labels({"Hostname": "gpu-01", "UUID": "GPU-a"}).hostname == "gpu-01"
    assert dcgm_labels({"hostname": "gpu-01", "UUID": "GPU-a"}).hostname == "gpu-01"
    assert dcgm_labels({"uuid": "GPU-a"}).uuid == "GPU-a"  # --use-old-namespace


def test_honor_labels_false_uses_exported_namespace_not_the_exporters_pod():
    labels = dcgm_labels(
        {
            "UUID": "GPU-a",
            "namespace": "gpu-operator",  # the exporter's own pod, renamed into place
            "pod": "nvidia-dcgm-exporter-x7k2",
            "exported_namespace": "team-nlp",
            "exported_pod": "llm-serve-0",
        }
    )
    assert (labels.namespace, labels.pod) == ("team-nlp", "llm-serve-0")
    old = dcgm_labels({"UUID": "GPU-a", "pod_namespace": "team-cv", "pod_name": "p"})
    assert (old.namespace, old.pod) == ("team-cv", "p")
    bare = dcgm_labels({"UUID": "GPU-a"})
    assert (bare.namespace, bare.pod) == (None, None)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        # an empty value is no value: the next spelling is read
        ({"Hostname": "", "hostname": "h", "UUID": "", "uuid": "G"}, ("h", "G", None, None, None)),
        # renamed (exported_namespace present, even empty): the exporter's pod and container
        # are never the workload's; namespace falls to pod_namespace
        (
            {"exported_namespace": "", "pod_namespace": "ns", "pod": "x", "container": "c"},
            (None, None, "ns", None, None),
        ),
        # exported_pod present (empty): namespace is the exporter's, not the workload's
        (
            {"exported_pod": "", "namespace": "gpu-operator", "pod_name": "p"},
            (None, None, None, "p", None),
        ),
        ({"namespace": "", "pod": "", "container": "c"}, (None, None, None, None, "c")),
    ],
)
def test_empty_labels_are_read_as_absent(labels, expected):
    read = dcgm_labels(labels)
    assert (read.hostname, read.uuid, read.namespace, read.pod, read.container) == expected


def series(metric, values, **labels) -> Series:
    return Series(
        metric,
        tuple(sorted(labels.items())),
        tuple(Sample(float(t), v) for t, v in values),
    )


def test_c21_mig_uses_prof_ratio_per_instance_and_drops_parent_dev_util(tricky_inputs):
    """C21: DEV_GPU_UTIL of a MIG parent reads 0 -> ignored; GR_ENGINE_ACTIVE is a 0-1 ratio,
    so instance 1 = 0.8123 x 100 = 81.23 %, instance 2 = 0 %; the L40S's DEV_GPU_UTIL 100 is
    replaced by GR_ENGINE_ACTIVE 0.03 = 3 %."""
    assert "GR_ENGINE_ACTIVE" in tricky_inputs["C21"]["input"]
    a0 = "GPU-00000000-0000-0000-0000-0000000000a0"  # the input abbreviates it "GPU-...a0"
    b1 = "GPU-00000000-0000-0000-0000-0000000000b1"
    devices = device_usage_from_series(
        [
            series(GPU_UTIL, [(0, 0.0)], gpu="0", UUID=a0, modelName="NVIDIA A100-SXM4-80GB"),
            series(
                GR_ENGINE_ACTIVE,
                [(0, 0.8123)],
                gpu="0",
                UUID=a0,
                GPU_I_PROFILE="3g.40gb",
                GPU_I_ID="1",
            ),
            series(
                GR_ENGINE_ACTIVE,
                [(0, 0.0)],
                gpu="0",
                UUID=a0,
                GPU_I_PROFILE="3g.40gb",
                GPU_I_ID="2",
            ),
            series(GPU_UTIL, [(0, 100.0)], gpu="1", UUID=b1, modelName="NVIDIA L40S"),
            series(GR_ENGINE_ACTIVE, [(0, 0.03)], gpu="1", UUID=b1),
        ]
    )
    got = {
        (d.uuid, d.gpu_instance_id): (d.util_source, [s.value for s in d.util_pct]) for d in devices
    }
    assert got[(a0, "1")] == ("prof", [pytest.approx(81.23)])
    assert got[(a0, "2")] == ("prof", [0.0])
    assert got[(b1, None)] == ("prof", [pytest.approx(3.0)])
    assert (a0, None) not in got  # the MIG parent's DEV_GPU_UTIL 0 is not a reading


def test_consumer_card_without_prof_metrics_falls_back_to_dev_util():
    devices = device_usage_from_series(
        [
            series(
                GPU_UTIL,
                [(0, 12.0), (60, 14.0)],
                UUID="GPU-4090",
                modelName="NVIDIA GeForce RTX 4090",
            ),
            series(FB_USED, [(0, 900.0)], UUID="GPU-4090"),
        ]
    )
    (device,) = devices
    assert device.util_source == "dev"
    assert [s.value for s in device.util_pct] == [12.0, 14.0]
    assert [s.value for s in device.fb_used_mib] == [900.0]


def test_mig_instance_without_prof_metrics_has_no_reading():
    (device,) = device_usage_from_series(
        [series(GPU_UTIL, [(0, 0.0)], UUID="GPU-m", GPU_I_ID="3", GPU_I_PROFILE="1g.10gb")]
    )
    assert device.util_source is None and device.util_pct == ()


def test_time_sliced_gpu_one_device_several_pods_merges_by_max():
    """dcgm-exporter #642: one device, several pods; the PROF value is copied onto each."""
    devices = device_usage_from_series(
        [
            series(
                GR_ENGINE_ACTIVE, [(0, 0.4), (60, 0.5)], UUID="GPU-t", namespace="team-a", pod="p1"
            ),
            series(
                GR_ENGINE_ACTIVE, [(0, 0.4), (60, 0.5)], UUID="GPU-t", namespace="team-a", pod="p2"
            ),
            series(
                GR_ENGINE_ACTIVE, [(0, 0.4), (60, 0.5)], UUID="GPU-t", namespace="team-b", pod="q1"
            ),
            series(GR_ENGINE_ACTIVE, [(0, 0.4)], UUID="GPU-t"),  # device-level series
        ]
    )
    got = {d.namespace: (d.pods, [s.value for s in d.util_pct]) for d in devices}
    assert got["team-a"] == (("p1", "p2"), [40.0, 50.0])  # not 80/100: copies are not summed
    assert got["team-b"] == (("q1",), [40.0, 50.0])
    assert got[None] == ((), [40.0])


def test_label_churn_two_series_one_gpu_and_nan_dropped():
    """C23 D: a renamed pod makes two series for one GPU; they join into one timeline."""
    (device,) = device_usage_from_series(
        [
            series(GPU_UTIL, [(0, 10.0), (60, None)], UUID="GPU-d", namespace="ns", pod="old"),
            series(GPU_UTIL, [(60, 70.0), (120, 5.0)], UUID="GPU-d", namespace="ns", pod="new"),
            series(GPU_UTIL, [(0, 1.0)], Hostname="h"),  # no UUID: cannot be placed, skipped
        ]
    )
    assert [(s.timestamp, s.value) for s in device.util_pct] == [(0, 10), (60, 70), (120, 5)]


def test_gpu_usage_is_three_queries_whatever_the_number_of_gpus():
    def answer(request: httpx.Request) -> httpx.Response:
        # '{__name__=~"NAME|name", ...}': the first metric name of the query
        metric = request.url.params["query"].split('"')[1].split("|")[0]
        result = [
            {
                "metric": {"__name__": metric, "UUID": f"GPU-{i}", "Hostname": "n1"},
                "values": [[0, "0.5" if metric == GR_ENGINE_ACTIVE else "50"]],
            }
            for i in range(50)
        ]
        return ok({"resultType": "matrix", "result": result})

    prom, sent = adapter(answer)
    devices = prom.gpu_usage(start=AT, end=AT, step_s=60, selector='Hostname=~"n.*"')
    assert len(sent) == 3
    assert sent[0].url.params["query"] == (
        '{__name__=~"DCGM_FI_PROF_GR_ENGINE_ACTIVE|dcgm_fi_prof_gr_engine_active", Hostname=~"n.*"}'
    )
    assert len(devices) == 50
    assert {d.util_pct[0].value for d in devices} == {50.0}


def test_one_series_out_of_order_or_repeated_is_still_sorted_and_merged():
    """The single-series shortcut applies only to a series in time order without NaN."""
    (device,) = device_usage_from_series(
        [
            series(GR_ENGINE_ACTIVE, [(60, 0.5), (0, 0.2), (60, 0.7), (120, None)], UUID="GPU-o"),
            series(FB_USED, [(0, 100.0), (60, None), (120, 300.0)], UUID="GPU-o"),
        ]
    )
    assert [(s.timestamp, s.value) for s in device.util_pct] == [
        (0, pytest.approx(20.0)),
        (60, pytest.approx(70.0)),
    ]
    assert [(s.timestamp, s.value) for s in device.fb_used_mib] == [(0, 100.0), (120, 300.0)]


def test_parsing_leaves_the_garbage_collector_as_it_found_it():
    """Decoding and parsing pause the cyclic collector; it is on again afterwards, also after
    an unreadable answer, and stays off where the caller turned it off."""
    good = {"resultType": "matrix", "result": [{"metric": {"UUID": "GPU-a"}, "values": [[0, "1"]]}]}
    prom, _ = adapter(lambda r: ok(good))
    broken, _ = adapter(lambda r: ok({"resultType": "matrix", "result": [{"values": []}]}))
    assert gc.isenabled()
    assert len(prom.gpu_usage(start=AT, end=AT)) == 1
    assert gc.isenabled()
    with pytest.raises(UnexpectedResponse):
        broken.gpu_usage(start=AT, end=AT)
    assert gc.isenabled()
    gc.disable()
    try:
        prom.gpu_usage(start=AT, end=AT)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_long_ranges_are_cut_into_pieces_prometheus_accepts():
    from datetime import UTC, datetime, timedelta

    from scheduler_adapters.prometheus import MAX_POINTS, _chunks

    start = datetime(2026, 11, 1, tzinfo=UTC)
    end = start + timedelta(days=30)  # 43,201 steps of 60 s
    pieces = _chunks(start, end, 60)
    steps = [int((b - a).total_seconds() // 60) + 1 for a, b in pieces]
    assert steps == [MAX_POINTS, MAX_POINTS, MAX_POINTS, MAX_POINTS, 43_201 - 4 * MAX_POINTS]
    assert pieces[0][0] == start and pieces[-1][1] == end
    for (_, previous_end), (next_start, _) in zip(pieces, pieces[1:], strict=False):
        assert next_start - previous_end == timedelta(seconds=60)  # no step read twice
    assert _chunks(start, start + timedelta(minutes=30), 60) == [
        (start, start + timedelta(minutes=30))
    ]


def test_a_nul_in_a_label_value_is_read_as_the_replacement_character():
    """Label values are any UTF-8, NUL included; PostgreSQL's text and jsonb refuse it, so a
    pod's ``model_name="qwen\\x00"`` failed the whole token import (and a namespace with one the
    serving pass): every consumer reads it as U+FFFD, visible and storable."""
    prom, _ = adapter(
        lambda r: ok(
            {
                "resultType": "vector",
                "result": [
                    {"metric": {"namespace": "team-\x00x", "model_name": "qwen\x00"},
                     "value": [1.5, "3"]},
                ],
            }
        )
    )  # fmt: skip

    (series,) = prom.query("vllm:prompt_tokens_total", at=AT)

    assert series.labels == (("model_name", "qwen\ufffd"), ("namespace", "team-\ufffdx"))
