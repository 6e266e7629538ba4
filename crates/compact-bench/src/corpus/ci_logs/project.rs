//! The repository a `ci-logs` session works in: its stack, modules,
//! functions and test files (the noise, which recurs all session long),
//! and the fact namespaces (files, tests, keys and versions that occur
//! once). Two vocabularies that never meet: noise words make module and
//! function names, fact words only ever make fact values.

use crate::corpus::plant::{Ledger, capitalize};
use crate::rng::Rng;

/// The language and tooling of the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stack {
    /// pytest, pip, mypy, Python tracebacks.
    Python,
    /// cargo build and test, rustc errors, panics.
    Rust,
    /// npm, tsc, jest.
    TypeScript,
}

const PROJECTS: &[&str] = &[
    "tallyhub",
    "quillmark",
    "pondstat",
    "brinewire",
    "cadenza",
    "lumenq",
    "ferrule",
    "saltmarsh",
    "kestrel",
    "orrery",
    "wickett",
    "marrowdb",
];

/// Module names (noise: they recur in listings, greps and tracebacks).
const MODULES: &[&str] = &[
    "spans",
    "calendar",
    "parser",
    "units",
    "cache",
    "config",
    "cli",
    "schema",
    "render",
    "registry",
    "compat",
    "errors",
    "timeline",
    "export",
    "filters",
    "models",
    "locale",
    "tokens",
    "intervals",
    "series",
    "grid",
    "merge",
    "window",
    "format",
];

const VERBS: &[&str] = &[
    "parse",
    "normalize",
    "load",
    "resolve",
    "build",
    "merge",
    "split",
    "render",
    "validate",
    "coerce",
    "apply",
    "collect",
    "flush",
    "expand",
    "emit",
    "lookup",
];

const NOUNS: &[&str] = &[
    "span", "unit", "offset", "entry", "window", "token", "schema", "row", "range", "key",
    "bucket", "label", "step", "frame", "header", "value",
];

const TYPES: &[&str] = &[
    "Span", "Interval", "Timeline", "Registry", "Frame", "Bucket", "Schema", "Cursor", "Entry",
    "Window",
];

/// Words for fact values only: no noise name contains one.
pub(super) const FACT_WORDS: &[&str] = &[
    "anvil", "beacon", "cinder", "drift", "ember", "fjord", "gable", "harbor", "inlet", "jetty",
    "kiln", "lattice", "mosaic", "nectar", "orbit", "prism", "quarry", "ripple", "sieve", "tether",
    "umber", "vault", "weir", "yoke", "zenith", "basalt", "cobalt", "dune", "fern", "glacier",
    "heron", "ivory",
];

const QUALIFIERS: &[&str] = &[
    "roundtrip",
    "with_offset",
    "at_boundary",
    "after_reload",
    "negative",
    "empty_input",
    "unicode",
    "leap_day",
    "dst_gap",
    "large_values",
    "nested",
    "duplicate_keys",
    "zero_width",
    "trailing_space",
    "mixed_case",
    "overflow",
];

const FACT_DIRS: &[&str] = &[
    "_vendor",
    "backends",
    "contrib",
    "_internal",
    "adapters",
    "plugins",
];

/// The repository of one session.
pub(super) struct Project {
    pub stack: Stack,
    /// Draws the text of the source files.
    pub seed: u64,
    pub name: String,
    /// Noise modules; the first is the one with the bug.
    pub modules: Vec<&'static str>,
    /// Noise functions of each module.
    pub functions: Vec<Vec<String>>,
    /// Noise test names of each module.
    pub tests: Vec<Vec<String>>,
    /// A type name of each module.
    pub types: Vec<&'static str>,
}

impl Project {
    pub(super) fn new(rng: &mut Rng) -> Self {
        let stack = match rng.below(10) {
            0..5 => Stack::Python,
            5..8 => Stack::Rust,
            _ => Stack::TypeScript,
        };
        let name = rng.pick(PROJECTS).to_string();
        let mut pool: Vec<&'static str> = MODULES.to_vec();
        let mut modules = Vec::new();
        for _ in 0..rng.range(9, 14) {
            let i = rng.below(pool.len() as u64) as usize;
            modules.push(pool.swap_remove(i));
        }
        // Names are unique across modules, as a module's own are.
        let mut seen = std::collections::HashSet::new();
        let functions = modules
            .iter()
            .map(|_| {
                let mut names = Vec::new();
                for _ in 0..rng.range(6, 16) {
                    let f = format!("{}_{}", rng.pick(VERBS), rng.pick(NOUNS));
                    if seen.insert(f.clone()) {
                        names.push(f);
                    }
                }
                if names.is_empty() {
                    names.push(format!("{}_{}", rng.pick(VERBS), seen.len()));
                }
                names
            })
            .collect();
        let tests = modules
            .iter()
            .map(|_| {
                let mut names: Vec<String> = Vec::new();
                for _ in 0..rng.range(6, 14) {
                    let t = format!("{}_{}", rng.pick(VERBS), rng.pick(NOUNS));
                    if !names.contains(&t) {
                        names.push(t);
                    }
                }
                names
            })
            .collect();
        let types = modules.iter().map(|_| *rng.pick(TYPES)).collect();
        Self {
            stack,
            seed: rng.next_u64(),
            name,
            modules,
            functions,
            tests,
            types,
        }
    }

    /// The module with the bug.
    pub(super) fn primary(&self) -> &'static str {
        self.modules[0]
    }

    /// The function with the bug.
    pub(super) fn primary_fn(&self) -> String {
        self.function(0, 0)
    }

    /// Function `i` of module `m` in the stack's naming (camelCase in
    /// TypeScript).
    pub(super) fn function(&self, m: usize, i: usize) -> String {
        let f = &self.functions[m][i % self.functions[m].len()];
        match self.stack {
            Stack::TypeScript => camel(f),
            _ => f.clone(),
        }
    }

    /// A random function of a random module.
    pub(super) fn any_function(&self, rng: &mut Rng) -> (usize, String) {
        let m = rng.below(self.modules.len() as u64) as usize;
        let i = rng.below(self.functions[m].len() as u64) as usize;
        (m, self.function(m, i))
    }

    /// The source file of module `m`.
    pub(super) fn src(&self, m: usize) -> String {
        let module = self.modules[m];
        match self.stack {
            Stack::Python => format!("src/{}/{module}.py", self.name),
            Stack::Rust => format!("src/{module}.rs"),
            Stack::TypeScript => format!("src/{module}.ts"),
        }
    }

    /// The test file of module `m`.
    pub(super) fn test_file(&self, m: usize) -> String {
        let module = self.modules[m];
        match self.stack {
            Stack::Python => format!("tests/test_{module}.py"),
            Stack::Rust => format!("tests/{module}.rs"),
            Stack::TypeScript => format!("test/{module}.test.ts"),
        }
    }

    /// A noise test of module `m`, as the runner names it.
    pub(super) fn test_id(&self, m: usize, i: usize) -> String {
        let t = &self.tests[m][i % self.tests[m].len()];
        let module = self.modules[m];
        match self.stack {
            Stack::Python => format!("{}::test_{t}", self.test_file(m)),
            Stack::Rust => format!("{module}::tests::{t}"),
            Stack::TypeScript => format!("{} › {}", capitalize(module), t.replace('_', " ")),
        }
    }

    /// The file extension of sources.
    pub(super) fn ext(&self) -> &'static str {
        match self.stack {
            Stack::Python => "py",
            Stack::Rust => "rs",
            Stack::TypeScript => "ts",
        }
    }

    /// A file path that occurs once in the session.
    pub(super) fn fact_file(&self, rng: &mut Rng, ledger: &mut Ledger) -> String {
        let (w, q) = Self::fact_base(rng, ledger);
        let d = rng.pick(FACT_DIRS);
        let path = match (self.stack, rng.below(5)) {
            (_, 0) => format!("tests/fixtures/{w}_{q}.json"),
            (_, 1) => format!("ci/{w}_{q}.yml"),
            (Stack::Python, _) => format!("src/{}/{d}/{w}_{q}.py", self.name),
            (_, _) => format!("src/{d}/{w}_{q}.{}", self.ext()),
        };
        ledger.reserve(&path);
        path
    }

    /// A fact word and qualifier whose `{word}_{qualifier}` no other fact
    /// value uses (test names, selectors and fixture files are made of
    /// them).
    fn fact_base(rng: &mut Rng, ledger: &mut Ledger) -> (&'static str, &'static str) {
        let mut pair = ("", "");
        ledger.fresh(rng, |r| {
            pair = (*r.pick(FACT_WORDS), *r.pick(QUALIFIERS));
            format!("{}_{}", pair.0, pair.1)
        });
        pair
    }

    /// A test name that occurs once, as the runner prints it (pytest node
    /// id, Rust test path, jest title).
    pub(super) fn fact_test(&self, rng: &mut Rng, ledger: &mut Ledger) -> String {
        let m = rng.below(self.modules.len() as u64) as usize;
        let (w, q) = Self::fact_base(rng, ledger);
        let t = match self.stack {
            Stack::Python => format!("{}::test_{w}_{q}", self.test_file(m)),
            Stack::Rust => format!("{}::tests::{w}_{q}", self.modules[m]),
            Stack::TypeScript => format!(
                "{} › {w} {}",
                capitalize(self.modules[m]),
                q.replace('_', " ")
            ),
        };
        ledger.reserve(&t);
        t
    }

    /// A test selector that occurs once (`-k` of pytest, the filter of
    /// `cargo test`, `-t` of jest) and the command that runs it.
    pub(super) fn fact_selector(&self, rng: &mut Rng, ledger: &mut Ledger) -> (String, String) {
        let m = rng.below(self.modules.len() as u64) as usize;
        let file = self.test_file(m);
        let (w, q) = Self::fact_base(rng, ledger);
        let (sel, cmd) = match self.stack {
            Stack::Python => {
                let sel = format!("test_{w}_{q}");
                let cmd = format!("python -m pytest {file} -q -k {sel}");
                (sel, cmd)
            }
            Stack::Rust => {
                let sel = format!("{w}_{q}");
                (sel.clone(), format!("cargo test -q {sel}"))
            }
            Stack::TypeScript => {
                let sel = format!("{w} {}", q.replace('_', " "));
                let cmd = format!("npx jest {file} -t '{sel}'");
                (sel, cmd)
            }
        };
        ledger.reserve(&sel);
        (sel, cmd)
    }

    /// An identifier (a key, attribute or option) that occurs once, in the
    /// stack's case.
    pub(super) fn fact_key(&self, rng: &mut Rng, ledger: &mut Ledger) -> String {
        let stack = self.stack;
        ledger.fresh(rng, |r| {
            let k = format!(
                "{}_{}",
                r.pick(FACT_WORDS),
                r.pick(&[
                    "offset", "mode", "limit", "policy", "scale", "epoch", "margin", "hint"
                ])
            );
            if stack == Stack::TypeScript {
                camel(&k)
            } else {
                k
            }
        })
    }

    /// A release version of the project that occurs once: calendar
    /// versions (the noise's versions all start below 10).
    pub(super) fn fact_version(&self, rng: &mut Rng, ledger: &mut Ledger) -> String {
        ledger.fresh(rng, |r| {
            format!("{}.{}.{}", r.range(21, 26), r.range(1, 12), r.range(0, 9))
        })
    }
}

/// `parse_span` → `parseSpan`.
pub(super) fn camel(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('_').enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            out.push_str(&capitalize(part));
        }
    }
    out
}
