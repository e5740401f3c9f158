"""Local GPU discovery over fake pynvml/amdsmi modules, and over the real ones on this machine."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

from raybridge.core.consts import VENDORS
from raybridge.core.inventory import GpuDevice, NodeGpus
from raybridge.gpu import discover_local, local_inventory, probe_amd, probe_nvidia, quiet_output, records_from_scan
from raybridge.gpu.scan import import_amdsmi

MIB = 1 << 20


# --- fake pynvml -----------------------------------------------------------------------------


class FakeNVMLError(Exception):
    pass


class FakeLibraryNotFound(FakeNVMLError):
    pass


class FakeDriverNotLoaded(FakeNVMLError):
    pass


@dataclass
class NvmlCalls:
    init: int = 0
    shutdown: int = 0


def fake_pynvml(
    names: list[Any],
    memory_mib: int = 81559,
    init_error: Optional[Exception] = None,
    broken: frozenset[int] = frozenset(),
) -> types.ModuleType:
    """A pynvml stand-in: `names` are what nvmlDeviceGetName returns (bytes or str)."""
    module = types.ModuleType("pynvml")
    calls = NvmlCalls()
    module.calls = calls  # type: ignore[attr-defined]
    module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    module.NVMLError_LibraryNotFound = FakeLibraryNotFound  # type: ignore[attr-defined]
    module.NVMLError_DriverNotLoaded = FakeDriverNotLoaded  # type: ignore[attr-defined]

    def nvmlInit() -> None:
        if init_error is not None:
            raise init_error
        calls.init += 1

    def nvmlShutdown() -> None:
        calls.shutdown += 1

    def nvmlDeviceGetHandleByIndex(index: int) -> int:
        if index in broken:
            raise FakeNVMLError("GPU is lost")
        return 100 + index

    module.nvmlInit = nvmlInit  # type: ignore[attr-defined]
    module.nvmlShutdown = nvmlShutdown  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: len(names)  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByIndex  # type: ignore[attr-defined]
    module.nvmlDeviceGetName = lambda handle: names[handle - 100]  # type: ignore[attr-defined]
    module.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(  # type: ignore[attr-defined]
        total=memory_mib * MIB, free=memory_mib * MIB, used=0
    )
    return module


def nvidia_only(module: types.ModuleType) -> list:
    return [lambda: probe_nvidia(lambda: module)]


# --- fake amdsmi -----------------------------------------------------------------------------


@dataclass
class AmdDevice:
    market_name: str = "AMD Instinct MI300X"
    total_bytes: Optional[int] = 196592 * MIB  # None: amdsmi_get_gpu_memory_total fails
    vram_size_mb: int = 196592


@dataclass
class AmdCalls:
    init: int = 0
    shutdown: int = 0
    devices: list[AmdDevice] = field(default_factory=list)


def fake_amdsmi(devices: list[AmdDevice], init_error: Optional[Exception] = None) -> types.ModuleType:
    module = types.ModuleType("amdsmi")
    calls = AmdCalls(devices=devices)
    module.calls = calls  # type: ignore[attr-defined]
    module.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0, VIS_VRAM=1, GTT=2)  # type: ignore[attr-defined]

    def amdsmi_init(flag: int = 2) -> None:
        if init_error is not None:
            raise init_error
        calls.init += 1

    def amdsmi_shut_down() -> None:
        calls.shutdown += 1

    def amdsmi_get_gpu_memory_total(handle: int, mem_type: int) -> int:
        assert mem_type == module.AmdSmiMemoryType.VRAM
        total = devices[handle].total_bytes
        if total is None:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return total

    module.amdsmi_init = amdsmi_init  # type: ignore[attr-defined]
    module.amdsmi_shut_down = amdsmi_shut_down  # type: ignore[attr-defined]
    module.amdsmi_get_processor_handles = lambda: list(range(len(devices)))  # type: ignore[attr-defined]
    module.amdsmi_get_gpu_asic_info = lambda h: {"market_name": devices[h].market_name}  # type: ignore[attr-defined]
    module.amdsmi_get_gpu_vram_info = lambda h: {"vram_size": devices[h].vram_size_mb}  # type: ignore[attr-defined]
    module.amdsmi_get_gpu_memory_total = amdsmi_get_gpu_memory_total  # type: ignore[attr-defined]
    return module


def amd_only(module: types.ModuleType) -> list:
    return [lambda: probe_amd(lambda: module)]


# --- NVIDIA --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names, model",
    [
        pytest.param([], None, id="no-gpus"),
        pytest.param([b"NVIDIA H100 80GB HBM3"], "NVIDIA H100 80GB HBM3", id="one-bytes"),
        pytest.param(["NVIDIA H100 80GB HBM3"], "NVIDIA H100 80GB HBM3", id="one-str"),
        pytest.param([b"NVIDIA A100-SXM4-80GB"] * 8, "NVIDIA A100-SXM4-80GB", id="eight-bytes"),
        pytest.param(["NVIDIA A100-SXM4-80GB"] * 8, "NVIDIA A100-SXM4-80GB", id="eight-str"),
    ],
)
def test_nvidia_counts_models_and_memory(names: list[Any], model: Optional[str]) -> None:
    nvml = fake_pynvml(names)
    found = discover_local("gpu-node", nvidia_only(nvml))

    assert found.node == "gpu-node"
    assert found.notes == ()
    assert (nvml.calls.init, nvml.calls.shutdown) == (1, 1)
    (record,) = found.records
    if not names:
        assert record == NodeGpus(name="gpu-node", vendor=None, gpus=0)
        return
    assert (record.vendor, record.gpus, record.model, record.memory_mib) == ("nvidia", len(names), model, 81559)
    assert record.resource_key == "nvidia.com/gpu"
    assert record.devices == tuple(GpuDevice(i, model, 81559) for i in range(len(names)))


@pytest.mark.parametrize(
    "error, note",
    [
        pytest.param(FakeLibraryNotFound("Not Found"), "nvidia: NVML library not found", id="no-lib"),
        pytest.param(FakeDriverNotLoaded("Driver Not Loaded"), "nvidia: NVIDIA driver not loaded", id="no-driver"),
        pytest.param(FakeNVMLError("Unknown"), "nvidia: nvmlInit failed: FakeNVMLError: Unknown", id="other"),
    ],
)
def test_nvml_init_failure_is_no_gpus_with_a_note(error: Exception, note: str) -> None:
    nvml = fake_pynvml([b"NVIDIA H100"], init_error=error)
    found = discover_local("n", nvidia_only(nvml))

    assert found.records == (NodeGpus(name="n", vendor=None, gpus=0),)
    assert found.notes == (note,)
    assert nvml.calls.shutdown == 0  # never shut down what did not start


def test_pynvml_missing_is_a_note() -> None:
    def missing() -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'pynvml'")

    assert probe_nvidia(missing) == {"vendor": "nvidia", "devices": [], "notes": ["nvidia: pynvml not installed"]}


def test_one_lost_nvidia_gpu_keeps_the_others() -> None:
    nvml = fake_pynvml(["NVIDIA L40S"] * 4, memory_mib=46068, broken=frozenset({2}))
    found = discover_local("n", nvidia_only(nvml))

    (record,) = found.records
    assert record.gpus == 4
    assert record.model == "NVIDIA L40S"
    assert record.devices[2] == GpuDevice(2, None, None)
    assert found.notes == ("nvidia: GPU 2: FakeNVMLError: GPU is lost",)
    assert nvml.calls.shutdown == 1


# --- AMD -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "devices, model, memory_mib",
    [
        pytest.param([AmdDevice()] * 8, "AMD Instinct MI300X", 196592, id="eight-mi300x"),
        pytest.param([AmdDevice(total_bytes=None)] * 2, "AMD Instinct MI300X", 196592, id="vram-info-fallback"),
        pytest.param([AmdDevice(market_name="N/A")], None, 196592, id="no-market-name"),
        pytest.param([], None, None, id="no-gpus"),
    ],
)
def test_amd_devices(devices: list[AmdDevice], model: Optional[str], memory_mib: Optional[int]) -> None:
    amd = fake_amdsmi(devices)
    found = discover_local("mi-node", amd_only(amd))

    assert (amd.calls.init, amd.calls.shutdown) == (1, 1)
    assert found.notes == ()
    (record,) = found.records
    if not devices:
        assert record.vendor is None and record.gpus == 0
        return
    assert (record.vendor, record.gpus, record.model, record.memory_mib) == ("amd", len(devices), model, memory_mib)
    assert record.resource_key == "amd.com/gpu"
    assert [d.index for d in record.devices] == list(range(len(devices)))


def test_amdsmi_init_failure_is_a_note() -> None:
    amd = fake_amdsmi([AmdDevice()], init_error=RuntimeError("AMDSMI_STATUS_INIT_ERROR"))
    found = discover_local("n", amd_only(amd))

    assert found.records == (NodeGpus(name="n", vendor=None, gpus=0),)
    assert found.notes == ("amd: amdsmi_init failed: RuntimeError: AMDSMI_STATUS_INIT_ERROR",)
    assert amd.calls.shutdown == 0


NOISY_AMDSMI = """
import ctypes, os, sys
print("/opt/rocm/lib/libamd_smi.so: cannot open shared object file")
print("Unable to find libamd_smi.so library try installing amd-smi-lib", file=sys.stderr)
os.write(1, b"raw fd 1 noise\\n")
os.write(2, b"raw fd 2 noise\\n")
ctypes.CDLL(None).printf(b"buffered C stdio noise\\n")
raise KeyError({key!r})
"""


@pytest.mark.parametrize("key", ["libamd_smi.so", "ROCM_PATH"])
def test_amdsmi_import_that_prints_and_raises_keyerror(
    key: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "amdsmi"
    package.mkdir()
    (package / "__init__.py").write_text(NOISY_AMDSMI.format(key=key))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)

    found = discover_local("n", [probe_amd])  # the real loader, importing the noisy package

    assert found.records == (NodeGpus(name="n", vendor=None, gpus=0),)
    assert found.notes == ("amd: amdsmi unavailable (ROCm not installed)",)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    print("still ours")
    assert capfd.readouterr().out == "still ours\n"


def test_amdsmi_missing_is_a_note() -> None:
    def missing() -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'amdsmi'")

    assert probe_amd(missing)["notes"] == ["amd: amdsmi not installed"]


# --- both, records, output ---------------------------------------------------------------------


def test_both_vendors_on_one_node() -> None:
    nvml = fake_pynvml([b"NVIDIA H100 80GB HBM3"] * 2)
    amd = fake_amdsmi([AmdDevice()] * 4)
    inventory = local_inventory("mixed", amd_only(amd) + nvidia_only(nvml))

    assert inventory.source == "local"
    assert [(n.name, n.vendor, n.gpus) for n in inventory.nodes] == [("mixed", "amd", 4), ("mixed", "nvidia", 2)]
    assert inventory.vendors() == {"amd": 4, "nvidia": 2}
    assert inventory.notes == ()
    as_dict = inventory.to_dict()
    assert as_dict["nodes"][1]["devices"][0] == {"index": 0, "model": "NVIDIA H100 80GB HBM3", "memoryMiB": 81559}


def test_one_vendor_missing_still_reports_the_other_with_the_note() -> None:
    nvml = fake_pynvml(["NVIDIA H200"] * 8, memory_mib=143771)
    amd = fake_amdsmi([], init_error=RuntimeError("no amdgpu"))
    found = discover_local("h200", amd_only(amd) + nvidia_only(nvml))

    assert [(r.vendor, r.gpus, r.memory_mib) for r in found.records] == [("nvidia", 8, 143771)]
    assert found.notes == ("amd: amdsmi_init failed: RuntimeError: no amdgpu",)


def test_mixed_models_and_memory_on_one_node() -> None:
    scan = {
        "hostname": "odd",
        "scans": [
            {
                "vendor": "nvidia",
                "devices": [
                    {"index": 0, "model": "NVIDIA A100-SXM4-80GB", "memoryMiB": 81920},
                    {"index": 1, "model": "NVIDIA A100-SXM4-40GB", "memoryMiB": 40960},
                    {"index": 2, "model": "NVIDIA A100-SXM4-80GB", "memoryMiB": 81920},
                ],
                "notes": [],
            }
        ],
    }
    (record,) = records_from_scan(scan).records
    assert record.name == "odd"
    assert record.model == "NVIDIA A100-SXM4-80GB / NVIDIA A100-SXM4-40GB"
    assert record.memory_mib == 40960  # the smallest, so a worker fits on any of them


def test_default_probes_name_known_vendors() -> None:
    from raybridge.gpu.scan import scan_node

    scans = scan_node()["scans"]
    assert {s["vendor"] for s in scans} == set(VENDORS)


def test_quiet_output_restores_descriptors_on_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError):
        with quiet_output():
            print("hidden")
            raise ValueError("boom")
    print("shown")
    assert capfd.readouterr().out == "shown\n"


# --- the real libraries on this machine ----------------------------------------------------------


def test_real_libraries_answer_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    inventory = local_inventory()

    out, _ = capfd.readouterr()
    assert out == ""
    assert inventory.source == "local"
    assert inventory.nodes
    if all(n.gpus == 0 for n in inventory.nodes):  # the usual case: no driver, no ROCm here
        assert inventory.nodes == (NodeGpus(name=inventory.nodes[0].name, vendor=None, gpus=0),)
        assert {note.split(":")[0] for note in inventory.notes} == set(VENDORS)
    else:
        assert all(n.vendor in VENDORS and n.gpus == len(n.devices) for n in inventory.nodes)


def test_import_loads_no_heavy_library() -> None:
    code = textwrap.dedent(
        """
        import sys
        import raybridge.gpu
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("ray", "pynvml", "amdsmi"))
        print(heavy)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_real_amdsmi_import_is_guarded(capfd: pytest.CaptureFixture[str]) -> None:
    """Whatever the installed amdsmi does here, probing it prints nothing and raises nothing."""
    scan = probe_amd(import_amdsmi)
    assert scan["vendor"] == "amd"
    assert capfd.readouterr().out == ""
