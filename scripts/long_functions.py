#!/usr/bin/env python3
"""Non-test Rust functions longer than LIMIT lines (from the `fn` line to its
closing brace), longest first: `scripts/long_functions.py [DIR] [LIMIT]`
(defaults: `.` and 120, issue 23's bound). Test code is left out: `tests/`
and `benches/` folders, `tests.rs` files, and items under `#[cfg(test)]`,
`#[test]` or `#[tokio::test]`. Strings, characters and comments are blanked
before braces are matched, so a brace in them does not count."""
import bisect
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 120

def strip(src):
    out = []; i = 0; n = len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i); j = n if j < 0 else j
            out.append(" " * (j - i)); i = j; continue
        if src.startswith("/*", i):
            depth = 0; j = i
            while j < n:
                if src.startswith("/*", j): depth += 1; j += 2; continue
                if src.startswith("*/", j):
                    depth -= 1; j += 2
                    if depth == 0: break
                    continue
                j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j; continue
        m = re.match(r'b?r(#*)"', src[i:i+10])
        if m and (i == 0 or not (src[i-1].isalnum() or src[i-1] == '_')):
            hashes = m.group(1); start = i + len(m.group(0))
            end = src.find('"' + hashes, start); end = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", src[i:end])); i = end; continue
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            out.append(re.sub(r"[^\n]", " ", src[i:j+1])); i = j + 1; continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:i+12])
            if m:
                out.append(" " * len(m.group(0))); i += len(m.group(0)); continue
        out.append(c); i += 1
    return "".join(out)

res = []
for dp, dns, fns in os.walk(root):
    dns[:] = [d for d in dns if d not in ("target", ".git", "tests", "benches", "node_modules") and not d.startswith(".")]
    for f in fns:
        if not f.endswith(".rs") or f == "tests.rs": continue
        p = os.path.join(dp, f)
        src = strip(open(p, encoding="utf-8", errors="replace").read())
        lines = src.split("\n")
        # line starts
        starts = [0]
        for l in lines: starts.append(starts[-1] + len(l) + 1)
        lineof = lambda pos: bisect.bisect_right(starts, pos)
        # find cfg(test) ranges
        skip = []
        for m in re.finditer(r"#\[cfg\(test\)\]|#\[test\]|#\[tokio::test[^\]]*\]", src):
            b = src.find("{", m.end())
            if b < 0: continue
            d = 0; j = b
            while j < len(src):
                if src[j] == "{": d += 1
                elif src[j] == "}":
                    d -= 1
                    if d == 0: break
                j += 1
            skip.append((m.start(), j))
        for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", src):
            if any(a <= m.start() <= b for a, b in skip): continue
            # find body open: first '{' or ';' at paren depth 0 after signature
            j = m.end(); pd = 0
            while j < len(src):
                ch = src[j]
                if ch in "([<": pd += 1 if ch != "<" else 0
                if ch in ")]": pd -= 1
                if pd == 0 and ch in "{;": break
                j += 1
            if j >= len(src) or src[j] == ";": continue
            d = 0; k = j
            while k < len(src):
                if src[k] == "{": d += 1
                elif src[k] == "}":
                    d -= 1
                    if d == 0: break
                k += 1
            # start at the line of 'fn' (include attrs? no)
            a = lineof(m.start()); b = lineof(k)
            length = b - a + 1
            if length > limit:
                res.append((length, os.path.relpath(p, root), a, m.group(1)))
res.sort(reverse=True)
for l, p, a, name in res: print(f"{l:5d} {p}:{a} {name}")
print(f"{len(res)} functions over {limit} lines", file=sys.stderr)
