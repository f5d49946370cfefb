"""The GPU model matching key (tricky inputs C05, C07, C17) and its use against the catalogue."""

import pytest

from pools.inventory.catalogue import load_gpu_models
from pools.inventory.gpu_names import model_key_index, normalise_model_key

MODELS = load_gpu_models()
INDEX = model_key_index(MODELS)


def lookup(raw):
    return INDEX.get(normalise_model_key(raw))


def test_rule_on_plain_examples():
    assert normalise_model_key("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert normalise_model_key("NVIDIA A100-SXM4-80GB") == "a100sxm480gb"
    assert normalise_model_key("NVIDIA-GeForce-RTX-4090-SHARED") == "rtx4090"
    assert normalise_model_key("a100_80g_sxm") == "a10080gsxm"


def test_spaces_hyphens_and_case_do_not_matter():
    assert normalise_model_key("NVIDIA-GeForce-RTX-4090") == normalise_model_key(
        "NVIDIA GeForce RTX 4090"
    )
    assert normalise_model_key("nvidia a100-sxm4-80gb") == normalise_model_key(
        "NVIDIA A100-SXM4-80GB"
    )


def test_c05_rtx_4090_d_is_its_own_model():
    d_spellings = ["NVIDIA GeForce RTX 4090 D", "RTX 4090D", "RTX 4090 D", "rtx-4090-d", "rtx4090d"]
    assert {normalise_model_key(s) for s in d_spellings} == {"rtx4090d"}
    assert normalise_model_key("RTX 4090 D") != normalise_model_key("RTX 4090")
    assert {lookup(s) for s in d_spellings} == {"rtx4090d"}
    assert lookup("NVIDIA GeForce RTX 4090") == "rtx4090"


def test_c17_shared_suffix_is_dropped():
    assert lookup("NVIDIA-GeForce-RTX-4090-SHARED") == "rtx4090"
    assert lookup("NVIDIA-L40S-SHARED") == "l40s"
    # Only a trailing suffix is a time-slicing marker.
    assert normalise_model_key("SHARED-RTX-4090") == "sharedrtx4090"


def test_brand_words_are_only_dropped_in_front():
    assert normalise_model_key("GeForce RTX 4090") == "rtx4090"
    assert normalise_model_key("RTX 4090 NVIDIA") == "rtx4090nvidia"


def test_nothing_left_gives_an_empty_key_that_matches_nothing():
    assert normalise_model_key("") == ""
    assert normalise_model_key("  NVIDIA ") == ""
    assert lookup("NVIDIA GeForce") is None


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        # nvidia-smi -L / Product Name in shared/fixtures/nvidia-smi/.
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("NVIDIA H200", "h200_sxm"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA GeForce RTX 4080 SUPER", "rtx4080s"),
        ("NVIDIA GeForce RTX 2080 SUPER", "rtx2080s"),
        # C01 / C21 modelName.
        ("NVIDIA A100-SXM4-80GB", "a100_80g_sxm"),
        # GFD product labels quoted in research/k8s_gpu_anchors.md §2.1.
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-A100-SXM4-80GB", "a100_80g_sxm"),
        ("NVIDIA-H800", "h800_sxm"),
        ("NVIDIA-GeForce-RTX-4090", "rtx4090"),
        # Slurm GRES types of C07 and research/slurm/NOTES.md.
        ("l40s", "l40s"),
        ("rtx4090", "rtx4090"),
        ("h200", "h200_sxm"),
    ],
)
def test_real_names_are_recognised(name, slug):
    assert lookup(name) == slug


@pytest.mark.parametrize(
    "name",
    [
        # Family names that cover several SKUs stay for an admin to map.
        "a100",
        "A100",
        "NVIDIA A100",
        "h100",
        "NVIDIA-H100",
        "a800",
        # Not in the catalogue at all (C01, C06, C07, C10).
        "NVIDIA GeForce GTX 770",
        "tesla",
        "k80",
        "a100_3g.20gb",
        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "4090",
    ],
)
def test_ambiguous_or_unknown_names_stay_unrecognised(name):
    assert lookup(name) is None


def test_no_substring_matching():
    # Every key is matched whole: the H100 PCIe key is not a prefix match for the NVL or SXM names.
    assert lookup("NVIDIA H100 PCIe") == "h100_pcie"
    assert lookup("NVIDIA H100 NVL") == "h100_nvl"
    assert lookup("NVIDIA H20") == "h20"
    assert lookup("NVIDIA L4") == "l4"
    assert lookup("NVIDIA A10") == "a10"


def test_catalogue_keys_do_not_collide_and_every_alias_finds_its_own_entry():
    # model_key_index raises on any key claimed twice; building INDEX above already proved that.
    for model in MODELS:
        names = [model["slug"], model["name"], model["vendor_name"]]
        names += [alias["value"] for alias in model["aliases"]]
        for name in names:
            assert lookup(name) == model["slug"], name


def test_distinct_nvidia_smi_names_give_distinct_keys():
    keys = [normalise_model_key(m["vendor_name"]) for m in MODELS]
    assert len(keys) == len(set(keys))


def _model(slug, *aliases):
    return {
        "slug": slug,
        "name": slug.upper(),
        "vendor_name": f"Vendor {slug}",
        "aliases": [{"value": a, "kind": "slurm-gres"} for a in aliases],
    }


def test_index_refuses_a_key_claimed_by_two_entries():
    with pytest.raises(ValueError, match="rtx4090"):
        model_key_index([_model("one", "RTX 4090"), _model("two", "rtx-4090")])


def test_index_refuses_an_empty_key():
    with pytest.raises(ValueError, match="empty"):
        model_key_index([_model("one", "NVIDIA")])
