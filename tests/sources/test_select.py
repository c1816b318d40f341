"""Which GPUs a run uses: --gpus, CUDA_VISIBLE_DEVICES (CUDA's rules), the process tree, all."""

from __future__ import annotations

import pytest

from trainmeter.sources.gpu.select import Device, parse_gpus_flag, select

DEVS = [
    Device(0, "GPU-aaaa1111-0000", (), "NVIDIA H100 80GB HBM3"),
    Device(1, "GPU-bbbb2222-0000", ("MIG-cccc3333-1", "MIG-dddd4444-2"), "NVIDIA H100 80GB HBM3"),
    Device(2, "GPU-bbbb9999-0000", (), "NVIDIA H100 80GB HBM3"),
]


def test_flag_wins_over_env_and_takes_uuids():
    s = select(DEVS, "2,GPU-aaaa", {"CUDA_VISIBLE_DEVICES": "1"})
    assert (s.indices, s.selected_by) == ([2, 0], "flag")


def test_flag_reports_entries_it_cannot_find():
    s = select(DEVS, "0,7")
    assert s.indices == [0] and s.unmatched == ["7"] and "7" in s.note


def test_env_indices_and_uuid_prefixes():
    assert select(DEVS, None, {"CUDA_VISIBLE_DEVICES": "2,0"}).indices == [2, 0]
    s = select(DEVS, None, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb9"})
    assert (s.indices, s.selected_by) == ([2], "env")


def test_env_ambiguous_prefix_and_invalid_entry_end_the_list():
    # "GPU-bbbb" matches two GPUs: CUDA treats it as invalid and ignores the rest of the list.
    s = select(DEVS, None, {"CUDA_VISIBLE_DEVICES": "0,GPU-bbbb,2"})
    assert s.indices == [0] and "GPU-bbbb" in s.note


def test_env_mig_selects_the_parent_gpu():
    assert select(DEVS, None, {"CUDA_VISIBLE_DEVICES": "MIG-dddd"}).indices == [1]


def test_env_empty_hides_every_gpu():
    s = select(DEVS, None, {"CUDA_VISIBLE_DEVICES": ""})
    assert (s.indices, s.selected_by) == ([], "env") and "no GPU" in s.note


def test_env_index_order_warning_only_on_mixed_models():
    mixed = [DEVS[0], Device(1, "GPU-x", (), "NVIDIA A100-SXM4-80GB")]
    assert "CUDA_DEVICE_ORDER" in select(mixed, None, {"CUDA_VISIBLE_DEVICES": "1"}).note
    ordered = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert select(mixed, None, ordered).note == ""
    assert select(DEVS, None, {"CUDA_VISIBLE_DEVICES": "1"}).note == ""


def test_process_tree_then_all():
    gpu_pids = {0: [10], 1: [20, 21], 2: []}
    s = select(DEVS, None, {}, tree_pids=[21, 99], gpu_pids=gpu_pids)
    assert (s.indices, s.selected_by) == ([1], "process")
    s = select(DEVS, None, {}, tree_pids=[99], gpu_pids=gpu_pids)
    assert (s.indices, s.selected_by) == ([0, 1, 2], "all")


@pytest.mark.parametrize("bad", ["", " , ", "0,gpu1", "cuda:0"])
def test_parse_flag_rejects_with_a_reason(bad):
    with pytest.raises(ValueError, match="--gpus"):
        parse_gpus_flag(bad)


def test_sampler_follows_the_process_once_it_appears(make_sampler):
    # h100 fixture: pid 4242 shows on GPU 0 from NVML's second process list on.
    sampler, _, clock = make_sampler("h100_sxm_gpm", tree_pids=lambda: [4242, 4243])
    first = sampler.sample()
    assert first["selected_by"] == "all" and first["selected"] == [0, 1]
    clock.t += 1
    second = sampler.sample()
    assert second["selected_by"] == "process" and [r["index"] for r in second["gpus"]] == [0]


def test_sampler_uses_cuda_visible_devices(make_sampler):
    sampler, _, _ = make_sampler(
        "h100_sxm_gpm", env={"CUDA_VISIBLE_DEVICES": "GPU-a1b2c3d4"}, tree_pids=lambda: [4242]
    )
    d = sampler.sample()
    assert d["selected_by"] == "env" and [r["index"] for r in d["gpus"]] == [1]


def test_a_bad_flag_selects_nothing_and_says_why():
    s = select(DEVS, "cuda:0")
    assert (s.indices, s.selected_by) == ([], "flag") and "--gpus" in s.note
