"""workloads.common.gpus: the planned GPUs, the GPUs a run used, and the message when they differ."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import skips
from workloads.common import gpus

H100 = ("0000:3b:00.0", "NVIDIA H100 80GB HBM3", "GPU-1f0e9d8c-0000-4000-8000-00000000003b", 0)
A100 = ("0000:5e:00.0", "NVIDIA A100-SXM4-40GB", "GPU-2e1d0c9b-0000-4000-8000-00000000005e", 1)
PROPRIETARY_VERSION = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
OPEN_VERSION = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (builder)\n"


def driver_tree(root, cards, version=PROPRIETARY_VERSION):
    """A /proc/driver/nvidia as the driver writes it, under root, for cards [(bus, model, uuid, minor)]."""
    base = Path(root, "proc/driver/nvidia")
    for bus, model, uuid, minor in cards:
        folder = base / "gpus" / bus
        folder.mkdir(parents=True)
        (folder / "information").write_text(
            f"Model: \t\t {model}\nIRQ:   \t\t 180\nGPU UUID: \t {uuid}\nVideo BIOS: \t 96.00.74.00.01\n"
            f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
        )
    base.mkdir(parents=True, exist_ok=True)
    (base / "version").write_text(version)
    return str(root)


def expected(text):
    return gpus.expected_from_env({gpus.EXPECTED_ENV: text})


def device(bus, name, index=0):
    return {"index": index, "name": name, "uuid": None, "pci_bus_id": bus, "driver": None, "cuda": None}


def test_no_plan_means_no_check():
    assert gpus.expected_from_env({}) is None
    assert gpus.mismatch(None, [device(*H100[:2])]) is None


def test_the_plan_is_read_and_its_bus_ids_normalized():
    plan = expected('{"count":2,"pci_bus_ids":["00000000:5E:00.0","0000:3b:00.0"]}')
    assert plan == gpus.ExpectedGpus(2, ["0000:3b:00.0", "0000:5e:00.0"])
    assert expected('{"count":1,"pci_bus_ids":null}') == gpus.ExpectedGpus(1, None)
    assert expected('{"count":0,"pci_bus_ids":[]}') == gpus.ExpectedGpus(0, [])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1", "an object with exactly the keys count and pci_bus_ids"),
        ("{count: 1}", "it is not JSON"),
        ('{"count":1}', r"exactly the keys count and pci_bus_ids \(got \['count'\]\)"),
        ('{"count":-1,"pci_bus_ids":null}', r"count must be a whole number >= 0 \(got -1\)"),
        ('{"count":true,"pci_bus_ids":null}', "count must be a whole number"),
        ('{"count":1,"pci_bus_ids":"0000:3b:00.0"}', "pci_bus_ids must be a list or null"),
        ('{"count":1,"pci_bus_ids":["3b:00"]}', "'3b:00' is not a PCI address like 0000:3b:00.0"),
        ('{"count":2,"pci_bus_ids":["0000:3b:00.0"]}', r"count is 2 but 1 bus id\(s\) are listed"),
        ('{"count":2,"pci_bus_ids":["0000:3b:00.0","0000:3B:00.0"]}', "a bus id is listed twice"),
    ],
)
def test_a_malformed_plan_says_what_is_wrong_and_what_is_expected(text, reason):
    with pytest.raises(ValueError, match=reason) as caught:
        expected(text)
    message = str(caught.value)
    assert message.startswith(f"PLATBENCH_EXPECTED_GPUS={text!r} is not valid: ")
    assert '{"count": N, "pci_bus_ids":' in message and "unset it to run by hand" in message


def test_a_cpu_plan_that_saw_a_gpu_names_it_and_the_visible_devices():
    message = gpus.mismatch(expected('{"count":0,"pci_bus_ids":[]}'), [device(*H100[:2])], {})
    assert message == (
        "the cell was planned without GPUs but the run saw 1: NVIDIA H100 80GB HBM3 (0000:3b:00.0); "
        "CUDA_VISIBLE_DEVICES=unset"
    )


def test_a_gpu_plan_checks_the_count_and_the_bus_ids_when_given():
    bm = expected('{"count":1,"pci_bus_ids":["0000:3b:00.0"]}')
    environ = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert gpus.mismatch(bm, [device("0000:3B:00.0", H100[1])], environ) is None
    assert gpus.mismatch(bm, [device(*A100[:2])], environ) == (
        "the cell was planned with 1 GPU(s) (0000:3b:00.0) but the run saw 1: NVIDIA A100-SXM4-40GB (0000:5e:00.0); "
        "CUDA_VISIBLE_DEVICES='1', CUDA_DEVICE_ORDER=PCI_BUS_ID"
    )
    assert gpus.mismatch(bm, [], {"CUDA_VISIBLE_DEVICES": ""}) == (
        "the cell was planned with 1 GPU(s) (0000:3b:00.0) but the run saw none; CUDA_VISIBLE_DEVICES=''"
    )
    unreadable = gpus.mismatch(bm, [device(None, H100[1])], {})
    assert unreadable.startswith("the cell was planned with 1 GPU(s) (0000:3b:00.0) but the PCI bus id of a GPU")
    # In a guest the bus ids differ from the host's: the plan gives none, only the count counts.
    guest = expected('{"count":1,"pci_bus_ids":null}')
    assert gpus.mismatch(guest, [device("0000:06:00.0", H100[1])], {}) is None
    assert "planned with 1 GPU(s) but the run saw 2" in gpus.mismatch(guest, [device(*H100[:2])] * 2, {})


def test_the_driver_version_is_read_from_both_kernel_module_flavours(tmp_path):
    assert gpus.driver_version(driver_tree(tmp_path / "a", [])) == "550.54.15"
    assert gpus.driver_version(driver_tree(tmp_path / "b", [], OPEN_VERSION)) == "560.35.03"
    assert gpus.driver_version(str(tmp_path / "none")) is None


@pytest.mark.parametrize(
    ("visible", "buses"),
    [
        (None, [H100[0], A100[0]]),  # unset: every GPU the driver shows, in PCI order
        ("1", [A100[0]]),
        ("1,0", [A100[0], H100[0]]),
        ("", []),  # a CPU cell
        ("0,-1,1", [H100[0]]),  # CUDA stops at the first invalid entry
        ("7", []),
        ("GPU-2e1d0c9b", [A100[0]]),  # a UUID prefix
    ],
)
def test_the_stdlib_probe_narrows_the_driver_s_gpus_as_cuda_visible_devices_does(tmp_path, visible, buses):
    root = driver_tree(tmp_path, [A100, H100])
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    seen = gpus.stdlib_devices(environ, root)
    assert [entry["pci_bus_id"] for entry in seen] == buses
    assert [entry["index"] for entry in seen] == list(range(len(buses)))
    if seen:
        first = {H100[0]: H100, A100[0]: A100}[buses[0]]
        assert seen[0] == {
            "index": 0,
            "name": first[1],
            "uuid": first[2],
            "pci_bus_id": first[0],
            "driver": "550.54.15",
            "cuda": None,
        }


def test_a_uuid_the_driver_masks_is_unknown_not_a_wrong_value(tmp_path):
    root = driver_tree(tmp_path, [(H100[0], H100[1], "GPU-????????-????-????-????-????????????", 0)])
    assert gpus.driver_gpus(root) == {H100[0]: {"name": H100[1], "uuid": None, "minor": 0}}


def fake_torch(initialized, reserved, properties):
    """What the probe asks torch: is CUDA initialized, how much each device reserved, its properties."""
    cuda = SimpleNamespace(
        is_initialized=lambda: initialized,
        device_count=lambda: len(reserved),
        max_memory_reserved=lambda index: reserved[index],
        current_device=lambda: 0,
        get_device_properties=lambda index: properties[index],
    )
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(cuda="12.4"))


def cuda_properties(name, domain, bus, slot, uuid):
    return SimpleNamespace(name=name, pci_domain_id=domain, pci_bus_id=bus, pci_device_id=slot, uuid=uuid)


def test_torch_reports_the_devices_it_allocated_on_completed_from_the_driver(tmp_path):
    root = driver_tree(tmp_path, [H100, A100])
    properties = [
        cuda_properties(H100[1], 0, 0x3B, 0, H100[2][4:]),
        cuda_properties(A100[1], 0, 0x5E, 0, A100[2][4:]),
    ]
    seen = gpus.probe_devices({"torch": fake_torch(True, [0, 1 << 20], properties)}, {}, root)
    assert seen == [
        {"index": 1, "name": A100[1], "uuid": A100[2], "pci_bus_id": A100[0], "driver": "550.54.15", "cuda": "12.4"}
    ]


def test_torch_that_never_initialized_cuda_used_no_gpu_even_on_a_gpu_host(tmp_path):
    root = driver_tree(tmp_path, [H100])
    assert gpus.probe_devices({"torch": fake_torch(False, [0], [])}, {}, root) == []
    # Without any framework (a launcher), the GPUs it may hand on are its devices.
    assert [entry["pci_bus_id"] for entry in gpus.probe_devices({}, {}, root)] == [H100[0]]


def test_tensorflow_reports_its_gpus_with_the_bus_id_of_its_device_description():
    physical = [SimpleNamespace(name="/physical_device:GPU:0")]
    config = SimpleNamespace(
        list_physical_devices=lambda kind: physical,
        list_logical_devices=lambda kind: ["/device:GPU:0"],
        experimental=SimpleNamespace(get_device_details=lambda _: {"device_name": H100[1]}),
    )
    tf = SimpleNamespace(config=config, sysconfig=SimpleNamespace(get_build_info=lambda: {"cuda_version": "12.5.1"}))
    local = [
        SimpleNamespace(name="/device:CPU:0", device_type="CPU", physical_device_desc=""),
        SimpleNamespace(
            name="/device:GPU:0",
            device_type="GPU",
            physical_device_desc=f"device: 0, name: {H100[1]}, pci bus id: 0000:3B:00.0, compute capability: 9.0",
        ),
    ]
    assert gpus.tensorflow_devices(tf, lambda: local) == [
        {"index": 0, "name": H100[1], "uuid": None, "pci_bus_id": H100[0], "driver": None, "cuda": "12.5.1"}
    ]


@skips.needs_no_gpu()
def test_on_a_machine_without_gpus_the_probe_finds_none():
    assert gpus.probe_devices() == []
    assert gpus.stdlib_devices({}) == []


def test_expected_round_trips_the_plan_s_compact_json():
    text = json.dumps({"count": 1, "pci_bus_ids": [H100[0]]}, separators=(",", ":"))
    assert gpus.mismatch(expected(text), [device(*H100[:2])], {}) is None
