"""Accuracy from two noise runs: what the candidate's new answers cost beside a restart's
(kveval/judge/novel.py), as the gate's accuracy check reads it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kveval.judge.checks import first
from kveval.judge.floor import accuracy_test
from kveval.judge.novel import novel_cost
from kveval.judge.pooled import pooled_accuracy
from kveval.judge.verdict import gate
from tests.test_gate_calibrated import answers, side

N = 500
USUALLY_WRONG = set(range(75))  # the setup's answer is wrong on these (85% right)


def restart(departs: int, rng: np.random.Generator, cost: float = 0.45,
            lost: int = 0) -> tuple[set[int], set[int]]:
    """(wrong items, changed items) of one run: it departs from the setup's answer on
    `departs` items, a departure from a right answer wrong with probability `cost` and one
    from a wrong answer right with probability 0.25; `lost` more right answers turned wrong
    on top (a real loss)."""
    changed = set(rng.choice(N, departs, replace=False).tolist())
    wrong = set(USUALLY_WRONG)
    for i in changed:
        if i in USUALLY_WRONG and rng.random() < 0.25:
            wrong.discard(i)
        elif i not in USUALLY_WRONG and rng.random() < cost:
            wrong.add(i)
    spare = [i for i in range(N) if i not in wrong and i not in changed]
    extra = set(rng.choice(spare, lost, replace=False).tolist()) if lost else set()
    return wrong | extra, changed | extra


def runs(departs: list[int], seed: int, **candidate: float) -> list:
    """The baseline, noise runs and (last) a candidate, each departing on its own items."""
    rng = np.random.default_rng(seed)
    made = [restart(d, rng) for d in departs[:-1]]
    made.append(restart(departs[-1], rng, **candidate))
    return [side(f"r{i}", answers("gsm8k", N, wrong=w, changed=c, tag=f"r{i}"),
                 i == len(made) - 1) for i, (w, c) in enumerate(made)]


def accuracy(sides: list):
    report = gate(sides[0], sides[-1], sides[1:-1])
    return report, first(report.checks, "gsm8k", "accuracy")


def test_a_restart_that_changes_three_times_as_much_is_not_a_regression():
    """Noise runs depart on 40 answers, the candidate on 120 at a restart's cost per changed
    answer: it scores lower than every run of the setup (a loss-biased model), and is still
    only a restart."""
    for seed in range(4):
        sides = runs([40, 40, 40, 120], seed)
        report, check = accuracy(sides)
        wrong = [sum(not i.correct for i in s.items) for s in sides]
        assert wrong[-1] > max(wrong[:-1])
        assert report.examined.pooled("gsm8k").novel is not None
        assert report.verdict == "pass" and check.p_value > check.level


def test_new_answers_that_cost_more_than_a_restarts_are_a_regression():
    """The candidate departs as a restart does and loses 45 more right answers (9 points,
    where every run changes 40 of 500 answers, each departure from a right answer wrong
    almost half the time): shown, with a loss beyond a restart's at the check's level."""
    for seed in range(6):
        report, check = accuracy(runs([40, 40, 40, 40], seed, lost=45))
        assert report.verdict == "regression" and check.adjusted_p < check.alpha
        assert report.examined.pooled("gsm8k").bound(check.level) > 0


def test_with_one_noise_run_the_pool_test_judges():
    report, _ = accuracy(runs([40, 40, 40], 0))
    assert report.examined.pooled("gsm8k").novel is None


def test_answers_cut_short_or_empty_are_not_new_answers():
    """The candidate's truncated and empty answers are the truncated and empty checks' to
    judge: they leave its new answers' cost alone."""
    codes = np.zeros((4, 200), dtype=int)
    wrong = np.zeros((4, 200), dtype=bool)
    for r in range(3):
        codes[r, 20 * r:20 * r + 20] = r + 1  # each pool run's 20 new answers, costing 0
    collapsed = np.zeros((4, 200), dtype=bool)
    codes[3, 100:140], wrong[3, 100:140], collapsed[3, 100:140] = 9, True, True
    found = novel_cost(codes, wrong, collapsed)
    assert found is not None and found.answers == 0 and found.p_value == 1.0
    collapsed[3] = False
    assert novel_cost(codes, wrong, collapsed).p_value < 1e-6


def test_a_pool_that_agrees_item_for_item_leaves_accuracy_to_the_pool_test():
    codes = np.zeros((4, 60), dtype=int)
    codes[3, :10] = 1
    assert novel_cost(codes, np.zeros((4, 60), bool), np.zeros((4, 60), bool)) is None
    codes[0, 0] = 2
    assert novel_cost(codes[[0, 1, 3]], np.zeros((3, 60), bool), np.zeros((3, 60), bool)) is None


def _quiet_pool(candidate_new: int, candidate_losses: int) -> tuple[np.ndarray, ...]:
    """Three runs of the setup with 4 new answers each, half of them losses, and a candidate
    with `candidate_new` new answers, `candidate_losses` of them losses, on 500 items."""
    codes = np.zeros((4, 500), dtype=int)
    wrong = np.zeros((4, 500), dtype=bool)
    for r in range(3):
        codes[r, 4 * r:4 * r + 4] = r + 1
        wrong[r, 4 * r:4 * r + 2] = True
    codes[3, 100:100 + candidate_new] = 9
    wrong[3, 100:100 + candidate_losses] = True
    return codes, wrong, np.zeros((4, 500), dtype=bool)


def test_a_noisy_restart_beside_a_quiet_pool_is_not_a_loss():
    """The pool's runs changed 12 answers between them, 6 turning right answers wrong; a
    candidate changing 80 answers at that rate is a restart that changes more, not a loss:
    the exchange allows for so few of the pool's new answers (a count test did not)."""
    found = novel_cost(*_quiet_pool(80, 40))
    assert found is not None and found.pool_answers == 12
    assert found.p_value > 0.05


def test_new_losses_beside_a_quiet_pool_are_a_loss():
    """The same quiet pool; a candidate whose 30 new answers are 28 losses is caught."""
    found = novel_cost(*_quiet_pool(30, 28))
    assert found is not None and found.p_value < 0.0115  # the check's share on the suite
    assert found.threshold(28, 0.0115) < 28 <= found.threshold(28, 0.005)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(2, 4), st.integers(0, 3))
def test_a_copy_of_any_run_of_the_setup_never_fails_accuracy(seed, pool_runs, copied):
    """Whatever the pool, a candidate that is a copy of one of its runs gave no new answer,
    and the check's p is 1."""
    rng = np.random.default_rng(seed)
    codes = np.where(rng.random((pool_runs + 1, 300)) < 0.2,
                     rng.integers(1, 4, (pool_runs + 1, 300)), 0)
    wrong = rng.random((pool_runs + 1, 300)) < 0.3
    source = copied % pool_runs
    codes[-1], wrong[-1] = codes[source], wrong[source]
    found = novel_cost(codes, wrong, np.zeros_like(wrong))
    assert found is None or found.answers == 0
    assert accuracy_test(wrong, 30.0, 0.5, found).p_value == 1.0


def test_new_losses_fail_a_candidate_no_more_wrong_than_a_pool_run():
    """One run of the setup changed 40 answers and lost 30 of them, the other two changed 20
    and lost 6; the candidate loses 25 answers every run of the setup got right and changes
    nothing else: its wrong count is below the worst pool run's, yet all its new answers are
    losses where a restart's are as often another right answer."""
    codes = np.zeros((4, 500), dtype=int)
    wrong = np.zeros((4, 500), dtype=bool)
    wrong[:, :80] = True  # the setup's answer is wrong on 80 items
    for r, (start, departs, lost) in enumerate([(100, 40, 30), (200, 20, 6), (300, 20, 6)]):
        codes[r, start:start + departs] = r + 1
        wrong[r, start:start + lost] = True
    codes[3, 450:475], wrong[3, 450:475] = 9, True
    assert wrong[3].sum() < wrong[:3].sum(axis=1).max()
    found = novel_cost(codes, wrong, np.zeros_like(wrong))
    assert found is not None and found.losses == 25 and found.gains == 0
    assert accuracy_test(wrong, 30.0, 0.5, found).p_value < 1e-3


# ---------------------------------------------------------------- each length against the pool


def needle_runs(lost_longest: bool, runs: int = 3) -> list:
    """Needle at 4 lengths x 10 items; every run of the setup finds 9 of 10 at each length
    (a different one missed per run); the candidate is a restart that, where `lost_longest`,
    loses every needle at the longest length."""
    lengths = (1024, 4096, 16384, 32768)
    made = []
    for r in range(runs + 1):
        wrong = {4 * ((r + 3 * j) % 10) + j for j in range(4)}
        if lost_longest and r == runs:
            wrong |= {i for i in range(40) if i % 4 == 3}
        made.append(side(f"r{r}", answers("needle", 40, wrong=wrong, changed=wrong,
                                          tag=f"r{r}", lengths=lengths), r == runs))
    return made


def at_32k(report):
    return next(c for c in report.checks if c.task == "needle" and c.name == "length 32k")


def test_a_needle_lost_at_the_longest_length_counts_against_every_run_of_the_setup():
    """9 of 10 needles found at 32k by each run of the setup, none by the candidate: against
    the baseline alone (exact McNemar, 9 lost) p = 0.002; against the pool of three runs each
    of those nine is a needle all three found, p = (1/4)^9 and below."""
    sides = needle_runs(True)
    alone = at_32k(gate(sides[0], sides[-1]))
    pooled = at_32k(gate(sides[0], sides[-1], sides[1:-1]))
    assert alone.p_value == pytest.approx(0.5 ** 9, rel=0.01)
    assert pooled.p_value < 1e-5 and pooled.alarmed


def test_a_restart_among_restarts_passes_every_length():
    sides = needle_runs(False)
    report = gate(sides[0], sides[-1], sides[1:-1])
    lengths = [c for c in report.checks if c.task == "needle" and c.kind == "length"]
    assert len(lengths) == 4 and not any(c.alarmed for c in lengths)
    assert report.verdict == "pass"


def test_a_pool_run_is_read_against_the_candidate_too():
    """Each run is read against as many others: a pool run's answer on an item where the
    candidate answered otherwise is no more new than the candidate's answer there."""
    codes = np.zeros((4, 300), dtype=int)
    wrong = np.zeros((4, 300), dtype=bool)
    for r in range(3):
        codes[r, 40 * r:40 * r + 40] = r + 1  # each pool run's 40 answers of its own
    codes[3, 0:20], wrong[[0, 3], 0:20] = 1, True  # the candidate gives run 0's answer
    collapsed = np.zeros((4, 300), dtype=bool)
    found = novel_cost(codes, wrong, collapsed)
    assert found is not None and found.answers == 0 and found.pool_answers == 20 + 40 + 40
    codes[3, 200:240], wrong[3, 200:240] = 9, True  # 40 lost, each its own wrong answer
    found = novel_cost(codes, wrong, collapsed)
    assert found is not None and found.answers == 40 and found.cost == 40
    assert found.p_value < 1e-6


def test_a_restarts_new_answers_cost_what_the_pools_do_where_restarts_share_alternatives():
    """Runs of one setup whose departures land mostly on one shared alternative answer
    (bench/calibration_worlds.py, restarts agreeing, loss-biased): the candidate, one more
    restart, is read against as many runs as each pool run is, so its new answers' cost
    gap is zero on average. Read against its fellows alone, a pool run's returns to the
    usual answer where the others gave the alternative count as new and cheap (a gap of
    +0.02 to +0.07, as much as the prior's spread between restarts)."""
    import sys
    from dataclasses import replace
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from calibration_worlds import SUITE, World, simulate_task

    task, world = replace(SUITE[0], n=5000), World(spread=0.0)
    rng = np.random.default_rng(12)
    gaps = []
    for _ in range(60):
        r = simulate_task(task, world, np.zeros(4), rng)
        collapsed = r.truncated | r.empty
        found = novel_cost(r.codes, ~r.correct | collapsed, collapsed)
        assert found is not None
        gaps.append(found.gap)
    assert abs(float(np.mean(gaps))) < 0.03


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 40), st.floats(0.001, 0.05))
def test_the_bound_of_the_new_answers_agrees_with_their_p_value(seed, lost, level):
    """At any level the candidate lies beyond what the check needs there exactly when the
    exchange's p is below it: the line printed beside the check never contradicts it."""
    rng = np.random.default_rng(seed)
    codes = np.where(rng.random((4, 400)) < 0.05, rng.integers(1, 4, (4, 400)), 0)
    wrong = rng.random((4, 400)) < 0.3
    codes[3, 300:300 + lost], wrong[3, 300:300 + lost] = 9, True
    found = novel_cost(codes, wrong, np.zeros_like(wrong))
    if found is None or not found.answers:
        return
    test = accuracy_test(wrong, 20.0, 0.5, found)
    if abs(test.p_value - level) > 1e-9:
        assert (test.bound(level) > 0) == (test.p_value < level), (found, level)


def test_the_candidates_errors_are_new_losses_not_left_out():
    """Errors cannot hide losses: the candidate's 30 error answers on items the setup got
    right are new answers that lost, beside restarts whose changes cost nothing."""
    import msgspec

    wrong = set(range(60))
    runs = [answers("gsm8k", 500, wrong=wrong, changed=set(range(100 + 20 * r, 130 + 20 * r)),
                    tag=f"r{r}") for r in range(4)]
    failed = {i for i in range(200, 230)}
    cand = [msgspec.structs.replace(r, status="error", output=None, correct=None)
            if int(r.item_id.split("/")[1]) in failed else r for r in runs[3]]
    sides = [side(f"r{i}", r) for i, r in enumerate(runs[:3])] + [side("c", cand, True)]
    test = pooled_accuracy("gsm8k", sides[0], sides[1:3], sides[3], "flexible")
    assert test is not None and test.novel is not None
    assert test.novel.losses >= 30 and test.p_value < 0.001
