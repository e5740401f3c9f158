"""Node-side GPU scan: what the vendor libraries report on the machine this runs on.

This is the code that has to run *on* each node: locally for `raybridge`
itself, and inside a Ray task on every node for the Ray probe. Ray nodes
usually run an image that does not have raybridge installed, so the Ray probe
ships this module by value (cloudpickle) rather than by import. That is why it
uses only the standard library, imports the vendor libraries lazily, and
returns plain dicts; `raybridge.gpu.local` turns those into inventory records.

A missing driver, library or package is an ordinary answer here (no devices,
one short note saying why), never an exception. `amdsmi` in particular prints
to stdout and raises `KeyError` at import where ROCm is absent, so it is
imported and used with both file descriptors 1 and 2 silenced.

Deliberately not here: anything from raybridge (not even lazily), naming
nodes, deciding eligibility, counting free GPUs, and honouring
`CUDA_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` (NVML and amdsmi see every GPU
of the machine, which is what an inventory wants).
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sys
from types import ModuleType
from typing import Any, Callable, Iterator, Optional, Sequence, TypedDict

_MIB = 1 << 20


class DeviceScan(TypedDict):
    index: int
    model: Optional[str]
    memoryMiB: Optional[int]


class VendorScan(TypedDict):
    vendor: str
    devices: list[DeviceScan]
    notes: list[str]


class NodeScan(TypedDict):
    hostname: str
    scans: list[VendorScan]


ModuleLoader = Callable[[], ModuleType]
VendorProbe = Callable[[], VendorScan]


# --- keeping library noise off our stdout ----------------------------------------------


def _flush_all_output() -> None:
    """Flush Python's streams and C stdio's buffers, so nothing crosses a redirect."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


@contextlib.contextmanager
def quiet_output() -> Iterator[None]:
    """Discard everything written to stdout and stderr inside, from Python or from C.

    File descriptors 1 and 2 point at /dev/null until exit (restored even on
    error), and `sys.stdout` / `sys.stderr` are swapped too, for when they are
    not the real descriptors (a test's capture, a notebook).
    """
    _flush_all_output()
    saved: list[tuple[int, int]] = []
    devnull: Optional[int] = None
    try:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            devnull = None
        if devnull is not None:
            for fd in (1, 2):
                try:
                    copy = os.dup(fd)
                except OSError:  # closed: nothing of ours to protect
                    continue
                saved.append((fd, copy))
                os.dup2(devnull, fd)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        _flush_all_output()
        for fd, copy in reversed(saved):
            os.dup2(copy, fd)
            os.close(copy)
        if devnull is not None:
            os.close(devnull)


# --- loading the vendor libraries ----------------------------------------------------------


def import_pynvml() -> ModuleType:
    """`pynvml` (nvidia-ml-py), or the copy Ray vendors when this process already runs Ray."""
    try:
        import pynvml

        return pynvml
    except ImportError:
        if "ray" not in sys.modules:
            raise
    from ray._private.thirdparty import pynvml as vendored

    return vendored


def import_amdsmi() -> ModuleType:
    """The `amdsmi` package; call it inside `quiet_output()`, it prints when ROCm is absent."""
    import amdsmi

    return amdsmi


# --- helpers ------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text and text[0] else type(exc).__name__


def _text(value: Any) -> Optional[str]:
    """A device name as str: NVML returns bytes or str depending on its version."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    text = str(value).replace("\x00", "").strip()
    return text if text and text != "N/A" else None


def _attempt(call: Callable[[], Any], notes: list[str], what: str) -> Any:
    """`call()`, or None with a note when it raises (one bad query must not lose the device)."""
    try:
        return call()
    except Exception as exc:
        notes.append(f"{what}: {_describe(exc)}")
        return None


def _is_instance(exc: BaseException, module: ModuleType, name: str) -> bool:
    cls = getattr(module, name, None)
    return isinstance(cls, type) and isinstance(exc, cls)


def _to_mib(value: Any, unit_bytes: int) -> Optional[int]:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number * unit_bytes // _MIB if number > 0 else None


# --- NVIDIA -----------------------------------------------------------------------------


def _nvml_init_note(nvml: ModuleType, exc: BaseException) -> str:
    if _is_instance(exc, nvml, "NVMLError_LibraryNotFound"):
        return "nvidia: NVML library not found"
    if _is_instance(exc, nvml, "NVMLError_DriverNotLoaded"):
        return "nvidia: NVIDIA driver not loaded"
    if _is_instance(exc, nvml, "NVMLError_NoPermission"):
        return "nvidia: no permission to use NVML"
    return f"nvidia: nvmlInit failed: {_describe(exc)}"


def _nvidia_device(nvml: ModuleType, index: int, notes: list[str]) -> DeviceScan:
    what = f"nvidia: GPU {index}"
    handle = _attempt(lambda: nvml.nvmlDeviceGetHandleByIndex(index), notes, what)
    if handle is None:
        return {"index": index, "model": None, "memoryMiB": None}
    name = _attempt(lambda: nvml.nvmlDeviceGetName(handle), notes, f"{what} name")
    memory = _attempt(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total, notes, f"{what} memory")
    return {"index": index, "model": _text(name), "memoryMiB": _to_mib(memory, 1)}


def probe_nvidia(load: ModuleLoader = import_pynvml) -> VendorScan:
    """NVIDIA GPUs through NVML; no devices and a note when NVML is unusable."""
    devices: list[DeviceScan] = []
    notes: list[str] = []
    try:
        nvml = load()
    except ImportError:
        return {"vendor": "nvidia", "devices": [], "notes": ["nvidia: pynvml not installed"]}
    except Exception as exc:
        return {"vendor": "nvidia", "devices": [], "notes": [f"nvidia: pynvml unusable: {_describe(exc)}"]}
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return {"vendor": "nvidia", "devices": [], "notes": [_nvml_init_note(nvml, exc)]}
    try:
        count = int(nvml.nvmlDeviceGetCount())
        devices = [_nvidia_device(nvml, i, notes) for i in range(count)]
    except Exception as exc:
        notes.append(f"nvidia: listing GPUs failed: {_describe(exc)}")
    finally:
        _attempt(nvml.nvmlShutdown, notes, "nvidia: nvmlShutdown")
    return {"vendor": "nvidia", "devices": devices, "notes": notes}


# --- AMD ----------------------------------------------------------------------------------


def _amd_import_note(exc: BaseException) -> str:
    if isinstance(exc, ModuleNotFoundError):
        return "amd: amdsmi not installed"
    if isinstance(exc, (KeyError, OSError)):  # KeyError 'libamd_smi.so' / 'ROCM_PATH'
        return "amd: amdsmi unavailable (ROCm not installed)"
    return f"amd: amdsmi unavailable ({_describe(exc)})"


def _amd_memory_mib(amd: ModuleType, handle: Any, notes: list[str], what: str) -> Optional[int]:
    """VRAM in MiB: the exact byte total, else the MB figure from the VRAM info."""
    try:
        return _to_mib(amd.amdsmi_get_gpu_memory_total(handle, amd.AmdSmiMemoryType.VRAM), 1)
    except Exception:
        pass
    info = _attempt(lambda: amd.amdsmi_get_gpu_vram_info(handle), notes, f"{what} memory")
    return _to_mib((info or {}).get("vram_size"), _MIB)


def _amd_device(amd: ModuleType, index: int, handle: Any, notes: list[str]) -> DeviceScan:
    what = f"amd: GPU {index}"
    asic = _attempt(lambda: amd.amdsmi_get_gpu_asic_info(handle), notes, f"{what} name")
    model = _text((asic or {}).get("market_name"))
    return {"index": index, "model": model, "memoryMiB": _amd_memory_mib(amd, handle, notes, what)}


def _amd_scan(load: ModuleLoader) -> VendorScan:
    devices: list[DeviceScan] = []
    notes: list[str] = []
    try:
        amd = load()
    except Exception as exc:
        return {"vendor": "amd", "devices": [], "notes": [_amd_import_note(exc)]}
    try:
        amd.amdsmi_init()
    except Exception as exc:
        return {"vendor": "amd", "devices": [], "notes": [f"amd: amdsmi_init failed: {_describe(exc)}"]}
    try:
        handles = list(amd.amdsmi_get_processor_handles())
        devices = [_amd_device(amd, i, h, notes) for i, h in enumerate(handles)]
    except Exception as exc:
        notes.append(f"amd: listing GPUs failed: {_describe(exc)}")
    finally:
        _attempt(amd.amdsmi_shut_down, notes, "amd: amdsmi_shut_down")
    return {"vendor": "amd", "devices": devices, "notes": notes}


def probe_amd(load: ModuleLoader = import_amdsmi) -> VendorScan:
    """AMD GPUs through amdsmi, with all of its output discarded; never raises."""
    try:
        with quiet_output():
            return _amd_scan(load)
    except Exception as exc:  # e.g. the descriptors could not be redirected
        return {"vendor": "amd", "devices": [], "notes": [f"amd: probe failed: {_describe(exc)}"]}


# --- the node ---------------------------------------------------------------------------

DEFAULT_PROBES: tuple[VendorProbe, ...] = (probe_amd, probe_nvidia)


def scan_node(probes: Sequence[VendorProbe] = DEFAULT_PROBES) -> NodeScan:
    """This machine's hostname and what each vendor probe found."""
    return {"hostname": socket.gethostname(), "scans": [probe() for probe in probes]}
