"""Reading run files: a plain json.loads pass, the typed decoder, and a whole `kveval compare`.

    python bench/read_runs.py [--items 100000] [--dir /tmp/kveval-read-runs] [--decoders]

Makes three GSM8K-shaped run files (baseline, candidate, noise; about 56 MB each at 100k
items: a one-question prompt, a worked answer ending in `#### N`, usage and metadata; the
candidate changes 30% of the answers part-way, the noise run 10%), then prints side by side:
a `json.loads` of every line of the three files, `read_run` (the typed decoder) on the three
files, and `kveval compare A B --noise N` in a subprocess (wall time and peak RSS), with the
ratio of compare to the json.loads pass. `--decoders` adds msgspec and pydantic decoding the
same item lines into the same dataclass, and msgspec into `ItemRecord` (a msgspec Struct).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import time
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # this checkout's kveval, in-process and in compare
sys.path.insert(0, str(ROOT))
WORDS = ("apples", "eggs", "dollars", "bolts", "fiber", "house", "repairs", "sprints", "meters",
         "week", "farmer", "market", "muffins", "friends", "breakfast", "profit", "value",
         "total", "each", "every", "half", "twice", "more", "less", "price", "pays", "buys",
         "sells", "makes", "runs", "takes", "decides")


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize()


def header_line(label: str) -> str:
    return json.dumps({
        "type": "run", "schema_version": 1, "label": label, "endpoint": "http://gpu1:8000/v1",
        "model": "qwen3-8b", "created": "2026-01-01T00:00:00+00:00", "kveval_version": "0.1.0",
        "tasks": [{"name": "gsm8k", "adapter": "gsm8k", "api": "completions",
                   "max_tokens": 256, "stop": ["Question:"], "temperature": 0.0}],
        "sampling": {"temperature": 0.0, "seed": 0, "extra_body": None},
        "concurrency": 32, "fingerprint": {"models": [{"id": "qwen3-8b"}]},
    })


def item_line(i: int, answer: str, rng: random.Random) -> str:
    question = f"Question: {sentence(rng, 6)}?\nAnswer:"
    return json.dumps({
        "type": "item", "task": "gsm8k", "item_id": f"gsm8k/test/{i:06d}",
        "prompt_sha256": f"{random.Random(i).getrandbits(256):064x}",
        "request": {"model": "qwen3-8b", "prompt": question, "max_tokens": 256,
                    "temperature": 0.0, "stop": ["Question:"], "seed": 0},
        "status": "ok", "output": answer, "finish_reason": "stop",
        "usage": {"prompt_tokens": 61, "completion_tokens": 48, "total_tokens": 109},
        "latency_s": round(rng.uniform(0.2, 3.0), 4), "extracted": answer.rsplit(" ", 1)[-1],
        "reference": "18", "correct": answer.endswith("18"), "correct_strict": True,
        "error": None, "meta": {"index": i, "extracted_strict": "18"},
        "reasoning": None, "logprobs": None,
    }, ensure_ascii=False, separators=(",", ":"))


def make_files(folder: Path, items: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.jsonl" for name in ("bf16a", "fp8", "bf16b")]
    if all(p.exists() for p in paths):
        return paths
    rng = random.Random(0)
    answers = [f"{sentence(rng, 8)}.\nSo {sentence(rng, 4)} = 18\n#### 18" for _ in range(items)]
    for path, changed in zip(paths, (0.0, 0.3, 0.1), strict=True):
        change = random.Random(path.stem)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(header_line(path.stem) + "\n")
            for i, answer in enumerate(answers):
                if change.random() < changed:
                    cut = change.randrange(len(answer))
                    answer = answer[:cut] + sentence(change, 3) + answer[cut:]
                fh.write(item_line(i, answer, change) + "\n")
    return paths


def timed(func) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Wall and CPU seconds of func(); CPU time is the steadier figure on a shared machine."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    return time.perf_counter() - wall, time.process_time() - cpu


def best(func, repeat: int = 2) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    runs = [timed(func) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def json_pass(paths: list[Path]) -> None:
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh]
        del records


def typed_pass(paths: list[Path]) -> None:
    from kveval.formats.reader import read_run

    runs = [read_run(path, judging=True) for path in paths]
    del runs


def compare_subprocess(paths: list[Path]) -> tuple[float, float, float]:
    """Wall and CPU seconds and peak RSS (MB) of `kveval compare A B --noise N`."""
    argv = [sys.executable, "-m", "kveval.cli", "compare", str(paths[0]), str(paths[1]),
            "--noise", str(paths[2])]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # cwd: `python -m` puts the working folder ahead of PYTHONPATH
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024


def record_dataclass() -> type:
    """ItemRecord's fields as a plain frozen dataclass: what both decoders can build."""
    import dataclasses

    import msgspec

    from kveval.formats.records import ItemRecord

    hints = typing.get_type_hints(ItemRecord)
    spec = [(f.name, hints[f.name]) if f.required else
            (f.name, hints[f.name], dataclasses.field(default=None if f.default is msgspec.NODEFAULT
                                                      else f.default))
            for f in msgspec.structs.fields(ItemRecord)]
    return dataclasses.make_dataclass("Record", spec, frozen=True, slots=True)


def decoder_figures(paths: list[Path]) -> list[tuple[str, tuple[float, float]]]:
    """msgspec and pydantic decoding the same item lines into one dataclass, validated, and
    msgspec into ItemRecord (a msgspec Struct) as kveval reads them."""
    import msgspec
    import pydantic

    from kveval.formats.records import ItemRecord

    lines = [line for path in paths for line in path.read_bytes().split(b"\n")[1:] if line]
    record = record_dataclass()
    msgspec_decoder = msgspec.json.Decoder(record)
    adapter = pydantic.TypeAdapter(record)
    struct_decoder = msgspec.json.Decoder(ItemRecord)
    gc.disable()  # as read_run does, for all
    try:
        return [
            ("msgspec -> dataclass", timed(lambda: [msgspec_decoder.decode(x) for x in lines])),
            ("pydantic -> dataclass", timed(lambda: [adapter.validate_json(x) for x in lines])),
            ("msgspec -> ItemRecord", timed(lambda: [struct_decoder.decode(x) for x in lines])),
        ]
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kveval-read-runs"))
    parser.add_argument("--decoders", action="store_true",
                        help="also time msgspec and pydantic on the item lines")
    args = parser.parse_args()
    paths = make_files(args.dir, args.items)
    size = sum(p.stat().st_size for p in paths) / 3 / 1e6
    print(f"3 run files of {args.items} items, {size:.1f} MB each, in {args.dir}")
    # compare first: Linux carries the parent's peak RSS into a child's ru_maxrss through
    # fork and exec, so after the passes below it would report theirs (over 400 MB)
    wall, cpu, peak = compare_subprocess(paths)
    rows = [("json.loads of every line", best(lambda: json_pass(paths))),
            ("read_run (typed decoder)", best(lambda: typed_pass(paths))),
            ("kveval compare A B --noise N", (wall, cpu))]
    if args.decoders:
        rows += decoder_figures(paths)
    print(f"{'':<34} {'wall s':>7} {'CPU s':>7}")
    for name, (w, c) in rows:
        print(f"{name:<34} {w:>7.2f} {c:>7.2f}")
    base_wall, base_cpu = rows[0][1]
    print(f"compare / json.loads: {wall / base_wall:.2f} x wall, {cpu / base_cpu:.2f} x CPU; "
          f"compare's peak RSS {peak:.0f} MB (target: at most 1.0 x and 200 MB)")


if __name__ == "__main__":
    main()
