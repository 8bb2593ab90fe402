"""`compare --show` on one long word: the side-by-side wrapping, textwrap over whole lines
(as it was) against kveval's wrap that cuts each line to what the shown lines can hold.

    python bench/show_wrap.py [--sizes 1000000,3000000,100000000] [--old-limit 3000000]

Prints seconds per answer size; the old wrapping is quadratic and is timed only up to
--old-limit characters.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kveval.safe import terminal  # noqa: E402
from kveval.show.blocks import SIDE_LINES, WIDTH  # noqa: E402
from kveval.show.text import _wrap  # noqa: E402


def old_wrap(text: str, width: int) -> list[str]:
    lines = [part for line in terminal(text).splitlines() or [""]
             for part in (textwrap.wrap(line, width, drop_whitespace=False) or [""])]
    return lines[:SIDE_LINES] + (["..."] if len(lines) > SIDE_LINES else [])


def seconds(wrap: object, text: str, width: int) -> float:
    started = time.perf_counter()
    wrap(text, width)  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000000,3000000,100000000")
    parser.add_argument("--old-limit", type=int, default=3_000_000)
    args = parser.parse_args()
    width = (WIDTH - 3) // 2
    print(f"{'characters':>12}  {'textwrap (old)':>15}  {'kveval wrap':>12}")
    for size in (int(s) for s in args.sizes.split(",")):
        text = "y" + "x" * (size - 1)
        old = f"{seconds(old_wrap, text, width):.2f} s" if size <= args.old_limit else "-"
        print(f"{size:>12,}  {old:>15}  {seconds(_wrap, text, width):>10.2f} s")


if __name__ == "__main__":
    main()
