"""The embedded engine's top-K by numpy gives llama-cpp-python's own log-probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kveval.run.engine_topk import top_pairs


@given(st.lists(st.sampled_from([-np.inf, -3.5, -1.0, -0.0, 0.0, -2.25]), min_size=1,
                max_size=60), st.integers(0, 70))
def test_the_top_pairs_are_the_sorts_first_k_ties_included(values: list[float], k: int) -> None:
    array = np.array(values, dtype=np.float32)
    expected = sorted(zip(array, range(len(array)), strict=True), reverse=True)[:k]
    got = top_pairs(array, k)
    assert [(float(v), i) for v, i in got] == [(float(v), i) for v, i in expected]
    assert all(type(v) is np.float32 for v, _ in got)


def test_the_bundled_model_answers_the_same_log_probabilities_to_the_last_bit() -> None:
    engine = pytest.importorskip("llama_cpp.llama")
    from kveval.run.engine_setup import bundled_model_path
    from kveval.run.engine_topk import install

    model = engine.Llama(str(bundled_model_path()), n_ctx=256, logits_all=True,
                            verbose=False, seed=0)

    def answer() -> dict[str, Any]:
        reply = model.create_completion("Question: what is 6 times 7?\nAnswer:", max_tokens=6,
                                        temperature=0, logprobs=5)
        return reply["choices"][0]["logprobs"]

    own = answer()
    install()
    try:
        fast = answer()
    finally:
        del engine.sorted
    assert fast["tokens"] == own["tokens"] and fast["token_logprobs"] == own["token_logprobs"]
    assert [list(t.items()) for t in fast["top_logprobs"]] == \
        [list(t.items()) for t in own["top_logprobs"]]
