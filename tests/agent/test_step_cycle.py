"""The repeat period of which optimizers step in each step (`step_cycle.find`): the length of
the counted FLOPs' window (`flops.on_step`)."""

from __future__ import annotations

import weakref

from trainmeter.agent.probes import flops, step_cycle

D, G = 1, 2


def _steps(pattern: list[tuple[int, ...]], n: int) -> list[tuple[int, ...]]:
    return [pattern[i % len(pattern)] for i in range(n)]


def test_one_optimizer_is_a_period_of_one_at_the_first_whole_step():
    assert step_cycle.find([(D,)], {D}, D) == 1


def test_optimizers_that_all_step_every_step_are_a_period_of_one_at_once():
    assert step_cycle.find([(D, G)], {D, G}, D) == 1


def test_d_d_g_waits_until_two_cycles_are_seen():
    # "D only", then "D plus G" (G joins the step a discriminator update began)
    pattern = [(D,), (D, G)]
    assert step_cycle.find(_steps(pattern, 1), {D, G}, D) is None  # G made, not seen stepping
    assert step_cycle.find(_steps(pattern, 2), {D, G}, D) is None  # not "D plus G" alone
    assert step_cycle.find(_steps(pattern, 4), {D, G}, D) is None
    assert step_cycle.find(_steps(pattern, 5), {D, G}, D) == 2


def test_n_critic_five_is_a_period_of_five():
    pattern = [(D,)] * 4 + [(D, G)]
    for n in range(1, 11):
        assert step_cycle.find(_steps(pattern, n), {D, G}, D) is None, n
    assert step_cycle.find(_steps(pattern, 11), {D, G}, D) == 5


def test_a_step_led_by_another_optimizer_is_no_period_of_one():
    # G, D, D: the first step holds G and the D that joins it; the second is led by D. A period
    # of 1 read from the first step alone would count one step of a loop of period 2
    assert step_cycle.find([(G, D)], {D, G}, D) is None
    assert step_cycle.find([(G, D), (D, G), (D,), (D, G), (D,)], {D, G}, D) == 2


def test_no_period_of_at_most_max_period():
    irregular = [(D,), (D, G), (D,), (D,), (D, G), (D, G), (D,), (D,), (D,)] * 2
    for n in range(1, step_cycle.WATCH):
        assert step_cycle.find(irregular[:n], {D, G}, D) is None, n
    # two equal steps in a row are no period of 1 when the steps before them differ
    assert step_cycle.find([(D,), (D,), (D, G), (D, G)], {D, G}, D) is None
    # an optimizer made that never steps: no period either, however regular the rest
    assert step_cycle.find([(D,)] * step_cycle.WATCH, {D, G}, D) is None


def test_the_note_says_over_which_steps():
    assert flops.window_note(3, 1, False) == flops.NOTE + " (step 3)"
    two = flops.window_note(7, 2, False)
    assert "over 2 whole steps" in two and "(steps 6-7: one cycle" in two
    differ = flops.window_note(19, 1, True)
    assert "(step 19; steps differ" in differ


def test_an_optimizer_that_never_stepped_is_left_out_at_the_watchs_end(monkeypatch):
    class Optimizer:  # stands for torch.optim's: only its identity is read
        pass

    d, g, spare = Optimizer(), Optimizer(), Optimizer()
    monkeypatch.setattr(step_cycle.signal, "made", weakref.WeakSet([d, g, spare]))
    monkeypatch.setattr(step_cycle.signal, "by_backward", False)
    steps = _steps([(id(d),), (id(d), id(g))], step_cycle.WATCH - 1)
    monkeypatch.setattr(step_cycle, "history", steps)
    monkeypatch.setattr(step_cycle, "_held", [{id(d): None}])  # the step now begun: D's
    assert step_cycle.period() is None  # the spare one never stepped: no period holds it
    assert step_cycle.idle() == {id(spare)}
    assert step_cycle.period_without({id(spare)}) == 2


def test_the_note_names_the_optimizers_that_never_stepped():
    note = flops.window_note(19, 1, False, 1)
    assert note.startswith(flops.window_note(19, 1, False))
    assert "; 1 optimizer made in the process stepped in none of the first 18 steps" in note
    assert "2 optimizers made" in flops.window_note(19, 1, False, 2)
