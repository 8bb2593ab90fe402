"""Loading task data: GSM8K from a folder or through `datasets`, prompt files."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from kveval.errors import DataError
from kveval.run.data import load_gsm8k, load_prompts


class FakeSplit(list):  # type: ignore[type-arg]
    info = types.SimpleNamespace(version="1.0.0")


def test_gsm8k_loads_through_datasets_when_no_folder_is_given(monkeypatch: Any) -> None:
    import datasets

    calls = []

    def load_dataset(name: str, config: str) -> dict[str, FakeSplit]:
        calls.append((name, config))
        row = {"question": "q?", "answer": "a\n#### 1"}
        return {"train": FakeSplit([row] * 8), "test": FakeSplit([row])}

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    data = load_gsm8k(None)
    assert calls == [("openai/gsm8k", "main")]
    assert len(data.train) == 8 and len(data.test) == 1
    assert data.source.startswith("hf:openai/gsm8k/main version 1.0.0")


def test_unreachable_hub_says_to_pass_data(monkeypatch: Any) -> None:
    import datasets

    def offline(name: str, config: str) -> None:
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match="pass --data DIR"):
        load_gsm8k(None)


def test_gsm8k_folder_with_a_bad_row_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    (tmp_path / "test.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(DataError, match="test.jsonl: row 1"):
        load_gsm8k(str(tmp_path))


@pytest.mark.parametrize(
    ("content", "message"),
    [("\n\n", "holds no prompts"),
     ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "appears twice"),
     ('{"id": "a", "messages": [{"role": "user"}]}\n', "'messages' must be"),
     ('{"prompt": "no id"}\n', "expected an object with 'id'"),
     ('{"id": "a", "prompt": "x"}\nnot json\n', ":2: not a JSON line")],
)
def test_bad_prompt_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        load_prompts(str(path))


# ---------------------------------------------------------------- the hub, quiet and offline

HUB_LINE = ("'[Errno -2] Name or service not known' thrown while requesting HEAD "
            "https://huggingface.co/datasets/openai/gsm8k/resolve/main/README.md")


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def offline_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose hub refuses connections and whose hub cache is empty."""
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") and "PROXY" not in k.upper()}
    return {**env, "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
            "HF_HOME": str(tmp_path / "hf-home"), "HF_DATASETS_CACHE": str(tmp_path / "hf-ds")}


def test_without_network_and_without_data_the_error_is_one_kveval_line(
        tmp_path: Path, fake_server: Any) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "kveval.cli", "run", "--endpoint", fake_server.base_url,
         "--task", "gsm8k", "--limit", "1", "-o", str(tmp_path / "run.jsonl")],
        capture_output=True, text=True, env=offline_env(tmp_path), timeout=120)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kveval: error: cannot load openai/gsm8k: the Hugging Face hub "
                               "is unreachable (127.0.0.1: ")
    assert lines[0].endswith("pass --data DIR with GSM8K's train.jsonl and test.jsonl")
    assert not (tmp_path / "run.jsonl").exists() and fake_server.requests == []


def test_the_hub_clients_log_lines_and_warnings_never_reach_the_terminal(
        capfd: Any, monkeypatch: Any, tmp_path: Path) -> None:
    import logging
    import warnings

    import datasets
    import huggingface_hub  # noqa: F401  (its import installs its stderr handler)
    from clirun import kveval

    from kveval.run import data

    def noisy(name: str, config: str) -> None:
        logging.getLogger("huggingface_hub.utils._http").warning(HUB_LINE)
        logging.getLogger("datasets.load").warning("Using the latest cached version")
        warnings.warn("the hub is slow today", UserWarning, stacklevel=1)
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(data, "hub_unreachable", lambda: None)  # a proxy: reachable, it says
    monkeypatch.setattr(datasets, "load_dataset", noisy)
    levels = {name: logging.getLogger(name).level for name in data.HUB_LOGGERS}
    # the hub's own handler holds the stderr of its import (under pytest, an older capture):
    # one on this test's stderr stands for it
    terminal = logging.StreamHandler(sys.stderr)
    logging.getLogger("huggingface_hub").addHandler(terminal)
    monkeypatch.setattr(logging.getLogger("huggingface_hub"), "propagate", False)
    try:
        logging.getLogger("huggingface_hub.utils._http").warning(HUB_LINE)
        assert HUB_LINE in capfd.readouterr().err  # the control: unsilenced, it reaches stderr
        code, out, err = kveval(capfd, "run", "--endpoint", "http://127.0.0.1:9/v1", "--task",
                                "gsm8k", "-o", str(tmp_path / "run.jsonl"))
    finally:
        logging.getLogger("huggingface_hub").removeHandler(terminal)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "kveval: error: cannot load openai/gsm8k from the Hugging Face hub (Couldn't reach "
        "'openai/gsm8k' on the Hub (LocalEntryNotFoundError)); pass --data DIR with GSM8K's "
        "train.jsonl and test.jsonl"]
    assert {name: logging.getLogger(name).level for name in data.HUB_LOGGERS} == levels


def test_hub_reachability_is_one_bounded_connect(monkeypatch: Any) -> None:
    from kveval.run.data import hub_unreachable

    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    reason = hub_unreachable()
    assert reason is not None and reason.startswith("127.0.0.1: ")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub_unreachable() is None  # only the proxy knows: the hub's client decides


def test_a_data_folder_never_imports_datasets(gsm8k_dir: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from kveval.run.data import load_gsm8k; "
            f"data = load_gsm8k({str(gsm8k_dir)!r}); "
            "assert len(data.test) == 1319, len(data.test); "
            "assert 'datasets' not in sys.modules and 'huggingface_hub' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---------------------------------------------------------------- the slice kveval ships


def test_the_bundled_slice_is_the_head_of_gsm8k_with_its_license(gsm8k_dir: Path) -> None:
    from kveval.run.data import bundled_gsm8k

    folder = Path(bundled_gsm8k())
    bundled, full = load_gsm8k(str(folder)), load_gsm8k(str(gsm8k_dir))
    assert list(bundled.test) == list(full.test[: len(bundled.test)])
    assert list(bundled.train) == list(full.train[: len(bundled.train)])
    license_text = (folder / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "Copyright (c) 2021 OpenAI" in license_text


def test_the_slice_is_package_data() -> None:
    """Every file of the slice matches a package-data pattern, so a wheel carries it."""
    import fnmatch
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from kveval.run.data import bundled_gsm8k

    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["kveval"]
    files = [p.relative_to(root / "kveval").as_posix() for p in Path(bundled_gsm8k()).iterdir()]
    assert {"test.jsonl", "train.jsonl", "LICENSE"} <= {Path(f).name for f in files}
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name
