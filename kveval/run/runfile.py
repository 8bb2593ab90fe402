"""A run file's life, from "may I write here" to "closed": the one place `kveval run` meets
its output.

`RunFile.claim` is called once, before any work: the file is refused as one of the run's own
inputs, refused when it exists without --resume or --overwrite, refused while another run
writes it (formats/lock.py), refused where nothing can be written; a run to resume is read.
Then `pending` says which items the file still lacks (a resumed run must be the same run and
ask for every item on file: run/resume.py), `writer` opens it (a new file, or the resumed one
rewritten as its header and answered items, locked: formats/writer.py) and `every` is what the
file holds once the run ends. Every refusal is one line; nothing on file is touched by it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kveval.adapters.base import Item
from kveval.atomic import regular_target
from kveval.errors import RunFileError, UsageError
from kveval.formats import lock
from kveval.formats.reader import parse_header, read_run
from kveval.formats.records import ItemRecord, Run, RunHeader
from kveval.formats.writer import RunWriter, create_run, line, refuse_existing, reopen_run
from kveval.masking import active
from kveval.run.resume import check_resumable, check_scope

Key = tuple[str, str]


@dataclass
class RunFile:
    """The run's output file: where it is, how it may be written, what it already holds."""

    path: Path
    overwrite: bool
    old: Run | None  # the run to resume, read once
    done: set[Key] = field(default_factory=set)

    @classmethod
    def claim(cls, output: Path, resume: bool, overwrite: bool,
              inputs: Iterable[str | Path | None] = ()) -> RunFile:
        """Before any work: refuse what must be refused, read the run to resume."""
        claimed = cls(output, overwrite, None)
        claimed.refuse_inputs(inputs)
        claimed.old = existing_run(output, resume, overwrite)
        check_writable(output)
        return claimed

    def refuse_inputs(self, inputs: Iterable[str | Path | None]) -> None:
        refuse_inputs(self.path, inputs)

    def pending(self, header: RunHeader, items: Sequence[Item]) -> set[Key]:
        """The keys already answered on file (none for a new file): the run sends the rest."""
        self.done = answered_keys(self.old, header, items)
        return self.done

    def writer(self, header: RunHeader) -> RunWriter:
        """A new run file, or the resumed one rewritten as its header and answered items."""
        if self.old is not None:
            merged = dataclasses.replace(self.old.header, tasks=header.tasks)
            return reopen_run(self.path, merged, self.kept())
        return create_run(self.path, header, overwrite=self.overwrite)

    def kept(self) -> list[ItemRecord]:
        return [r for r in self.old.items if r.key in self.done] if self.old else []

    def every(self, new: Sequence[ItemRecord]) -> list[ItemRecord]:
        """What the file holds once the run ends: the answers kept, then the new ones."""
        return self.kept() + list(new)


def existing_run(output: Path, resume: bool, overwrite: bool) -> Run | None:
    """The run to resume, read once before any work; None for a new run file."""
    if output.exists() and not (resume or overwrite):
        refuse_existing(output)
    if output.is_dir():
        raise UsageError(f"{output}: is a folder; -o wants a file")
    if output.exists():
        lock.refuse_busy(output)  # another run writes it now
    return read_run(output) if resume and output.exists() else None


def answered_keys(old: Run | None, header: RunHeader, items: Sequence[Item]) -> set[Key]:
    """Resume: the items the existing file already answered, for the same prompt."""
    if old is None:
        return set()
    check_resumable(old.header, as_written(header), old.path)
    check_scope(old, items)
    return {r.key for r in old.items if r.ok}


def as_written(header: RunHeader) -> RunHeader:
    """The header as a run file holds it: the run's secrets masked (a server that lists the
    key as its model id leaves `***` on file)."""
    return parse_header(line(header), Path("<header>")) if active() else header


def refuse_inputs(output: str | Path, inputs: Iterable[str | Path | None]) -> None:
    """-o never names a file the run reads (a prompt file, a suite, the baseline it
    teacher-forces, a data file): --overwrite would destroy the run's own input. A folder
    input counts with the files directly in it (GSM8K's train.jsonl and test.jsonl)."""
    if not os.path.exists(output):
        return
    for given in inputs:
        if not given:
            continue
        path = Path(given).expanduser()
        files = [p for p in path.iterdir() if p.is_file()] if path.is_dir() else [path]
        for found in files:
            with contextlib.suppress(OSError):
                if os.path.samefile(output, found):
                    raise RunFileError(f"{output}: is also an input of this run ({found}); "
                                       "-o must name another file")


def check_writable(path: str | Path) -> None:
    """Before any request: the run file is a regular file or a new path (atomic.py), and
    its folder can be made and written, else one line."""
    try:
        folder = regular_target(path).parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{Path(path).name}.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise RunFileError(f"{path}: cannot write here ({exc.strerror or exc})") from None
