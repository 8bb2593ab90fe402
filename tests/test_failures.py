"""How a failed request is described and whether it is retried."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

from kveval.run.failures import MAX_WAIT_S, backoff, classify, connection_failure, retry_after


def test_retry_after_reads_seconds_and_dates_and_is_capped() -> None:
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "3600"}) == MAX_WAIT_S
    soon = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    wait = retry_after({"retry-after": soon})
    assert wait is not None and 25 <= wait <= 30
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_backoff_doubles_up_to_eight_seconds() -> None:
    assert [backoff(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_the_cause_under_a_wrapped_error_names_what_happened() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as inner:
            raise TimeoutError("Request timed out.") from inner
    except TimeoutError as outer:
        assert connection_failure(outer, 5).startswith("connection refused")


def test_a_body_that_is_not_json_is_not_retried() -> None:
    failure = classify(ValueError("Expecting value"), 5)
    assert failure.message.startswith("malformed response") and not failure.retry


def test_the_whole_attempt_deadline_is_retried_and_says_the_option() -> None:
    failure = classify(TimeoutError(), 3)
    assert failure.retry and failure.message == "no complete answer within --timeout 3 s"
