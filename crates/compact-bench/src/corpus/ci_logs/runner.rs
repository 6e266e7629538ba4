//! Test runner output (pytest, cargo test, jest), whole or cut by `tail`,
//! and the traceback or panic of a failing script.

use super::project::{Project, Stack};
use super::source;
use crate::rng::Rng;

/// A failing test and the error it failed with.
pub(super) struct Failure {
    pub id: String,
    pub error: String,
}

/// One test run.
pub(super) struct TestRun {
    /// Tests collected.
    pub total: usize,
    pub failures: Vec<Failure>,
    /// Piped through `tail`: only the summary is printed.
    pub tail: bool,
}

/// Whether the stack's runner prints each failure's error in the summary
/// that `tail` keeps (cargo's does not).
pub(super) fn tail_shows_errors(stack: Stack) -> bool {
    stack != Stack::Rust
}

fn secs(rng: &mut Rng) -> String {
    format!("{}.{:02}", rng.range(0, 40), rng.below(100))
}

/// The output of `run`, about `size` characters when printed whole.
pub(super) fn output(rng: &mut Rng, p: &Project, size: usize, run: &TestRun) -> String {
    match p.stack {
        Stack::Python => pytest(rng, p, size, run),
        Stack::Rust => cargo(rng, p, size, run),
        Stack::TypeScript => jest(rng, p, size, run),
    }
}

fn pytest(rng: &mut Rng, p: &Project, size: usize, run: &TestRun) -> String {
    let failed = run.failures.len();
    let passed = run.total.saturating_sub(failed);
    let counts = if failed > 0 {
        format!("{failed} failed, {passed} passed in {}s", secs(rng))
    } else {
        format!("{passed} passed in {}s", secs(rng))
    };
    let mut out = String::new();
    if !run.tail {
        out.push_str(&format!(
            "============================= test session starts ==============================\nplatform linux -- Python 3.11.9, pytest-8.2.1, pluggy-1.5.0\nrootdir: /repo\nconfigfile: pyproject.toml\nplugins: cov-5.0.0, xdist-3.6.1\ncollected {} items\n\n",
            run.total
        ));
    }
    // Progress lines: a dot per passing test, an F per failure.
    let mut left = run.total;
    let mut m = 0;
    let mut progress = Vec::new();
    while left > 0 {
        let n = left.min(rng.range(8, 70) as usize);
        left -= n;
        let mut marks: String = ".".repeat(n);
        if m < run.failures.len() {
            marks.replace_range(n / 2..n / 2 + 1, "F");
        }
        let pct = 100 * (run.total - left) / run.total.max(1);
        progress.push(format!(
            "{} {marks:<50} [{pct:>3}%]",
            p.test_file(m % p.modules.len())
        ));
        m += 1;
    }
    if run.tail {
        for l in progress.iter().rev().take(2).rev() {
            out.push_str(l);
            out.push('\n');
        }
    } else {
        for l in &progress {
            out.push_str(l);
            out.push('\n');
        }
        if failed > 0 {
            out.push_str("\n=================================== FAILURES ===================================\n");
        }
        let body = size.saturating_sub(out.len()) / failed.max(1);
        for f in &run.failures {
            let name = f.id.rsplit("::").next().unwrap_or(&f.id);
            out.push_str(&format!(
                "_________________________ {name} _________________________\n\n"
            ));
            let tests = source::tests(p, 0);
            let want = (body / 40).clamp(4, 60);
            let at = rng.below(tests.len().saturating_sub(want).max(1) as u64) as usize;
            for l in tests.iter().skip(at).take(want) {
                out.push_str(&format!("    {l}\n"));
            }
            out.push_str(&format!(
                ">       assert {}('2wk') == 1209600\nE       {}\n\n",
                p.primary_fn(),
                f.error
            ));
            out.push_str(&format!(
                "{}:{}: {}\n",
                p.test_file(0),
                rng.range(10, 400),
                f.error.split(':').next().unwrap_or("AssertionError")
            ));
        }
    }
    if failed > 0 {
        out.push_str(
            "=========================== short test summary info ============================\n",
        );
        for f in &run.failures {
            out.push_str(&format!("FAILED {} - {}\n", f.id, f.error));
        }
    }
    if run.tail {
        out.push_str(&counts);
        out.push('\n');
    } else {
        out.push_str(&format!(
            "========================= {counts} =========================\n"
        ));
    }
    out
}

fn cargo(rng: &mut Rng, p: &Project, size: usize, run: &TestRun) -> String {
    let failed = run.failures.len();
    let passed = run.total.saturating_sub(failed);
    let mut out = String::new();
    if !run.tail {
        out.push_str(&format!(
            "   Compiling {} v0.{}.0 (/repo)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in {}s\n     Running unittests src/lib.rs (target/debug/deps/{}-{:016x})\n\nrunning {} tests\n",
            p.name,
            rng.range(1, 9),
            secs(rng),
            p.name,
            rng.next_u64(),
            run.total
        ));
        let mut listed = 0;
        while listed < passed && out.len() < size / 2 {
            let m = rng.below(p.modules.len() as u64) as usize;
            out.push_str(&format!("test {} ... ok\n", p.test_id(m, listed)));
            listed += 1;
        }
        if failed > 0 {
            out.push_str("\nfailures:\n\n");
        }
        for f in &run.failures {
            out.push_str(&format!(
                "---- {} stdout ----\nthread '{}' panicked at {}:{}:{}:\n{}\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n",
                f.id,
                f.id,
                p.src(0),
                rng.range(10, 600),
                rng.range(5, 40),
                f.error
            ));
        }
    }
    if failed > 0 {
        out.push_str("\nfailures:\n");
        for f in &run.failures {
            out.push_str(&format!("    {}\n", f.id));
        }
    }
    let verdict = if failed > 0 { "FAILED" } else { "ok" };
    out.push_str(&format!(
        "\ntest result: {verdict}. {passed} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out; finished in {}s\n",
        secs(rng)
    ));
    if failed > 0 {
        out.push_str("\nerror: test failed, to rerun pass `--lib`\n");
    }
    out
}

fn jest(rng: &mut Rng, p: &Project, size: usize, run: &TestRun) -> String {
    let failed = run.failures.len();
    let passed = run.total.saturating_sub(failed);
    let mut out = String::new();
    let block = |rng: &mut Rng, f: &Failure| -> String {
        let file = p.test_file(0);
        let l = rng.range(10, 300);
        format!(
            "  ● {}\n\n    {}\n\n      {} |   it('handles the input', () => {{\n    > {} |     expect({}('2wk')).toEqual(1209600);\n         |                              ^\n\n      at Object.<anonymous> ({file}:{l}:30)\n\n",
            f.id,
            f.error,
            l - 1,
            l,
            p.primary_fn()
        )
    };
    if run.tail {
        if failed > 0 {
            out.push_str(&format!(
                "Summary of all failing tests\n FAIL  {}\n",
                p.test_file(0)
            ));
            for f in &run.failures {
                out.push_str(&block(rng, f));
            }
        }
    } else {
        let mut m = 0;
        while out.len() < size / 2 && m < 4 * p.modules.len() {
            out.push_str(&format!(
                "PASS {} ({} s)\n",
                p.test_file(m % p.modules.len()),
                secs(rng)
            ));
            m += 1;
        }
        if failed > 0 {
            out.push_str(&format!("FAIL {}\n", p.test_file(0)));
            for f in &run.failures {
                out.push_str(&block(rng, f));
            }
        }
    }
    let suites = p.modules.len();
    out.push_str(&format!(
        "Test Suites: {}{} passed, {suites} total\nTests:       {}{passed} passed, {} total\nSnapshots:   0 total\nTime:        {} s\nRan all test suites.\n",
        if failed > 0 { "1 failed, " } else { "" },
        suites - usize::from(failed > 0),
        if failed > 0 { format!("{failed} failed, ") } else { String::new() },
        run.total,
        secs(rng)
    ));
    out
}

/// What a failing script prints: a Python traceback ending in `error`, a
/// Rust panic, or a Node stack.
pub(super) fn crash(rng: &mut Rng, p: &Project, script: &str, error: &str) -> String {
    let frames = rng.range(2, 5) as usize;
    match p.stack {
        Stack::Python => {
            let mut out = format!(
                "Traceback (most recent call last):\n  File \"/repo/{script}\", line {}, in <module>\n    print({}('2wk'))\n",
                rng.range(3, 12),
                p.primary_fn()
            );
            for i in 0..frames {
                let m = if i == 0 {
                    0
                } else {
                    rng.below(p.modules.len() as u64) as usize
                };
                let f = p.function(m, i);
                let src = source::module(p, m);
                // The frame's line is a statement a few lines into the
                // function's body.
                let at = src
                    .iter()
                    .position(|l| l.contains(&format!("{f}(")))
                    .map_or(0, |i| i + rng.range(2, 6) as usize);
                let line = src
                    .get(at)
                    .map(|l| l.trim())
                    .filter(|l| !l.is_empty())
                    .unwrap_or("return None");
                out.push_str(&format!(
                    "  File \"/repo/{}\", line {}, in {f}\n    {line}\n",
                    p.src(m),
                    at + 1,
                ));
            }
            out.push_str(error);
            out.push('\n');
            out
        }
        Stack::Rust => format!(
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in {}s\n     Running `target/debug/examples/{}`\nthread 'main' panicked at {}:{}:{}:\n{error}\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            secs(rng),
            script
                .trim_end_matches(".rs")
                .rsplit('/')
                .next()
                .unwrap_or("repro"),
            p.src(0),
            rng.range(10, 600),
            rng.range(5, 40)
        ),
        Stack::TypeScript => {
            let mut out = format!("/repo/{script}:{}\n", rng.range(3, 12));
            out.push_str(&format!("{error}\n"));
            for i in 0..frames {
                let m = if i == 0 {
                    0
                } else {
                    rng.below(p.modules.len() as u64) as usize
                };
                out.push_str(&format!(
                    "    at {} (/repo/{}:{}:{})\n",
                    p.function(m, i),
                    p.src(m).replace(".ts", ".js").replace("src/", "dist/"),
                    rng.range(10, 640),
                    rng.range(3, 40)
                ));
            }
            out.push_str("\nNode.js v20.11.1\n");
            out
        }
    }
}
