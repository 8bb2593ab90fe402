"""`kveval ab` with settings and secrets in the servers' environment and command line
(tests/ab_server.py): settings in clear in every file, which all parse and resume; a key in
`--serve` resumes and is in no file (nor one holding `{port}`, as the server got it), a
changed key is a changed setup."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_ab import Q8, command, environment, last_line, serve

SETTINGS = ("MY_FLAG=false", "RUN_SEED=1234", "DATASET=gsm8k", "PORT={port}")
KEY = "kv-resume-key-7f3a91"
SECRETS = (KEY, "pw-in-url-93b1", "pw-prefix-5521", "sk-prefixed-key-123456789")


def gsm8k_suite(tmp_path: Path) -> Path:
    """A prompts task named gsm8k: the name a DATASET=gsm8k setting must leave alone."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"Prompt number {i}: say something.\n" for i in range(40)))
    path = tmp_path / "suite.toml"
    path.write_text(f'[[task]]\nname = "gsm8k"\nadapter = "prompts"\ndata = "{prompts}"\n')
    return path


def ab(tmp_path: Path, *args: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    cmd = command(tmp_path, gsm8k_suite(tmp_path), *args,
                  serve_cmd=serve(tmp_path, f"--echo-env PORT --echo-env DATASET {extra}"))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=environment())


def every_file(folder: Path) -> dict[Path, str]:
    return {p: p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def parsed(files: dict[Path, str]) -> dict[Path, list[object]]:
    """Every JSON and JSON-lines file, read whole: a file that does not parse fails here."""
    found: dict[Path, list[object]] = {}
    for path, text in files.items():
        if path.suffix == ".json":
            found[path] = [json.loads(text)]
        elif path.suffix == ".jsonl":
            found[path] = [json.loads(line) for line in text.splitlines()]
    return found


def env_args() -> list[str]:
    return [word for pair in SETTINGS for word in ("--baseline-env", pair)] + \
        ["--candidate-env", "MY_FLAG=false", "--candidate-env", "DATASET=gsm8k"]


def test_settings_in_the_environment_are_in_clear_every_file_parses_and_it_resumes(
        tmp_path: Path) -> None:
    done = ab(tmp_path, *env_args(), "--speed", "--json")
    assert done.returncode == 0, done.stderr
    assert "***" not in done.stdout + done.stderr
    files = every_file(tmp_path / "ab")
    assert not any("***" in text for text in files.values())
    runs = parsed(files)
    header = runs[tmp_path / "ab" / "baseline.jsonl"][0]
    assert isinstance(header, dict)
    assert [task["name"] for task in header["tasks"]] == ["gsm8k"]
    assert header["sampling"]["seed"] == 1234
    assert header["endpoint"] == "http://127.0.0.1:{port}/v1"
    assert header["setup"]["server_env"] == " ".join(SETTINGS)
    state = runs[tmp_path / "ab" / "ab.json"][0]
    assert isinstance(state, dict)
    assert state["arguments"]["baseline_env"] == dict(p.split("=", 1) for p in SETTINGS)
    log = files[tmp_path / "ab" / "servers" / "baseline.log"]
    assert "fake server: env DATASET=gsm8k" in log
    port = log.split("fake server: env PORT=")[1].split()[0]
    assert port.isdigit() and f"starting on port {port}" in log
    again = ab(tmp_path, *env_args(), "--speed", "--json")
    assert again.returncode == 0, again.stderr
    assert "baseline: finished on file; not started" in again.stderr
    assert json.loads(again.stdout)["verdict"] == "pass"


def secret_args() -> tuple[list[str], str]:
    args = ["--baseline-env", "LLAMA_ARG_MODEL_URL=https://bob:pw-prefix-5521@h.example/m",
            "--baseline-env", "API_TOKEN=tok-{port}-filled",
            "--candidate-env", "VLLM_EXTRA_KEYS=sk-prefixed-key-123456789"]
    return args, (f"--api-key {KEY} --model-url https://alice:pw-in-url-93b1@h.example/m.gguf "
                  "--echo-env API_TOKEN")


def test_a_key_in_serve_resumes_is_on_no_file_and_a_changed_key_is_refused(
        tmp_path: Path) -> None:
    args, extra = secret_args()
    first = ab(tmp_path, *args, extra=extra)
    assert first.returncode == 0, first.stderr
    again = ab(tmp_path, *args, extra=extra)
    assert again.returncode == 0, again.stderr
    assert "baseline: finished on file; not started" in again.stderr
    files = every_file(tmp_path / "ab")
    parsed(files)
    seen = "".join(files.values()) + first.stdout + first.stderr + again.stdout + again.stderr
    assert [s for s in SECRETS if s in seen] == []
    assert "--api-key scrypt:" in files[tmp_path / "ab" / "baseline.jsonl"].splitlines()[0]
    log = files[tmp_path / "ab" / "servers" / "baseline.log"]
    assert "fake server: argv " in log and "fake server: env API_TOKEN=***" in log
    assert "-filled" not in seen  # the secret as the server got it, its port filled in
    changed = ab(tmp_path, *args, extra=extra.replace(KEY, KEY + "-new"))
    assert changed.returncode == 2
    line = last_line(changed.stderr)
    assert "holds an experiment made with other arguments: --serve" in line
    assert KEY not in line and "(on file: " in line


def test_a_key_in_a_candidates_arguments_resumes(tmp_path: Path) -> None:
    candidate = f"{Q8} --api-key {KEY}"
    cmd = command(tmp_path, gsm8k_suite(tmp_path), serve_cmd=serve(tmp_path),
                  candidate=candidate)
    for _ in range(2):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                              env=environment())
        assert done.returncode == 0, done.stderr
        assert KEY not in "".join(every_file(tmp_path / "ab").values()) + done.stderr
    assert "candidate: finished on file; not started" in done.stderr


def test_a_short_secret_is_masked_whole_or_in_text_and_named_in_one_line(
        tmp_path: Path) -> None:
    """DB_PASSWORD=q7z (three characters) is masked in the server's log too; PIN=7 and
    `--api-key xy`, too short to mask inside text, are fingerprinted in every record, masked
    in the start line, and named (not shown) in one line."""
    args = ["--baseline-env", "DB_PASSWORD=q7z", "--baseline-env", "PIN=7",
            "--secret-env", "PIN", "--json"]
    done = ab(tmp_path, *args, extra="--api-key xy --echo-env DB_PASSWORD")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "too short" in line]
    assert notes == ["kveval: PIN, --api-key: too short to mask in the servers' logs (a secret "
                     "shorter than 3 characters is masked only where it stands whole); use a "
                     "longer one"]
    json.loads(done.stdout)
    files = every_file(tmp_path / "ab")
    runs = parsed(files)
    assert "q7z" not in "".join(files.values()) + done.stdout + done.stderr
    assert "fake server: env DB_PASSWORD=***" in files[tmp_path / "ab" / "servers" /
                                                       "baseline.log"]
    starts = [line for line in done.stderr.splitlines() if ": start " in line]
    assert starts and all(line.endswith("--api-key '***'") or "--api-key '***' " in line
                          for line in starts)
    state = runs[tmp_path / "ab" / "ab.json"][0]
    assert isinstance(state, dict) and state["arguments"]["baseline_env"]["PIN"].startswith(
        "scrypt:")
    serve_ = state["arguments"]["serve"]
    assert serve_[serve_.index("--api-key") + 1].startswith("scrypt:")
    again = ab(tmp_path, *args, extra="--api-key xy --echo-env DB_PASSWORD")
    assert again.returncode == 0, again.stderr
    assert "baseline: finished on file; not started" in again.stderr
