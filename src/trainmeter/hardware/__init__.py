"""Device specs with their cited sources: `lookup(nvml_name)` and `all_specs()`."""

from __future__ import annotations

from .specs import DeviceSpec, all_specs, lookup

__all__ = ["DeviceSpec", "all_specs", "lookup"]
