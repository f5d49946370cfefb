"""Quantities as the API server holds them (issue #28 item 4): built-in kinds are stored in
resource.Quantity's canonical form (k8s.io/apimachinery/pkg/api/resource, quantity.go), so a
GPU quota someone set to ``1.5`` comes back as ``1500m``. The adapter reads it as 1.5 cards, a
drift, and the next write repairs it to the portal's whole number."""

from decimal import Decimal

import pytest

from scheduler_adapters.base import NamespaceGpuQuota

A100 = "NVIDIA-A100-SXM4-80GB"
NS = "team-nlp"


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        # from the examples in quantity.go's documentation and its canonical-form rules
        ("1.5", "1500m"),  # no fractional digits: the suffix goes down
        ("2000m", "2"),  # the largest suffix that keeps the mantissa whole
        ("1000", "1k"),
        ("1.5Gi", "1536Mi"),  # binary stays binary while whole
        ("1Ki", "1Ki"),
        ("0.5Ki", "512"),  # binary below 1024 is written in decimal SI
        ("1e4", "10e3"),  # exponents in steps of 3
        ("0.1n", "1n"),  # rounded up to nano precision
        (4, "4"),
    ],
)
def test_the_fake_stores_quantities_in_canonical_form(k8s_fake, written, stored):
    assert k8s_fake.canonical_quantity(written) == stored


def test_a_quota_set_to_one_and_a_half_is_a_drift_repaired_to_the_portals_cards(
    apiserver, make_adapter
):
    """The portal set 2 A100; someone set ``requests.nvidia.com/gpu`` to 1.5, which the
    server holds as 1500m. get_gpu_quota reads Decimal("1.5") (before issue #28 it raised
    UnexpectedResponse on every reconcile and never repaired it); the next ensure_team writes
    2 again (a conflict with kubectl-edit, forced on the portal's object)."""
    adapter = make_adapter()
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2})
    apiserver.edit(
        "",
        "resourcequotas",
        NS,
        "gpu-quota",
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "1.5"}),
    )
    hard = apiserver.get("", "resourcequotas", NS, "gpu-quota")["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "1500m"}

    found = adapter.get_gpu_quota("nlp")

    assert found == NamespaceGpuQuota(
        team="nlp", namespace=NS, cards=Decimal("1.5"), cards_by_product={A100: 2}, kueue=False
    )
    assert found.cards != 2
    assert adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2}) is True
    hard = apiserver.get("", "resourcequotas", NS, "gpu-quota")["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "2"}
    assert adapter.get_gpu_quota("nlp").cards == 2


def test_a_whole_quota_in_another_spelling_is_no_drift(apiserver, make_adapter):
    """``2000m`` is stored as ``2``; ``1k`` cards read as 1000, both whole numbers (int)."""
    adapter = make_adapter()
    adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2})
    apiserver.edit(
        "",
        "resourcequotas",
        NS,
        "gpu-quota",
        lambda rq: rq["spec"]["hard"].update({"requests.nvidia.com/gpu": "2000m"}),
    )

    cards = adapter.get_gpu_quota("nlp").cards

    assert (cards, type(cards)) == (2, int)
    assert adapter.ensure_team("nlp", group="oidc:nlp", gpu_quota={A100: 2}) is False
