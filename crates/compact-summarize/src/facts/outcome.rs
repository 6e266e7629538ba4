//! What a command's output says happened: its exit status, a test
//! runner's summary and failing tests, the error it ended with, and, for a
//! short output, the lines that carry its result.
//!
//! Agent frameworks wrap command output their own way (mini-swe-agent's
//! `<returncode>1</returncode><output>…</output>`, Codex's `Exit code: 1`
//! header); the wrapping is read for the status and then set aside.

use std::sync::LazyLock;

use regex::Regex;

use super::lexicon::re;
use super::{clip, floor_boundary};

/// What a command's output says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The exit status, when the output states it.
    pub exit: Option<i64>,
    /// The command timed out.
    pub timed_out: bool,
    /// How long it was given, as the output says (`after 60 seconds`).
    pub timeout: Option<String>,
    /// A test runner's summary (`3 failed, 41 passed`, `Ran 12 tests: OK`).
    pub tests: Option<String>,
    /// Failing (or, in a short verbose run, passing) test ids.
    pub test_ids: Vec<String>,
    /// The error the output ends with (an exception line, `error: …`,
    /// `command not found`).
    pub error: Option<String>,
    /// Where in the project that error was raised (`test/conftest.py:9`):
    /// the innermost frame of its traceback outside installed packages.
    pub at: Option<String>,
    /// A checker's findings (type checker, linter, compiler diagnostics).
    pub diagnostics: Vec<String>,
    /// What the failing tests failed with, each once (pytest's short
    /// summary line `FAILED id - KeyError: 'x'`, the line under jest's
    /// `● Suite › name`): the errors a fix made go away are part of its
    /// story.
    pub failures: Vec<String>,
    /// The result lines of a short output (or the last lines of a long one).
    pub lines: Vec<String>,
    /// `lines` are all the output said (it was short).
    pub whole: bool,
}

static RETURNCODE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)<returncode>\s*(-?\d+)\s*</returncode>|(?m)^\[?(?:exit code|exit status|process exited with code|exited with code|return code)[:\s]+(-?\d+)\]?",
    )
});
static WRAPPER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?s)<returncode>.*?</returncode>|<elided_chars>.*?</elided_chars>|<warning>.*?</warning>|</?(?:output|output_head|output_tail|exception|stdout|stderr)>",
    )
});
static TIMED_OUT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)timed out|timeout expired|time limit exceeded"));
/// The limit a timeout message names: `timed out after 60 seconds`.
static TIMED_OUT_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)timed out after (\d+(?:\.\d+)? ?(?:seconds?|secs?|s|minutes?|mins?|m|ms))(?-u:\b)")
});
/// An exception named inside a line (`pn.upper() AttributeError: …`,
/// `ERROR: TypeError: …`): a script that prints what it caught.
static ERROR_INSIDE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?-u:\b)(?:[A-Z][A-Za-z0-9_]*(?:Error|Exception|Warning)|[A-Za-z_.]*Error)(?::| -) \S.*$")
});
/// pytest's last line, with or without its `=` rule.
static PYTEST: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?m)^=*\s*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)(?:, )?)+)(?: in [\d.]+s)?.*?=*\s*$|(?m)^=+ (no tests ran)",
    )
});
static UNITTEST_RAN: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^Ran (\d+) tests? in"));
static UNITTEST_RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^(OK(?: \([^)]*\))?|FAILED \([^)]*\))\s*$"));
static CARGO: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^test result: (\w+)\. (\d+ passed; \d+ failed)"));
static JEST: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^Tests:\s+(.+)$"));
static FAILED_ID: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?m)^(?:FAILED|ERROR) (\S+::\S+)|^(\S+::\S+) (?:FAILED|ERROR)|^(?:FAIL|ERROR): (\w+ \([\w.]+\))|^test (\S+) \.\.\. FAILED|^--- FAIL: (\S+)",
    )
});
/// jest's failing test, `● Suite › name`.
static JEST_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*● (.+ › .+?)\s*$"));
/// pytest's short summary: `FAILED id - Error: message`.
static PYTEST_FAILURE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^(?:FAILED|ERROR) \S+::\S+ - (.+?)\s*$"));
/// A Rust panic: `thread 'main' panicked at src/x.rs:5:9:` then its
/// message on the next line (or quoted on the same one, before 1.73).
static PANIC: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?m)^thread '[^']*' panicked at (?:'([^'\n]+)', \S+|\S+:\d+:\d+:\s*\n\s*(.+?))\s*$")
});
static PASSED_ID: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^(\S+::\S+) PASSED"));
/// The line an error ends with: an exception (`ValueError: …`,
/// `django.core.exceptions.ImproperlyConfigured: …`), a compiler's
/// `error: …`, a shell's complaint.
static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning)|AssertionError|error(?:\[\w+\])?|fatal|panic(?:ked)?)(?::\s.*|$)|: command not found$|: No such file or directory$|: No module named \S+$|^E\s+\w+(?:Error|Exception):",
    )
});
/// The shell's own prefix before a complaint.
static SHELL_PREFIX: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:(?:/\S+/)?(?:ba|da|z|k)?sh: (?:line )?\d+: )"));
/// Output lines that say nothing about the result.
static NOISE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:warning: running pip as|\[notice\]|collecting |downloading |using cached|requirement already satisfied|installing collected|building wheel|created wheel|stored in directory|preparing metadata|getting requirements|obtaining |[-=_*#~.]{3,}$|\s*\d+%\||finished `?\w+`? profile|compiling |updating |running `|note: run with|blocking waiting|fresh |checking |locking )",
    )
});

/// A diagnostic line: `path:line[:col]: error|warning|CODE …`.
static DIAGNOSTIC: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\S+:\d+(?::\d+)?:?\s+(?:error|warning|[A-Z]{1,3}\d{2,4})\b"));
/// A diagnostic without what varies between its instances: where it is,
/// the names it quotes, the numbers it gives.
fn diagnostic_shape(line: &str) -> String {
    static PLACE: LazyLock<Regex> = LazyLock::new(|| re(r"^\S+?:\d+(?::\d+)?:?\s*"));
    static QUOTED_OR_NUMBER: LazyLock<Regex> =
        LazyLock::new(|| re(r#""[^"]*"|'[^']*'|`[^`]*`|\d+"#));
    let rest = PLACE.replace(line, "");
    QUOTED_OR_NUMBER.replace_all(&rest, "_").into_owned()
}

/// Most diagnostics kept from one output.
const MAX_DIAGNOSTICS: usize = 4;

/// Most result lines kept from one output.
const MAX_LINES: usize = 9;
/// An output of at most this many lines is kept whole (a search that
/// found this few lines found something; more are a listing).
const WHOLE_LINES: usize = 3;
/// A line that gives a verdict on what it checked.
static VERDICT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?-u:\b)(?:ERROR|FAIL(?:ED|URE)?|MISMATCH|UNEXPECTED|WRONG|BUG)(?-u:\b)|\((?:should be|expected) [^)]*\)",
    )
});
/// Longest result line kept, in bytes.
const MAX_LINE: usize = 160;
/// Most test ids kept.
const MAX_IDS: usize = 8;

/// Reads a command's output.
pub(crate) fn read(output: &str) -> Outcome {
    let mut o = Outcome::default();
    if let Some(c) = RETURNCODE.captures(output) {
        o.exit = c
            .get(1)
            .or_else(|| c.get(2))
            .and_then(|m| m.as_str().parse().ok());
    }
    o.timed_out = output.contains("<exception>") && TIMED_OUT.is_match(output)
        || output
            .lines()
            .take(3)
            .any(|l| TIMED_OUT.is_match(l) && l.len() < 200);
    if o.timed_out {
        o.timeout = TIMED_OUT_AFTER
            .captures(output)
            .map(|c| format!("after {}", &c[1]));
    }
    let body = WRAPPER.replace_all(output, "\n");
    let lines: Vec<&str> = body
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !RETURNCODE.is_match(l))
        // Our own marks (a cap's cut) are not the program's words.
        .filter(|l| !l.contains("⟦truncated:") && !l.contains("⟦removed:"))
        .collect();
    o.tests = tests_summary(&body);
    read_test_ids(&mut o, &body);
    o.error = final_error(&body, &lines);
    if o.error.is_some() {
        o.at = error_site(&body);
    }
    read_diagnostics(&mut o, &lines);
    if o.tests.is_none() {
        read_result_lines(&mut o, &lines);
    }
    o
}

/// The tests that failed (or the few that passed, when none failed) and
/// what they failed with.
fn read_test_ids(o: &mut Outcome, body: &str) {
    for c in FAILED_ID.captures_iter(body) {
        if let Some(m) = (1..=5).find_map(|i| c.get(i)) {
            push_unique(&mut o.test_ids, m.as_str());
        }
    }
    for c in JEST_FAILED.captures_iter(body) {
        push_unique(&mut o.test_ids, &c[1]);
        // What it failed with: the first error line under its header.
        let after = &body[c.get(0).map_or(0, |m| m.end())..];
        if let Some(e) = after
            .lines()
            .take(6)
            .map(str::trim)
            .find(|l| ERROR_LINE.is_match(l))
        {
            push_failure(&mut o.failures, e);
        }
    }
    for c in PYTEST_FAILURE.captures_iter(body) {
        push_failure(&mut o.failures, &c[1]);
    }
    // cargo's closing list: `failures:` then one indented test path a line.
    for block in body.split("\nfailures:\n").skip(1) {
        for line in block.lines() {
            let id = line.trim();
            if id.is_empty() || !line.starts_with("    ") || id.contains(char::is_whitespace) {
                break;
            }
            push_unique(&mut o.test_ids, id);
        }
    }
    if o.test_ids.is_empty() {
        let passed: Vec<&str> = PASSED_ID
            .captures_iter(body)
            .filter_map(|c| c.get(1).map(|m| m.as_str()))
            .collect();
        if passed.len() <= MAX_IDS {
            for p in passed {
                push_unique(&mut o.test_ids, p);
            }
        }
    }
    o.test_ids.truncate(MAX_IDS);
}

/// The error the output ends on: a panic, the last error line, or a
/// script's own report of what it caught, without the shell's prefix.
fn final_error(body: &str, lines: &[&str]) -> Option<String> {
    let panic = PANIC
        .captures_iter(body)
        .last()
        .and_then(|c| c.get(1).or_else(|| c.get(2)))
        .map(|m| m.as_str());
    panic
        .or_else(|| {
            lines
                .iter()
                .rev()
                .map(|l| l.trim())
                .find(|l| ERROR_LINE.is_match(l))
        })
        .map(str::to_owned)
        // A script's own report of what it caught, inside a line.
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find_map(|l| ERROR_INSIDE.find(l).map(|m| m.as_str().to_owned()))
        })
        // `bash: line 1: hexdump: command not found`: the shell's name and
        // line say nothing of what failed.
        .map(|l| {
            let l = SHELL_PREFIX.replace(&l, "");
            // pytest's `E       AssertionError: …`: the gap is layout.
            clip(&one_spaced(&l), MAX_LINE)
        })
}

/// A frame of a traceback: Python's `File "x.py", line 9, in f`,
/// pytest's short `x.py:9: in f`, a Rust panic's `panicked at
/// src/x.rs:5:9`, a JavaScript stack's `at f (src/x.js:3:7)`.
static FRAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?m)^\s*File "([^"\n]+)", line (\d+)|^(\S+\.py):(\d+): in |panicked at (\S+?):(\d+):\d+|^\s+at (?:\S+ \()?([^\s()]+?):(\d+):\d+\)?\s*$"#,
    )
});
/// Paths of code the project did not write: installed packages, the
/// interpreter's library, the runtime.
static NOT_PROJECT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"site-packages/|dist-packages/|/lib/python\d|node_modules/|^node:|^internal/|<frozen |^<|/rustc/|\.cargo/registry/|/\.rustup/",
    )
});

/// Where the error was raised: the innermost project frame. Python and
/// pytest print the innermost frame last, a JavaScript stack first.
fn error_site(body: &str) -> Option<String> {
    let frames: Vec<(String, bool)> = FRAME
        .captures_iter(body)
        .filter_map(|c| {
            let (path, line, innermost_first) = if let Some(p) = c.get(1) {
                (p, c.get(2)?, false)
            } else if let Some(p) = c.get(3) {
                (p, c.get(4)?, false)
            } else if let Some(p) = c.get(5) {
                (p, c.get(6)?, false)
            } else {
                (c.get(7)?, c.get(8)?, true)
            };
            let path = path.as_str();
            (!NOT_PROJECT.is_match(path))
                .then(|| (format!("{path}:{}", line.as_str()), innermost_first))
        })
        .collect();
    match frames.first() {
        Some((site, true)) => Some(site.clone()),
        Some(_) => frames.last().map(|(site, _)| site.clone()),
        None => None,
    }
    .map(|s| clip(&s, MAX_LINE / 2))
}

/// A checker's findings (`src/x.py:25: error: …`, `x.rs:3:1: E0425`),
/// each its own finding, the first few kept.
fn read_diagnostics(o: &mut Outcome, lines: &[&str]) {
    // Errors before warnings and style codes: a type error is what the
    // run is about, `E501 line too long` rarely is.
    // Many of one kind (`incompatible type "str | None"` in ten places)
    // are one finding; the odd one out is its own.
    let found: Vec<&str> = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| DIAGNOSTIC.is_match(l))
        .collect();
    let shapes: Vec<String> = found.iter().map(|l| diagnostic_shape(l)).collect();
    let alike = |i: usize| shapes.iter().filter(|s| **s == shapes[i]).count();
    let mut order: Vec<usize> = (0..found.len())
        .filter(|&i| shapes[..i].iter().all(|s| *s != shapes[i]))
        .collect();
    order.sort_by_key(|&i| (!found[i].contains(": error"), alike(i) > 1));
    let found: Vec<String> = order
        .into_iter()
        .map(|i| match alike(i) {
            1 => found[i].to_owned(),
            n => format!("{} (+{} like it)", found[i], n - 1),
        })
        .collect();
    for l in &found {
        if o.diagnostics.len() >= MAX_DIAGNOSTICS {
            break;
        }
        let l = clip(l, MAX_LINE);
        if o.error.as_deref() != Some(l.as_str()) && !o.diagnostics.contains(&l) {
            o.diagnostics.push(l);
        }
    }
}

/// The lines that show what a program without a test summary set out to
/// do and how it went.
fn read_result_lines(o: &mut Outcome, lines: &[&str]) {
    // With the error's place known, the traceback (its header, its
    // frames and the source line under each) says where it was again.
    let traceback = |k: usize, l: &str| {
        o.at.is_some()
            && (l == "Traceback (most recent call last):"
                || FRAME.is_match(lines[k])
                || k > 0 && FRAME.is_match(lines[k - 1]))
    };
    let meaningful: Vec<&str> = lines
        .iter()
        .enumerate()
        .map(|(k, l)| (k, l.trim()))
        .filter(|&(k, l)| !NOISE.is_match(l) && !traceback(k, l))
        .map(|(_, l)| l)
        .collect();
    // A program's output opens with what it set out to show (`Found 81
    // visit methods`) and ends with how it went.
    o.whole = meaningful.len() <= WHOLE_LINES;
    let take: Vec<&str> = if o.whole {
        meaningful.clone()
    } else {
        // Its first line, the lines that report a failure or an
        // exception it caught (a test script's `ERROR: TypeError: …`
        // is what it found), its last two.
        let n = meaningful.len();
        let head = n.min(3);
        let tail = (n - head).min(3);
        let mut v: Vec<&str> = meaningful[..head].to_vec();
        v.extend(
            meaningful[head..n - tail]
                .iter()
                .filter(|l| ERROR_INSIDE.is_match(l) || VERDICT.is_match(l))
                .take(3),
        );
        v.extend_from_slice(&meaningful[n - tail..]);
        v
    };
    for l in take {
        if o.error.as_deref() == Some(l)
            || o.diagnostics.iter().any(|d| d == l)
            || o.lines.len() >= MAX_LINES
        {
            continue;
        }
        // Indentation inside a line (`493:        if x:`) is layout.
        o.lines.push(clip(&one_spaced(l), MAX_LINE));
    }
}

/// `line` with each run of whitespace as one space: the gaps inside an
/// output line (`493:        if x:`, pytest's `E       `) are layout.
fn one_spaced(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Most failure errors kept from one output.
const MAX_FAILURES: usize = 8;

fn push_failure(v: &mut Vec<String>, error: &str) {
    let e = clip(&one_spaced(error.trim_start_matches("E ")), MAX_LINE);
    if v.len() < MAX_FAILURES && !v.contains(&e) {
        v.push(e);
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_owned());
    }
}

fn tests_summary(body: &str) -> Option<String> {
    if let Some(c) = CARGO.captures_iter(body).last() {
        return Some(format!("test result {}: {}", &c[1], &c[2]));
    }
    if let Some(c) = PYTEST.captures_iter(body).last() {
        let m = c.get(1).or_else(|| c.get(2))?;
        return Some(m.as_str().trim_end_matches([',', ' ']).to_owned());
    }
    if let Some(c) = UNITTEST_RAN.captures_iter(body).last() {
        let result = UNITTEST_RESULT
            .captures_iter(body)
            .last()
            .map_or(String::new(), |r| format!(": {}", &r[1]));
        return Some(format!("ran {} tests{result}", &c[1]));
    }
    JEST.captures_iter(body)
        .last()
        .map(|c| c[1].trim().to_owned())
}

impl Outcome {
    /// One line: status, tests, error, result lines, cut at `max` bytes.
    pub(crate) fn render(&self, max: usize) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.timed_out {
            parts.push(match &self.timeout {
                Some(after) => format!("timed out {after}"),
                None => "timed out".into(),
            });
        } else if let Some(e) = self.exit {
            parts.push(format!("exit {e}"));
        }
        if let Some(t) = &self.tests {
            parts.push(t.clone());
        }
        if !self.test_ids.is_empty() {
            parts.push(self.test_ids.join(", "));
        }
        match (&self.error, &self.at) {
            // As a compiler puts it, `path:line: error`: the place comes
            // first, so that a shortened line still says where.
            (Some(e), Some(at)) => parts.push(format!("{at}: {e}")),
            (Some(e), None) => parts.push(e.clone()),
            _ => {}
        }
        parts.extend(self.diagnostics.iter().cloned());
        for l in &self.lines {
            parts.push(format!("\"{l}\""));
        }
        let s = parts.join("; ");
        if s.len() <= max {
            s
        } else {
            let end = floor_boundary(&s, max.saturating_sub(1));
            format!("{}…", &s[..end])
        }
    }

    /// Whether the command failed: a non-zero status, a failing test, an
    /// error line, a timeout.
    pub(crate) fn failed(&self) -> bool {
        self.timed_out
            || self.exit.is_some_and(|e| e != 0)
            || self.tests.as_deref().is_some_and(|t| {
                t.contains("failed") || t.contains("FAILED") || t.contains("error")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_says_how_long_and_a_scripts_caught_error_is_its_error() {
        let o = read(
            "<returncode>-1</returncode>\n<exception>Command 'pip install numpy' timed out after 60 seconds</exception>",
        );
        assert!(o.timed_out);
        assert!(
            o.render(200).starts_with("timed out after 60 seconds"),
            "{}",
            o.render(200)
        );
        let script = "<returncode>0</returncode>\n<output>\nTest generator with original code:\nERROR: TypeError: object of type 'generator' has no len()\n\nTest list with original code:\nSUCCESS: Created with list\nTest tuple:\nSUCCESS: Created with tuple\n</output>";
        let o = read(script);
        assert_eq!(
            o.error.as_deref(),
            Some("TypeError: object of type 'generator' has no len()")
        );
        let caught = "pn = SomeName\nTesting string operations:\npn.startswith('S') AttributeError: 'PersonName' object has no attribute 'startswith'\npn.upper() works\nlen 8\ndone";
        assert!(
            read(caught)
                .render(480)
                .contains("AttributeError: 'PersonName' object has no attribute 'startswith'")
        );
    }

    #[test]
    fn an_error_says_where_in_the_project_it_was_raised() {
        // pytest failing to load a conftest: the short frame names it.
        let conftest = "<returncode>4</returncode>\n<output>\nImportError while loading conftest '/testbed/test/conftest.py'.\ntest/conftest.py:9: in <module>\n    from sqlfluff.cli.commands import quoted_presenter\nE   ModuleNotFoundError: No module named 'sqlfluff'\n</output>";
        let o = read(conftest);
        assert_eq!(o.at.as_deref(), Some("test/conftest.py:9"));
        assert!(
            o.render(120)
                .contains("test/conftest.py:9: E ModuleNotFoundError: No module named 'sqlfluff'"),
            "{}",
            o.render(120)
        );
        // A Python traceback: the innermost frame outside installed
        // packages, not the library's own.
        let traceback = "Traceback (most recent call last):\n  File \"/testbed/reproduce.py\", line 4, in <module>\n    main()\n  File \"/testbed/pvlib/irradiance.py\", line 812, in king\n    np.cos(z)\n  File \"/opt/conda/lib/python3.9/site-packages/numpy/core/fromnumeric.py\", line 57, in _wrapfunc\n    return bound(*args)\nTypeError: ufunc 'cos' not supported";
        assert_eq!(
            read(traceback).at.as_deref(),
            Some("/testbed/pvlib/irradiance.py:812")
        );
        // A JavaScript stack lists the innermost frame first.
        let node = "TypeError: x is not a function\n    at parse (src/lexer.js:41:9)\n    at Object.<anonymous> (src/index.js:3:1)\n    at node:internal/main:12:3";
        assert_eq!(read(node).at.as_deref(), Some("src/lexer.js:41"));
        // A Rust panic names its own place.
        let panic = "thread 'main' panicked at src/window.rs:88:14:\nindex out of bounds\nnote: run with `RUST_BACKTRACE=1`";
        assert_eq!(read(panic).at.as_deref(), Some("src/window.rs:88"));
        // No error, no place; an error without frames has none either.
        assert_eq!(read("  File \"a.py\", line 3\nall good").at, None);
        assert_eq!(read("ValueError: bad window").at, None);
        assert_eq!(
            read("ValueError: bad window").render(80),
            "ValueError: bad window"
        );
    }

    #[test]
    fn failing_tests_keep_what_they_failed_with() {
        let pytest = "FAILED tests/test_a.py::test_x - KeyError: 'dune_margin'\nFAILED tests/test_a.py::test_y - AssertionError: assert None == 1\nFAILED tests/test_b.py::test_z - KeyError: 'dune_margin'\n3 failed, 40 passed in 1.2s";
        let o = read(pytest);
        assert_eq!(
            o.failures,
            [
                "KeyError: 'dune_margin'",
                "AssertionError: assert None == 1"
            ]
        );
        let jest = "  ● Series › quarry leap day\n\n    RangeError: kilnEpoch must be a positive integer, got -18\n\n      274 |   it('x', () => {\nTests:       1 failed, 10 passed, 11 total";
        let o = read(jest);
        assert_eq!(o.test_ids, ["Series › quarry leap day"]);
        assert_eq!(
            o.failures,
            ["RangeError: kilnEpoch must be a positive integer, got -18"]
        );
        let panic = "Exit code: 101\nthread 'main' panicked at src/filters.rs:56:38:\nmissing field `inlet_policy` at line 1 column 55\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
        assert_eq!(
            read(panic).error.as_deref(),
            Some("missing field `inlet_policy` at line 1 column 55")
        );
        let old_panic =
            "thread 'main' panicked at 'index out of bounds: the len is 3', src/main.rs:4:5";
        assert_eq!(
            read(old_panic).error.as_deref(),
            Some("index out of bounds: the len is 3")
        );
    }

    #[test]
    fn a_pytest_run_gives_its_summary_and_failing_ids() {
        let out = "<returncode>1</returncode>\n<output>\n============ test session starts ====\ncollected 44 items\n\ntests/test_a.py ..F.\nFAILED tests/test_a.py::test_unknown - AttributeError: x\n======= 1 failed, 43 passed in 2.10s =======\n</output>";
        let o = read(out);
        assert_eq!(o.exit, Some(1));
        assert_eq!(o.tests.as_deref(), Some("1 failed, 43 passed"));
        assert_eq!(o.test_ids, ["tests/test_a.py::test_unknown"]);
        assert!(o.failed());
        assert!(
            o.render(300)
                .starts_with("exit 1; 1 failed, 43 passed; tests/test_a.py::test_unknown")
        );
    }

    #[test]
    fn a_traceback_ends_in_its_exception_and_a_short_output_is_its_result() {
        let out = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"/testbed/x.py\", line 3, in <module>\n    f()\nAttributeError: 'AsStringVisitor' object has no attribute 'visit_unknown'\n</output>";
        let o = read(out);
        assert_eq!(
            o.error.as_deref(),
            Some("AttributeError: 'AsStringVisitor' object has no attribute 'visit_unknown'")
        );
        let o = read("<returncode>0</returncode>\n<output>\nFound 81 visit methods\n</output>");
        assert_eq!(o.lines, ["Found 81 visit methods"]);
        assert!(!o.failed());
        // The shell's name and line number are not what failed.
        let o = read("bash: line 1: hexdump: command not found\n");
        assert_eq!(o.error.as_deref(), Some("hexdump: command not found"));
        // A search's hit keeps its words, not its indentation.
        let o = read(
            "<returncode>0</returncode>\n<output>\n493:        if isinstance(uinput, Sequence):\n</output>",
        );
        assert!(o.whole);
        assert_eq!(o.lines, ["493: if isinstance(uinput, Sequence):"]);
    }

    #[test]
    fn a_checkers_odd_error_goes_before_its_many_alike_and_its_style_codes() {
        let out = "src/a.py:3:1: E501 line too long (98 > 88 characters)\n\
src/t.py:257: error: Argument 1 to \"merge_span\" has incompatible type \"str | None\"; expected \"str\"  [arg-type]\n\
src/f.py:239: error: Argument 1 to \"emit_key\" has incompatible type \"str | None\"; expected \"str\"  [arg-type]\n\
src/c.py:12: error: Argument 1 to \"load\" has incompatible type \"str | None\"; expected \"str\"  [arg-type]\n\
src/k.py:224: error: \"Schema\" has no attribute \"orbit_mode\"  [attr-defined]\n\
Found 4 errors in 4 files (checked 41 source files)\n[exit code: 1]\n";
        let o = read(out);
        assert_eq!(
            o.diagnostics,
            [
                "src/k.py:224: error: \"Schema\" has no attribute \"orbit_mode\"  [attr-defined]",
                "src/t.py:257: error: Argument 1 to \"merge_span\" has incompatible type \"str | None\"; expected \"str\"  [arg-type] (+2 like it)",
                "src/a.py:3:1: E501 line too long (98 > 88 characters)",
            ]
        );
    }

    #[test]
    fn unittest_and_cargo_summaries_are_read() {
        let o = read(
            "....F\n======\nFAIL: test_x (app.tests.T)\n----\nRan 5 tests in 0.01s\n\nFAILED (failures=1)\n",
        );
        assert_eq!(o.tests.as_deref(), Some("ran 5 tests: FAILED (failures=1)"));
        assert_eq!(o.test_ids, ["test_x (app.tests.T)"]);
        let o = read(
            "running 3 tests\ntest a::b ... ok\ntest result: ok. 3 passed; 0 failed; 0 ignored",
        );
        assert_eq!(
            o.tests.as_deref(),
            Some("test result ok: 3 passed; 0 failed")
        );
        let o = read(
            "Successfully installed pyyaml-6.0.3 types-pkg_resources-0.1\nWARNING: Running pip as the 'root' user can result in broken permissions",
        );
        assert_eq!(
            o.lines,
            ["Successfully installed pyyaml-6.0.3 types-pkg_resources-0.1"]
        );
    }

    #[test]
    fn jest_and_cargo_name_their_failing_tests_their_own_way() {
        let jest = "  ● Export › parse label\n\n    expect(received).toEqual(expected)\n\n  ● Console\n\n  ● Filters › inlet large values\n\n    TypeError: Cannot read properties of undefined (reading 'umberMargin')\n\nTests:       2 failed, 820 passed, 822 total\n[exit code: 1]\n";
        let o = read(jest);
        assert_eq!(
            o.test_ids,
            ["Export › parse label", "Filters › inlet large values"]
        );
        assert_eq!(o.tests.as_deref(), Some("2 failed, 820 passed, 822 total"));
        let cargo = "failures:\n\n---- grid::tests::split_row stdout ----\nboom\n\nfailures:\n    grid::tests::split_row\n    tokens::tests::mosaic_leap_day\n\ntest result: FAILED. 22 passed; 2 failed; 0 ignored\n";
        let o = read(cargo);
        assert_eq!(
            o.test_ids,
            ["grid::tests::split_row", "tokens::tests::mosaic_leap_day"]
        );
    }
}
