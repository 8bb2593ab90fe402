"""Run the kveval command line in-process and collect its exit code, stdout and stderr."""

from __future__ import annotations

import pytest

from kveval.cli.cli import main


def kveval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    else:  # pragma: no cover
        code = 0
    out, err = capsys.readouterr()
    return code, out, err
