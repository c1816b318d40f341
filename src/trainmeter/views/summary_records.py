"""`tm summary`'s record groups: series, alerts, warnings, facts with provenance, the host and
node, and every absent number with its reason.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import mantissa, percent, si, si_unit
from .memory_text import alert_numbers
from .summary_blocks import _grid, _text
from .terminal import alerts, loss_text, number, plural


def series(snap: dict[str, Any]) -> list[Any]:
    entries = get_dict(snap, "series") or {}
    rows = []
    for name, entry in sorted(entries.items()):
        if not isinstance(entry, dict):
            continue
        key = f" (from {entry['key']})" if entry.get("mapped_by_name") and entry.get("key") else ""
        step = f"step {entry['step']}" if entry.get("step") is not None else ""
        via = entry.get("via") or entry.get("source") or ""
        rows.append([f"{name}{key}", _text((loss_text(entry.get("value")), "bold")),
                     plural(int(entry.get("count") or 0), "value"), step, via])
    return [_grid(rows)] if rows else []


def alert_lines(snap: dict[str, Any]) -> list[Any]:
    rows = [[_text(("! " + str(a.get("kind")), "bold red")),
             str(a.get("message") or "") + alert_numbers(a)] for a in alerts(snap)]
    return [_grid(rows, whole=1)] if rows else []


def warnings(snap: dict[str, Any]) -> list[Any]:
    return [_text(("· ", "yellow"), str(w)) for w in snap.get("warnings") or []]


def facts(snap: dict[str, Any]) -> list[Any]:
    entries = get_dict(snap, "facts") or {}
    rows = []
    for key, fact in sorted(entries.items()):
        if not isinstance(fact, dict):
            continue
        value = fact.get("value")
        note = fact.get("note") or ""
        if number(value) is not None:
            shown = si(value)
        elif isinstance(value, dict) and value.get("name"):
            shown = str(value["name"])  # a device: {name, index, uuid}
        elif isinstance(value, (list, dict)) and note:
            shown = "(see note)"  # a structure (the models trained): its note says it in words
        else:
            shown = str(value)
        if len(shown) > 24:  # a reason, not a value: it goes where text may wrap
            # said once: an agent's reason is often its note too
            said = note.startswith(shown.rstrip(". "))
            shown, note = "(see note)", note if said else f"{shown}. {note}".strip(". ")
        conflicts = fact.get("conflicts") or []
        if conflicts:
            note += f" (also said: {len(conflicts)} other value{'s' if len(conflicts) > 1 else ''})"
        rows.append([key, _text((shown, "bold")), fact.get("source") or "", _text((note, "dim"))])
    return [_grid(rows)] if rows else []


def node(snap: dict[str, Any]) -> list[Any]:
    out = []
    host = get_dict(snap, "host")
    if host:
        bits = []
        if number(host.get("procs")) is not None:
            bits.append(plural(int(host["procs"]), "process"))
        if number(host.get("cpu_cores")) is not None:
            bits.append(f"{mantissa(host['cpu_cores'])} cores busy")
        if number(host.get("rss_b")) is not None:
            bits.append(f"{si_unit(host['rss_b'], 'B')} resident")
        out.append(_text(("training tree: ", "dim"), ", ".join(bits)))
    n = get_dict(snap, "node")
    if n:
        bits = []
        cpu = get_dict(n, "cpu") or {}
        if number(cpu.get("idle")) is not None:
            bits.append(f"CPU {percent(1 - cpu['idle'])} busy of {n.get('cores', '?')} cores")
        mem = get_dict(n, "memory") or {}
        if number(mem.get("total_b")) and number(mem.get("available_b")) is not None:
            bits.append(f"memory {si_unit(mem['total_b'] - mem['available_b'], 'B')} of {si_unit(mem['total_b'], 'B')}")
        disk = get_dict(n, "disk") or {}
        if number(disk.get("free_b")) is not None:
            bits.append(f"disk {si_unit(disk['free_b'], 'B')} free")
        if isinstance(n.get("load"), list) and n["load"]:
            bits.append("load " + " ".join(mantissa(x) for x in n["load"] if number(x) is not None))
        out.append(_text(("node: ", "dim"), ", ".join(bits)))
    return out


def absent(snap: dict[str, Any], width: int = 100) -> list[Any]:
    """Every absent number with its reason, whole: keys that share a reason are one group (the
    keys on a line, wrapped between keys), the reason wrapped beneath them, never cut short."""
    import textwrap

    reasons = get_dict(snap, "absent") or {}
    groups: dict[str, list[str]] = {}
    for name, why in sorted(reasons.items()):
        groups.setdefault(" ".join(str(why).split()), []).append(str(name))
    inner = max(width - 4, 30)  # the section indents its body two columns
    out: list[Any] = []
    for why, names in sorted(groups.items(), key=lambda g: g[1][0]):
        keys = textwrap.wrap(", ".join(names) + ":", inner, break_long_words=False,
                             break_on_hyphens=False)
        out.extend(_text((line, "bold")) for line in keys)
        out.extend(
            _text("  " + line)
            for line in textwrap.wrap(why, inner - 2, break_long_words=False,
                                      break_on_hyphens=False)
        )
    return out
