"""Long documents teacher-forced from their first token: where a KV cache is large.

Each item is one document, cut in the server's own tokens to the longest length of the grid
that the server's context holds (`lengths`, default 1k to 32k), and forced from its first
token: every later position records the document's next token's log-probability and the
top-K (run/forcing/document.py sends it, by the best method the server offers). The grid's
lengths are also the edges of the position buckets the judge reads it by (judge/positions.py):
0-1k, 1k-2k, 2k-4k, ... Nothing is generated and nothing is right or wrong: the task is judged
by how far each position's distribution moved against the restarts' own movement.

Documents: the user's (`data = "docs/"`: .txt and .md files, or a JSONL file with a `text`
field; run/documents.py reads them), or the four that ship with kveval (kveval/data/context/:
SQLite's public-domain documentation, 34k to 52k tokens each).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kveval.adapters.base import BuildContext, Item, Score, TaskSpec

DEFAULT_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
# characters of a document kept per token asked: English takes about 4, so the cut in tokens
# (made by the server's tokenizer) always falls inside the text sent
CHARS_PER_TOKEN = 6


@dataclass(frozen=True)
class Document:
    name: str  # unique within the task: the item id is `context/NAME`
    text: str


@dataclass(frozen=True)
class ContextData:
    documents: tuple[Document, ...]
    source: str


def grid(spec: TaskSpec) -> list[int]:
    """The task's lengths, ascending, each once."""
    lengths = spec.params.get("lengths") or DEFAULT_LENGTHS
    return sorted({int(length) for length in lengths})


def usable(spec: TaskSpec, ctx: BuildContext) -> list[int]:
    """The lengths the server's context holds (all of them where it does not say)."""
    lengths = grid(spec)
    if ctx.max_context is None:
        return lengths
    return [length for length in lengths if length <= ctx.max_context]


def forced_tokens(lengths: Sequence[int], max_context: int | None) -> int:
    """How many tokens of a document are forced: the longest usable length, less the one
    position a request needs for its reply where the context is exactly that long."""
    longest = max(lengths)
    return longest if max_context is None else min(longest, max_context - 1)


class Context:
    name = "context"
    description = ("long documents teacher-forced from their first token: KL and perplexity "
                   "change by position, against the restarts' own")

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        lengths = usable(spec, ctx)
        if not lengths or not isinstance(ctx.data, ContextData):
            return []
        tokens = forced_tokens(lengths, ctx.max_context)
        documents = ctx.data.documents[: spec.limit] if spec.limit else ctx.data.documents
        return [Item(task=spec.name, item_id=f"context/{doc.name}",
                     prompt=doc.text[: tokens * CHARS_PER_TOKEN], max_tokens=1,
                     meta={"document": doc.name, "tokens": tokens, "lengths": lengths})
                for doc in documents]

    def score(self, item: Item, output: str) -> Score:
        return Score(extracted=None, correct=None)

    def skipped_lengths(self, spec: TaskSpec, ctx: BuildContext) -> list[int]:
        kept = set(usable(spec, ctx))
        return [length for length in grid(spec) if length not in kept]


ADAPTER = Context()
