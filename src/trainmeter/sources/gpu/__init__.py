"""GPU rows from outside the training process: NVML (+GPM), a fake for tests, GPU selection."""

from .backend import Backend, NvmlError, PynvmlBackend
from .fake import FakeBackend, load_fixture
from .sampler import GpuSampler, decode_throttle

__all__ = [
    "Backend",
    "FakeBackend",
    "GpuSampler",
    "NvmlError",
    "PynvmlBackend",
    "decode_throttle",
    "load_fixture",
]
