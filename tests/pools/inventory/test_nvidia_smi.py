"""nvidia-smi parser: real captures, tricky inputs C01/C02/C03/C05, and bad input.

Expected values are read off the capture text by eye (the ``--query-gpu`` rows of the ``load`` run,
which come last in each capture), not computed by the parser.
"""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.inventory.nvidia_smi import parse_nvidia_smi
from scheduler_adapters.types import (
    GpuHealth,
    InventorySource,
    MigDeviceSnapshot,
    ParseResult,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CAPTURES = FIXTURES / "nvidia-smi"
ZERO_UUID = "GPU-00000000-0000-0000-0000-000000000000"
MASKED_SERIAL = "0000000000000"


def capture(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def tricky(case_id: str) -> dict:
    cases = json.loads((FIXTURES / "tricky_inputs.json").read_text(encoding="utf-8"))
    return next(case for case in cases if case["id"] == case_id)


def section(text: str, command: str, occurrence: int = 0) -> str:
    """The output under the ``occurrence``-th ``# $ <command>`` header of a capture file."""
    lines = text.split("\n")
    headers = [n for n, line in enumerate(lines) if line.rstrip() == f"# $ {command}"]
    start = headers[occurrence] + 2  # skip the header and the rule of '#' under it
    stop = next(n for n in range(start, len(lines)) if lines[n].startswith("#####"))
    return "\n".join(lines[start:stop])


def only_node(result: ParseResult):
    assert len(result.nodes) == 1, result.issues
    return result.nodes[0]


def messages(result: ParseResult) -> list[str]:
    return [issue.message for issue in result.issues]


# --- real captures ----------------------------------------------------------------------------

CAPTURE_CASES = [
    # file, name, PCI bus id, memory.total MiB, MIG mode, serial, driver, CUDA,
    # then the load run's utilization.gpu %, memory.used MiB, power.draw W
    (
        "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt",
        "NVIDIA GeForce RTX 2080 SUPER",
        "00000000:0C:00.0",
        8192,
        None,
        None,
        "595.71.05",
        "13.2",
        8.0,
        819,
        111.50,
    ),
    (
        "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt",
        "NVIDIA GeForce RTX 4080 SUPER",
        "00000000:01:00.0",
        16376,
        None,
        None,
        "595.71.05",
        "13.2",
        7.0,
        1474,
        84.24,
    ),
    (
        "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
        "NVIDIA H100 80GB HBM3",
        "00000000:00:09.0",
        81559,
        False,
        MASKED_SERIAL,
        "590.48.01",
        "13.1",
        100.0,
        19818,
        631.95,
    ),
    (
        "linux-x86_64__nvidia-h100-mig__590.48.01.txt",
        "NVIDIA H100 80GB HBM3",
        "00000000:00:09.0",
        81559,
        True,
        MASKED_SERIAL,
        "590.48.01",
        "13.1",
        None,  # [N/A]: MIG parents report no utilisation
        11125,
        433.78,
    ),
    (
        "linux-x86_64__nvidia-h200__590.48.01.txt",
        "NVIDIA H200",
        "00000000:83:00.0",
        143771,
        False,
        MASKED_SERIAL,
        "590.48.01",
        "13.1",
        100.0,
        32362,
        627.40,
    ),
    (
        "linux-x86_64__nvidia-l40s__595.80.txt",
        "NVIDIA L40S",
        "00000000:01:00.0",
        46068,
        None,
        MASKED_SERIAL,
        "595.80",
        "13.2",
        9.0,
        1235,
        110.23,
    ),
]


@pytest.mark.parametrize(
    (
        "filename",
        "name",
        "pci",
        "memory",
        "mig",
        "serial",
        "driver",
        "cuda",
        "util",
        "used",
        "watts",
    ),
    CAPTURE_CASES,
)
def test_capture_file_gives_one_node_with_each_gpu_once(
    filename, name, pci, memory, mig, serial, driver, cuda, util, used, watts
):
    result = parse_nvidia_smi(capture(filename), hostname="gpu-01")

    node = only_node(result)
    assert result.issues == ()
    assert node.hostname == "gpu-01"
    assert node.source is InventorySource.NVIDIA_SMI
    assert node.driver_version == driver
    assert node.cuda_version == cuda
    # idle and load runs list the same card twice each: it must come out once
    assert len(node.gpus) == 1
    gpu = node.gpus[0]
    assert gpu.index == 0
    assert gpu.model_name == name
    assert gpu.uuid == ZERO_UUID
    assert gpu.serial == serial
    assert gpu.pci_bus_id == pci
    assert gpu.memory_total_mib == memory
    assert gpu.mig_mode is mig
    assert gpu.health is GpuHealth.OK
    assert gpu.utilization_gpu_percent == util
    assert gpu.memory_used_mib == used
    assert gpu.power_draw_w == watts


def test_h100_mig_capture_keeps_mig_devices_under_their_gpu():
    result = parse_nvidia_smi(
        capture("linux-x86_64__nvidia-h100-mig__590.48.01.txt"), hostname="gpu-01"
    )

    (gpu,) = only_node(result).gpus
    assert gpu.model_name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_mib == 81559
    assert gpu.mig_mode is True
    # profile and UUID from -L; instance ids and memory from -q
    assert gpu.mig_devices == (
        MigDeviceSnapshot(0, "MIG-00000000-0000-0000-0000-000000000000", "3g.40gb", 2, 0, 40448),
        MigDeviceSnapshot(1, "MIG-00000001-0000-0000-0000-000000000001", "2g.20gb", 3, 0, 20096),
        MigDeviceSnapshot(2, "MIG-00000002-0000-0000-0000-000000000002", "1g.10gb", 9, 0, 9984),
        MigDeviceSnapshot(3, "MIG-00000003-0000-0000-0000-000000000003", "1g.10gb", 10, 0, 9984),
    )


def test_list_section_alone_gives_names_and_mig_profiles_with_unknown_health():
    text = section(capture("linux-x86_64__nvidia-h100-mig__590.48.01.txt"), "nvidia-smi -L")

    result = parse_nvidia_smi(text, hostname="gpu-01")

    node = only_node(result)
    (gpu,) = node.gpus
    assert (gpu.index, gpu.model_name, gpu.uuid) == (0, "NVIDIA H100 80GB HBM3", ZERO_UUID)
    assert [m.profile for m in gpu.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert gpu.mig_mode is True
    assert gpu.health is GpuHealth.UNKNOWN
    assert gpu.memory_total_mib is None
    assert node.driver_version is None
    assert result.issues == ()


def test_a_list_line_cut_short_in_its_uuid_keeps_the_card_and_its_name_and_says_where():
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
        "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-zzzz\n"
    )
    result = parse_nvidia_smi(text, hostname="gpu-01")

    first, second = only_node(result).gpus
    assert (first.index, first.uuid) == (0, "GPU-1b2c3d4e-0000-1111-2222-333344445555")
    assert (second.index, second.model_name, second.uuid) == (1, "NVIDIA A100-SXM4-80GB", None)
    (issue,) = result.issues
    assert issue.line == 2 and "ends inside its UUID" in issue.message


def test_query_section_alone_reads_average_power_and_idle_readings():
    text = section(capture("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"), "nvidia-smi -q")

    node = only_node(parse_nvidia_smi(text, hostname="gpu-01"))

    (gpu,) = node.gpus
    assert (node.driver_version, node.cuda_version) == ("590.48.01", "13.1")
    assert gpu.index == 0  # Attached GPUs : 1 and one block, so the order is the index
    assert gpu.serial == MASKED_SERIAL
    assert gpu.pci_bus_id == "00000000:00:09.0"
    assert gpu.memory_total_mib == 81559
    assert gpu.memory_used_mib == 0
    assert gpu.utilization_gpu_percent == 0.0
    assert gpu.power_draw_w == 69.85  # Average Power Draw; -q prints no plain "Power Draw"
    assert gpu.health is GpuHealth.OK


def test_query_section_falls_back_to_instantaneous_power_when_average_is_na():
    text = section(
        capture("linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"), "nvidia-smi -q"
    )

    (gpu,) = only_node(parse_nvidia_smi(text, hostname="gpu-01")).gpus

    assert gpu.power_draw_w == 37.62
    assert gpu.memory_used_mib == 214
    assert gpu.serial is None  # Serial Number : N/A
    assert gpu.mig_mode is None  # MIG Mode Current : N/A on GeForce


def test_table_banner_alone_gives_versions_and_says_gpus_are_unknown():
    text = section(capture("linux-x86_64__nvidia-l40s__595.80.txt"), "nvidia-smi")

    result = parse_nvidia_smi(text, hostname="gpu-01")

    node = only_node(result)
    assert (node.driver_version, node.cuda_version) == ("595.80", "13.2")
    assert node.gpus == ()
    assert any("no GPU listing" in message for message in messages(result))


def test_truncated_row_in_capture_is_reported_by_line_and_the_rest_is_kept():
    lines = capture("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt").split("\n")
    # the load run's --query-gpu output: header line, rule, CSV header, then the row
    header = [n for n, line in enumerate(lines) if line.startswith("# $ nvidia-smi --query-gpu")]
    row = header[1] + 3
    assert lines[row].startswith("2026/")
    lines[row] = lines[row][:120]

    result = parse_nvidia_smi("\n".join(lines), hostname="gpu-01")

    (gpu,) = only_node(result).gpus
    row_issue, section_issue = result.issues
    assert (row_issue.line, row_issue.node) == (row + 1, "gpu-01")
    assert row_issue.message == "expected 212 fields, found 7; row skipped"
    assert (section_issue.line, section_issue.message) == (row, "CSV has a header but no rows")
    # readings now come from the load run's -q, the last sample still whole
    assert gpu.power_draw_w == 629.45
    assert gpu.memory_used_mib == 19818
    assert gpu.utilization_gpu_percent == 100.0


# --- tricky inputs ----------------------------------------------------------------------------


def test_c01_placeholders_become_none_and_no_row_is_dropped():
    result = parse_nvidia_smi(tricky("C01")["input"], hostname="gpu-01")

    node = only_node(result)
    assert result.issues == ()
    assert [g.index for g in node.gpus] == [0, 1, 2]
    row0, row1, row2 = node.gpus
    assert (row0.model_name, row0.memory_total_mib, row0.memory_used_mib) == (
        "NVIDIA L40S",
        46068,
        3,
    )
    assert row0.utilization_gpu_percent == 0.0
    assert row0.power_draw_w == 36.52
    assert row1.model_name == "NVIDIA GeForce GTX 770"
    assert row1.utilization_gpu_percent is None
    assert row1.power_draw_w is None
    assert row2.model_name == "NVIDIA A100-SXM4-80GB"
    assert row2.memory_total_mib == 81920
    assert row2.memory_used_mib is None
    assert row2.utilization_gpu_percent is None  # unknown, never 0: it must not look idle
    assert row2.power_draw_w == 61.20


BANNER_535 = (
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2                  |\n"
    "+-----------------------------------------------------------------------------------------+\n"
)
BANNER_610 = (
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 610.43.02    KMD Version: 610.43.02       CUDA UMD Version: 13.0              |\n"
    "+-----------------------------------------------------------------------------------------+\n"
)


@pytest.mark.parametrize(
    ("banner", "driver", "cuda"),
    [(BANNER_535, "535.129.03", "12.2"), (BANNER_610, "610.43.02", "13.0")],
)
def test_c02_both_table_banner_labels(banner, driver, cuda):
    node = only_node(parse_nvidia_smi(banner, hostname="gpu-01"))

    assert node.driver_version == driver
    assert node.cuda_version == cuda


def test_c02_query_labels_of_610_drivers_and_na_cuda():
    text = (
        "==============NVSMI LOG==============\n\n"
        "KMD Version                               : 610.43.02\n"
        "CUDA UMD Version                          : N/A\n\n"
        "Attached GPUs                             : 1\n"
        "GPU 00000000:17:00.0\n"
        "    Product Name                          : NVIDIA L40S\n"
    )

    node = only_node(parse_nvidia_smi(text, hostname="gpu-01"))

    assert node.driver_version == "610.43.02"
    assert node.cuda_version is None
    assert node.gpus[0].model_name == "NVIDIA L40S"


@pytest.mark.parametrize("driver", ["418.87.01", "535.54.03", "535.129.03"])
def test_c02_driver_version_from_csv_is_kept_as_the_raw_string(driver):
    text = f"index, name, driver_version\n0, NVIDIA L40S, {driver}\n"

    assert only_node(parse_nvidia_smi(text, hostname="gpu-01")).driver_version == driver


def test_c03_xml_two_gpus_power_from_either_element_and_error_health():
    result = parse_nvidia_smi(tricky("C03")["input"], hostname="gpu-01")

    node = only_node(result)
    assert result.issues == ()
    assert (node.driver_version, node.cuda_version) == ("550.54.15", "12.4")
    gpu0, gpu1 = node.gpus
    assert (gpu0.index, gpu0.pci_bus_id, gpu0.model_name) == (0, "00000000:17:00.0", "NVIDIA L40S")
    assert gpu0.power_draw_w == 35.10
    assert gpu0.memory_total_mib == 46068
    assert gpu0.memory_used_mib == 1
    assert gpu0.mig_mode is None  # current_mig N/A
    assert gpu0.health is GpuHealth.OK
    # product_brand "Unknown Error": still inventoried by its PCI id, as an error
    assert (gpu1.index, gpu1.pci_bus_id, gpu1.model_name) == (1, "00000000:2A:00.0", "NVIDIA L40S")
    assert gpu1.power_draw_w is None
    assert gpu1.memory_used_mib is None
    assert gpu1.utilization_gpu_percent is None  # element missing
    assert gpu1.health is GpuHealth.ERROR


def test_c03_xml_that_is_not_well_formed_rejects_the_whole_snapshot():
    broken = tricky("C03")["input"].replace("</gpu>\n</nvidia_smi_log>", "</gpu>\n")

    result = parse_nvidia_smi(broken, hostname="gpu-01")

    assert result.nodes == ()
    (issue,) = result.issues
    assert "not well-formed" in issue.message


def test_c03_xml_inside_a_capture_rejects_the_capture_when_broken():
    text = (
        "# $ nvidia-smi -L\n"
        "GPU 0: NVIDIA L40S (UUID: GPU-a)\n"
        "# $ nvidia-smi -q -x\n"
        "<?xml version='1.0' ?>\n<nvidia_smi_log><gpu>\n"
    )

    result = parse_nvidia_smi(text, hostname="gpu-01")

    assert result.nodes == ()
    assert result.issues[0].line == 5


@pytest.mark.parametrize(
    "doctype",
    [
        '<!DOCTYPE nvidia_smi_log [<!ENTITY boom "boom">]>',
        '<!DOCTYPE nvidia_smi_log [<!ENTITY boom SYSTEM "file:///etc/passwd">]>',
    ],
)
def test_xml_entities_are_refused(doctype):
    text = f'<?xml version="1.0" ?>\n{doctype}\n<nvidia_smi_log>&boom;</nvidia_smi_log>'

    result = parse_nvidia_smi(text, hostname="gpu-01")

    assert result.nodes == ()
    assert len(result.issues) == 1


def test_xml_gpu_count_is_checked_against_attached_gpus():
    text = (
        "<nvidia_smi_log><attached_gpus>3</attached_gpus>"
        '<gpu id="00000000:17:00.0"><product_name>NVIDIA L40S</product_name>'
        "<power_readings><power_draw>75.50 W</power_draw></power_readings></gpu>"
        "</nvidia_smi_log>"
    )

    result = parse_nvidia_smi(text, hostname="gpu-01")

    (gpu,) = only_node(result).gpus
    assert gpu.index is None  # with a GPU missing, the position is not the index
    assert gpu.power_draw_w == 75.50
    assert any("3" in m and "1 GPUs" in m for m in messages(result))


def test_c05_similar_names_stay_distinct_raw_names():
    result = parse_nvidia_smi(tricky("C05")["input"], hostname="gpu-01")

    node = only_node(result)
    assert [g.model_name for g in node.gpus] == [
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 4090",
    ]
    assert [g.memory_total_mib for g in node.gpus] == [24564, 24564]
    # the admin-typed alias on line 4 is not a CSV row
    (issue,) = result.issues
    assert issue.line == 4


# --- CSV shapes and bad input -----------------------------------------------------------------


def test_empty_input_gives_no_node():
    result = parse_nvidia_smi("", hostname="gpu-01")

    assert result.nodes == ()
    assert messages(result)[0].startswith("no nvidia-smi output found")


def test_text_without_nvidia_smi_content_gives_no_node():
    result = parse_nvidia_smi("kernel: something else entirely\n", hostname="gpu-01")

    assert result.nodes == ()
    assert messages(result)[0].startswith("no nvidia-smi output found")


def test_truncated_csv_row_is_reported_and_other_rows_kept():
    text = (
        "index, name, memory.total [MiB], power.draw [W]\n"
        "0, NVIDIA L40S, 46068 MiB, 36.52 W\n"
        "1, NVIDIA L40S, 460\n"
        "2, NVIDIA L40S, 46068 MiB, 40.00 W\n"
    )

    result = parse_nvidia_smi(text, hostname="gpu-01")

    assert [g.index for g in only_node(result).gpus] == [0, 2]
    (issue,) = result.issues
    assert issue.line == 3
    assert issue.message == "expected 4 fields, found 3; row skipped"


def test_columns_in_any_order_with_units_in_header_and_cells():
    text = (
        "power.draw [W], memory.total [MiB], uuid, pci.bus_id, name, index\n"
        "250.10 W, 81920 MiB, GPU-b, 0000:3B:00.0, NVIDIA A100-SXM4-80GB, 1\n"
        "[N/A], 81920 MiB, GPU-a, 00000000:1a:00.0, NVIDIA A100-SXM4-80GB, 0\n"
    )

    node = only_node(parse_nvidia_smi(text, hostname="gpu-01"))

    gpu0, gpu1 = node.gpus  # sorted by index
    assert (gpu0.index, gpu0.uuid, gpu0.pci_bus_id) == (0, "GPU-a", "00000000:1A:00.0")
    assert (gpu0.memory_total_mib, gpu0.power_draw_w) == (81920, None)
    assert (gpu1.index, gpu1.uuid, gpu1.pci_bus_id) == (1, "GPU-b", "00000000:3B:00.0")
    assert (gpu1.memory_total_mib, gpu1.power_draw_w) == (81920, 250.10)


def test_unknown_columns_are_ignored():
    text = (
        "index, clocks.sm [MHz], name, vendor.new_field, memory.total [MiB]\n"
        "0, 1980 MHz, NVIDIA H200, whatever, 143771 MiB\n"
    )

    result = parse_nvidia_smi(text, hostname="gpu-01")

    (gpu,) = only_node(result).gpus
    assert (gpu.index, gpu.model_name, gpu.memory_total_mib) == (0, "NVIDIA H200", 143771)
    assert result.issues == ()


def test_headerless_csv_without_columns_gives_no_gpus():
    result = parse_nvidia_smi("0, NVIDIA L40S, 46068\n", hostname="gpu-01")

    assert result.nodes == ()
    assert result.issues[0].line == 1
    assert "CSV has no header line" in result.issues[0].message
    assert "--query-gpu=" in result.issues[0].message  # says how to make it readable


def test_headerless_csv_with_columns():
    result = parse_nvidia_smi(
        "0, NVIDIA L40S, 46068\n1, NVIDIA L40S, 46068\n",
        hostname="gpu-01",
        columns=["index", "name", "memory.total"],
    )

    node = only_node(result)
    assert [(g.index, g.model_name, g.memory_total_mib) for g in node.gpus] == [
        (0, "NVIDIA L40S", 46068),
        (1, "NVIDIA L40S", 46068),
    ]


def test_bad_number_becomes_none_and_is_reported_with_line_and_field():
    text = "index, name, memory.total [MiB], utilization.gpu [%]\n0, NVIDIA L40S, lots, 12 %\n"

    result = parse_nvidia_smi(text, hostname="gpu-01")

    (gpu,) = only_node(result).gpus
    assert gpu.memory_total_mib is None
    assert gpu.utilization_gpu_percent == 12.0
    (issue,) = result.issues
    assert (issue.line, issue.field) == (2, "memory.total")


@pytest.mark.parametrize(
    "token",
    ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]"],
)
def test_every_placeholder_in_a_numeric_field_is_none(token):
    text = f"index, name, power.draw [W]\n0, NVIDIA L40S, {token}\n"

    result = parse_nvidia_smi(text, hostname="gpu-01")

    assert only_node(result).gpus[0].power_draw_w is None
    assert result.issues == ()


def test_error_string_in_the_name_marks_the_gpu_as_error():
    text = "index, name, pci.bus_id\n0, [Unknown Error], 00000000:3B:00.0\n"

    (gpu,) = only_node(parse_nvidia_smi(text, hostname="gpu-01")).gpus

    assert gpu.health is GpuHealth.ERROR
    assert gpu.model_name is None
    assert gpu.pci_bus_id == "00000000:3B:00.0"


def test_replacement_characters_and_nul_bytes_do_not_crash():
    text = "index, name, memory.total [MiB]\n0, NVIDIA L40S\ufffd, 46068\x00\n"

    (gpu,) = only_node(parse_nvidia_smi(text, hostname="gpu-01")).gpus

    assert gpu.model_name == "NVIDIA L40S\ufffd"
    assert gpu.memory_total_mib == 46068


def test_no_devices_found_is_a_node_with_no_gpus():
    result = parse_nvidia_smi("No devices were found\n", hostname="gpu-01")

    assert only_node(result).gpus == ()
    assert result.issues == ()


def test_gpu_that_cannot_be_opened_is_listed_as_error():
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n"
        "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
    )

    result = parse_nvidia_smi(text, hostname="gpu-01")

    ok, failed = only_node(result).gpus
    assert (ok.index, ok.health) == (0, GpuHealth.UNKNOWN)
    assert (failed.pci_bus_id, failed.health) == ("00000000:3B:00.0", GpuHealth.ERROR)
    assert result.issues[0].line == 2


def test_masked_uuids_shared_by_two_gpus_do_not_merge_them():
    text = (
        "# $ nvidia-smi -L\n"
        f"GPU 0: NVIDIA H200 (UUID: {ZERO_UUID})\n"
        f"GPU 1: NVIDIA H200 (UUID: {ZERO_UUID})\n"
        "# $ nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.total --format=csv,noheader\n"
        f"0, {ZERO_UUID}, 00000000:17:00.0, 143771 MiB\n"
        f"1, {ZERO_UUID}, 00000000:2A:00.0, 143771 MiB\n"
    )

    result = parse_nvidia_smi(text, hostname="gpu-01")

    gpus = only_node(result).gpus
    assert [(g.index, g.model_name, g.pci_bus_id) for g in gpus] == [
        (0, "NVIDIA H200", "00000000:17:00.0"),
        (1, "NVIDIA H200", "00000000:2A:00.0"),
    ]
    assert any(ZERO_UUID in m for m in messages(result))


# --- never raises -----------------------------------------------------------------------------

_FIXTURE_LINES = sorted(
    {
        line
        for path in CAPTURES.glob("*.txt")
        for line in path.read_text(encoding="utf-8").split("\n")
    }
    | {line for case in ("C01", "C03", "C05") for line in tricky(case)["input"].split("\n")}
)
_ODD_TEXT = st.text(alphabet=st.sampled_from(list("GPU 0:,[]<>/N/A$#-\n\t\x00\ufffd MiB%W.x")))


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.one_of(
        st.text(),
        _ODD_TEXT,
        st.lists(st.one_of(st.sampled_from(_FIXTURE_LINES), _ODD_TEXT), max_size=40).map("\n".join),
    )
)
def test_any_text_gives_a_parse_result(text):
    result = parse_nvidia_smi(text, hostname="gpu-01")

    assert isinstance(result, ParseResult)
    assert len(result.nodes) <= 1
