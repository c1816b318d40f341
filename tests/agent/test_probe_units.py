"""The probes' pure parts, in this process: token finding, padding, parameter counting, config
lookup through wrappers, the device fact, and warn-once."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from trainmeter.agent import boot  # noqa: E402
from trainmeter.agent.probes import device, flops, guard, model, phases, steps, tokens  # noqa: E402
from trainmeter.agent.probes.step_state import state  # noqa: E402
from trainmeter.agent.state import STATE  # noqa: E402

tokens.bind(torch)
model._torch = torch


def test_find_prefers_input_ids_then_positional_then_other_keywords():
    ids = torch.zeros(2, 5, dtype=torch.long)
    mask = torch.ones(2, 5, dtype=torch.long)
    floats = torch.zeros(2, 5)
    assert tokens.find((), {"attention_mask": mask, "input_ids": ids}) is ids
    assert tokens.find((floats, ids), {}) is ids
    assert tokens.find((), {"attention_mask": mask, "tokens": ids}) is ids
    assert tokens.find((floats, torch.zeros(5, dtype=torch.long)), {"labels": mask}) is None
    assert tokens.find((ids.to(torch.int32),), None) is not None


def test_real_tokens_from_mask_or_labels_only_on_the_cpu():
    ids = torch.zeros(2, 4, dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    assert tokens.real(ids, {"attention_mask": mask}) == 4  # 3 + 1
    labels = torch.tensor([[5, -100, 7, -100], [-100, -100, -100, 1]])
    assert tokens.real(ids, {"labels": labels}) == 3
    assert tokens.real(ids, {"attention_mask": mask[:, :3]}) is None  # another shape
    meta_mask = torch.ones(2, 4, device="meta")
    assert tokens.real(ids, {"attention_mask": meta_mask}) is None  # not on the CPU: no value


class _Tied(nn.Module):
    """The token table shared with the head through a second Parameter on the same storage."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)  # 40
        self.pos = nn.Embedding(3, 4)  # 12
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = nn.Parameter(self.emb.weight.data)  # same storage, new Parameter
        self.frozen = nn.Linear(4, 2)  # 8 + 2 = 10
        self.frozen.requires_grad_(False)


def test_count_params_dedupes_by_storage_and_keeps_tied_tables_out_of_e():
    total, embedding, frozen = model.count_params(_Tied())
    # N = emb 40 + pos 12 + frozen 10 (the head shares emb's storage) = 62
    assert (total, embedding, frozen) == (62, 12, 10)


def test_config_and_dp_are_found_through_wrappers():
    inner = nn.Linear(2, 2)
    inner.config = {"num_hidden_layers": 3, "hidden_size": 8, "n_routed_experts": 16}
    wrapper = nn.Module()
    wrapper.module = inner
    compiled = nn.Module()
    compiled._orig_mod = wrapper
    chain = model.unwrap_chain(compiled)
    assert chain == [compiled, wrapper, inner]
    config = model.find_config(chain)
    assert model.config_int(config, model.LAYER_KEYS) == 3
    assert model.config_int(config, model.WIDTH_KEYS) == 8
    assert model.config_int(config, model.EXPERT_KEYS) == 16
    nested = types.SimpleNamespace(text_config=types.SimpleNamespace(n_layer=True, num_layers=4))
    assert model.config_int(nested, model.LAYER_KEYS) == 4  # a bool is not a count
    assert model.data_parallel_degree(chain) is None  # no DDP process group here


class _Sender:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    def send(self, kind: str, d: dict) -> None:
        self.sent.append((kind, d))


def test_device_fact_only_when_cuda_is_already_initialized(monkeypatch):
    calls: list[str] = []
    state = {"up": False}

    class _Cuda:
        @staticmethod
        def is_initialized() -> bool:
            calls.append("is_initialized")
            return state["up"]

        @staticmethod
        def current_device() -> int:
            calls.append("current_device")
            return 1

        @staticmethod
        def get_device_properties(index: int):
            calls.append(f"props {index}")
            return types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", uuid="1234-abcd")

    sender = _Sender()
    monkeypatch.setattr(device, "_torch", types.SimpleNamespace(cuda=_Cuda))
    monkeypatch.setattr(device, "_sent", False)
    monkeypatch.setattr(device, "get_sender", lambda: sender)
    assert device.look() is False
    assert calls == ["is_initialized"]  # nothing that could create a context
    state["up"] = True
    assert device.look() is True and device.look() is True
    assert sender.sent == [
        (
            "fact",
            {
                "key": "device",
                "value": {"name": "NVIDIA H100 80GB HBM3", "index": 1, "uuid": "GPU-1234-abcd"},
                "source": "detected",
                "note": "torch.cuda",
            },
        )
    ]


def test_off_warns_once_and_drops_the_probe_name(capsys, monkeypatch):
    monkeypatch.setattr(STATE, "probes", ["steps", "unit-probe"])
    guard.off("unit-probe", ValueError("bad"))
    guard.off("unit-probe", ValueError("worse"))
    err = capsys.readouterr().err
    assert err == "trainmeter: unit-probe off: ValueError('bad'); the run goes on\n"
    assert STATE.probes == ["steps"] and guard.is_off("unit-probe")
    guard.attached("unit-probe")
    assert STATE.probes == ["steps"]


def test_device_fact_names_the_device_the_model_is_on(monkeypatch):
    # a model moved with .to("cuda:3") while the current device is still 0
    calls: list[str] = []

    class _Cuda:
        @staticmethod
        def is_initialized() -> bool:
            return True

        @staticmethod
        def current_device() -> int:
            calls.append("current_device")
            return 0

        @staticmethod
        def get_device_properties(index: int):
            calls.append(f"props {index}")
            return types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", uuid="GPU-9")

    sender = _Sender()
    monkeypatch.setattr(device, "_torch", types.SimpleNamespace(cuda=_Cuda))
    monkeypatch.setattr(device, "_sent", False)
    monkeypatch.setattr(device, "get_sender", lambda: sender)
    ids = types.SimpleNamespace(device=types.SimpleNamespace(type="cuda", index=3))
    device._on_first_forward(nn.Linear(1, 1), ids, (), {})
    assert calls == ["props 3"]
    assert sender.sent[0][1]["value"]["index"] == 3


def test_train_every_step_does_not_walk_the_model_when_nothing_switches(monkeypatch):
    # HF Trainer calls model.train() every step, and train() recurses into every submodule
    looked: list[int] = []
    monkeypatch.setattr(steps, "root", lambda: looked.append(1))
    monkeypatch.setattr(phases, "_eval_since", None)
    net = nn.Sequential(*(nn.Linear(2, 2) for _ in range(10)))
    wrapped = phases._wrap_train(nn.Module.train)
    monkeypatch.setattr(nn.Module, "train", wrapped)
    net.train()
    assert looked == []
    net.eval()  # a real switch looks for the root (not found here: no span opens)
    assert looked and phases._eval_since is None


def test_fake_count_is_refused_when_the_copy_would_run_hooks():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    assert flops.fake_refusal(net) is None
    handle = net[1].register_forward_hook(lambda *a: None)
    assert flops.fake_refusal(net) == "Linear has forward or backward hooks"
    handle.remove()
    handle = nn.modules.module.register_module_forward_pre_hook(lambda *a: None)
    try:
        assert flops.fake_refusal(net) == "global module hooks are registered"
    finally:
        handle.remove()


def test_int_env_never_raises(monkeypatch):
    for value, expected in (("4", 4), (" 2 ", 2), ("-1", -1), ("--1", None), ("²", None)):
        monkeypatch.setenv("TM_TEST_INT", value)
        assert boot._int_env("TM_TEST_INT") == expected
    monkeypatch.delenv("TM_TEST_INT")
    assert boot._int_env("TM_TEST_INT") is None


def test_config_is_also_found_as_model_args_or_params():
    # TorchTitan keeps its hyper-parameters in `model_args`, Meta's reference Llama in `params`
    titan = nn.Linear(2, 2)
    titan.model_args = types.SimpleNamespace(n_layers=16, dim=2048)
    llama = nn.Linear(2, 2)
    llama.params = types.SimpleNamespace(n_layers=32, dim=4096)
    for module, layers in ((titan, 16), (llama, 32)):
        config = model.find_config(model.unwrap_chain(module))
        assert model.config_int(config, model.LAYER_KEYS) == layers
    lists = nn.Module()
    lists.params = nn.ParameterList([nn.Parameter(torch.zeros(1))])
    assert model.find_config([lists]) is None  # a module's parameter list is not a config


def test_an_encoder_decoder_config_counts_both_stacks():
    # T5 spells the stacks num_layers + num_decoder_layers; BART, Marian and Whisper
    # encoder_layers + decoder_layers (with num_hidden_layers the encoder's alone)
    t5 = {"is_encoder_decoder": True, "num_layers": 6, "num_decoder_layers": 4}
    bart = {"is_encoder_decoder": True, "num_hidden_layers": 12, "encoder_layers": 12, "decoder_layers": 2}
    assert model.config_layers(t5) == (10, " (encoder 6 + decoder 4 layers)")
    assert model.config_layers(bart) == (14, " (encoder 12 + decoder 2 layers)")
    # an encoder or a decoder built alone: Hugging Face clears is_encoder_decoder
    assert model.config_layers({**t5, "is_encoder_decoder": False}) == (6, "")
    assert model.config_layers({"n_layer": 3}) == (3, "")


def test_distributed_checkpoint_save_is_timed(monkeypatch):
    saved: list[str] = []
    dcp = types.SimpleNamespace(save=lambda state, **kw: saved.append("save"))
    monkeypatch.setitem(phases._totals, "checkpoint", [0.0, 0])
    phases._patch_dcp(dcp)
    dcp.save({}, checkpoint_id="x")
    assert saved == ["save"] and phases._totals["checkpoint"][1] == 1


class _Sends:
    """Stands in for the sender: keeps each `phase` record's d and t."""

    def __init__(self) -> None:
        self.records: list[tuple[dict, float | None]] = []

    def send(self, kind: str, d: dict, src: str = "agent", t: float | None = None) -> None:
        self.records.append((d, t))

    def take(self) -> list[tuple[str, float, int, float | None]]:
        out = [(d["name"], round(d["s"], 9), d["n"], t) for d, t in self.records]
        self.records.clear()
        return out


def test_phase_seconds_are_sent_at_the_step_they_preceded(monkeypatch):
    # `tm` puts a wait before rank 0's first step outside the training window by comparing
    # times: a wait that ended before step 1 but is flushed after it must carry step 1's time,
    # and a wait after the last step the flush's own (None: the sender stamps it)
    sends = _Sends()
    monkeypatch.setattr(phases, "get_sender", lambda: sends)
    monkeypatch.setattr(phases, "_totals", {name: [0.0, 0] for name in phases.NAMES})
    monkeypatch.setattr(phases, "_sent", {name: (0.0, 0) for name in phases.NAMES})
    monkeypatch.setattr(phases, "_mark_step", 0)
    monkeypatch.setattr(phases, "_mark", None)
    monkeypatch.setattr(phases, "_mark_sent", None)
    monkeypatch.setattr(state, "n_steps", 0)
    monkeypatch.setattr(state, "t", 0.0)

    phases.add("data", 0.25)  # the first batch
    phases.drain()  # flushed before step 1: the flush's time is right
    assert sends.take() == [("data", 0.25, 1, None)]
    phases.add("data", 0.5)  # a second wait, still before step 1
    state.n_steps, state.t = 1, 100.0  # step 1, and no flush in between
    phases.drain()
    assert sends.take() == [("data", 0.5, 1, 100.0)]  # before step 1, by its time
    phases.add("data", 0.125)  # batch 2: the first add since step 1 marks the totals
    state.n_steps, state.t = 2, 200.0
    phases.add("data", 0.0625)  # batch 3 marks again (at step 2), then adds
    phases.add("eval", 2.0)
    phases.drain()
    # batch 2 went before step 2; batch 3 and the eval after it (no step since: the flush's time)
    assert sends.take() == [
        ("data", 0.125, 1, 200.0),
        ("data", 0.0625, 1, None),
        ("eval", 2.0, 1, None),
    ]
    phases.drain()
    assert sends.take() == []  # nothing moved, the mark already sent: nothing twice
    state.n_steps, state.t = 3, 300.0
    phases.add("checkpoint", 1.0)  # after step 3: marks (nothing new before it), then adds
    phases.drain()
    assert sends.take() == [("checkpoint", 1.0, 1, None)]
    assert phases._totals["data"] == [0.9375, 4]
