"""The layout's rules (docs/architecture.md), read from the code: the arrows between folders,
no two modules importing each other (directly or round a longer circle), no module over 300
lines. Imports under `if TYPE_CHECKING:` count as any other: a circle in the types is a circle
in the design."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kveval"
# (from, to): a folder that must never import another (judge/stats.py: numpy and scipy only)
NEVER = {("adapters", "run"), ("judge", "run"), ("run", "show"), ("judge", "show"),
         ("formats", "run"), ("formats", "judge"), ("formats", "show"), ("adapters", "judge")}
MAX_LINES = 300


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.ImportFrom) -> set[str]:
    found = {str(node.module)}
    for alias in node.names:
        name = f"{node.module}.{alias.name}"
        if (PACKAGE.parent / name.replace(".", "/")).with_suffix(".py").is_file() or \
                (PACKAGE.parent / name.replace(".", "/") / "__init__.py").is_file():
            found.add(name)
    return found


def imports() -> dict[str, set[str]]:
    """Every kveval module and the kveval modules it imports: at the top, in a function, or
    for its annotations alone."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kveval"):
                found |= _targets(node)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("kveval")}
        graph[_name(path)] = found - {_name(path)}
    return graph


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else "kveval"


def _circle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports from `start` back to itself, if any (packages' __init__ aside)."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen and nxt in graph:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_arrows_run_one_way():
    broken = sorted(f"{a} -> {b}" for a, targets in imports().items() for b in targets
                    if (_folder(a), _folder(b)) in NEVER
                    or (_folder(b) == "cli" and _folder(a) != "cli"))
    assert not broken, broken


def test_judging_statistics_import_no_other_kveval_module():
    assert imports()["kveval.judge.stats"] == set()


def test_no_two_modules_import_each_other():
    graph = {m: {t for t in ts if not (PACKAGE.parent / t.replace(".", "/")).is_dir()}
             for m, ts in imports().items()}
    circles = [c for m in graph if (c := _circle_from(m, graph))]
    assert not circles, " | ".join(" -> ".join(c) for c in circles[:5])


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: _name(p))
def test_every_module_is_under_300_lines(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)}: {lines} lines"
