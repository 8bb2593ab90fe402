"""Loading task data: GSM8K from a folder or through `datasets`, prompt files."""

from __future__ import annotations

import json
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
