"""The issue's "Done when" in a real browser: size Qwen2.5-72B for 2,000 tok/s on the demo
fleet, switch the weights to FP8 and watch the table update in place (no page load), then turn
the result into a capacity request (since issue 17's PCIe all-reduce evidence, for A100 PCIe:
the L40S TP 4 option needs more cards than the pool has free)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from browser_support import log_in
from factories import TeamFactory, inference_fleet
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_changing_an_input_updates_the_table_in_place_then_request_these_cards(
    signed_in, live_server
):
    inference_fleet()
    TeamFactory(slug="nlp", name="NLP")
    page = signed_in

    page.goto(f"{live_server.url}/sizing/")
    page.evaluate("window.__sameDocument = true")  # survives htmx swaps, not a page load
    l40s = page.locator("tr[data-gpu=l40s]")
    # Qwen2.5-72B in BF16 at 2,000 tok/s: on L40S even one sequence misses the 50 ms TPOT,
    # and the inference pool has nothing else that meets it; the page says what is lacking.
    expect(l40s).to_have_class(re.compile("muted"))
    expect(page.locator("#request-cards")).to_have_count(0)
    expect(page.locator("#request-lacks")).to_contain_text(
        "no inference pool has GB200 (per GPU, NVL72) cards: ask a pool admin to host 3 of them"
    )

    page.select_option("select[name=precision]", "FP8")
    page.select_option("select[name=kv_cache_dtype]", "FP8")

    # FP8 meets the targets on L40S, but TP 4 over PCIe needs 60 cards and 40 are free; the
    # pool's other model needs 50 A100 PCIe and it holds 8.
    expect(l40s).not_to_have_class(re.compile("muted"))
    expect(l40s.locator("td.cards-cell")).to_have_text(re.compile(r"^60"))
    # Every modelled rate carries its likely range; the recommendation says it in words.
    expect(l40s.locator(".band-cell")).to_have_text(re.compile(r"^[\d,]+–[\d,]+$"))
    expect(page.locator("p.band").first).to_contain_text("Likely between")
    # 60 L40S or 50 A100 PCIe would do, more than the pool holds (40, 8): not requestable.
    expect(page.locator("#request-cards")).to_have_count(0)
    expect(page.locator("#request-lacks")).to_contain_text("ask a pool admin to host 2 of them")
    assert page.evaluate("window.__sameDocument") is True
    assert "precision=FP8" in page.url  # the inputs are in the address, to share or reload
    expect(page.locator("#sizing-chart")).to_be_visible()

    # At half the load 32 L40S fit the 40 free: sizing ends in a request that submits as is.
    page.fill("input[name=output_tok_s]", "1000")
    expect(page.locator("#request-cards")).to_be_visible()
    page.click("#request-cards")

    page.wait_for_url(re.compile(r"/requests/new/\?"))
    expect(page.locator("input[name=card_count]")).to_have_value("32")
    expect(page.locator("select[name=gpu_model]")).to_have_value("l40s")
    expect(page.locator("select[name=pool]")).to_have_value("infer-k8s")
    expect(page.locator("input[value=inference]")).to_be_checked()
    expect(page.locator("textarea[name=justification]")).to_contain_text(
        "Serve Qwen2.5-72B for 1,000 output tok/s at peak. Sized by the portal: 32 × L40S"
    )
    page.click("button[name=submit_request]")
    page.wait_for_url(re.compile(r"/requests/\d+/$"))
    expect(page.locator("body")).to_contain_text("32 × L40S")


def test_the_default_70b_case_ends_in_a_submitted_request_for_capacity(browser, live_server):
    """Issue #21's dead end, on the demo fleet as bob (manager of vision) would meet it:
    Llama-3.1-70B at the page's default load is cheapest on 3 GB200 (TP 1 × 3; 2 B200 under the
    hard roofline, 6 H100 NVL before issue 34's catalogue), a card no inference pool has. The
    page says so and offers to ask for that capacity; the request form opens prefilled (kind,
    model, cards, shape, justification from the estimate), submits as it is, and a pool admin
    accepts it from the queue as a plan."""
    from django.core.management import call_command

    call_command("load_demo", verbosity=0)

    def sign_in(user):
        page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
        log_in(page, live_server.url, user)
        return page

    page = sign_in("bob")
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_70b")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-70B")
    expect(page.locator("p.headline").first).to_have_text(
        re.compile(r"^3 × GB200 \(per GPU, NVL72\)")
    )
    expect(page.locator("#request-cards")).to_have_count(0)
    expect(page.locator("#request-lacks")).to_contain_text(
        "no inference pool has GB200 (per GPU, NVL72) cards: ask a pool admin to host 3 of them"
    )
    # the table's status codes read as words, the code and the explanation stay on the badge
    badge = page.locator("tr.warnings [data-code=not_in_inference_pools]").first
    expect(badge).to_have_text("no inference pool has it")
    expect(badge).to_have_attribute("title", "No inference pool has GB200 (per GPU, NVL72) cards.")
    # and the whole table shows at 1366 px: nothing scrolls inside its card
    wrap = page.locator("#results .table-wrap")
    assert wrap.evaluate("e => e.scrollWidth <= e.clientWidth")

    page.click("#request-capacity")
    page.wait_for_url(re.compile(r"/requests/new/\?.*kind=growth"))
    expect(page.locator("input[name=kind][value=growth]")).to_be_checked()
    expect(page.locator("input[name=workload_kind][value=inference]")).to_be_checked()
    expect(page.locator("select[name=gpu_model]")).to_have_value("gb200")
    expect(page.locator("select[name=pool]")).to_have_value("")
    expect(page.locator("input[name=card_count]")).to_have_value("3")
    # TP 1: any cards, no node shape asked for
    expect(page.locator("input[name=cards_per_node]")).to_have_value("")
    expect(page.locator("input[name=node_count]")).to_have_value("")
    expect(page.locator("textarea[name=justification]")).to_contain_text(
        "Serve Llama-3.1-70B for 2,000 output tok/s at peak. Sized by the portal: 3 × GB200 "
        "(per GPU, NVL72) (TP 1 × 3 replicas)"
    )
    expect(page.locator("#growth-note")).to_contain_text("Capacity to add.")
    page.click("button[name=submit_request]")

    page.wait_for_url(re.compile(r"/requests/\d+/$"))
    detail = page.url
    expect(page.locator("h2")).to_contain_text("Submitted")
    expect(page.locator("body")).to_contain_text("capacity to add")
    expect(page.locator("body")).to_contain_text("Waiting for a pool admin to plan the capacity.")

    page = sign_in("admin")
    page.goto(f"{live_server.url}/requests/queue/")
    row = page.locator("tr", has=page.locator(f"a[href='{detail.removeprefix(live_server.url)}']"))
    expect(row).to_contain_text("capacity to add")
    expect(row).to_contain_text("Vision")
    row.get_by_role("link", name="Accept / decline…").click()
    page.fill("input[name=reason][placeholder^='e.g.']", "Two HGX H100 NVL nodes ordered.")
    page.click("button[name=accept]")
    expect(page.locator("h2")).to_contain_text("Accepted: capacity planned")
    expect(page.locator("body")).to_contain_text("request.accepted")


def test_a_dense_custom_architecture_is_sized_with_its_moe_fields_left_blank(
    signed_in, live_server
):
    """Issue 34's first page bug: "Custom architecture…" sent the blank MoE fields and every
    dense model failed "Enter a whole number". Starting from the Llama-3.1-8B preset (dense:
    the experts fields stay blank) the page must size it. Llama-3.1-8B's config
    (meta-llama/Llama-3.1-8B config.json): 32 layers x 8 KV heads x 128 head dim x 2 (K, V)
    x 2 B (FP16) = 131,072 B of KV per token, the figure the KV card must show."""
    page = signed_in
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_8b")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-8B")
    page.select_option("select[name=model]", "custom")
    expect(page.locator("input[name='custom_model.num_layers']")).to_have_value("32")
    expect(page.locator("input[name='custom_model.num_experts']")).to_have_value("")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-8B (modified)")
    expect(page.locator("#results .sizing-errors")).to_have_count(0)
    expect(page.locator("#results")).not_to_contain_text("Enter a whole number")
    expect(page.locator("#results")).to_contain_text("131\u202f072 B")
    expect(page.locator("tr[data-gpu=h100_sxm] td.cards-cell")).to_have_text(re.compile(r"^\d"))


def test_one_sequence_in_flight_is_batch_1_with_the_estimate_commands_figure(
    signed_in, live_server
):
    """Issue 34's second page bug: *Sequences in flight* rows showed the largest batch that met
    the targets (67) instead of the sequences entered. One sequence must read batch 1 and the
    rate ``manage.py estimate`` gives for the same configuration (Llama-3.1-8B BF16, FP16 KV,
    1,000 in / 200 out, one H100 SXM, one sequence)."""
    import io
    import json

    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "estimate",
        json_file="-",
        stdin=io.StringIO(
            json.dumps(
                {
                    "model": "llama3_8b",
                    "gpu": "h100_sxm",
                    "tp": 1,
                    "precision": "BF16",
                    "kv_cache_dtype": "FP16",
                    "input_len": 1000,
                    "output_len": 200,
                    "concurrency": 1,
                }
            )  # fmt: skip
        ),
        stdout=out,
    )
    command = json.loads(out.getvalue())
    assert command["batch"] == 1

    page = signed_in
    page.goto(
        f"{live_server.url}/sizing/?model=llama3_8b&precision=BF16&kv_cache_dtype=FP16"
        "&engine=vllm&input_len=1000&output_len=200&demand_kind=concurrency&concurrency=1"
        "&tpot_target_ms=50&ttft_target_ms=1000"
    )
    row = page.locator("tr[data-gpu=h100_sxm]")
    expect(row.locator("td.tp-cell")).to_have_text("1 × 1")
    expect(row.locator("td.batch-cell")).to_have_text("1")
    expect(row.locator(".rate-cell")).to_have_text(f"{command['output_tok_s_total']:,.1f}")
    # ten sequences: still one replica of TP 1, now at batch 10, not the largest batch allowed
    page.fill("input[name=concurrency]", "10")
    expect(row.locator("td.batch-cell")).to_have_text("10")


def test_an_uploaded_config_json_replaces_the_fields_and_is_sized(signed_in, live_server):
    """Issue 34: the custom architecture reads a Hugging Face config.json uploaded on the page.
    Qwen3-30B-A3B's published config (tests/fixtures/hf_configs): 128 experts, 8 per token;
    counted by hand in tests/pools/sizing/test_sizing_service.py, 30,532,110,336 parameters,
    61.1 GB at BF16 (x 2 B)."""
    from pathlib import Path

    config = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
    page = signed_in
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_8b")
    page.select_option("select[name=model]", "custom")
    expect(page.locator("input[name='custom_model.num_layers']")).to_have_value("32")
    page.set_input_files("#config-upload", str(config))

    # the preset's fields are cleared (they would override the config) and the config is sized
    expect(page.locator("input[name='custom_model.num_layers']")).to_have_value("")
    expect(page.locator("#results")).to_contain_text("30\u202f532\u202f110\u202f336 parameters")
    expect(page.locator("#results")).to_contain_text("61.1 GB")
    expect(page.locator("#results .sizing-errors")).to_have_count(0)


def test_a_pasted_config_json_is_not_named_after_the_preset_it_replaced(signed_in, live_server):
    """Pasting a config.json replaced the preset's fields but kept its name: Qwen3-30B-A3B's
    config, pasted after starting from Llama-3.1-8B, was sized (30,532,110,336 parameters, as
    the upload test counts them) as "Llama-3.1-8B (modified)". The config names no model
    (no ``_name_or_path``), so it is the "Custom model"; a name the user typed is kept."""
    from pathlib import Path

    config = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
    page = signed_in
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_8b")
    page.select_option("select[name=model]", "custom")
    name = page.locator("input[name='custom_model.name']")
    expect(name).to_have_value("Llama-3.1-8B (modified)")
    textarea = page.locator("textarea[name='custom_model.config']")
    textarea.fill(config.read_text())
    textarea.blur()  # a paste is a change once the field is left

    expect(page.locator("#results")).to_contain_text("30\u202f532\u202f110\u202f336 parameters")
    expect(name).to_have_value("")
    expect(page.locator("#results")).to_contain_text("(Custom model, BF16)")
    expect(page.locator("#results")).not_to_contain_text("Llama-3.1-8B")

    name.fill("Qwen3 test")
    textarea.fill(config.read_text() + "\n")
    textarea.blur()
    expect(page.locator("#results")).to_contain_text("(Qwen3 test, BF16)")
    expect(name).to_have_value("Qwen3 test")


@pytest.mark.parametrize("width", [1280, 390])
def test_pipeline_stages_are_chosen_in_the_parallelism_section(signed_in, live_server, width):
    """Open *Parallelism*, ask for TP 4 x PP 2 (one 8-card node): every sized row reads
    "4·2 ×" in place; then TP 16 on a 200 Gb/s NIC (000 §4.1: TP across nodes below 400 Gb/s
    is refused) leaves every 8-card GPU model unsized with the reason."""
    import os
    from pathlib import Path

    inference_fleet()
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/sizing/")
    page.evaluate("window.__sameDocument = true")

    page.click("#parallelism summary")
    page.fill("input[name=tp]", "4")
    page.fill("input[name=pp]", "2")
    page.locator("input[name=pp]").dispatch_event("change")

    h100 = page.locator("tr[data-gpu=h100_sxm]")
    expect(h100.locator("td.tp-cell")).to_have_text(re.compile(r"^4·2 ×"))
    expect(page.locator("#results")).to_contain_text("TP 4 × PP 2 ×")
    assert "pp=2" in page.url
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots = Path(os.environ.get("BROWSER_SHOTS") or "/tmp")
    page.screenshot(path=str(shots / f"sizing-parallel-{width}.png"), full_page=True)

    page.fill("input[name=tp]", "16")
    page.fill("input[name=pp]", "1")
    page.fill("input[name=nic_gbps]", "200")
    page.locator("input[name=nic_gbps]").dispatch_event("change")
    refused = page.locator("tr[data-gpu=h100_sxm] + tr.warnings")
    expect(refused.locator("[data-code=layout_refused]")).to_have_text("Layout refused")
    expect(refused).to_contain_text("at least 400 Gb/s")
    expect(h100.locator("td.tp-cell")).to_have_text("—")
    assert page.evaluate("window.__sameDocument") is True


@pytest.mark.parametrize("width", [1366, 390])
def test_speculative_decoding_is_credited_for_one_sequence_and_not_for_a_full_batch(
    signed_in, live_server, width
):
    """Issue 34 (000 §3.3): open *Speculative decoding*, Llama-3.1-70B with Llama-3.1-8B as
    draft, gamma 4, alpha 0.7: (1 - 0.7^5) / 0.3 = 2.77 tokens a pass, credited at one
    sequence; the draft's 16.1 GB of weights (8,030,261,248 x 2 B) is counted. With 256 in
    flight and no latency targets a replica runs as many as fit and the verification is
    compute bound: the H100 row says *speculation not credited*."""
    import os
    from pathlib import Path

    inference_fleet()
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(
        f"{live_server.url}/sizing/?model=llama3_70b&precision=BF16&kv_cache_dtype=FP16"
        "&engine=vllm&input_len=1000&output_len=200&demand_kind=concurrency&concurrency=1"
        "&tpot_target_ms=50&ttft_target_ms=1000&gpu_models=h100_sxm"
    )
    page.evaluate("window.__sameDocument = true")

    page.click("#speculation summary")
    page.fill("input[name=speculative_draft_tokens]", "4")
    page.fill("input[name=speculative_acceptance_rate]", "0.7")
    page.select_option("select[name=speculative_draft_model]", "llama3_8b")

    expect(page.locator("#speculation-explained")).to_contain_text("2.77 tok / pass")
    expect(page.locator("#speculation-explained")).to_contain_text("16.1 GB of weights")
    expect(page.locator("#speculation-line")).to_contain_text("Speculative decoding credited")
    h100_warnings = page.locator("tr[data-gpu=h100_sxm] + tr.warnings")
    expect(h100_warnings.locator("[data-code=speculation_not_credited]")).to_have_count(0)
    assert "speculative_draft_model=llama3_8b" in page.url
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots = Path(os.environ.get("BROWSER_SHOTS") or "/tmp")
    page.screenshot(path=str(shots / f"sizing-speculation-{width}.png"), full_page=True)

    page.fill("input[name=tpot_target_ms]", "")
    page.fill("input[name=ttft_target_ms]", "")
    page.fill("input[name=concurrency]", "256")
    page.locator("input[name=concurrency]").dispatch_event("change")
    expect(h100_warnings.locator("[data-code=speculation_not_credited]")).to_have_text(
        "speculation not credited"
    )
    expect(page.locator("#speculation-line")).to_contain_text("not credited")
    assert page.evaluate("window.__sameDocument") is True


@pytest.mark.parametrize("width", [1366, 390])
def test_images_per_request_add_visual_tokens_in_place(signed_in, live_server, width):
    """Issue 34 (000 §6.3): Qwen2.5-VL-7B with one 1,024 x 1,024 image a request reads
    "+ 1,369 tokens" (74 x 74 patches / 4) and the encoder's 7.7 TFLOP; two images double
    both, updated in place."""
    import os
    from pathlib import Path

    inference_fleet()
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(
        f"{live_server.url}/sizing/?model=qwen2_5_vl_7b&precision=BF16&kv_cache_dtype=FP16"
        "&engine=vllm&input_len=1000&output_len=200&demand_kind=concurrency&concurrency=1"
        "&tpot_target_ms=50&ttft_target_ms=1000&gpu_models=h100_sxm"
    )
    page.evaluate("window.__sameDocument = true")

    page.click("#multimodal summary")
    page.fill("input[name=images_per_request]", "1")
    page.locator("input[name=images_per_request]").dispatch_event("change")
    expect(page.locator("#multimodal-explained")).to_contain_text("+ 1\u202f369 tokens")
    expect(page.locator("#multimodal-explained")).to_contain_text("encoder 7.7 TFLOP")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots = Path(os.environ.get("BROWSER_SHOTS") or "/tmp")
    page.screenshot(path=str(shots / f"sizing-multimodal-{width}.png"), full_page=True)

    page.fill("input[name=images_per_request]", "2")
    page.locator("input[name=images_per_request]").dispatch_event("change")
    expect(page.locator("#multimodal-explained")).to_contain_text("+ 2\u202f738 tokens")
    assert page.evaluate("window.__sameDocument") is True


@pytest.mark.parametrize("width", [1366, 390])
def test_attention_data_parallel_keeps_attention_per_rank_in_place(signed_in, live_server, width):
    """Issue 34: DeepSeek-V3 FP8 on 16 H200 at EP 16 holds (671,026,404,352 + 1,853,358,080) B
    / 16 = 42.1 GB of weights per card (the embedding and head, 2 x 129,280 x 7,168 weights,
    stay 16 bit in the checkpoint: a second byte each); with 16 attention DP ranks each card
    keeps its 16 experts of each MoE layer (40.9 GB) and a whole copy of the rest (17.1 GB + the
    heads' second bytes 1.9 GB = 19.0 GB): 59.8 GB, updated in place. A dense model refuses
    attention DP with a field error."""
    import os
    from pathlib import Path

    inference_fleet()
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(
        f"{live_server.url}/sizing/?model=deepseek_v3&precision=FP8&kv_cache_dtype=FP8"
        "&engine=sglang&input_len=1000&output_len=1000&demand_kind=concurrency&concurrency=256"
        "&tpot_target_ms=&ttft_target_ms=&gpu_models=h200_sxm&tp=16&ep=16&nic_gbps=400"
    )
    page.evaluate("window.__sameDocument = true")
    weights = page.locator("tr[data-gpu=h200_sxm] td").nth(4)
    expect(weights).to_have_text("42.1")

    page.fill("input[name=dp_attention]", "16")
    page.locator("input[name=dp_attention]").dispatch_event("change")
    expect(weights).to_have_text("59.8")
    expect(page.locator("tr[data-gpu=h200_sxm] .dp-cell")).to_have_text("DP 16")
    # MLA keeps one latent and the rotary key per token and layer: 61 x (512 + 64) x 1 B.
    expect(page.get_by_text("61 layers × (512 latent + 64 rotary key)")).to_be_visible()
    assert "dp_attention=16" in page.url
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots = Path(os.environ.get("BROWSER_SHOTS") or "/tmp")
    page.screenshot(path=str(shots / f"sizing-dp-attention-{width}.png"), full_page=True)

    page.select_option("select[name=model]", "llama3_70b")
    expect(
        page.get_by_text("Attention data parallelism needs a mixture of experts")
    ).to_be_visible()
    assert page.evaluate("window.__sameDocument") is True


def test_a_chart_of_two_priced_models_draws_both_bars_with_their_names(signed_in, live_server):
    """Two priced GPU models on a phone: the chart's box was 80 + 2 × 26 px, less than its two
    axes and legend take, so the bars had no height and one name was skipped. Each row now gets
    at least 18 px (a 12 px label and Chart.js's skip padding) and every bar its GPU model."""
    from datetime import date
    from decimal import Decimal

    from billing.choices import RateKind
    from billing.models import RateCard, RateCardEntry
    from pools.inventory.models import GpuModel

    inference_fleet()
    card = RateCard.objects.create(name="2020", currency="EUR", effective_from=date(2020, 1, 1))
    for slug, price in (("l40s", "1.20"), ("a100_80g_pcie", "1.90")):
        RateCardEntry.objects.create(
            rate_card=card,
            kind=RateKind.GPU_RESERVED,
            gpu_model=GpuModel.objects.get(slug=slug),
            price=Decimal(price),
        )
    page = signed_in
    page.set_viewport_size({"width": 390, "height": 844})

    page.goto(
        f"{live_server.url}/sizing/?model=qwen2_5_72b&precision=FP8&kv_cache_dtype=FP8"
        "&engine=vllm&input_len=1000&output_len=200&demand_kind=output_rate&output_tok_s=2000"
        "&prompt_cache_hit_rate=0&input_weight=0.5&tpot_target_ms=50&ttft_target_ms=2000"
        "&gpu_models=l40s&gpu_models=a100_80g_pcie"
    )
    expect(page.locator("#sizing-chart")).to_be_visible()
    chart = page.evaluate(
        """() => { const c = Chart.getChart('sizing-chart');
        return {area: c.chartArea.height, rows: c.data.labels.length,
                shown: c.scales.y.ticks.length, cost: c.scales.x2.options.title.text}; }"""
    )

    assert chart["rows"] == chart["shown"] == 2
    assert chart["area"] >= 2 * 18
    assert chart["cost"].startswith("monthly cost, EUR")


def test_the_weights_kv_cache_and_engine_lists_show_every_choice_whole(signed_in, live_server):
    """Three selects side by side in the 21rem form left 36 px for their text at any desktop
    width: the default "BF16" read "BF1", "tensorrt-llm" a few letters. Every choice of the
    three now fits its select (text width against the select's width less its padding)."""
    inference_fleet()
    page = signed_in
    page.set_viewport_size({"width": 1366, "height": 900})

    page.goto(f"{live_server.url}/sizing/")
    clipped = page.evaluate(
        """() => { const ctx = document.createElement('canvas').getContext('2d');
        return ['precision', 'kv_cache_dtype', 'engine'].flatMap(name => {
          const select = document.querySelector(`#sizing-form select[name=${name}]`);
          const style = getComputedStyle(select);
          ctx.font = style.font;
          const room = select.clientWidth - parseFloat(style.paddingLeft)
            - parseFloat(style.paddingRight);
          return Array.from(select.options).filter(o => ctx.measureText(o.text).width > room)
            .map(o => `${name}: ${o.text}`); }); }"""
    )

    assert clipped == []


@pytest.mark.parametrize("width", [1280, 390])
def test_a_pasted_config_json_over_5000_bytes_is_sized_in_place(signed_in, live_server, width):
    """The preview was an htmx GET of the whole form: a config.json this long made a request
    line gunicorn refuses (over 4,094 bytes) and the old results silently stayed. Posted, it
    is sized (DeepSeek-V3: the preset's 671,026,404,352 parameters); the address keeps the
    sizing before it, from the fields (no address can hold the config), and the results say
    how to share this one."""
    from sizing_support import DEEPSEEK_V3_PARAMS, deepseek_v3_config_text

    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_8b")
    page.select_option("select[name=model]", "custom")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-8B (modified)")
    shared = page.url  # the custom fields, started from the preset, make an address
    assert "model=custom" in shared and "custom_model.num_layers=32" in shared
    textarea = page.locator("textarea[name='custom_model.config']")
    config = deepseek_v3_config_text()
    assert len(config.encode()) > 5_000
    textarea.fill(config)
    textarea.blur()  # a paste is a change once the field is left

    expect(page.locator("#results")).to_contain_text(f"{DEEPSEEK_V3_PARAMS} parameters")
    expect(page.locator("#results .sizing-errors")).to_have_count(0)
    expect(page.locator("#config-not-in-address")).to_be_visible()
    assert page.url == shared
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # its CSV is posted with the form's fields, which the results no longer carry themselves
    with page.expect_download() as download:
        page.locator("#csv-by-post button").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    # DeepSeek-V3's 671,026,404,352 parameters at the page's BF16: 2 B each
    assert {row["weights_bytes"] for row in rows} - {""} == {str(671_026_404_352 * 2)}


def test_a_preview_the_portal_refuses_or_never_gets_says_so(signed_in, live_server):
    """A failed preview (4xx/5xx, or no answer) swapped nothing, so the results of the inputs
    before stood as if they were the new ones; the results now say it failed."""
    page = signed_in
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_8b")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-8B")
    failure = {"how": "500"}

    def preview(route):
        if route.request.method != "POST":
            route.continue_()
        elif failure["how"] == "500":
            route.fulfill(status=500, body="Server Error")
        else:
            route.abort()

    page.route(re.compile(r"/sizing/$"), preview)
    page.select_option("select[name=model]", "llama3_70b")

    note = page.locator("#results .request-failed")
    expect(note).to_have_text(
        "These inputs were not recomputed: the portal answered 500. "
        "The results below are for the inputs before."
    )
    expect(page.locator("#results")).to_contain_text("Llama-3.1-8B")

    failure["how"] = "unreachable"
    page.select_option("select[name=precision]", "FP8")
    expect(note).to_have_text(
        "These inputs were not recomputed: the portal could not be reached. "
        "The results below are for the inputs before."
    )
    expect(note).to_have_count(1)
    for width in (1280, 390):  # the note wraps inside the results at either width
        page.set_viewport_size({"width": width, "height": 900})
        # (the chart's canvas follows a resize a frame or more later)
        for _ in range(50):
            if page.evaluate("document.documentElement.scrollWidth") <= width:
                break
            page.wait_for_timeout(100)
        assert page.evaluate("document.documentElement.scrollWidth") <= width

    page.unroute(re.compile(r"/sizing/$"))
    page.select_option("select[name=precision]", "BF16")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-70B")
    expect(note).to_have_count(0)


def test_a_second_click_on_save_estimate_saves_nothing_more(signed_in, live_server):
    """Double-clicking "Save estimate" saved two: the second click came after the first save
    answered and before the browser had left for the estimate's page. The button stays
    disabled from the first click until the page is left: a click made the moment the save
    answers (the page itself clicks again) sends nothing."""
    from pools.sizing.models import SizingEstimate

    page = signed_in
    page.goto(f"{live_server.url}/sizing/?model=llama3_8b")
    saves = []
    page.on(
        "request",
        lambda r: saves.append(r) if r.method == "POST" and r.url.endswith("/sizing/save/") else 0,
    )
    page.evaluate(
        """() => document.body.addEventListener("htmx:afterRequest", (event) => {
             const button = event.detail.elt;
             if (button.id === "save-estimate") setTimeout(() => button.click());
           })"""
    )
    held = []  # the way to the estimate's page, held until the second click was made
    page.route(re.compile(r"/sizing/estimates/\d+/$"), lambda route: held.append(route))

    page.click("#save-estimate", no_wait_after=True)
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the saved estimate's page was not asked for"
    page.wait_for_timeout(500)  # time for a second save to leave, were it sent
    assert len(saves) == 1
    held[0].continue_()

    page.wait_for_url(re.compile(r"/sizing/estimates/\d+/$"))
    assert SizingEstimate.objects.count() == 1


def test_a_field_the_browser_refuses_says_the_results_were_not_recomputed(signed_in, live_server):
    """Input tokens -1 (below the field's min of 1): the browser refuses the field, htmx sends
    nothing, and the results of the inputs before stood with no word; now they say so, naming
    the field, until a value the browser accepts recomputes them."""
    page = signed_in
    page.goto(f"{live_server.url}/sizing/")
    page.select_option("select[name=model]", "llama3_8b")
    expect(page.locator("#results")).to_contain_text("Llama-3.1-8B")
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)

    page.fill("input[name=input_len]", "-1")

    note = page.locator("#results .request-failed")
    expect(note).to_contain_text("These inputs were not recomputed: Input tokens: ")
    expect(note).to_contain_text("The results below are for the inputs before.")
    assert posts == []
    page.fill("input[name=input_len]", "2000")
    expect(note).to_have_count(0)
    assert len(posts) >= 1


def test_on_a_phone_the_form_top_counts_the_inputs_to_fix_and_opens_their_section(
    signed_in, live_server
):
    """At 390 px the error list sits below the whole form: the form's top says how many inputs
    to fix and links the list, and an input at fault in a folded section is shown (speculative
    decoding given its draft tokens alone: the acceptance rate and the cost ratio missing)."""
    inference_fleet()
    page = signed_in
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/sizing/")
    banner = page.locator("#sizing-error-banner")
    expect(banner).to_be_hidden()

    page.click("#speculation summary")
    page.fill("input[name=speculative_draft_tokens]", "4")
    page.locator("input[name=speculative_draft_tokens]").dispatch_event("change")
    expect(page.locator("#sizing-errors li")).to_have_count(2)
    page.click("#speculation summary")  # folded again, the faults still there
    expect(page.locator("#speculation")).not_to_have_attribute("open", "")
    page.fill("input[name=input_len]", "1500")
    page.locator("input[name=input_len]").dispatch_event("change")

    expect(page.locator("#speculation")).to_have_attribute("open", "")
    expect(page.locator("input[name=speculative_acceptance_rate]")).to_have_attribute(
        "aria-invalid", "true"
    )
    page.evaluate("window.scrollTo(0, 0)")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("2 inputs to fix")
    assert banner.bounding_box()["y"] < 844  # in the first screen, above the form's inputs
    banner.locator("a").click()
    expect(page.locator("#sizing-errors")).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    page.fill("input[name=speculative_draft_tokens]", "")
    page.locator("input[name=speculative_draft_tokens]").dispatch_event("change")
    expect(page.locator("#sizing-errors")).to_have_count(0)
    expect(banner).to_be_hidden()
