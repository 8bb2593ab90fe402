"""How the `context` task's bundled documents were made (kveval/data/context/).

They are SQLite's own documentation, which its authors dedicated to the public domain
(https://sqlite.org/copyright.html), as Debian's `sqlite3-doc` package ships it: plain
English prose about one subject each, long enough to fill 32k tokens. This script turns the
package's HTML pages into the text files: the text of every paragraph, heading, list item
and table cell, in order, without markup, scripts, syntax diagrams or navigation.

    apt-get download sqlite3-doc && dpkg-deb -x sqlite3-doc_*.deb sq
    python bench/context_documents.py sq/usr/share/doc/sqlite3 kveval/data/context
"""

from __future__ import annotations

import html.parser
import re
import sys
from pathlib import Path

DOCUMENTS = {
    "sqlite-storage": ["fileformat2.html", "walformat.html", "tempfiles.html", "datatype3.html",
                       "limits.html", "mmap.html"],
    "sqlite-transactions": ["atomiccommit.html", "lockingv3.html", "wal.html", "isolation.html",
                            "howtocorrupt.html", "lang_transaction.html"],
    "sqlite-query-planner": ["queryplanner.html", "optoverview.html", "queryplanner-ng.html",
                             "np1queryprob.html", "whentouse.html", "testing.html"],
    "sqlite-extensions": ["fts5.html", "rtree.html", "json1.html", "foreignkeys.html"],
}
BLOCKS = {"p", "h1", "h2", "h3", "h4", "li", "td", "th", "dt", "dd", "pre", "blockquote",
          "div", "tr", "br"}
SKIPPED = {"script", "style", "svg", "head", "title"}
SKIPPED_CLASSES = ("menu", "nosearch", "imgcontainer", "fancy_toc", "toc")


class Text(html.parser.HTMLParser):
    """A page's readable text: one paragraph per block element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping: tuple[str, int] | None = None  # the skipped element's tag and depth

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = " ".join(value or "" for name, value in attrs if name in ("class", "id"))
        if self.skipping is not None:
            if tag == self.skipping[0]:
                self.skipping = (tag, self.skipping[1] + 1)
        elif tag in SKIPPED or any(c in classes for c in SKIPPED_CLASSES):
            self.skipping = (tag, 1)
        elif tag in BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if self.skipping is not None:
            if tag == self.skipping[0]:
                depth = self.skipping[1] - 1
                self.skipping = (tag, depth) if depth else None
        elif tag in BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.skipping is None:
            self.parts.append(data)


def page_text(path: Path) -> str:
    parser = Text()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    paragraphs = (re.sub(r"[ \t\r\f\v]*\n[ \t\r\f\v]*", " ", p).strip()
                  for p in "".join(parser.parts).split("\n\n"))
    kept = [re.sub(r"[ \t]+", " ", p) for p in paragraphs if len(p) > 1]
    return "\n\n".join(p for p in kept if p.isascii()) + "\n"


def main(source: str, target: str) -> None:
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    for name, pages in DOCUMENTS.items():
        text = "\n".join(page_text(Path(source) / page) for page in pages)
        (out / f"{name}.txt").write_text(text, encoding="utf-8")
        print(f"{name}: {len(text):,} characters")


if __name__ == "__main__":
    main(*sys.argv[1:3])
