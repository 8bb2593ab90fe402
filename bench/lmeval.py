"""lm-eval logs and prompts: read speed of a full-size samples log, prompt building, and how
much of each prompt a server's prefix cache can reuse under `--fewshot first` vs `lm-eval`.

    python bench/lmeval.py [--data ../shared/data/gsm8k] [--shots 8]

The log is written in lm-eval 0.4.13's layout (one line per question per filter) for all
1,319 GSM8K test questions, with lm-eval's own prompts; nothing is sent anywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kveval.adapters.base import BuildContext, Item
from kveval.adapters.gsm8k import ADAPTER
from kveval.formats.lmeval import read_lmeval
from kveval.run.data import load_gsm8k
from kveval.run.tasks import builtin_spec, override

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


def build(data: object, mode: str, shots: int) -> tuple[list[Item], float]:
    spec = override(builtin_spec("gsm8k"), params={"fewshot": mode, "shots": shots})
    started = time.perf_counter()
    items = ADAPTER.build(spec, BuildContext(data=data))
    return items, time.perf_counter() - started


def reusable_share(prompts: Sequence[str]) -> float:
    """Share of prompt characters that repeat an earlier prompt's prefix (what a prefix
    cache can serve), from each prompt's longest common prefix with its sorted neighbours."""
    order = sorted(prompts)
    shared = 0
    for i, text in enumerate(order):
        neighbours = order[max(i - 1, 0):i] + order[i + 1:i + 2]
        shared += max((_lcp(text, other) for other in neighbours), default=0)
    return shared / sum(len(p) for p in prompts)


def _lcp(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def write_log(folder: Path, items: Sequence[Item], test: Sequence[dict]) -> Path:
    path = folder / "samples_gsm8k_2026-01-01T00-00-00.000000.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for name in ("strict-match", "flexible-extract"):
            for doc_id, (item, row) in enumerate(zip(items, test, strict=True)):
                fh.write(json.dumps(_line(doc_id, item, row, name), ensure_ascii=False) + "\n")
    return path


def _line(doc_id: int, item: Item, row: dict, name: str) -> dict:
    prompt = item.prompt or ""
    return {"doc_id": doc_id, "doc": row, "target": row["answer"],
            "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["Question:"]}}},
            "resps": [[f"#### {item.reference}"]], "filtered_resps": [item.reference],
            "filter": name, "metrics": ["exact_match"],
            "doc_hash": "", "prompt_hash": hashlib.sha256(prompt.encode()).hexdigest(),
            "target_hash": "", "exact_match": 1.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--shots", type=int, default=8)
    args = parser.parse_args()
    data = load_gsm8k(args.data)
    print(f"{'fewshot':<9} {'build s':>8} {'prompt chars':>13} {'prefix-cache reusable':>22}")
    built = {}
    for mode in ("first", "lm-eval"):
        items, seconds = build(data, mode, args.shots)
        built[mode] = items
        prompts = [i.prompt or "" for i in items]
        print(f"{mode:<9} {seconds:>8.3f} {sum(map(len, prompts)):>13,} "
              f"{reusable_share(prompts):>21.1%}")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_log(Path(tmp), built["lm-eval"], list(data.test))
        started = time.perf_counter()
        run = read_lmeval(path)
        seconds = time.perf_counter() - started
        size = path.stat().st_size / 1e6
    print(f"read_lmeval: {len(run.items)} questions ({2 * len(run.items)} lines, {size:.1f} MB) "
          f"in {seconds:.2f} s ({size / seconds:.0f} MB/s)")


if __name__ == "__main__":
    main()
