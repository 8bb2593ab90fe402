"""Token divergence on the real embedded engine (integration): a restart of the f16 cache
moves no distribution at all; a q8_0 cache moves them; teacher forcing scores the f16 answers
under q8_0 with aligned positions."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from kveval.cli.cli import main
from kveval.formats.reader import read_run
from kveval.run import engine_setup
from tests.clirun import kveval

HAVE_ENGINE = all(importlib.util.find_spec(m) is not None for m in engine_setup.SERVER_MODULES)
HAVE_MODEL = importlib.util.find_spec(engine_setup.BUNDLED_PACKAGE) is not None
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (HAVE_ENGINE and HAVE_MODEL),
                       reason="llama-cpp-python[server] or the bundled model is not installed"),
]
PROMPTS = ["Name three colours.", "What is the capital of France?", "Count from one to five.",
           "Write a haiku about rain."]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("divergence")
    prompts = folder / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    paths = {}
    for label, kv in (("f16a", "f16"), ("f16b", "f16"), ("q8", "q8_0")):
        paths[label] = folder / f"{label}.jsonl"
        try:
            main(["run", "--task", "prompts", "--prompts", str(prompts), "--max-tokens", "24",
                  "--logprobs", "5", "--kv-cache-type", kv, "--label", label, "--ctx", "1024",
                  "-o", str(paths[label])])
        except SystemExit as exc:
            assert exc.code == 0
    return paths


def test_q8_0_moves_distributions_a_restart_does_not(capsys: Any,
                                                      runs: dict[str, Path]) -> None:
    code, out, _ = kveval(capsys, "compare", str(runs["f16a"]), str(runs["q8"]), "--noise",
                          str(runs["f16b"]), "--json")
    assert code == 0
    div = json.loads(out)["tasks"][0]["divergence"]
    assert div["noise"]["kl_mean"] == 0.0  # f16 on a CPU is deterministic: restart KL is 0
    assert div["kl_mean"] > 0.0
    assert div["test"]["candidate_kl"] > div["test"]["noise_kl"]
    assert div["positions"] >= len(PROMPTS)


def test_teacher_forcing_on_the_embedded_engine(capsys: Any, runs: dict[str, Path]) -> None:
    forced = runs["f16a"].with_name("tf-q8.jsonl")
    code, _, err = kveval(capsys, "run", "--teacher-force", str(runs["f16a"]), "--kv-cache-type",
                          "q8_0", "--ctx", "1024", "-o", str(forced))
    assert code == 0, err
    base = read_run(runs["f16a"]).by_key()
    for item in read_run(forced).items:
        mine, theirs = item.logprobs, base[item.key].logprobs
        assert item.output == base[item.key].output and mine and theirs
        # the baseline's tokens, each the top-1 of its own position under f16: aligned
        shared = min(len(mine["tokens"]), len(theirs["tokens"]))
        assert mine["tokens"][:3] == theirs["tokens"][:3]
        assert sum(a == b for a, b in zip(mine["top_tokens"][:shared],
                                          theirs["top_tokens"][:shared], strict=True)) > 0
    code, out, _ = kveval(capsys, "compare", str(runs["f16a"]), str(forced), "--json")
    assert json.loads(out)["tasks"][0]["divergence"]["top1_agreement"] > 0.8
