#!/usr/bin/env python3
"""Which top-level module of the `parlance` crate uses which (`crate::X` paths), and the cycles.

Usage: python3 scripts/module_graph.py [crates/parlance/src]
Prints one line per module with the modules it uses, then any cycle between modules (the modules
are meant to form a DAG: template -> format/message -> analyze -> parse -> constrain/turn -> roundtrip).
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "crates", "parlance", "src")
modules = sorted(
    name[:-3] if name.endswith(".rs") else name
    for name in os.listdir(root)
    if name not in ("lib.rs",) and (name.endswith(".rs") or os.path.isdir(os.path.join(root, name)))
)
uses = {m: set() for m in modules}
for m in modules:
    path = os.path.join(root, m)
    files = [path + ".rs"] if os.path.isfile(path + ".rs") else [
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".rs")
    ]
    for f in files:
        text = open(f, encoding="utf-8").read()
        # Only code: drop line comments (doc links name modules without using them).
        text = "\n".join(line.split("//")[0] for line in text.splitlines())
        for used in re.findall(r"\bcrate::([a-z_]+)", text):
            if used in uses and used != m:
                uses[m].add(used)
for m in modules:
    print(f"{m:18} -> {', '.join(sorted(uses[m])) or '(none)'}")
# Cycles: strongly connected components with more than one module.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in uses[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))
for m in modules:
    if m not in index:
        visit(m)
print("cycles:", "; ".join(" <-> ".join(c) for c in sccs) if sccs else "none")
