"""The context task on llama.cpp's own llama-server (integration): one bundled document forced
from its first token on one slot (deterministic: a restart's floor is 0 in every bucket), an
f16 restart and a q4_0 candidate; the same token ids in every run, q4_0's rise shown with the
bucket where it starts, `--max-kl 0` failing it, a candidate that changes nothing passing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from llama_server import available, llama_server

from kveval.formats.reader import read_run
from kveval.run import engine_setup
from tests.clirun import kveval

HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (available() and HAVE_MODEL),
                       reason="no llama-server (make test builds it) or no bundled model"),
]
SUITE = '[[task]]\nname = "context"\nlimit = 1\nlengths = [128, 256, 512]\n'


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from kveval.cli.cli import main

    folder = tmp_path_factory.mktemp("context")
    suite = folder / "suite.toml"
    suite.write_text(SUITE)
    model = engine_setup.bundled_model_path()
    paths = {name: folder / f"{name}.jsonl" for name in ("f16-a", "f16-b", "f16-c", "q4_0")}

    def run(url: str, name: str) -> None:
        with pytest.raises(SystemExit) as done:
            main(["run", "--endpoint", url, "--suite", str(suite), "--label", name,
                  "-o", str(paths[name]), "--order", "shuffle"])
        assert done.value.code == 0, name

    with llama_server(model, "f16", slots=1, ctx_per_slot=1024, threads=2) as url:
        run(url, "f16-a")
        run(url, "f16-b")
        run(url, "f16-c")  # a candidate whose arguments change nothing
    with llama_server(model, "q4_0", slots=1, ctx_per_slot=1024, threads=2) as url:
        run(url, "q4_0")
    return paths


def test_every_run_forces_the_same_tokens_by_forced_decoding(runs: dict[str, Path]) -> None:
    records = [read_run(str(path)).items[0] for path in runs.values()]
    assert len(records) == 4
    forced = [r.meta["teacher_forced"] for r in records]
    assert {f["method"] for f in forced} == {"forced_decoding"}
    assert len({f["ids"] for f in forced}) == 1 and forced[0]["positions"] == 511
    assert all(r.logprobs and r.logprobs["tokens"] == records[0].logprobs["tokens"]
               for r in records)
    # the bias makes every position carry the document token's own log-probability
    assert all(v is not None for r in records for v in r.logprobs["logprobs"])


def gate(capsys: Any, runs: dict[str, Path], candidate: str, *extra: str
         ) -> tuple[int, dict[str, Any]]:
    code, out, _ = kveval(capsys, "gate", "--baseline", str(runs["f16-a"]), "--candidate",
                          str(runs[candidate]), "--noise", str(runs["f16-b"]), "--json", *extra)
    return code, json.loads(out)


def test_q4_0_rises_above_a_floor_of_zero_and_fails_max_kl_0(capsys: Any,
                                                             runs: dict[str, Path]) -> None:
    code, data = gate(capsys, runs, "q4_0", "--max-kl", "0")
    assert code == 1 and data["verdict"] == "regression"
    entry = next(t for t in data["tasks"] if t["task"] == "context")["context"]
    assert all(b["kl_mean"] == 0 for b in entry["noise_runs"][0]["buckets"])
    assert all(b["kl_mean"] > 0.001 for b in entry["candidate"]["buckets"])
    # one document, one restart: the shortest buckets hold too few blocks to show alone
    assert entry["rise_starts"] in {b["label"] for b in entry["candidate"]["buckets"]}
    assert "context" in data["summary"]


def test_a_candidate_that_changes_nothing_passes(capsys: Any, runs: dict[str, Path]) -> None:
    code, out, _ = kveval(capsys, "gate", "--baseline", str(runs["f16-a"]), "--candidate",
                          str(runs["f16-c"]), "--noise", str(runs["f16-b"]), "--max-kl", "0")
    assert code == 0, out
