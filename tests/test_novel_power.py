"""Planning for the new answers' cost test (kveval/judge/novel_power.py): what a pilot's
restarts show, and the sizes and noise runs `kveval plan` asks for where the gate judges
accuracy by that test."""

from __future__ import annotations

import numpy as np

from kveval.judge.novel_power import NovelPilot, of_pilot
from kveval.judge.plan import Targets, plan
from tests.test_novel import N, restart, runs

LEVEL = 0.05 / 3


def arrays(departs: list[int], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes, wrong answers and collapsed answers of runs that each depart on their own
    items with an answer of their own (a code no other run gives)."""
    rng = np.random.default_rng(seed)
    codes, wrong = [], []
    for r, d in enumerate(departs):
        w, changed = restart(d, rng)
        codes.append([1000 * (r + 1) + i if i in changed else i for i in range(N)])
        wrong.append([i in w for i in range(N)])
    return np.array(codes), np.array(wrong), np.zeros((len(departs), N), bool)


def test_a_pilot_reads_a_restarts_new_answers_and_their_cost() -> None:
    """Three runs departing on 40 items each: a departure is new where neither other run
    departs there too (the others then answer alike), 40 x 0.92^2 = 34 a run; a
    departure from a right answer (85% of them) is wrong with probability 0.45, one from a
    wrong answer right with probability 0.25: a net cost of about 0.85 x 0.45 - 0.15 x 0.25."""
    pilots = [of_pilot(*arrays([40, 40, 40], seed)) for seed in range(20)]
    found = [p for p in pilots if p is not None]
    assert len(found) == len(pilots)
    assert all(p.runs == 3 for p in found)
    shares = [p.share for p in found]
    rates = [p.rate for p in found]
    assert min(shares) >= 0.06 and max(shares) <= 0.075
    assert abs(float(np.mean(shares)) - 40 * 0.92 ** 2 / N) < 0.003
    assert abs(float(np.mean(rates)) - (0.85 * 0.45 - 0.15 * 0.25)) < 0.03


def test_fewer_than_three_runs_or_no_new_answer_plan_nothing() -> None:
    assert of_pilot(*arrays([40, 40], 0)) is None
    assert of_pilot(*arrays([0, 0, 0], 0)) is None


def test_more_items_more_noise_runs_and_a_larger_loss_are_each_easier() -> None:
    pilot = NovelPilot(share=0.05, rate=0.3, variance=0.9, runs=3)
    assert pilot.catches(20_000, 2, 0.03, LEVEL, 0.8)
    assert not pilot.catches(400, 2, 0.03, LEVEL, 0.8)
    at = [pilot.loss(n, 2, LEVEL, 0.8) or 1.0 for n in (500, 1000, 2000, 4000)]
    assert at == sorted(at, reverse=True) and len(set(at)) == 4
    calm = NovelPilot(share=0.02, rate=0.3, variance=0.9, runs=3)
    runs_ = [calm.loss(1000, k, LEVEL, 0.8) or 1.0 for k in (2, 3, 5, 8)]
    assert runs_ == sorted(runs_, reverse=True) and len(set(runs_)) == 4


def test_a_loss_at_a_restarts_cost_cannot_be_seen() -> None:
    """Where every new answer a restart gives is a wrong one, a lost answer costs what a
    restart's change costs: the test conditions on the changes and cannot see it."""
    pilot = NovelPilot(share=0.05, rate=1.0, variance=0.1, runs=3)
    assert pilot.loss(100_000, 8, LEVEL, 0.8) is None


def test_pools_without_a_new_answer_are_left_to_the_pool_test() -> None:
    pilot = NovelPilot(share=0.001, rate=0.3, variance=0.9, runs=3)
    assert not pilot.applies(10_000, 1)  # one noise run: the pool test judges
    assert not pilot.applies(300, 2)  # under one new answer in the pool's three runs
    assert pilot.applies(900, 2)  # a few: the exchange reads them


def test_plan_sizes_for_the_cost_test_the_gate_will_use() -> None:
    """A pilot of a baseline, two noise runs and a restart that change 8% of the answers each:
    the items plan asks for to catch 5 points are those at which the cost test (the gate's,
    with two noise runs and this many new answers) reaches 80%, and no fewer."""
    sides = runs([40, 40, 40, 40], 3)
    found = plan(sides[0], sides[1:-1], sides[-1], Targets(detect=5.0))
    task = next(t for t in found.tasks if t.kind == "accuracy")
    assert task.items_needed is not None and task.noise_runs_needed == 2
    n, level = task.items_needed, task.level
    pilot = of_pilot(*_pilot_arrays(sides))
    assert pilot is not None and pilot.runs == 4
    assert pilot.applies(n - 1, 2)
    assert pilot.catches(n, 2, 0.05, level, 0.8)
    assert not pilot.catches(n - 1, 2, 0.05, level, 0.8)


def _pilot_arrays(sides: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from kveval.judge.pooled import scored_runs

    found = scored_runs("gsm8k", sides[0], sides[1:-1], sides[-1], "flexible")
    assert found is not None
    return found


def test_a_thin_pilot_says_how_far_its_few_new_answers_leave_the_size_open() -> None:
    """A pilot whose restarts depart on 6 items each reads a new answer's cost from a dozen
    or so and brackets the size it asks widely; one departing on 60 each, narrowly. The
    bracket holds the size asked."""
    def asked(departs: int) -> tuple[int, tuple[int | None, int | None]]:
        sides = runs([departs] * 3, 3)
        found = plan(sides[0], sides[1:-1], sides[-1], Targets(detect=5.0))
        task = next(t for t in found.tasks if t.kind == "accuracy")
        assert task.items_needed is not None and task.items_within is not None
        assert task.pilot_answers is not None and task.pilot_answers > 0
        return task.items_needed, task.items_within

    for departs in (6, 60):
        needed, (low, high) = asked(departs)
        assert low is not None and low <= needed and (high is None or needed <= high)
    thin, rich = asked(6), asked(60)
    width = [(w[1] or 10 ** 7) / (w[0] or 1) for _, w in (thin, rich)]
    assert width[0] > 1.5 * width[1]


def test_a_pilots_doubt_about_a_new_answers_cost_asks_for_the_items_it_needs() -> None:
    """The power a size is given is its assurance: the test's power averaged over what a
    restart's new answer may cost, normal about the pilot's rate with its posterior sd. A
    pilot sure of the cost asks where the power at that cost reaches 80%; one as likely to
    be wrong either way asks more, since a cost read too low loses more power than one read
    too high gains."""
    from dataclasses import replace

    from kveval.judge.power import smallest_size

    sure = NovelPilot(share=0.03, rate=0.4, variance=0.9, runs=3)
    doubtful = replace(sure, rate_sd=0.2)

    def needs(pilot: NovelPilot) -> int | None:
        return smallest_size(lambda n: not pilot.catches(n, 2, 0.05, LEVEL, 0.8), 8, 10 ** 7)

    at_sure, at_doubt = needs(sure), needs(doubtful)
    assert at_sure is not None and at_doubt is not None and at_doubt > 1.2 * at_sure
    assert abs(sure.assurance(at_sure, 2, 0.05, LEVEL) - 0.8) < 0.01
    draws = np.random.default_rng(0).normal(0.4, 0.2, 4000)
    averaged = np.mean([sure.at_rate(r).assurance(at_doubt, 2, 0.05, LEVEL) for r in draws])
    assert abs(doubtful.assurance(at_doubt, 2, 0.05, LEVEL) - averaged) < 0.01


def test_a_pilot_whose_few_new_answers_are_all_losses_still_gets_a_size() -> None:
    """Three new answers, all losses: the cost reads 0.67 with a posterior sd of 0.28. A cost
    above 1 is no cost an answer can have, so the doubt is truncated there rather than piled
    on a cost no size could beat: the plan asks more items than the point reading, not none."""
    from kveval.judge.novel_power import cost_moments
    from kveval.judge.power import smallest_size

    rate, variance, sd = cost_moments(np.array([1.0, 1.0, 1.0]))
    thin = NovelPilot(share=0.006, rate=rate, variance=variance, runs=3, read_from=3,
                      rate_sd=sd)

    def needs(pilot: NovelPilot) -> int | None:
        return smallest_size(lambda n: not pilot.catches(n, 2, 0.03, LEVEL, 0.8), 8, 10 ** 7)

    assured, point = needs(thin), needs(thin.at_rate(rate))
    assert assured is not None and point is not None and assured > point
