//! What shell commands print in a `ci-logs` session: source lines (for
//! `cat -n`, `sed -n`, `grep -rn`), listings, `git log` and `git diff`,
//! and build logs. All noise: names from the project's noise vocabulary,
//! except a planted error line a build log may carry.

use super::project::{Project, Stack, camel};
use super::source;
use crate::corpus::plant::capitalize;
use crate::rng::Rng;

/// What a README's usage line says a function does: the first six of the
/// source's doc comments (the corpus's sessions are fixed by their seeds,
/// so the list stays six long).
const DOCS: &[&str] = source::DOCS.split_at(6).0;

fn hex(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
        .collect()
}

const VARS: &[&str] = &[
    "raw", "value", "parts", "unit", "result", "entry", "items", "total", "factor", "key",
    "cursor", "frame",
];

fn var(rng: &mut Rng) -> &'static str {
    let v: &&'static str = rng.pick(VARS);
    v
}

/// `cat -n` style: right-aligned line numbers from `first`, a tab, the line.
pub(super) fn numbered(lines: &[String], first: usize) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}\n", first + i))
        .collect()
}

/// `grep -rn NEEDLE` over the sources and tests: the lines that hold it,
/// at most `n`.
pub(super) fn grep(p: &Project, needle: &str, n: usize) -> String {
    let mut out = String::new();
    let mut hits = 0;
    for m in 0..p.modules.len() {
        for (file, lines) in [
            (p.src(m), source::module(p, m)),
            (p.test_file(m), source::tests(p, m)),
        ] {
            for (i, l) in lines.iter().enumerate() {
                if hits < n && l.contains(needle) {
                    out.push_str(&format!("{file}:{}:{l}\n", i + 1));
                    hits += 1;
                }
            }
        }
    }
    out
}

fn month_day(rng: &mut Rng) -> String {
    format!(
        "{} {:>2} {:02}:{:02}",
        rng.pick(&["Jan", "Feb", "Mar", "Apr", "May"]),
        rng.range(1, 28),
        rng.below(24),
        rng.below(60)
    )
}

/// `ls -la` of the repository root.
pub(super) fn ls(rng: &mut Rng, p: &Project) -> String {
    let mut entries: Vec<(&str, String)> = vec![
        ("d", ".".into()),
        ("d", "..".into()),
        ("d", ".git".into()),
        ("d", ".github".into()),
        ("-", ".gitignore".into()),
        ("-", "CHANGELOG.md".into()),
        ("-", "LICENSE".into()),
        ("-", "README.md".into()),
        ("d", "docs".into()),
        ("d", "src".into()),
    ];
    match p.stack {
        Stack::Python => {
            entries.extend([
                ("-", "pyproject.toml".into()),
                ("-", "tox.ini".into()),
                ("d", "tests".into()),
                ("d", format!("{}.egg-info", p.name)),
            ]);
        }
        Stack::Rust => {
            entries.extend([
                ("-", "Cargo.toml".into()),
                ("-", "Cargo.lock".into()),
                ("d", "tests".into()),
                ("d", "target".into()),
                ("-", "rustfmt.toml".into()),
            ]);
        }
        Stack::TypeScript => {
            entries.extend([
                ("-", "package.json".into()),
                ("-", "package-lock.json".into()),
                ("-", "tsconfig.json".into()),
                ("-", "jest.config.js".into()),
                ("d", "test".into()),
                ("d", "node_modules".into()),
            ]);
        }
    }
    let mut out = format!("total {}\n", rng.range(60, 400));
    for (kind, name) in entries {
        let (perm, size) = if kind == "d" {
            ("drwxr-xr-x", 4096)
        } else {
            ("-rw-r--r--", rng.range(40, 40_000))
        };
        let links = if kind == "d" { rng.range(2, 9) } else { 1 };
        out.push_str(&format!(
            "{perm} {links:>2} root root {size:>6} {} {name}\n",
            month_day(rng)
        ));
    }
    out
}

/// `find src tests -name '*.ext'`: every noise source and test file.
pub(super) fn find(p: &Project) -> String {
    let mut out = String::new();
    for m in 0..p.modules.len() {
        out.push_str(&p.src(m));
        out.push('\n');
    }
    for m in 0..p.modules.len() {
        out.push_str(&p.test_file(m));
        out.push('\n');
    }
    out
}

/// `git log --oneline -N`.
pub(super) fn git_log(rng: &mut Rng, p: &Project, n: usize) -> String {
    let mut out = String::new();
    for _ in 0..n {
        let m = rng.below(p.modules.len() as u64) as usize;
        let msg = match rng.below(6) {
            0 => format!("Fix typo in {} docs", p.modules[m]),
            1 => format!("Refactor {} to share the cache", p.modules[m]),
            2 => format!("Add tests for {}", p.function(m, 1)),
            3 => "Bump dev dependencies".to_string(),
            4 => format!("Speed up {} on long inputs", p.function(m, 2)),
            _ => format!(
                "Merge pull request from {}-maintainers/{}",
                p.name, p.modules[m]
            ),
        };
        out.push_str(&format!("{} {msg}\n", hex(rng, 7)));
    }
    out
}

/// `git diff` of the bug's module: the agent's edit so far, one hunk per
/// place it changed.
pub(super) fn git_diff(rng: &mut Rng, p: &Project, hunks: usize) -> String {
    let file = p.src(0);
    let lines = source::module(p, 0);
    let mut out = format!(
        "diff --git a/{file} b/{file}\nindex {}..{} 100644\n--- a/{file}\n+++ b/{file}\n",
        hex(rng, 7),
        hex(rng, 7)
    );
    for h in 0..hunks.max(1) {
        let at = (h * lines.len() / hunks.max(1) + 2).min(lines.len().saturating_sub(8));
        let Some(window) = lines.get(at..at + 7) else {
            break;
        };
        out.push_str(&format!("@@ -{},7 +{},8 @@\n", at + 1, at + 1));
        for (i, l) in window.iter().enumerate() {
            if i == 3 {
                out.push_str(&format!(
                    "-{l}\n+{}\n+{l}\n",
                    l.replace("(", "(_normalize_unit(").replacen(')', "))", 1)
                ));
            } else {
                out.push_str(&format!(" {l}\n"));
            }
        }
    }
    out
}

/// The dependencies a build of `stack` installs or compiles.
fn build_deps(stack: Stack) -> &'static [&'static str] {
    match stack {
        Stack::Python => &[
            "pluggy",
            "iniconfig",
            "packaging",
            "attrs",
            "click",
            "typing_extensions",
            "coverage",
            "hypothesis",
            "sortedcontainers",
            "exceptiongroup",
        ],
        Stack::Rust => &[
            "serde",
            "serde_json",
            "thiserror",
            "regex",
            "memchr",
            "itoa",
            "proc-macro2",
            "quote",
            "syn",
            "once_cell",
            "smallvec",
            "unicode-ident",
        ],
        Stack::TypeScript => &[
            "typescript",
            "ts-jest",
            "jest",
            "@types/node",
            "eslint",
            "prettier",
            "esbuild",
            "semver",
            "chalk",
            "yargs",
        ],
    }
}

/// A dependency install or build of about `size` characters; `error`, if
/// any, is printed as the build's error line near the end.
pub(super) fn build(rng: &mut Rng, p: &Project, size: usize, error: Option<&str>) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut len = 0;
    let deps = build_deps(p.stack);
    match p.stack {
        Stack::Python => lines.push("Obtaining file:///repo".into()),
        Stack::Rust => lines.push("    Updating crates.io index".into()),
        Stack::TypeScript => lines.push(format!(
            "> {}@0.{}.0 build\n> tsc -p tsconfig.json",
            p.name,
            rng.range(1, 9)
        )),
    }
    while len < size {
        let d = rng.pick(deps);
        let v = format!(
            "{}.{}.{}",
            rng.range(0, 9),
            rng.range(0, 30),
            rng.range(0, 200)
        );
        let line = match (p.stack, rng.below(4)) {
            (Stack::Python, 0) => format!(
                "  Downloading {d}-{v}-py3-none-any.whl ({} kB)",
                rng.range(8, 900)
            ),
            (Stack::Python, 1) => "  Installing build dependencies ... done".to_string(),
            (Stack::Python, _) => format!(
                "Requirement already satisfied: {d}>={} in /usr/local/lib/python3.11/site-packages (from {}) ({v})",
                rng.range(0, 9),
                p.name
            ),
            (Stack::Rust, 0) => {
                let (f, l) = (
                    p.src(rng.below(p.modules.len() as u64) as usize),
                    rng.range(3, 600),
                );
                format!(
                    "warning: unused variable: `{}`\n  --> {f}:{l}:{}\n   |\n   = note: `#[warn(unused_variables)]` on by default",
                    var(rng),
                    rng.range(5, 40)
                )
            }
            (Stack::Rust, _) => format!("   Compiling {d} v{v}"),
            (Stack::TypeScript, 0) => {
                format!("npm warn deprecated {d}@{v}: this version is no longer supported")
            }
            (Stack::TypeScript, _) => format!(
                "added {} packages, and audited {} packages in {}s",
                rng.range(1, 60),
                rng.range(300, 900),
                rng.range(2, 30)
            ),
        };
        len += line.len() + 1;
        lines.push(line);
    }
    if let Some(e) = error {
        let m = rng.below(p.modules.len() as u64) as usize;
        let line = rng.range(3, 600);
        lines.push(match p.stack {
            Stack::Python => format!("{}:{line}: {e}", p.src(m)),
            Stack::Rust => format!("{e}\n  --> {}:{line}:{}", p.src(m), rng.range(5, 40)),
            Stack::TypeScript => format!("{}({line},{}): {e}", p.src(m), rng.range(5, 40)),
        });
    }
    lines.push(match p.stack {
        Stack::Python => format!(
            "Successfully installed {}-0.{}.dev{}",
            p.name,
            rng.range(1, 9),
            rng.range(1, 90)
        ),
        Stack::Rust => format!(
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in {}.{:02}s",
            rng.range(1, 90),
            rng.below(100)
        ),
        Stack::TypeScript => format!(
            "\n{} packages are looking for funding\n  run `npm fund` for details",
            rng.range(20, 120)
        ),
    });
    lines.join("\n") + "\n"
}

/// A type checker's or linter's output of about `size` characters.
pub(super) fn lint(rng: &mut Rng, p: &Project, size: usize) -> String {
    let mut out = String::new();
    while out.len() < size {
        let m = rng.below(p.modules.len() as u64) as usize;
        let (l, c) = (rng.range(3, 600), rng.range(1, 80));
        let line = match p.stack {
            Stack::Python => match rng.below(3) {
                0 => format!(
                    "{}:{l}:{c}: E501 line too long ({} > 88 characters)",
                    p.src(m),
                    rng.range(89, 130)
                ),
                1 => format!(
                    "{}:{l}: error: Argument 1 to \"{}\" has incompatible type \"str | None\"; expected \"str\"  [arg-type]",
                    p.src(m),
                    p.function(m, 1)
                ),
                _ => format!(
                    "{}:{l}:{c}: F401 'typing.Optional' imported but unused",
                    p.src(m)
                ),
            },
            Stack::Rust => format!(
                "warning: this `if` has identical blocks\n  --> {}:{l}:{c}\n   |\n   = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html#if_same_then_else",
                p.src(m)
            ),
            Stack::TypeScript => format!(
                "{}\n  {l}:{c}  warning  '{}' is assigned a value but never used  @typescript-eslint/no-unused-vars",
                p.src(m),
                camel(var(rng))
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(match p.stack {
        Stack::Python => "Found errors in 3 files (checked 41 source files)\n",
        Stack::Rust => "warning: `clippy` generated warnings\n",
        Stack::TypeScript => "\n✖ problems found (0 errors, all warnings)\n",
    });
    out
}

/// A README's first lines.
pub(super) fn readme(rng: &mut Rng, p: &Project) -> String {
    let mut out = format!(
        "# {}\n\n{} is a small library for parsing and merging time spans, calendars and schedules.\n\n## Install\n\n",
        p.name,
        capitalize(&p.name)
    );
    out.push_str(match p.stack {
        Stack::Python => "    pip install -e .[dev]\n",
        Stack::Rust => "    cargo add --path .\n",
        Stack::TypeScript => "    npm install\n",
    });
    out.push_str("\n## Usage\n\n");
    for _ in 0..rng.range(4, 9) {
        let (m, f) = p.any_function(rng);
        out.push_str(&format!(
            "- `{f}` ({}): {}.\n",
            p.modules[m],
            rng.pick(DOCS)
        ));
    }
    out.push_str(
        "\n## Development\n\nRun the tests before sending a pull request. See CONTRIBUTING.md.\n",
    );
    out
}
