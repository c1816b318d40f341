"""Loss curves: canonical names, bare `loss`, emitted over tapped, then the latest."""

from __future__ import annotations

from trainmeter.engine.series_names import canonical

from .build import engine_of, rec, run, start


def metric(t, key, value, via="emit", step=None):
    d = {"key": key, "value": value, "via": via}
    if step is not None:
        d["step"] = step
    return rec("metric", t, src="emit" if via == "emit" else "agent", **d)


def test_aliases():
    assert canonical("train/loss") == "train_loss"
    assert canonical("eval_loss") == "val_loss"
    assert canonical("val/loss") == "val_loss"
    assert canonical("learning_rate") == "lr"
    assert canonical("Grad_Norm") == "grad_norm"
    assert canonical("loss") is None  # decided by what else is logged


def test_bare_loss_is_train_loss_until_an_explicit_train_key():
    snap = run(start(), metric(1, "loss", 3.0))
    assert snap["series"]["train_loss"]["key"] == "loss"
    assert snap["series"]["train_loss"]["mapped_by_name"] is True
    snap = run(start(), metric(1, "loss", 3.0), metric(2, "train/loss", 2.9, via="wandb"))
    assert snap["series"]["train_loss"]["key"] == "train/loss"
    assert snap["series"]["loss"]["value"] == 3.0


def test_emitted_beats_tapped_then_latest():
    snap = run(
        start(),
        metric(1, "train_loss", 2.0, via="emit"),
        metric(2, "train/loss", 1.9, via="wandb"),  # later but tapped
    )
    s = snap["series"]["train_loss"]
    assert (s["value"], s["source"], s["via"]) == (2.0, "emitted", "emit")
    snap = run(
        start(),
        metric(1, "train/loss", 2.0, "wandb"),
        metric(2, "training_loss", 1.8, "tensorboard"),
    )
    assert snap["series"]["train_loss"]["value"] == 1.8  # both tapped: the latest


def test_count_step_and_non_numbers_skipped():
    snap = run(
        start(), metric(1, "lr", 1e-3, step=5), metric(2, "lr", 2e-3, step=6), metric(3, "lr", "x")
    )
    assert snap["series"]["lr"] == {
        "value": 2e-3,
        "key": "lr",
        "count": 2,
        "source": "emitted",
        "via": "emit",
        "step": 6,
        "mapped_by_name": False,
        "rank": 0,
    }


def test_points_follow_the_rank_rule_and_carry_step_time_and_tokens():
    """What every view draws: the values taken, at their step (the loop's, else the count),
    seconds since the run's start and the tokens seen by then."""
    engine = engine_of(start(t=10.0))
    assert engine.take_points() == []  # the first call starts keeping them
    for record in (
        rec("step", 11.0, k=1, tokens=100, n=1),
        {**metric(11.5, "loss", 3.0), "rank": 1},  # only rank 1 logs it: taken
        metric(12.0, "lr", 1e-3, step=7),
        {**metric(12.5, "lr", 9.0), "rank": 2},  # rank 0 logs lr: left out
    ):
        engine.feed(record)
    assert engine.take_points() == [
        ("loss", 1, 3.0, 1.5, 100.0),
        ("lr", 7, 1e-3, 2.0, 700.0),
    ]
    assert engine.take_points() == []
    assert engine.t0 == 10.0


def test_one_copy_of_a_series_when_every_rank_logs_it():
    on_rank = [
        {**metric(t, "train_loss", 3.0 - t / 10), "rank": r} for t in (1, 2, 3) for r in (0, 1, 2)
    ]
    snap = run(start(), on_rank)
    assert snap["series"]["train_loss"]["count"] == 3
    assert snap["series"]["train_loss"]["value"] == 3.0 - 3 / 10  # rank 0's last value
