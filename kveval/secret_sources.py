"""What is secret: by name (`api_key`, `DB_PASSWORD`, `Authorization`), by form (URL
userinfo, `sk-` and `hf_` keys, a JSON web token) and by where kveval reads credentials from
(the API key variables, the endpoint's and the proxies' URLs). kveval/masking.py masks what
these find; this module only finds it. Imports nothing of kveval.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

# An API key shorter than this is a placeholder a server that checks no key is given
# (EMPTY, none, dummy): masking it would turn every "none" of a table into ***.
MIN_KEY = 8
# A switch or a placeholder under a secret's name is no secret (ENABLE_AUTH=false, --api-key
# EMPTY, use_auth_token=1): masking it would turn every "false" and "none" of a log into ***.
PLACEHOLDERS = frozenset({"", "0", "1", "true", "false", "yes", "no", "on", "off", "none",
                          "null", "empty", "dummy"})
# Key names whose values are secrets: api_key, api-key, X-Api-Key, accessToken, token,
# password, passphrase, key, Authorization, ... (tokenizer, max_tokens, detokenize are not)
SECRET_NAME = re.compile(r"(?i)(api[_-]?key|(private|access|secret)[_-]?key|[a-z]token($|[_.-])|"
                         r"(^|[_.-])(token|secrets?|passwords?|passwd|passphrase|pass|pwd|"
                         r"credentials?|authorization|auth|bearer|keys?|cookies?)($|[_.-]))")
# Values that are credentials whatever their key's name: an Authorization header, an OpenAI,
# Hugging Face, GitHub, GitLab, Slack or AWS key, a JSON web token.
CREDENTIAL = re.compile(r"(?i)\b(bearer|basic|token)\s+[\w.~+/=-]{8,}|\b(sk|pk|rk)-[\w-]{8,}|"
                        r"\bhf_[a-z0-9]{16,}|\bgh[pousr]_[a-z0-9]{20,}|\bgithub_pat_\w{20,}|"
                        r"\bglpat-[\w-]{16,}|\bxox[abposr]-[\w-]{8,}|\bAKIA[0-9A-Z]{16}\b|"
                        r"\beyJ[\w-]{8,}\.[\w-]{8,}\.")
# The variables kveval or the libraries it runs read credentials from.
KEY_VARIABLES = ("KVEVAL_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                   "ALL_PROXY")
URL_VARIABLES = ("KVEVAL_ENDPOINT", *PROXY_VARIABLES)


def url_secrets(url: str | None) -> list[str]:
    """The credentials of a URL: the password as written and decoded, `user:password`, and
    its base64 (the Basic header's value)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    if user is None and password is None:
        return []
    pair = f"{unquote(user or '')}:{unquote(password or '')}"
    found = [pair, base64.b64encode(pair.encode("utf-8")).decode("ascii")]
    if password:
        found += [password, unquote(password)]
    elif user:  # a token given as the userinfo alone (https://TOKEN@host)
        found += [user, unquote(user)]
    return found


def with_scheme(url: str) -> str:
    """A proxy URL as urllib reads it: `user:password@host:port` (no scheme) as http://."""
    return url if "://" in url else f"http://{url}"


def key_secrets(key: str | None) -> list[str]:
    """An API key as a secret to register: none for a placeholder shorter than MIN_KEY."""
    return [key] if key and len(key) >= MIN_KEY else []


def from_environment(environ: Mapping[str, str]) -> list[str]:
    """The secrets the environment holds: the API keys kveval and its libraries read, and
    the credentials of the endpoint's and the proxies' URLs."""
    found = [s for name in KEY_VARIABLES for s in key_secrets(environ.get(name))]
    for name in URL_VARIABLES:
        value = environ.get(name)
        found += url_secrets(with_scheme(value) if value and name in PROXY_VARIABLES else value)
    return found


def looks_like_credential(value: Any) -> bool:
    return isinstance(value, str) and CREDENTIAL.search(value) is not None


def named_secrets(value: Any) -> list[str]:
    """The strings of a JSON value that are secrets: under a secret-named key at any depth
    (`headers.Authorization`, `key`, `passphrase`) but a placeholder, or shaped like a
    credential."""
    found: list[str] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, named = stack.pop()
        if isinstance(node, Mapping):
            stack += [(v, named or (isinstance(k, str) and bool(SECRET_NAME.search(k))))
                      for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(v, named) for v in node]
        elif isinstance(node, str) and (named and node.strip().lower() not in PLACEHOLDERS
                                        or looks_like_credential(node)):
            found.append(node)
    return found
