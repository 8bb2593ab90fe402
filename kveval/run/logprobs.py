"""Log-probabilities as servers return them -> the compact shape a run file records.

Two shapes arrive. Chat completions (OpenAI, llama.cpp's llama-server, vLLM, and
llama-server's completions too) return `logprobs.content`: a list of
`{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}`, one per token. Legacy
completions (vLLM, llama-cpp-python) return parallel lists `tokens`, `token_logprobs`,
`text_offset` and `top_logprobs`, the last a list of `{token: logprob}` dicts.

Both become one compact record of parallel arrays (`ItemRecord.logprobs`):

    {"k": 5,
     "tokens": ["The", " answer", ...],          # the tokens, as text
     "logprobs": [-0.0123, -1.5, ...],           # each token's log-probability (nats;
                                                 #  null: unknown, teacher forcing only)
     "top_tokens": [["The", "A", ...], ...],     # per position: the top-K tokens, best first
     "top_logprobs": [[-0.0123, -4.61, ...], ...]}

Two token ids of one position may decode to the same text (a byte-level tokenizer has
several spellings of some texts; llama-server's `n_probs`, vLLM's `prompt_logprobs` and
SGLang list each id apart). The record keeps texts, each once per top-K: a text's entry holds
the summed probability of every listed id that decodes to it (`outcomes`, the one place every
path goes through), so a top-K is a coarser partition of the vocabulary and its KL stays a
lower bound of the full one. Keeping the larger of the two (or the last) dropped the other's
mass, and where the two runs kept different ids of one text the bound could exceed the truth.

Log-probabilities are kept at the full precision the server sent (a float written with the
shortest repr that reads back the same): rounding them to 4 decimals made a top-1
log-probability of -0.00004 read as 0, and so overstated the KL bound. A position the server
gave no log-probability (an echoed prompt's first token) is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FLOOR = -9999.0  # -inf (a token of probability 0) as a finite JSON number


def rounded(value: Any) -> float:
    """The log-probability as a finite float, at full precision (-inf becomes FLOOR)."""
    number = float(value)
    if math.isnan(number) or number == math.inf:
        raise ValueError(f"a log-probability is {number}")
    return FLOOR if math.isinf(number) or number < FLOOR else number


def outcomes(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """A position's listed tokens as text-level outcomes: each text once, holding the summed
    probability of the token ids that decode to it (log-sum-exp of their log-probabilities)."""
    found: dict[str, float] = {}
    for text, logprob in pairs:
        if text in found:
            from numpy import logaddexp

            found[text] = float(logaddexp(found[text], logprob))
        else:
            found[text] = logprob
    return found


def _ranked(pairs: Iterable[tuple[str, float]], k: int) -> tuple[list[str], list[float]]:
    """The top k text-level outcomes (`outcomes`), best first."""
    ranked = sorted(outcomes(pairs).items(), key=lambda tl: -tl[1])[:k]
    return [t for t, _ in ranked], [rounded(lp) for _, lp in ranked]


def _empty(k: int) -> dict[str, Any]:
    return {"k": k, "tokens": [], "logprobs": [], "top_tokens": [], "top_logprobs": []}


def _append(out: dict[str, Any], token: str, logprob: Any,
            alternatives: Sequence[tuple[str, float]], k: int, keep_unknown: bool = False) -> None:
    if logprob is None and not keep_unknown:
        return
    top_tokens, top_logprobs = _ranked(alternatives, k)
    out["tokens"].append(token)
    out["logprobs"].append(None if logprob is None else rounded(logprob))
    out["top_tokens"].append(top_tokens)
    out["top_logprobs"].append(top_logprobs)


def from_content(content: Sequence[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """The chat shape: one object per token with its own `top_logprobs` list."""
    out = _empty(k)
    for entry in content:
        alternatives = [(str(t["token"]), float(t["logprob"]))
                        for t in entry.get("top_logprobs") or () if t.get("logprob") is not None]
        _append(out, str(entry["token"]), entry.get("logprob"), alternatives, k)
    return out


def from_legacy(data: Mapping[str, Any], k: int, keep_unknown: bool = False) -> dict[str, Any]:
    """The legacy completions shape: parallel lists, alternatives as {token: logprob} dicts.

    keep_unknown: keep a position whose own log-probability is unknown (null in the record)."""
    out = _empty(k)
    tops = data.get("top_logprobs") or [None] * len(data["tokens"])
    for token, logprob, top in zip(data["tokens"], data["token_logprobs"], tops, strict=True):
        alternatives = [(str(t), float(lp)) for t, lp in (top or {}).items() if lp is not None]
        _append(out, str(token), logprob, alternatives, k, keep_unknown)
    return out


def compact(logprobs: Any, k: int) -> dict[str, Any] | None:
    """A choice's `logprobs` in either shape -> the compact record; None when absent.

    Raises ValueError (or KeyError/TypeError) on a malformed body; the caller records it."""
    if not logprobs:
        return None
    if isinstance(logprobs, Mapping) and "content" in logprobs:
        return from_content(logprobs["content"] or [], k)
    if isinstance(logprobs, Mapping) and "tokens" in logprobs:
        return from_legacy(logprobs, k)
    raise ValueError(f"unknown log-probability shape: {str(logprobs)[:120]}")


def request_keys(api_chat: bool, k: int) -> dict[str, Any]:
    """What a request adds to ask for the top-K log-probabilities."""
    return {"logprobs": True, "top_logprobs": k} if api_chat else {"logprobs": k}


# ---------------------------------------------------------------- the echoed reply


def _top1(top: Mapping[str, float] | None) -> str | None:
    return max(top.items(), key=lambda kv: kv[1])[0] if top else None


def shift_of(tokens: Sequence[str], tops: Sequence[Mapping[str, float] | None]) -> int:
    """0 when each position holds its own distribution, 1 when it holds the next one's.

    Under the right alignment a token is often its position's top-1 (the answer's tokens
    were greedy choices); under the wrong one it rarely is. One must win clearly."""
    aligned = sum(_top1(tops[i]) == tokens[i] for i in range(1, len(tokens)))
    shifted = sum(_top1(tops[i - 1]) == tokens[i] for i in range(1, len(tokens)))
    if aligned > 2 * shifted:
        return 0
    if shifted > 2 * aligned:
        return 1
    raise ValueError(f"cannot align the echoed log-probabilities (a token is its own "
                     f"position's top-1 {aligned} times, the next position's {shifted} times)")


def answer_logprobs(data: Mapping[str, Any], answer: str, generated: str,
                    k: int) -> dict[str, Any]:
    """The compact log-probabilities of an echo's answer: the tokens that spell `answer`,
    which the echoed text follows with `generated` (the server's one new token).

    Offsets are anchored at the end of the text: llama-cpp-python counts them in its
    detokenized text, where a chat template's special tokens take no characters, and may
    leave the generated token out of the list; both placements of the end are tried."""
    tokens, offsets = [str(t) for t in data["tokens"]], data.get("text_offset")
    if not isinstance(offsets, list) or len(offsets) != len(tokens) or len(tokens) < 2:
        raise ValueError("the server returned no echoed log-probabilities with offsets "
                         "(llama.cpp's llama-server does not echo them)")
    tops = list(data.get("top_logprobs") or [None] * len(tokens))
    shift = shift_of(tokens, tops)
    last = int(offsets[-1]) + len(tokens[-1])
    for end in dict.fromkeys((last - len(generated), last)):
        picked = [i for i, offset in enumerate(offsets)
                  if end - len(answer) <= int(offset) < end and i >= shift]
        if picked and "".join(tokens[i] for i in picked) == answer:
            break
    else:
        raise ValueError("the echoed tokens do not spell the answer")
    dists = [tops[i - shift] or {} for i in picked]
    chosen = [data["token_logprobs"][i] if shift == 0 else dists[n].get(tokens[i])
              for n, i in enumerate(picked)]
    return from_legacy({"tokens": [tokens[i] for i in picked], "token_logprobs": chosen,
                       "top_logprobs": dists}, k, keep_unknown=True)
