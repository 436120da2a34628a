#!/usr/bin/env python3
"""Prints the dependency graph of a crate's top-level modules and fails on a cycle.

Usage: .ci/modgraph.py <crate>/src [...]

A module `foo` is `foo.rs` plus everything under `foo/`. It depends on `bar` when its non-test
code names `crate::bar` (in a `use` or a path, grouped imports included). Test code (files named
`tests.rs` and what follows a `#[cfg(test)]` line opening `mod tests`) is left out.
"""
import re
import sys
from pathlib import Path

def strip_tests(text: str) -> str:
    m = re.search(r"^\s*#\[cfg\(test\)\]\s*\n\s*mod tests\b", text, re.M)
    return text[: m.start()] if m else text

def crate_refs(text: str) -> set[str]:
    text = re.sub(r"//[^\n]*", "", text)
    refs = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text))
    for group in re.findall(r"\bcrate::\{([^}]*)\}", text, re.S):
        refs |= set(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
    return refs

def graph(src: Path) -> dict[str, set[str]]:
    mods = {p.stem for p in src.glob("*.rs") if p.stem not in ("lib", "main")}
    deps: dict[str, set[str]] = {m: set() for m in mods}
    for path in src.rglob("*.rs"):
        rel = path.relative_to(src)
        top = rel.parts[0].removesuffix(".rs")
        if top not in mods or path.name == "tests.rs":
            continue
        deps[top] |= {r for r in crate_refs(strip_tests(path.read_text())) if r in mods and r != top}
    return deps

def sccs(deps: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v: str) -> None:
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in sorted(deps[v]):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out

def main() -> int:
    sys.setrecursionlimit(10000)
    bad = False
    for arg in sys.argv[1:]:
        deps = graph(Path(arg))
        print(f"# {arg}")
        for m in sorted(deps):
            print(f"{m} -> {', '.join(sorted(deps[m])) or '-'}")
        for comp in sccs(deps):
            if len(comp) > 1:
                bad = True
                print(f"CYCLE: {{{', '.join(comp)}}}")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
