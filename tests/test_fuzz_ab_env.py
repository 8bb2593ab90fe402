"""Fuzz: ordinary values in the servers' environment (`--baseline-env`, `--candidate-env`:
switches, seeds, dataset names, `{port}`, null, text that looks like JSON, quotes, any
Unicode) never change the structure of a file `kveval ab` writes: every JSON and JSON-lines
file parses, `--json` too, and each value is recorded in clear (ab.json, the run headers) and
logged as the server got it, while a key in the same command is in no file."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from hypothesis import Phase, assume, example, given, settings
from hypothesis import strategies as st
from test_ab import command, environment, serve
from test_ab_secrets import KEY, every_file, gsm8k_suite, parsed

from kveval.run.ab.env import secret_values

NAMES = ("MY_FLAG", "RUN_SEED", "DATASET", "PORT", "EXTRA_ARGS", "LOG_LEVEL")
VALUES = st.one_of(
    st.sampled_from(["false", "1234", "gsm8k", "{port}", "null", "", "true", "0", "NaN",
                     '{"a": 1}', "[1, 2]", '"q"', "a b", "x=y", "--flag", "\\", "'", "1e999"]),
    st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_categories=("Cc",),
                          exclude_characters="{}"), max_size=12))
ENVS = st.dictionaries(st.sampled_from(NAMES), VALUES, min_size=1, max_size=len(NAMES))


def ab(folder: Path, baseline: dict[str, str], candidate: dict[str, str]) -> \
        subprocess.CompletedProcess[str]:
    echo = " ".join(f"--echo-env {name}" for name in NAMES)
    env = [w for k, v in baseline.items() for w in ("--baseline-env", f"{k}={v}")]
    env += [w for k, v in candidate.items() for w in ("--candidate-env", f"{k}={v}")]
    cmd = command(folder, gsm8k_suite(folder), *env, "--json",
                  serve_cmd=serve(folder, f"--api-key {KEY} {echo}"))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=environment())


def logged(log: str, name: str, value: str) -> bool:
    port = log.split("fake server: starting on port ")[1].split()[0]
    return f"fake server: env {name}={value.replace('{port}', port)}\n" in log


# each example is a whole experiment (three servers): a few, and a failure reported unshrunk
@settings(max_examples=max(1, settings.default.max_examples // 40),
          phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(ENVS, ENVS)
@example({"MY_FLAG": '{"a": 1}', "EXTRA_ARGS": "null", "PORT": "{port}", "LOG_LEVEL": "a b",
          "DATASET": "\\"}, {"RUN_SEED": "1234", "MY_FLAG": "'", "EXTRA_ARGS": "é\"]"})
def test_fuzz_settings_in_the_environment(baseline: dict[str, str],
                                          candidate: dict[str, str]) -> None:
    assume(not secret_values([*baseline.items(), *candidate.items()], []))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        done = ab(folder, baseline, candidate)
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr
        json.loads(done.stdout)
        files = every_file(folder / "ab")
        runs = parsed(files)
        assert KEY not in "".join(files.values()) + done.stdout + done.stderr
        state = runs[folder / "ab" / "ab.json"][0]
        assert isinstance(state, dict) and state["arguments"]["baseline_env"] == baseline
        assert state["arguments"]["candidates"]["candidate"]["env"] == candidate
        for label, env in (("baseline", baseline), ("candidate", candidate)):
            header = runs[folder / "ab" / f"{label}.jsonl"][0]
            assert isinstance(header, dict)
            assert header["setup"]["server_env"] == " ".join(f"{k}={v}" for k, v in env.items())
            log = files[folder / "ab" / "servers" / f"{label}.log"]
            assert all(logged(log, k, v) for k, v in env.items()), log
