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

__all__ = ["cuda_available", "gpu_driver_present"]

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
