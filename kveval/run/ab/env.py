"""What is secret in a server's setup, as `kveval ab` records and masks it: the one place
that says so, for the command line, the environment and every record of them.

A value is a secret by its name (`..._KEY`, `..._TOKEN`, `..._SECRET`, `..._PASSWORD`,
`..._PASS`, `..._AUTH`, `..._CREDENTIALS`, `..._COOKIE` and the like, `PGPASSWORD` too),
by its form (a URL with `user:password@` anywhere in it, a key with a known prefix, `sk-`,
`hf_`, `ghp_`, ...: secret_sources.CREDENTIAL), or by the user's word (`--secret-env NAME`). Every
other value is a setting, recorded in clear (`MY_FLAG=false`, `RUN_SEED=1234`,
`PORT={port}`, `VLLM_ATTENTION_BACKEND=FLASHINFER`). `--record-env NAME` records a
secret-named value in clear, and so is a switch or a placeholder under a secret's name
(`ENABLE_AUTH=false`, `--api-key EMPTY`); a credential's form is a secret whatever the name.

Looked at: `--baseline-env` and `--candidate-env` values, the `K=V` words of an `env [-S
STRING] K=V ... PROGRAM` or shell prefix in `--serve` (those of `env -S`'s string too), the
value of a flag whose name looks like a secret (`--api-key KEY`, `--hf-token=TOKEN`), and
every word for a credential's form. A secret is registered for masking in every spelling
(kveval/masking.py) and every record holds it as its fingerprint, `scrypt:` and 16 hex digits
of scrypt(the value, the experiment's salt), some 40 ms of a core a guess (a 6-digit PIN
costs hours, not a second): a changed value still shows as a changed setup, and resume
compares the fingerprinted, masked form a record holds with the same form it would write.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kveval.masking import MASK
from kveval.secret_sources import CREDENTIAL, PLACEHOLDERS, SECRET_NAME, url_secrets

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A name that ends in a secret's word however it is joined (PGPASSWORD, MYSQL_PWD, APITOKEN)
SECRET_END = re.compile(r"(?i)(keys?|token|secrets?|passwords?|passwd|passphrase|pass|pwd|"
                        r"auth|credentials?|cookies?)$")
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
ENV_ARGUMENT = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
SPLIT = ("-S", "--split-string")
Hide = Callable[[str], str]
Found = list[tuple[str, str]]  # each secret with what holds it: a variable, a flag, a URL


@dataclass(frozen=True)
class Names:
    """The user's word on environment variables: recorded in clear, or secret."""

    record: tuple[str, ...] = ()  # --record-env
    secret: tuple[str, ...] = ()  # --secret-env


NO_NAMES = Names()


def credentials(text: str) -> list[str]:
    """The secrets a value holds by its form: URL credentials anywhere in it (the password,
    `user:password` and its base64), and keys with a known prefix (a header's key alone too)."""
    found = [s for url in URL.findall(text) for s in url_secrets(url)]
    for match in CREDENTIAL.finditer(text):
        found += dict.fromkeys([match.group(), match.group().split()[-1]])
    return found


def _named_secret(name: str, value: str, names: Names) -> bool:
    if name in names.secret:
        return True
    if name in names.record or value.strip().lower() in PLACEHOLDERS:
        return False
    return SECRET_NAME.search(name) is not None or SECRET_END.search(name) is not None


def pair_secrets(name: str, value: str, names: Names) -> list[str]:
    """The secrets of `NAME=VALUE` (or `--name VALUE`): the value, or its credentials."""
    found = credentials(value)
    return [value, *found] if _named_secret(name, value, names) else found


@functools.lru_cache(maxsize=1024)
def fingerprint(value: str, salt: str) -> str:
    data = value.encode("utf-8", "surrogatepass")
    digest = hashlib.scrypt(data, salt=f"kveval:{salt}".encode(), n=1 << 14, r=8, p=1,
                            dklen=8)
    return f"scrypt:{digest.hex()}"


def shown(name: str, value: str, salt: str, names: Names = NO_NAMES) -> str:
    """The value as records hold it: itself for a setting, else its fingerprint."""
    return fingerprint(value, salt) if pair_secrets(name, value, names) else value


def _is_env(argv: Sequence[str]) -> bool:
    return bool(argv) and argv[0].rsplit("/", 1)[-1] == "env"


def prefix_pairs(argv: Sequence[str]) -> list[tuple[int, str, str]]:
    """The `K=V` words before the program: an `env [OPTIONS] K=V ... PROGRAM` prefix (an
    option's own argument skipped), or `K=V ... PROGRAM` as a shell would read it:
    (position, name, value)."""
    found: list[tuple[int, str, str]] = []
    at = 1 if _is_env(argv) else 0
    while at < len(argv):
        word = argv[at]
        if at and word.startswith("-") and _is_env(argv):
            at += 2 if word in ENV_ARGUMENT else 1
            continue
        name, sep, value = word.partition("=")
        if not sep or not ENV_NAME.fullmatch(name):
            break
        found.append((at, name, value))
        at += 1
    return found


def _split_string(argv: Sequence[str], at: int) -> tuple[str, str] | None:
    """`env -S STRING`'s string, with what stands before it in its word: (head, string)."""
    word = argv[at]
    if not _is_env(argv):
        return None
    if at >= 2 and argv[at - 1] in SPLIT:
        return "", word
    for head in ("--split-string=", "-S"):
        if word.startswith(head) and word != head:
            return head, word[len(head):]
    return None


def _in_string(head: str, string: str, names: Names, hide: Hide) -> tuple[str, Found]:
    """`env -S`'s string as records hold it, and its secrets."""
    try:
        inner = shlex.split(string)
    except ValueError:  # env would refuse it too: a credential's form is all we can know
        found = [("env -S", s) for s in credentials(string)]
        return head + (hide(string) if found else string), found
    words, found = walk(["env", *inner], names, hide)
    return head + (shlex.join(words[1:]) if found else string), found


def _flagged(word: str, before: str | None, names: Names) -> tuple[str, str, Found]:
    """A flag's value: (what stands before it in its word, the value, its secrets)."""
    flag, sep, value = word.partition("=")
    if word.startswith("-") and sep:
        return flag + sep, value, [(flag, s) for s in pair_secrets(flag.lstrip("-"), value,
                                                                   names)]
    if before is not None and before.startswith("-") and "=" not in before \
            and not word.startswith("-"):
        return "", word, [(before, s) for s in pair_secrets(before.lstrip("-"), word, names)]
    return "", word, [("a URL", s) for s in credentials(word)]


def walk(argv: Sequence[str], names: Names, hide: Hide) -> tuple[list[str], Found]:
    """The command line as records hold it (each secret value through `hide`) and the
    secrets it carries, each with what holds it."""
    words, found = list(argv), []
    pairs = {at: (name, value) for at, name, value in prefix_pairs(argv)}
    for at, word in enumerate(argv):
        split = _split_string(argv, at)
        if at in pairs:
            name, value = pairs[at]
            secret = [(name, s) for s in pair_secrets(name, value, names)]
            head = f"{name}="
        elif split is not None:
            words[at], secret = _in_string(*split, names, hide)
            found += secret
            continue
        else:
            head, value, secret = _flagged(word, argv[at - 1] if at else None, names)
        if secret:
            words[at] = head + hide(value)
        found += secret
    return words, found


def recorded_argv(argv: Sequence[str], salt: str, names: Names = NO_NAMES) -> list[str]:
    """The command line as records hold it: every secret value fingerprinted."""
    return walk(argv, names, lambda value: fingerprint(value, salt))[0]


def named_values(env: Iterable[tuple[str, str]], argv: Sequence[str],
                 names: Names = NO_NAMES) -> Found:
    """Every secret a command line and the environment it is given carry, each with the
    variable or the flag that holds it."""
    found = [(name, s) for name, value in env for s in pair_secrets(name, value, names)]
    return [(name, s) for name, s in [*found, *walk(argv, names, str)[1]] if s]


def secret_values(env: Iterable[tuple[str, str]], argv: Sequence[str],
                  names: Names = NO_NAMES) -> list[str]:
    """Every secret a command line and the environment it is given carry."""
    return [s for _, s in named_values(env, argv, names)]


def masked_argv(argv: Sequence[str], names: Names = NO_NAMES) -> list[str]:
    """The command line as a terminal shows it: every secret value, however short, masked."""
    return walk(argv, names, lambda value: MASK)[0]
