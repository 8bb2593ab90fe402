"""The context task judged by position: how far a run's next-token distributions moved from
the baseline's forced pass of the same documents, bucket by bucket of position.

Buckets are the task's lengths as edges (0-1k, 1k-2k, 2k-4k, ...). For each run against the
baseline, per bucket: the mean KL (the top-K bound, judge/divergence.py) and its p99, the
change in the document's own next-token perplexity (exp of the mean change in negative
log-probability, over the positions where both runs know the token's log-probability: all of
them on every server kveval forces on), the same-top-token rate, and llama-perplexity's KLD
table. The restarts' buckets are the floor.

The test (the `context` check of the family) uses the whole curve: every position of every
document, in blocks of BLOCK positions, each block's mean KL of the candidate (less
`--max-kl`) exchanged with each restart's within the block and the candidate's mean as one
more run among the restarts' (judge/kl_test.py: the larger p-value). The same test in each
bucket alone names where the rise starts: from the longest bucket down, each bucket whose own
test reaches the check's level, until one does not (a fixed sequence after the whole-curve
test, so the family's level holds). `--max-ppl-rise PCT` adds the `context ppl` check: the
perplexity change per block less log(1 + PCT/100) against the restarts', each bucket apart,
Bonferroni over the buckets: "a rise beyond PCT in some bucket beyond the restarts' spread".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kveval.errors import IncomparableError
from kveval.judge.divergence import ItemDivergence, Position, check_record, position
from kveval.judge.kl_test import KlTest, kl_test
from kveval.judge.kld import KldTable, kld_table

BLOCK = 32  # positions per exchangeable block


@dataclass(frozen=True)
class Bucket:
    """One run against the baseline over positions [start, end)."""

    start: int
    end: int
    positions: int
    kl_mean: float | None
    kl_p99: float | None
    ppl_change: float | None  # percent: exp(mean change of the token's NLL) - 1
    same_top: float | None
    kld: KldTable | None = None

    @property
    def label(self) -> str:
        return f"{_k(self.start)}-{_k(self.end)}"


@dataclass(frozen=True)
class RunCurve:
    label: str
    buckets: tuple[Bucket, ...]


@dataclass(frozen=True)
class ContextFound:
    """A context task: the candidate's curve, each restart's, and the tests."""

    task: str
    documents: int
    candidate: RunCurve
    noises: tuple[RunCurve, ...]
    test: KlTest | None  # the whole curve; None without a restart
    bucket_p: tuple[float, ...]  # each bucket's own test
    ppl_p: float | None = None  # with --max-ppl-rise
    ppl_min_p: float = 1.0
    max_ppl_rise: float | None = None
    reach: float = 1.0  # the smallest p the whole-curve test could give had the candidate moved
    short: tuple[str, ...] = ()  # documents that end before the longest bucket does

    @property
    def min_p(self) -> float:
        """What the check could reach: a candidate that moved nothing against restarts that
        moved nothing gives no data-dependent reach, yet any rise would have shown."""
        return min(self.reach, self.test.min_p) if self.test is not None else 1.0

    def starts(self, level: float) -> Bucket | None:
        """The first bucket of the run of buckets, counted from the longest, whose own tests
        reach `level` (None where the longest's does not)."""
        found = None
        for bucket, p in reversed(list(zip(self.candidate.buckets, self.bucket_p,
                                           strict=True))):
            if p >= level:
                break
            found = bucket
        return found


def _k(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


@dataclass(frozen=True)
class _Pair:
    """One document's positions of a run against the baseline (position p scores token p)."""

    item_id: str
    positions: tuple[Position, ...]
    nll_change: np.ndarray  # per position: NLL under the run less under the baseline (NaN: unknown)


def _pair(base: Any, other: Any) -> _Pair:
    a, b = check_record(base), check_record(other)
    shared = min(len(a["tokens"]), len(b["tokens"]))
    if _ids(base) != _ids(other) or a["tokens"][:shared] != b["tokens"][:shared]:
        raise IncomparableError(f"{base.task} {base.item_id}: the runs forced different tokens "
                                "(another tokenizer or another cut); a document's positions "
                                "must be the same tokens in every run")
    positions = tuple(position(a, b, i) for i in range(shared))
    mine = np.array([np.nan if v is None else v for v in a["logprobs"][:shared]], dtype=float)
    theirs = np.array([np.nan if v is None else v for v in b["logprobs"][:shared]],
                      dtype=float)
    return _Pair(base.item_id, positions, mine - theirs)


def _ids(record: Any) -> Any:
    forced = (record.meta or {}).get("teacher_forced")
    return forced.get("ids") if isinstance(forced, dict) else None


def _bucket(pairs: Sequence[_Pair], start: int, end: int) -> Bucket:
    """Positions p in [start, end) of every document: index p - 1 of its arrays."""
    lo, hi = max(start - 1, 0), end - 1
    positions = [p for pair in pairs for p in pair.positions[lo:hi]]
    change = np.concatenate([pair.nll_change[lo:hi] for pair in pairs]) if pairs else \
        np.array([])
    change = change[~np.isnan(change)]
    kls = np.array([p.kl for p in positions])
    return Bucket(start, end, len(positions),
                  float(kls.mean()) if len(kls) else None,
                  float(np.percentile(kls, 99)) if len(kls) else None,
                  100 * math.expm1(float(change.mean())) if len(change) else None,
                  float(np.mean([p.top1_same for p in positions])) if positions else None,
                  kld_table(positions) if positions else None)


def curve(label: str, pairs: Sequence[_Pair], edges: Sequence[int]) -> RunCurve:
    spans = [(a, b) for a, b in zip(edges, edges[1:], strict=False)]
    return RunCurve(label, tuple(_bucket(pairs, a, b) for a, b in spans))


def _spans(pairs: Sequence[_Pair], start: int, end: int
           ) -> Iterator[tuple[_Pair, str, slice]]:
    """Positions [start, end) of every document in blocks of BLOCK: the document, the
    block's key (alike in every run) and its slice of the document's arrays."""
    for pair in pairs:
        stop = min(end - 1, len(pair.positions))
        for lo in range(max(start - 1, 0), stop, BLOCK):
            yield pair, f"{pair.item_id}@{lo}", slice(lo, min(lo + BLOCK, stop))


def _blocks(task: str, pairs: Sequence[_Pair], start: int, end: int) -> list[ItemDivergence]:
    return [ItemDivergence((task, key), pair.positions[part], None)
            for pair, key, part in _spans(pairs, start, end)]


def _ppl_blocks(pairs: Sequence[_Pair], start: int, end: int) -> dict[str, float]:
    """Each block's mean NLL change; a block with no known log-probability is left out in
    every run."""
    found = {}
    for pair, key, part in _spans(pairs, start, end):
        values = pair.nll_change[part]
        values = values[~np.isnan(values)]
        if len(values):
            found[key] = float(values.mean())
    return found


def edges(meta: Any) -> list[int]:
    """A document's bucket edges from its item's metadata (adapters/context.py): 0, each
    length below its tokens, then its tokens."""
    lengths = meta.get("lengths") if isinstance(meta, dict) else None
    tokens = meta.get("tokens") if isinstance(meta, dict) else None
    if not isinstance(lengths, list) or type(tokens) is not int or tokens < 2:
        return []
    inner = sorted({n for n in lengths if type(n) is int and 0 < n < tokens})
    return [0, *inner, tokens]


def _by_doc(pairs: Sequence[Any], task: str) -> list[_Pair]:
    return [_pair(p.base, p.other) for p in pairs
            if p.key[0] == task and p.base.logprobs and p.other.logprobs]


def context_found(task: str, pairs: Sequence[Any], noise_pairs: Sequence[Sequence[Any]],
                  labels: Sequence[str], max_kl: float | None = None,
                  max_ppl_rise: float | None = None) -> ContextFound | None:
    """The task's curves and tests; `pairs` (and each restart's) hold `.key`, `.base` and
    `.other` records (judge.compare.Pair); `labels`: the candidate's, then each restart's."""
    cand = _by_doc(pairs, task)
    if not cand:
        return None
    cuts = edges(next(p.base.meta for p in pairs if p.key[0] == task))
    longest = 1 + max(len(p.positions) for p in cand)  # a document shorter than asked
    cuts = [e for e in cuts if e < longest] + [longest]
    short = tuple(f"{p.item_id} ({len(p.positions):,} positions)" for p in cand
                  if 1 + len(p.positions) < longest)
    noises = [n for n in (_by_doc(run, task) for run in noise_pairs) if n]
    spans = list(zip(cuts, cuts[1:], strict=False))
    test, bucket_p = _kl_tests(task, cand, noises, spans, max_kl or 0.0)
    ppl_p, ppl_min = _ppl_test(cand, noises, spans, max_ppl_rise)
    blocks = test.items if test is not None else 0  # those every run shares
    return ContextFound(task, len(cand), curve(labels[0], cand, cuts),
                        tuple(curve(label, n, cuts) for label, n in zip(labels[1:], noises,
                                                                        strict=False)),
                        test, bucket_p, ppl_p, ppl_min, max_ppl_rise,
                        design_min_p(blocks, len(noises)), short)


def design_min_p(blocks: int, runs: int) -> float:
    """The smallest p-value the exchange test of `blocks` blocks among `runs` restarts can
    give (judge/permute.py: exact, resampled, or normal past LARGE_ITEMS blocks)."""
    from kveval.judge.permute import LARGE_ITEMS, RESAMPLES

    if not runs or not blocks:
        return 1.0
    exact = math.exp(-blocks * math.log(runs + 1))
    if blocks > LARGE_ITEMS or blocks * math.log(runs + 1) <= math.log(RESAMPLES):
        return exact
    return max(exact, 1 / (RESAMPLES + 1))


def _kl_tests(task: str, cand: Sequence[_Pair], noises: Sequence[Sequence[_Pair]],
              spans: Sequence[tuple[int, int]], shift: float
              ) -> tuple[KlTest | None, tuple[float, ...]]:
    if not noises:
        return None, tuple(1.0 for _ in spans)
    whole = kl_test(_blocks(task, cand, 0, spans[-1][1]),
                    *(_blocks(task, n, 0, spans[-1][1]) for n in noises), shift=shift)
    by_bucket = tuple(kl_test(_blocks(task, cand, a, b), *(_blocks(task, n, a, b)
                                                           for n in noises),
                              shift=shift).p_value for a, b in spans)
    return whole, by_bucket


def _ppl_test(cand: Sequence[_Pair], noises: Sequence[Sequence[_Pair]],
              spans: Sequence[tuple[int, int]], rise: float | None
              ) -> tuple[float | None, float]:
    """Bonferroni over the buckets of each bucket's exchange test of the candidate's NLL
    change less log(1 + rise %) against the restarts'."""
    from kveval.judge.permute import exchange_p

    if rise is None or not noises:
        return None, 1.0
    shift = math.log1p(rise / 100)
    found = []
    for a, b in spans:
        mine, floors = _ppl_blocks(cand, a, b), [_ppl_blocks(n, a, b) for n in noises]
        keys = [k for k in mine if all(k in f for f in floors)]
        found.append(exchange_p([mine[k] - shift for k in keys],
                                [[f[k] for k in keys] for f in floors]))
    count = len(found)
    return (min(1.0, count * min(p for p, _ in found)),
            min(1.0, count * min(least for _, least in found)))


def context_tasks(tasks: Sequence[dict[str, Any]]) -> frozenset[str]:
    """A run header's tasks of the context adapter: forced documents, judged by position."""
    return frozenset(str(t.get("name")) for t in tasks if t.get("adapter") == "context")


def apart(pairs: Sequence[Any], tasks: frozenset[str]) -> list[Any]:
    """The pairs of every other task (the free-running divergence leaves these to us)."""
    return [p for p in pairs if p.key[0] not in tasks]


def all_context(tasks: frozenset[str], pairs: Sequence[Sequence[Any]], labels: Sequence[str],
                family: Any) -> tuple[ContextFound, ...]:
    """Every context task's curves and tests: `pairs` the candidate's, then each restart's
    (judge.compare.Pair); `family`'s --max-kl and --max-ppl-rise."""
    found = (context_found(task, pairs[0], pairs[1:], labels, family.max_kl,
                           family.max_ppl_rise) for task in sorted(tasks))
    return tuple(f for f in found if f is not None)


def check_ppl_rise(max_ppl_rise: float | None, found: Sequence[ContextFound]) -> None:
    from kveval.errors import UsageError

    if max_ppl_rise is not None and not any(c.test for c in found):
        raise UsageError("--max-ppl-rise judges the context task's perplexity against a "
                         "restart's: give the context task in every run and --noise N")
