"""Whether torch would find a GPU, asked without importing torch where no GPU driver is there.

Choosing ``auto`` settings (the model, ``grownup extract --jobs``) needs only this one answer,
but importing torch to get it costs a second or two and a few hundred MB in a process that may
never run a model: ``--jobs auto`` hands the pages to child processes, each with its own model.
A machine without a GPU driver (no NVIDIA or ROCm device node, no ``nvidia-smi``) cannot have
CUDA, so torch is only asked where one is found, or where torch is already imported.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["check_device", "cuda_available", "gpu_driver_present"]

# device nodes and files a GPU driver creates: NVIDIA (Linux), AMD ROCm, WSL's GPU bridge
DRIVER_PATHS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd",
                "/dev/dxg")


def gpu_driver_present() -> bool:
    """True where a GPU driver may be installed (always on systems this cannot check)."""
    if sys.platform != "linux":
        return sys.platform != "darwin"  # macOS has no CUDA; elsewhere, ask torch
    return (any(os.path.exists(path) for path in DRIVER_PATHS)
            or shutil.which("nvidia-smi") is not None)


def cuda_available() -> bool:
    """``torch.cuda.is_available()``, importing torch only where a GPU driver is present."""
    if "torch" not in sys.modules and not gpu_driver_present():
        return False
    try:
        import torch
    except ImportError:  # a plain install serves on the CPU without torch
        return False
    return bool(torch.cuda.is_available())


def check_device(device: str | None) -> None:
    """``DeviceError`` (one line naming it) unless ``device`` is there on this machine:
    ``None``, ``"auto"`` and ``"cpu"`` always are; a GPU device needs torch and the GPU."""
    from scrapy_grownup.errors import DeviceError

    if device in (None, "auto", "cpu"):
        return
    name = str(device)
    kind, _, index = name.partition(":")
    if kind not in ("cuda", "mps", "xpu") or (index and not index.isdigit()):
        raise DeviceError(f"unknown device {name!r} (expected auto, cpu, cuda, cuda:N, mps "
                          "or xpu)")
    if kind == "cuda" and "torch" not in sys.modules and not gpu_driver_present():
        raise DeviceError(f"device {name!r} is not available: no CUDA GPU on this machine")
    try:
        import torch
    except ImportError:
        raise DeviceError(f"device {name!r} needs torch: pip install "
                          "'scrapy-grownup[gpu]'") from None
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise DeviceError(f"device {name!r} is not available: no CUDA GPU on this machine")
        if index and int(index) >= count:
            raise DeviceError(f"device {name!r} is not available: this machine has {count} "
                              f"CUDA GPU{'s' if count > 1 else ''} (cuda:0 to cuda:{count - 1})")
    elif kind == "mps" and not torch.backends.mps.is_available():
        raise DeviceError(f"device {name!r} is not available on this machine")
    elif kind == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise DeviceError(f"device {name!r} is not available on this machine")
