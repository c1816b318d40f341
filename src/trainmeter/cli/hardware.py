"""`tm hardware [--json] [--dump FILE] [--from FILE]`: the node, with a reason for every gap.

GPUs with their datasheet peak in one line (card, dense figure, the document it comes from;
once for GPUs that share a spec; `--sources` adds the full citation), or why there is none, a
measured peak if one was taken here, CPU, memory, disks, network interfaces and container
limits. Sizes in GiB, as everywhere in trainmeter.
`--dump` writes what the readers read (NVML answers in the fake-fixture format, and the /proc,
/sys and cgroup files) into one JSON file; `--from` shows such a dump on any machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..readable import si, si_unit


def _bytes(value: float | None) -> str:
    return si_unit(value, "B")  # memory and disk in binary units, '?' when not known


def _peaks(gpus: list[dict[str, Any]], sources: bool) -> list[str]:
    """One line per distinct spec, naming the GPUs that share it; citations only with --sources."""
    from trainmeter.hardware.citation import document, index_ranges

    groups: dict[str, tuple[dict[str, Any], str, list[int]]] = {}
    for gpu in gpus:
        spec = gpu.get("spec")
        if spec:
            key = json.dumps(spec, sort_keys=True, default=str)
            groups.setdefault(key, (spec, gpu.get("name") or "?", []))[2].append(gpu["index"])
    lines = []
    for spec, name, indexes in groups.values():
        peak = spec.get("bf16_dense_flops")
        clock = spec.get("tensor_clock_mhz")
        cited = spec.get("sources") or {}
        first = cited.get("bf16_dense_tflops") or next(iter(cited.values()), None)
        which = "GPU" if len(indexes) == 1 else "GPUs"
        figure = "no dense peak" if peak is None else f"dense BF16 peak {si_unit(peak, 'FLOP/s')}"
        lines.append(
            f"  peak    {which} {index_ranges(indexes)} ({name}): {figure}"
            + (f" at {clock} MHz tensor clock" if clock else " (tensor clock not published)")
            + (f", from {document(first)}" if first else "")
        )
        if sources:
            for field, line in cited.items():
                lines.append(f"          {field}: {line}")
    if groups and not sources:
        lines.append("          (tm hardware --sources prints each figure's full citation)")
    return lines


def render(inv: dict[str, Any], sources: bool = False) -> str:
    lines = [f"node {inv.get('hostname', '?')}"]
    cpu = inv.get("cpu", {})
    lines.append(f"  CPU     {cpu.get('model', 'model unknown')}, {cpu.get('cores', '?')} cores")
    mem = inv.get("memory", {})
    lines.append(
        f"  memory  {_bytes(mem.get('total_b'))} total, {_bytes(mem.get('available_b'))} available, "
        f"swap {_bytes(mem.get('swap_total_b'))}"
    )
    for disk in inv.get("disks", []):
        lines.append(
            f"  disk    {disk['mount']} ({disk.get('fs', '?')}): {_bytes(disk.get('free_b'))} free "
            f"of {_bytes(disk.get('total_b'))}"
        )
    for nic in inv.get("network", []):
        speed = f", {nic['speed_mb_s']} Mb/s" if "speed_mb_s" in nic else ""
        lines.append(f"  network {nic['name']} ({nic.get('state', '?')}{speed})")
    cont = inv.get("container", {})
    if cont.get("limits"):
        lim = cont["limits"]
        parts = []
        if "memory_b" in lim:
            parts.append(f"memory {_bytes(lim['memory_b'])}")
        if "cpu_cores" in lim:
            parts.append(f"{si(lim['cpu_cores'])} CPU cores")
        lines.append(f"  limits  {', '.join(parts)} ({lim.get('source', '')})")
    else:
        lines.append(f"  limits  none below the host: {cont.get('limits_missing', '?')}")
    if "unavailable" in inv:
        lines.append(f"  GPUs    none visible: {inv['unavailable']}")
        return "\n".join(lines)
    versions = inv.get("versions", {})
    lines.append(
        f"  GPUs    {len(inv.get('gpus', []))} (driver {versions.get('driver', '?')}, "
        f"CUDA {versions.get('cuda', '?')})"
    )
    for gpu in inv.get("gpus", []):
        lines.append(
            f"  [{gpu['index']}] {gpu.get('name') or '?'}  {gpu.get('uuid', '')}  "
            f"{_bytes(gpu.get('memory_total_b'))}, max SM {gpu.get('max_sm_clock_mhz', '?')} MHz"
        )
        if not gpu.get("spec"):
            lines.append(f"      no datasheet peak: {gpu.get('spec_missing', '?')}")
        if "measured_peak_flops" in gpu:
            lines.append(
                f"      measured peak {si_unit(gpu['measured_peak_flops'], 'FLOP/s')} "
                f"({gpu.get('measured_peak_source', '')})"
            )
        lines.append(
            "      GPM: yes (SM/tensor/DRAM active, OFU)"
            if gpu.get("gpm")
            else f"      GPM: no: {gpu.get('gpm_missing', '?')}"
        )
    lines += _peaks(inv.get("gpus", []), sources)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tm hardware", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the inventory as JSON")
    parser.add_argument(
        "--sources", action="store_true", help="the full citation of each datasheet figure"
    )
    parser.add_argument("--dump", metavar="FILE", help="also pack what was read into FILE")
    parser.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="show a dump made with --dump (on any machine)",
    )
    args = parser.parse_args(argv)
    from trainmeter.sources import inventory as inv_mod

    if args.from_file:
        try:
            from trainmeter.agent.inputs import load_json
            from trainmeter.sources.gpu.fake import MAX_FIXTURE_BYTES

            dumped = load_json(args.from_file, MAX_FIXTURE_BYTES, "dump")
            inv = inv_mod.inventory_from_dump(dumped)
        except (OSError, ValueError) as exc:
            print(f"tm hardware: cannot read {args.from_file}: {exc}", file=sys.stderr)
            return 2
    elif args.dump:
        inv, dump = inv_mod.make_dump()
        try:
            with open(args.dump, "w") as fh:
                json.dump(dump, fh, indent=1)
        except OSError as exc:
            print(f"tm hardware: cannot write {args.dump}: {exc}", file=sys.stderr)
            return 2
        print(f"tm hardware: wrote {args.dump} (attach it to a bug report)", file=sys.stderr)
    else:
        inv = inv_mod.inventory()
    print(json.dumps(inv, indent=1) if args.json else render(inv, args.sources))
    return 0
