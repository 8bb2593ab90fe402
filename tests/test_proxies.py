"""Proxy variables: credentials masked in every form a proxy variable takes (a URL without a
scheme, as curl and urllib accept it, too), and a proxy URL that does not parse is one line
and exit 2 in `run` and `check`, naming the variable and never quoting it."""

from __future__ import annotations

from typing import Any

import pytest

import kveval.run.http  # noqa: F401 - its opener takes the proxies of the environment it is imported in
from tests.clirun import kveval

SECRET = "proxy-secret-77"
UNREACHABLE = "http://127.0.0.1:9/v1"
BAD = ["http://user:pa#ss@127.0.0.1:3128", "http://127.0.0.1:3128/\x01x",
       "http://u:p@127.0.0.1:port", "http://u:p@127.0.0.1:3128/?x=1", "http://:3128"]


def clear_proxies(monkeypatch: Any) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_a_proxy_without_a_scheme_is_masked_in_the_proxy_row(capsys: Any,
                                                            monkeypatch: Any) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv("http_proxy", f"puser:{SECRET}@127.0.0.1:9")
    code, out, err = kveval(capsys, "check", "--endpoint", "http://192.0.2.1:8000/v1",
                            "--timeout", "0.5")
    assert code == 2
    assert SECRET not in out + err and "puser" not in out + err
    assert "through the proxy http://127.0.0.1:9 (http_proxy)" in err


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("command", [["check", "--endpoint", UNREACHABLE],
                                     ["run", "--endpoint", UNREACHABLE, "--task", "gsm8k",
                                      "--limit", "1"]])
def test_a_proxy_that_does_not_parse_is_one_line(capsys: Any, monkeypatch: Any, tmp_path: Any,
                                                 value: str, command: list[str]) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", value)
    args = [*command, "-o", str(tmp_path / "r.jsonl")] if command[0] == "run" else command
    code, out, err = kveval(capsys, *args)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "kveval: error: HTTPS_PROXY does not parse as a proxy URL: "), err
    assert value not in err and "pa#ss" not in err and not (tmp_path / "r.jsonl").exists()
