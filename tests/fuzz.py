"""The fuzz suite's parts: hostile values, valid shapes to plant them in, and the property
every command must keep whatever it is given.

The property: exit 0, 1 or 2 and never a traceback; exit 1 from `gate` or `report` only
with REGRESSION said; no secret in any output or written file in any spelling a server or a
proxy can echo it (`spellings`); no raw C0 or C1 control character on a terminal, in
`--json` too. How long the suite runs is the hypothesis profile's (tests/conftest.py: `ci`,
under 3 minutes; `fuzz` under `make fuzz`).
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from hypothesis import strategies as st

SECRET = "sk-fuzz-secret-8d3f"  # the run's API key: a hostile server echoes it
LMEVAL_SECRET = "sk-lmeval-fuzz-51c2"  # an lm-eval log's model_args api_key


def spellings(secret: str) -> list[str]:
    """A secret as a server or a proxy may echo it, written out here apart from
    kveval/masking.py: raw, URL-, form- and fully percent-encoded in either case, every
    character a JSON \\u escape, base64 of it and of the whole `Bearer` header."""
    data = secret.encode()
    percent = "".join(f"%{b:02X}" for b in data)
    found = [secret, quote(secret, safe=""), quote_plus(secret, safe=""), percent,
             percent.lower(), "".join(f"\\u{ord(c):04x}" for c in secret),
             base64.b64encode(data).decode(), base64.b64encode(b"Bearer " + data).decode()]
    return list(dict.fromkeys(found))


ENCODED_SECRET = spellings(SECRET)[1:]
# what a terminal would act on: C0 controls but tab and newline, DEL, C1 (CR is the
# progress bar's own, checked apart)
RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
HOSTILE_TEXT = ["\x1b[2J", "\x1b]0;owned\x07", "\r# Heading", "\x9b31m", "\x00", "\x7f",
                "\u2028", "<script>x</script>", "| a | b |", "[x](http://evil)", "\ud800",
                "e\u0301", "\U0001F468\u200d\U0001F469", SECRET, f"Bearer {SECRET}",
                *ENCODED_SECRET]


@dataclass(frozen=True)
class Deep:
    """JSON nested `levels` deep, spliced in as text (json.dumps stops near 1,000)."""

    levels: int


def text_values() -> st.SearchStrategy[str]:
    pieces = st.sampled_from(HOSTILE_TEXT + ["a", " ", "\n", "9", "-", "x" * 300])
    return st.one_of(st.text(max_size=20), st.lists(pieces, max_size=6).map("".join))


def numbers() -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(), st.floats(), st.sampled_from(
        [0, -1, 1, 2**64, -(2**63), 1e308, -1e308, 5e-324, 0.5, 100, 101]))


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), numbers(), text_values())


def hostile() -> st.SearchStrategy[Any]:
    """A value of any JSON type (and NaN, huge numbers, control characters, the secret),
    possibly nested, possibly far too deep."""
    nested = st.recursive(scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(text_values(), inner, max_size=3)),
        max_leaves=5)
    deep = st.sampled_from([63, 64, 66, 900, 5000, 100_000]).map(Deep)
    return st.one_of(scalars(), nested, deep)


def dumps(value: Any) -> str:
    """JSON text of `value`, with each Deep spliced in (NaN stays NaN: a file may hold it)."""
    deep: list[Deep] = []

    def mark(v: Any) -> Any:
        if isinstance(v, Deep):
            deep.append(v)
            return f"@@DEEP{len(deep) - 1}@@"
        if isinstance(v, dict):
            return {k: mark(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mark(x) for x in v]
        return v

    text = json.dumps(mark(value))
    for i, d in enumerate(deep):
        text = text.replace(f'"@@DEEP{i}@@"', "[" * d.levels + "]" * d.levels)
    return text


# ---------------------------------------------------------------- planting values


DELETE = object()


def plant(record: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set (or delete) `record` at `path`, making the containers on the way."""
    node: Any = record
    for key in path[:-1]:
        if isinstance(node, list):
            if not node:
                return
            node = node[int(key) % len(node)]
            continue
        if not isinstance(node.get(key), (dict, list)):
            node[key] = {}
        node = node[key]
    last = path[-1]
    if isinstance(node, list):
        if node and value is DELETE:
            node.pop(int(last) % len(node))
        elif node:
            node[int(last) % len(node)] = value
    elif value is DELETE:
        node.pop(last, None)
    else:
        node[last] = value


@dataclass(frozen=True)
class Mutation:
    line: int  # 0 is the header; taken modulo the number of lines
    path: tuple[Any, ...]
    value: Any


Paths = dict[tuple[Any, ...], st.SearchStrategy[Any]]
FREE_FORM = ("meta", "fingerprint", "setup", "tasks", "sampling", "logprobs")


def mutations(paths: Paths, header_paths: Paths) -> st.SearchStrategy[list[Mutation]]:
    """One to three changes: each a path and, mostly, a hostile value of the type the field
    holds (so the file reads and judging meets it), else anything or the field deleted."""
    def at(line: st.SearchStrategy[int], chosen: Paths) -> st.SearchStrategy[Mutation]:
        # fields a reader takes as any JSON (meta, fingerprint, ...) reach judging with
        # whatever they hold: drawn three times as often as typed fields
        order = sorted(chosen, key=repr)
        order += [p for p in order if p[0] in FREE_FORM] * 2
        return st.sampled_from(order).flatmap(lambda path: st.builds(
            Mutation, line, st.just(path),
            st.one_of(chosen[path], chosen[path], chosen[path], hostile(), st.just(DELETE))))

    item, head = at(st.integers(1, 10_000), paths), at(st.just(0), header_paths)
    return st.lists(st.one_of(item, item, head), min_size=1, max_size=3)


def any_type() -> st.SearchStrategy[Any]:
    """A free-form field's value: a number, or a string, a list, null or anything else."""
    return st.one_of(numbers(), text_values(), st.none(), st.lists(numbers(), max_size=2),
                     hostile())


def texts_or_none() -> st.SearchStrategy[Any]:
    return st.one_of(text_values(), st.none())


def log_probabilities() -> st.SearchStrategy[float]:
    """Mostly valid (at most 0), sometimes not."""
    return st.one_of(st.floats(max_value=0, allow_nan=False), st.just(-9999.0),
                     st.just(-1e308), st.floats(min_value=0, max_value=10))


def _holds(node: Any, path: tuple[Any, ...]) -> bool:
    for key in path:
        if isinstance(node, list) and isinstance(key, int) and node:
            node = node[key % len(node)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return False
    return True


def mutated_lines(records: list[dict[str, Any]], changes: list[Mutation]) -> list[str]:
    """The records as lines, each change planted in an item line that holds its path (a
    needle's meta.depth, a prompt's logprobs), or in the header."""
    rows = copy.deepcopy(records)
    for change in changes:
        if change.line == 0:
            plant(rows[0], change.path, change.value)
            continue
        lines = [i for i in range(1, len(rows)) if _holds(rows[i], change.path)] or list(
            range(1, len(rows)))
        plant(rows[lines[change.line % len(lines)]], change.path, change.value)
    return [dumps(row) for row in rows]


LINE_EDITS = st.sampled_from(["none"] * 6 + ["truncate", "duplicate", "blank",
                              "garbage", "bom", "crlf"])


def edited(lines: list[str], edit: str, at: int) -> bytes:
    """A whole-file accident: a cut tail, a repeated or blank line, garbage, a BOM, CRLF."""
    at = at % len(lines)
    if edit == "duplicate":
        lines = lines[:at] + [lines[at]] + lines[at:]
    elif edit == "blank":
        lines = lines[:at] + ["   "] + lines[at:]
    elif edit == "garbage":
        lines = lines[:at] + ["{not json \x1b[2J"] + lines[at:]
    data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    if edit == "truncate":
        data = data[: max(1, len(data) - 1 - at % 97)]
    if edit == "bom":
        data = b"\xef\xbb\xbf" + data
    if edit == "crlf":
        data = data.replace(b"\n", b"\r\n")
    return data


# ---------------------------------------------------------------- the property


def written_text(paths: Sequence[Path]) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in paths if p.is_file())


def check(command: str, code: int, out: str, err: str, written: Sequence[Path] = (),
          secrets: Sequence[str] = (), verdict_text: str | None = None,
          json_out: bool = False) -> None:
    """The property every command keeps on any input."""
    assert code in (0, 1, 2), f"{command}: exit {code}\n{err[-2000:]}"
    assert "Traceback" not in err, f"{command}: {err[-3000:]}"
    if code == 1 and command in ("gate", "report"):
        said = out if verdict_text is None else verdict_text
        assert "REGRESSION" in said, f"{command}: exit 1 without REGRESSION\n{out[-2000:]}"
    if command in ("compare", "score"):
        assert code in (0, 2), f"{command}: exit {code}"
    text = out + err + written_text(written)
    for secret in secrets:
        assert secret not in text, f"{command}: the secret {secret!r} was printed or written"
    screen = out + (err.replace("\r", "") if command == "run" else err)
    if json_out and out.strip():
        json.loads(out)  # --json is JSON, whatever the verdict
    found = RAW_CONTROL.search(screen)
    assert found is None, f"{command}: raw {found.group()!r} on the terminal: " \
                          f"{screen[max(0, found.start() - 80):found.end() + 80]!r}"
    if command != "run":
        assert "\r" not in screen, f"{command}: a raw CR on the terminal"
    if code == 2:
        assert (out + err).strip(), f"{command}: exit 2 without a word"
