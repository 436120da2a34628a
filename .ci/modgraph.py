#!/usr/bin/env python3
"""Prints the dependency graph of a crate's top-level modules and fails on a cycle.

Usage: .ci/modgraph.py <crate>/src [...]

A module `foo` is `foo.rs` plus everything under `foo/`. It depends on `bar` when its non-test
code names `crate::bar` (in a `use` or a path, grouped imports included), or calls a method
that `bar` adds to a type defined elsewhere (an `impl Inner { fn flush_oldest .. }` in
`flush.rs` makes a caller of `.flush_oldest(` depend on `flush`). Test code (files named
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

def impl_blocks(text: str):
    """Yields (type name, body) of each inherent `impl Type {` block at the top level."""
    for m in re.finditer(r"^impl(?:<[^>]*>)? ([A-Z][A-Za-z0-9_]*)(?:<[^>]*>)? \{\n", text, re.M):
        end = re.search(r"^\}", text[m.end():], re.M)
        yield m.group(1), text[m.end(): m.end() + (end.start() if end else 0)]

def graph(src: Path) -> dict[str, set[str]]:
    mods = {p.stem for p in src.glob("*.rs") if p.stem not in ("lib", "main")}
    deps: dict[str, set[str]] = {m: set() for m in mods}
    texts: dict[str, str] = {m: "" for m in mods}
    for path in src.rglob("*.rs"):
        rel = path.relative_to(src)
        top = rel.parts[0].removesuffix(".rs")
        if top not in mods or path.name == "tests.rs":
            continue
        text = strip_tests(path.read_text())
        texts[top] += text + "\n"
        deps[top] |= {r for r in crate_refs(text) if r in mods and r != top}
    # Methods a module adds to a type that another module defines.
    defined = {m: set(re.findall(r"^pub(?:\([a-z]+\))? (?:struct|enum) ([A-Z]\w*)|^(?:struct|enum) ([A-Z]\w*)", t, re.M)) for m, t in texts.items()}
    defined = {m: {a or b for a, b in v} for m, v in defined.items()}
    added: dict[str, tuple[str, str]] = {}
    for m, t in texts.items():
        for ty, body in impl_blocks(t):
            if ty in defined[m]:
                continue
            for name in re.findall(r"^    (?:pub(?:\([a-z]+\))? )?fn (\w+)", body, re.M):
                added[name] = (m, ty)
    # A call counts when its receiver is named after the type (`inner.x(` for `Inner`), is
    # `self` in a module with an impl of the type, or when it is `Type::x(`.
    for m, t in texts.items():
        for recv, name in re.findall(r"(\w+)(?:\.|::)(\w+)\(", t):
            if name not in added or added[name][0] == m:
                continue
            owner, ty = added[name]
            snake = re.sub(r"(?<!^)([A-Z])", r"_\1", ty).lower()
            has_impl = re.search(rf"^impl(?:<[^>]*>)? (?:\w+ for )?{ty}\b", t, re.M)
            if recv in (snake, ty) or (recv == "self" and has_impl):
                deps[m].add(owner)
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
