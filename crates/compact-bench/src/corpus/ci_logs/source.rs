//! The repository's source files. Each module's text is drawn from its
//! own seed, so every `cat -n`, `sed -n`, `grep -rn` or diff of the same
//! file shows the same lines, as in a real checkout.

use super::project::{Project, Stack, camel};
use crate::rng::Rng;

const COMMENTS: &[&str] = &[
    "keep the old behaviour for callers that pass a bare number",
    "fast path: most inputs are already normalized",
    "the registry is filled lazily on first use",
    "this mirrors what the CLI does before dispatch",
    "units are matched case-insensitively",
    "FIXME: this walks the list twice",
    "see the module docstring for the grammar",
    "cached per process; cleared by reset()",
    "order matters here, longest suffix first",
    "historical: accepted for backwards compatibility",
    "strict mode rejects anything not in the table",
    "NOTE: do not reorder, the CLI relies on it",
];

/// The doc comments of generated functions (a README's usage lines use
/// the first six).
pub(super) const DOCS: &[&str] = &[
    "Return the normalized form of the input",
    "Split the raw text into its parts",
    "Look the value up in the registry",
    "Merge adjacent entries that overlap",
    "Build the frame for one window",
    "Validate the header before anything is parsed",
    "Convert a count of units to seconds",
    "Drop entries that fall outside the window",
];

const VARS: &[&str] = &[
    "raw", "value", "parts", "unit", "result", "entry", "items", "total", "factor", "key",
    "cursor", "frame",
];

/// Unit names the code's tables hold (noise).
const TABLE_UNITS: &[(&str, u64)] = &[
    ("s", 1),
    ("sec", 1),
    ("min", 60),
    ("h", 3600),
    ("hr", 3600),
    ("d", 86_400),
    ("day", 86_400),
    ("wk", 604_800),
    ("week", 604_800),
];

fn var(rng: &mut Rng) -> &'static str {
    let v: &&'static str = rng.pick(VARS);
    v
}

/// The source of module `m`.
pub(super) fn module(p: &Project, m: usize) -> Vec<String> {
    lines(p, m, p.seed ^ (m as u64).wrapping_mul(0x9E37_79B9))
}

/// The tests of module `m`.
pub(super) fn tests(p: &Project, m: usize) -> Vec<String> {
    let mut rng = Rng::new(p.seed ^ 0x7E57 ^ (m as u64).wrapping_mul(0x85EB_CA6B));
    let mut out = Vec::new();
    out.push(match p.stack {
        Stack::Python => format!("from {}.{} import *\n", p.name, p.modules[m]),
        Stack::Rust => format!("use {}::{}::*;\n", p.name, p.modules[m]),
        Stack::TypeScript => format!("import * as m from '../src/{}';\n", p.modules[m]),
    });
    for (i, t) in p.tests[m].iter().enumerate() {
        let f = p.function(m, i);
        let (unit, secs) = *rng.pick(TABLE_UNITS);
        let n = rng.range(1, 9);
        match p.stack {
            Stack::Python => {
                out.push(format!("def test_{t}():"));
                out.push(format!("    assert {f}('{n}{unit}') == {}", n * secs));
                out.push(String::new());
            }
            Stack::Rust => {
                out.push("#[test]".into());
                out.push(format!("fn {t}() {{"));
                out.push(format!(
                    "    assert_eq!({f}(\"{n}{unit}\").unwrap().seconds(), {});",
                    n * secs
                ));
                out.push("}".into());
                out.push(String::new());
            }
            Stack::TypeScript => {
                out.push(format!("test('{}', () => {{", t.replace('_', " ")));
                out.push(format!(
                    "  expect(m.{f}('{n}{unit}')).toEqual({});",
                    n * secs
                ));
                out.push("});".into());
                out.push(String::new());
            }
        }
    }
    out
}

/// A source file of `p`'s stack drawn from `seed`, using module `m`'s
/// functions and type.
pub(super) fn lines(p: &Project, m: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<String> = match p.stack {
        Stack::Python => vec![
            format!("\"\"\"{}.\"\"\"", DOCS[m % DOCS.len()]),
            "from __future__ import annotations".into(),
            String::new(),
            "import logging".into(),
            "import re".into(),
            String::new(),
            "log = logging.getLogger(__name__)".into(),
            String::new(),
        ],
        Stack::Rust => vec![
            format!("//! {}.", DOCS[m % DOCS.len()]),
            String::new(),
            "use std::collections::HashMap;".into(),
            String::new(),
            "use crate::errors::Error;".into(),
            String::new(),
        ],
        Stack::TypeScript => vec![
            format!("// {}.", DOCS[m % DOCS.len()]),
            "import { Frame } from './models';".into(),
            String::new(),
        ],
    };
    for i in 0..p.functions[m].len() {
        let f = p.function(m, i);
        let g = p.any_function(&mut rng).1;
        let block = match rng.below(5) {
            0 if i > 0 => table(&mut rng, p, i),
            1 => class(&mut rng, p, m, &f),
            2 => matcher(&mut rng, p, &f),
            _ => function(&mut rng, p, m, &f, &g),
        };
        out.extend(block);
        out.push(String::new());
        if p.stack == Stack::Python {
            out.push(String::new());
        }
    }
    // Templates holding newlines become lines of their own.
    out.iter()
        .flat_map(|l| l.split('\n').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

fn function(rng: &mut Rng, p: &Project, m: usize, f: &str, g: &str) -> Vec<String> {
    let t = p.types[m];
    let (a, b) = (var(rng), var(rng));
    let comment = rng.pick(COMMENTS);
    let doc = rng.pick(DOCS);
    let k = rng.range(2, 64);
    let mut v = match p.stack {
        Stack::Python => vec![
            format!("def {f}({a}, *, strict=False):"),
            format!("    \"\"\"{doc}.\"\"\""),
            format!("    if {a} is None:"),
            "        return None".into(),
            format!("    # {comment}"),
            format!("    {b} = {g}({a})"),
            format!("    for item in {b}:"),
            "        if not item:".into(),
            "            continue".into(),
            format!("        if len(item) > {k}:"),
            format!("            raise ValueError(f\"{{item!r}} is longer than {k}\")"),
        ],
        Stack::Rust => vec![
            format!("/// {doc}."),
            format!("pub fn {f}({a}: &str) -> Result<{t}, Error> {{"),
            format!("    // {comment}"),
            format!("    let {b} = {g}({a})?;"),
            format!("    if {b}.len() > {k} {{"),
            format!("        return Err(Error::TooLong({b}.len()));"),
            "    }".into(),
            format!("    let mut out = {t}::default();"),
            format!("    for item in {b}.iter() {{"),
            "        out.push(item.clone());".into(),
            "    }".into(),
        ],
        Stack::TypeScript => vec![
            format!("/** {doc}. */"),
            format!("export function {f}({a}: string): {t} | undefined {{"),
            format!("  // {comment}"),
            format!("  const {b} = {g}({a});"),
            format!("  if (!{b}) return undefined;"),
            format!("  if ({b}.length > {k}) {{"),
            format!("    throw new RangeError(`${{{a}}} is longer than {k}`);"),
            "  }".into(),
        ],
    };
    // Bodies differ in length, as real ones do.
    for _ in 0..rng.below(8) {
        let (c, h) = (var(rng), p.any_function(rng).1);
        v.push(match p.stack {
            Stack::Python => format!("    {c} = {h}({b}, strict=strict)"),
            Stack::Rust => format!("    let {c} = {h}(&{b})?;"),
            Stack::TypeScript => format!("  const {}{} = {h}({b});", c, rng.below(9)),
        });
    }
    v.push(match p.stack {
        Stack::Python => format!("    return {t}({b})"),
        Stack::Rust => "    Ok(out)\n}".into(),
        Stack::TypeScript => format!("  return new {t}({b});\n}}"),
    });
    v
}

fn class(rng: &mut Rng, p: &Project, m: usize, f: &str) -> Vec<String> {
    let t = p.types[m];
    let field = var(rng);
    match p.stack {
        Stack::Python => vec![
            format!(
                "class {t}{}:",
                rng.pick(&["Cache", "Builder", "State", "View"])
            ),
            format!("    \"\"\"{}.\"\"\"", rng.pick(DOCS)),
            String::new(),
            format!("    def __init__(self, {field}=None):"),
            format!("        self.{field} = {field} or {{}}"),
            "        self._hits = 0".into(),
            String::new(),
            format!("    def {f}(self, key):"),
            "        self._hits += 1".into(),
            format!("        return self.{field}.get(key)"),
        ],
        Stack::Rust => vec![
            "#[derive(Debug, Default, Clone)]".into(),
            format!(
                "pub struct {t}{} {{",
                rng.pick(&["Cache", "Builder", "State", "View"])
            ),
            format!("    {field}: HashMap<String, u64>,"),
            "    hits: usize,".into(),
            "}".into(),
            String::new(),
            format!("impl {t} {{"),
            format!("    pub fn {f}(&mut self, key: &str) -> Option<u64> {{"),
            "        self.hits += 1;".into(),
            format!("        self.{field}.get(key).copied()"),
            "    }".into(),
            "}".into(),
        ],
        Stack::TypeScript => vec![
            format!(
                "export class {t}{} {{",
                rng.pick(&["Cache", "Builder", "State", "View"])
            ),
            format!(
                "  private {}: Map<string, number> = new Map();",
                camel(field)
            ),
            "  private hits = 0;".into(),
            String::new(),
            format!("  {f}(key: string): number | undefined {{"),
            "    this.hits += 1;".into(),
            format!("    return this.{}.get(key);", camel(field)),
            "  }".into(),
            "}".into(),
        ],
    }
}

fn table(rng: &mut Rng, p: &Project, i: usize) -> Vec<String> {
    let name = format!(
        "UNITS_{}",
        ["V1", "V2", "STRICT", "LENIENT", "ALIASES"][i % 5]
    );
    let n = rng.range(4, TABLE_UNITS.len() as u64) as usize;
    let mut v = vec![match p.stack {
        Stack::Python => format!("_{name} = {{"),
        Stack::Rust => format!("const {name}: &[(&str, u64)] = &["),
        Stack::TypeScript => format!("export const {name}: Record<string, number> = {{"),
    }];
    for &(u, s) in &TABLE_UNITS[..n] {
        v.push(match p.stack {
            Stack::Python => format!("    \"{u}\": {s},"),
            Stack::Rust => format!("    (\"{u}\", {s}),"),
            Stack::TypeScript => format!("  {u}: {s},"),
        });
    }
    v.push(match p.stack {
        Stack::Python => "}".into(),
        Stack::Rust => "];".into(),
        Stack::TypeScript => "};".into(),
    });
    v
}

fn matcher(rng: &mut Rng, p: &Project, f: &str) -> Vec<String> {
    let a = var(rng);
    let mut v = vec![match p.stack {
        Stack::Python => format!("def {f}({a}):"),
        Stack::Rust => format!("fn {f}({a}: &str) -> Option<u64> {{"),
        Stack::TypeScript => format!("function {f}({a}: string): number | undefined {{"),
    }];
    match p.stack {
        Stack::Python => v.push(format!("    {a} = {a}.strip().lower()")),
        Stack::Rust => v.push(format!("    match {a}.trim() {{")),
        Stack::TypeScript => v.push(format!("  switch ({a}.trim()) {{")),
    }
    for &(u, s) in TABLE_UNITS.iter().take(rng.range(3, 7) as usize) {
        v.push(match p.stack {
            Stack::Python => format!("    if {a} == \"{u}\":\n        return {s}"),
            Stack::Rust => format!("        \"{u}\" => Some({s}),"),
            Stack::TypeScript => format!("    case '{u}':\n      return {s};"),
        });
    }
    v.push(match p.stack {
        Stack::Python => "    log.debug(\"unknown unit %r\", unit)\n    return None".into(),
        Stack::Rust => "        _ => None,\n    }\n}".into(),
        Stack::TypeScript => "    default:\n      return undefined;\n  }\n}".into(),
    });
    v
}
