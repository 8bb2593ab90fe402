"""The runs a verdict command reads: kveval run files, lm-eval sample logs and the tutorial's
JSON arrays of answers, as judging reads them. Heavy modules are imported inside the
functions, so `kveval --help` stays fast."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kveval.formats.reader import Shared
    from kveval.judge.compare import Side
    from kveval.judge.forced import Forced


def load(path: str, shared: Shared | None = None) -> Side:
    """A kveval run file, an lm-eval samples log, or the tutorial's JSON array of answers;
    runs judged together share one `shared` (what they hold alike is kept once)."""
    from kveval.formats.lmeval import looks_like_lmeval, read_lmeval
    from kveval.formats.reader import is_answer_array, read_answer_array, read_run
    from kveval.judge.compare import side_from_answers, side_from_run

    if looks_like_lmeval(path):
        return side_from_run(read_lmeval(path))
    if is_answer_array(path):
        return side_from_answers(path, read_answer_array(path))
    return side_from_run(read_run(path, judging=True, shared=shared))


def load_all(paths: Sequence[str],
             load_one: Callable[[str, Shared | None], Side] | None = None) -> list[Side]:
    """The runs judged together, each read by `load_one` (default `load`): what they hold
    alike is read once (formats/reader.py)."""
    from kveval.formats.reader import Shared

    shared = Shared()  # dropped once read: judging needs only the runs
    return [(load_one or load)(path, shared) for path in paths]


def load_run(path: str, shared: Shared | None = None) -> Side:
    """A kveval run file or an lm-eval samples log; arrays of answers carry no scores."""
    from kveval.errors import UsageError
    from kveval.formats.lmeval import looks_like_lmeval, read_lmeval
    from kveval.formats.reader import is_answer_array, read_run
    from kveval.judge.compare import side_from_run

    if looks_like_lmeval(path):
        return side_from_run(read_lmeval(path))
    if is_answer_array(path):
        raise UsageError(f"{path}: a JSON array of answers has no scores; score and gate read "
                         "kveval run files (compare reads both)")
    return side_from_run(read_run(path, judging=True, shared=shared))


def files_read(path: str) -> list[Path]:
    """The files reading `path` opens: an lm-eval folder or results file stands for its
    samples and results files, anything else for itself."""
    from kveval.formats.lmeval import looks_like_lmeval
    from kveval.formats.lmeval_files import files_of

    return files_of(path) if looks_like_lmeval(path) else [Path(path)]


def check_fewshot(*sides: Side | None) -> None:
    """An lm-eval log paired with a kveval run: refuse when their few-shot prompts differ."""
    from kveval.judge import fewshot

    fewshot.check_fewshot(sides)


def load_forced(paths: Sequence[str]) -> Forced | None:
    """The forced passes (the baseline's own, the candidate's, each restart's), or None."""
    from kveval.judge.forced import Forced

    if not paths:
        return None
    base, cand, *noises = load_all(paths, load_run)
    return Forced(base, cand, tuple(noises))
