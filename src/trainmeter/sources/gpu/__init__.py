"""GPU rows from outside the training process: one door per device family (NVML with GPM, AMD
SMI), their fakes for tests, the one place that picks (`families.py`), GPU selection."""

from .backend import Backend, GpuError
from .fake import FakeBackend, load_fixture
from .families import backend_from_env
from .nvml import NvmlError, PynvmlBackend
from .sampler import GpuSampler, decode_throttle

__all__ = [
    "Backend",
    "FakeBackend",
    "GpuError",
    "GpuSampler",
    "NvmlError",
    "PynvmlBackend",
    "backend_from_env",
    "decode_throttle",
    "load_fixture",
]
