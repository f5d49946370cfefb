from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_adapters.units import (
    parse_k8s_extended_count,
    parse_k8s_quantity,
    parse_slurm_memory_mib,
)

# --- C19: Kubernetes quantities -------------------------------------------------------------

C19_MEMORY_BYTES = {
    "129e6": Decimal(129 * 10**6),  # exponent, not exa
    "129M": Decimal(129 * 10**6),
    "123Mi": Decimal(123 * 1_048_576),  # 128,974,848
    "128974848000m": Decimal(128_974_848),  # milli-bytes
    "2.1Gi": Decimal("2.1") * 1_073_741_824,  # 2,254,857,830.4
    "64Gi": Decimal(64 * 2**30),
    "64G": Decimal(64 * 10**9),
    "1E": Decimal(10**18),
}
C19_CPU_CORES = {"500m": Decimal("0.5"), "1.5": Decimal("1.5"), "250m": Decimal("0.25")}


def _c19_tokens(case: dict, prefix: str) -> list[str]:
    line = next(line for line in case["input"].splitlines() if line.startswith(prefix))
    return [token.strip().strip('"') for token in line.split(":", 1)[1].split("|")]


def test_c19_memory_quantities_give_exact_bytes(tricky_inputs):
    tokens = _c19_tokens(tricky_inputs["C19"], "memory:")
    assert tokens == list(C19_MEMORY_BYTES)
    for token, expected in C19_MEMORY_BYTES.items():
        assert parse_k8s_quantity(token) == expected, token


def test_c19_worked_numbers():
    assert parse_k8s_quantity("123Mi") == 128_974_848
    assert parse_k8s_quantity("2.1Gi") == Decimal("2254857830.4")
    # The API server's canonical form of 2.1Gi is the same value in milli-bytes.
    assert parse_k8s_quantity("2254857830400m") == parse_k8s_quantity("2.1Gi")
    difference = parse_k8s_quantity("64Gi") - parse_k8s_quantity("64G")
    assert difference == 4_719_476_736
    assert round(difference / parse_k8s_quantity("64Gi") * 100, 2) == Decimal("6.87")


def test_c19_cpu_quantities(tricky_inputs):
    assert _c19_tokens(tricky_inputs["C19"], "cpu:") == list(C19_CPU_CORES)
    for token, expected in C19_CPU_CORES.items():
        assert parse_k8s_quantity(token) == expected, token


def test_c19_fractional_gpu_request_is_rejected_not_rounded(tricky_inputs):
    assert 'nvidia.com/gpu: "500m"' in tricky_inputs["C19"]["input"]
    with pytest.raises(ValueError, match="whole non-negative"):
        parse_k8s_extended_count("500m")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1m", Decimal("0.001")),
        ("1M", Decimal(10**6)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1E", Decimal(10**18)),
        ("1k", Decimal(1000)),
        ("1Ki", Decimal(1024)),
        ("1Ei", Decimal(2**60)),
        ("1e-3", Decimal("0.001")),
        ("+5", Decimal(5)),
        ("-5Mi", Decimal(-5 * 2**20)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("0", Decimal(0)),
    ],
)
def test_quantity_suffixes_are_case_sensitive(text, expected):
    assert parse_k8s_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1Gi",
        "1Gi ",
        "1 Gi",
        "Gi",
        "1K",
        "1gi",
        "1KI",
        "1GB",
        "1.2.3",
        "0x10",
        "1e",
        "e3",
        "1mi",
    ],
)
def test_bad_quantities_raise_value_error(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_k8s_quantity(text)


def test_quantity_that_cannot_be_held_exactly_raises():
    with pytest.raises(ValueError, match="too large"):
        parse_k8s_quantity("1" * 70 + "Ei")
    with pytest.raises(ValueError, match="too large"):
        parse_k8s_quantity("1e999999999")


def test_quantity_must_be_text():
    with pytest.raises(ValueError, match="must be a string"):
        parse_k8s_quantity(4)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4", 4), ("16384", 16384), ("1k", 1000), ("2e3", 2000), ("1.0", 1), ("1Gi", 2**30)],
)
def test_extended_count_accepts_whole_numbers(text, expected):
    assert parse_k8s_extended_count(text) == expected


@pytest.mark.parametrize("text", ["500m", "0.5", "-1", "1.5m", "1e-1"])
def test_extended_count_rejects_fractions_and_negatives(text):
    with pytest.raises(ValueError, match="whole non-negative"):
        parse_k8s_extended_count(text)


_MULTIPLIERS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


@given(
    number=st.integers(min_value=0, max_value=10**15), suffix=st.sampled_from(list(_MULTIPLIERS))
)
def test_integers_round_trip_with_every_suffix(number, suffix):
    # Expected values in int arithmetic: Decimal's default 28-digit context would round them.
    assert parse_k8s_quantity(f"{number}{suffix}") == number * _MULTIPLIERS[suffix]
    assert parse_k8s_quantity(f"{number}m") * 1000 == number


@given(
    number=st.integers(min_value=0, max_value=10**12),
    exponent=st.integers(min_value=-9, max_value=18),
    letter=st.sampled_from(["e", "E"]),
)
def test_integers_round_trip_with_exponents(number, exponent, letter):
    assert parse_k8s_quantity(f"{number}{letter}{exponent}") == Decimal(number).scaleb(exponent)


@given(st.text(max_size=20))
def test_quantity_parser_only_raises_value_error(text):
    try:
        parse_k8s_quantity(text)
    except ValueError:
        pass


# --- C20: Slurm memory sizes ----------------------------------------------------------------


def test_c20_slurm_tres_memory_is_binary(tricky_inputs):
    case_input = tricky_inputs["C20"]["input"]
    assert "mem=64G" in case_input and "mem=515456M" in case_input
    assert parse_slurm_memory_mib("64G") == 64 * 1024  # 65,536 MiB
    assert parse_slurm_memory_mib("515456M") == 515_456
    assert parse_slurm_memory_mib("515456M") / 1024 == Decimal("503.375")  # GiB


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16000", Decimal(16000)),
        ("16000M", Decimal(16000)),
        ("64g", Decimal(65536)),
        ("1.50G", Decimal(1536)),
        ("512K", Decimal("0.5")),
        ("1T", Decimal(1024 * 1024)),
        ("2P", Decimal(2 * 1024**3)),
    ],
)
def test_slurm_memory_sizes(text, expected):
    assert parse_slurm_memory_mib(text) == expected


@pytest.mark.parametrize("text", [None, "", "N/A", "(null)"])
def test_slurm_memory_unknown_is_none(text):
    assert parse_slurm_memory_mib(text) is None


@pytest.mark.parametrize("text", ["64GB", "64Gi", "abc", "-1G", "4000Mc"])
def test_slurm_memory_malformed_raises(text):
    with pytest.raises(ValueError, match="not a Slurm memory size"):
        parse_slurm_memory_mib(text)
