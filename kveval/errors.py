"""Errors that library code raises; only cli.py turns them into messages and exit codes."""

from __future__ import annotations

EXIT_OK = 0
EXIT_REGRESSION = 1  # a gate found a regression, or a run finished with error items
EXIT_INPUT = 2  # usage or input error, an endpoint that cannot serve the run, incomparable runs


class KvevalError(Exception):
    """Base class: its message is one line a user can act on."""

    exit_code = EXIT_INPUT


class UsageError(KvevalError):
    """A bad option, flag combination or spec file."""


class RunFileError(KvevalError):
    """A run file that cannot be read, written or resumed."""


class DataError(KvevalError):
    """Task data (GSM8K, a prompt file) missing or malformed."""


class EndpointError(KvevalError):
    """The endpoint cannot serve the run: unreachable, wrong model, prompt too long."""


class IncomparableError(KvevalError):
    """Two runs that cannot be judged against each other."""


class EngineError(KvevalError):
    """The embedded llama.cpp engine could not start or died."""


class ServerError(KvevalError):
    """A server `kveval ab` started exited before it answered, never answered, died while
    serving, or left its port taken after it was stopped."""


class Interrupted(KvevalError):
    """Ctrl-C or SIGTERM stopped a run; the message says what the run file holds."""

    exit_code = 130  # 128 + SIGINT; a SIGTERM sets 143

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code
