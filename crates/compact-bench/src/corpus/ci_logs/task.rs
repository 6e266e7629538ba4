//! The words of a `ci-logs` session: the system prompt, the task (a bug
//! report wrapped in the framework's instructions), the agent's thoughts,
//! its findings, and the framework's nudges.

use super::project::{FACT_WORDS, Project, Stack};
use crate::corpus::plant::Ledger;
use crate::corpus::{FactKind, Location};
use crate::rng::Rng;

/// The system prompt of a shell agent (Chat) and of a Codex-like agent
/// (Responses).
pub(super) const SYSTEM_CHAT: &str = "You are a software engineer working in a Linux shell. You have one tool, `bash`, which runs a single command in a fresh subshell started in /repo and returns its output and exit code. In every reply, say in a sentence or two why you run the next command, then call the tool exactly once.";

pub(super) const SYSTEM_RESPONSES: &str = "You are a coding agent running in a terminal sandbox. Use the `shell` tool to run commands and `apply_patch` (through the shell) to edit files. Keep the user informed with short progress notes. Prefer small, verifiable steps; run the relevant tests before you finish.";

/// The repository's instructions a Codex-like agent reads first.
pub(super) const DEVELOPER_RESPONSES: &str = "Repository guidelines:\n- Do not edit files under tests/ unless asked.\n- Keep public function signatures stable.\n- Format with the project's formatter before finishing.\n- Network access is disabled; dependencies are already installed.";

/// The framework's nudge after a reply without a tool call (repeated
/// verbatim every time, as frameworks do).
pub(super) const NUDGE: &str = "Your last reply did not contain a tool call. Reply with exactly one tool call. If you have finished the task, run `echo TASK_DONE` as your command.";

/// The framework's message after malformed call arguments.
pub(super) const FORMAT_ERROR: &str = "Tool call error: the arguments of your last tool call are not valid JSON (expected ',' or '}' at column 61). Send exactly one tool call whose arguments are a JSON object with a \"command\" string.";

const INSTRUCTIONS: &str = "<instructions>\nYou are working in a checked-out copy of the repository at /repo. Fix the issue above by changing the source code; the maintainers will run the full test suite on your change.\n\n## Recommended workflow\n1. Find and read the code involved before changing anything.\n2. Write a small script that reproduces the problem and run it.\n3. Edit the source to fix the problem.\n4. Run the reproduction again and the relevant tests.\n5. Think about edge cases and make sure the fix handles them.\n\n## Rules\n- DO NOT MODIFY the existing tests or the test configuration.\n- Each command runs in a new subshell: `cd` and environment variables do not persist between commands.\n- Do not start interactive programs (editors, pagers, REPLs).\n- Prefer commands with short output; pipe long output through `head` or `tail`.\n- When you are done, run `echo TASK_DONE` as your only command. You cannot continue after that.\n</instructions>";

const UNITS: &[&str] = &[
    "fortnight",
    "sennight",
    "quadrant",
    "decade",
    "jiffy",
    "shake",
    "moment",
    "lustrum",
];

/// What the task planted that later text may refer to.
pub(super) struct Task {
    pub text: String,
}

fn literal(rng: &mut Rng, ledger: &mut Ledger) -> String {
    ledger.fresh(rng, |r| format!("{}{}", r.range(2, 99), r.pick(UNITS)))
}

/// The task message of turn 1, with its facts planted.
pub(super) fn task(rng: &mut Rng, p: &Project, ledger: &mut Ledger, chat: bool) -> Task {
    let number = ledger.fresh(rng, |r| format!("#{}", r.range(1000, 9999)));
    ledger.plant(
        FactKind::Identifier,
        Location::User,
        1,
        vec![number.clone()],
        format!("issue {number}"),
    );
    let new_ver = p.fact_version(rng, ledger);
    ledger.plant(
        FactKind::Identifier,
        Location::User,
        1,
        vec![new_ver.clone()],
        format!("broken since {new_ver}"),
    );
    let old_ver = rng.chance(0.7).then(|| {
        let v = p.fact_version(rng, ledger);
        ledger.plant(
            FactKind::Identifier,
            Location::User,
            1,
            vec![v.clone()],
            format!("worked in {v}"),
        );
        v
    });
    let lit = literal(rng, ledger);
    if rng.chance(0.7) {
        ledger.plant(
            FactKind::Identifier,
            Location::User,
            1,
            vec![lit.clone()],
            format!("the reported input {lit}"),
        );
    }
    let unit = lit
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .to_string();
    let error = match p.stack {
        Stack::Python => format!("ValueError: unsupported unit '{unit}' (strict mode)"),
        Stack::Rust => format!(
            "called `Result::unwrap()` on an `Err` value: UnsupportedUnit {{ unit: \"{unit}\", strict: true }}"
        ),
        Stack::TypeScript => format!("RangeError: Unsupported unit \"{unit}\" (strict)"),
    };
    ledger.reserve(&error);
    ledger.plant(
        FactKind::Error,
        Location::User,
        1,
        vec![error.clone()],
        error.clone(),
    );
    let kw = p.fact_key(rng, ledger);
    if rng.chance(0.6) {
        ledger.plant(
            FactKind::Identifier,
            Location::User,
            1,
            vec![kw.clone()],
            format!("called with {kw}"),
        );
    }
    let pfn = p.primary_fn();
    let pmod = p.primary();
    let snippet = match p.stack {
        Stack::Python => format!(
            "```python\nfrom {}.{pmod} import {pfn}\n\nspan = {pfn}('{lit}', {kw}=True)\n```",
            p.name
        ),
        Stack::Rust => format!(
            "```rust\nlet cfg = Config {{ {kw}: true, ..Config::default() }};\nlet span = {}::{pmod}::{pfn}(\"{lit}\", &cfg).unwrap();\n```",
            p.name
        ),
        Stack::TypeScript => format!(
            "```ts\nimport {{ {pfn} }} from '{}/{pmod}';\n\nconst span = {pfn}('{lit}', {{ {kw}: true }});\n```",
            p.name
        ),
    };
    let upgrade = match &old_ver {
        Some(old) => format!("After upgrading {} from {old} to {new_ver}", p.name),
        None => format!("Since we moved to {} {new_ver}", p.name),
    };
    let mut body = format!(
        "{upgrade}, `{pfn}` fails on inputs that our nightly export has been sending for months. Minimal example:\n\n{snippet}\n\nfails with\n\n```\n{error}\n```\n\nI expected it to return a {} as it did before; other units are fine. It only happens in strict mode.",
        p.types[0]
    );
    if rng.chance(0.6) {
        let keep = p.fact_key(rng, ledger);
        let sentence = format!(
            "Please note that the fix must keep `{keep}` working: our scheduler plugin still passes it on every call."
        );
        ledger.plant(
            FactKind::Constraint,
            Location::User,
            1,
            vec![keep, "must".into()],
            sentence.clone(),
        );
        body.push_str("\n\n");
        body.push_str(&sentence);
    }
    body.push_str("\n\nThanks for the library!");
    let title = format!("{pfn} rejects valid inputs in strict mode");
    let text = if chat {
        format!(
            "Please solve this issue in the repository checked out at /repo.\n\n<issue>\n{title} ({number})\n\n{body}\n</issue>\n\n{INSTRUCTIONS}"
        )
    } else {
        format!(
            "Fix issue {number} in this repo.\n\n{title}\n\n{body}\n\nMake the tests pass before you finish."
        )
    };
    Task { text }
}

/// A sentence stating a finding, and its probes; planted by the caller.
pub(super) fn finding(rng: &mut Rng, p: &Project, ledger: &mut Ledger) -> (String, Vec<String>) {
    let pfn = p.primary_fn();
    match rng.below(6) {
        0 => {
            let key = p.fact_key(rng, ledger);
            (
                format!(
                    "The bug is that `{pfn}` returns None when the unit has a plural suffix, because `{key}` is only read for bare numbers."
                ),
                vec![key],
            )
        }
        1 => {
            let mut a = 0;
            let v = ledger.fresh(rng, |r| {
                a = 60 * r.range(2, 600);
                format!("{} seconds", 2 * a)
            });
            (
                format!("So the offset is applied twice: {a} + {a} = {v} instead of {a}."),
                vec![v],
            )
        }
        2 => {
            let deps: &[&str] = match p.stack {
                Stack::Python => &["tzdata", "python-dateutil", "pytz", "babel"],
                Stack::Rust => &["chrono-tz", "time-tz", "jiff", "icu_calendar"],
                Stack::TypeScript => &["luxon", "date-fns-tz", "dayjs", "temporal-polyfill"],
            };
            let v = ledger.fresh(rng, |r| {
                format!(
                    "{} {}.{}.{}",
                    r.pick(deps),
                    r.range(10, 30),
                    r.range(0, 12),
                    r.range(0, 9)
                )
            });
            (
                format!(
                    "The environment has {v}, so the vendored fallback is never used and the strict path goes through the upstream parser."
                ),
                vec![v],
            )
        }
        3 => {
            let lit = literal(rng, ledger);
            (
                format!(
                    "Found it: `{pfn}` caches on the raw string, so the entry for {lit} stays stale after the registry reload."
                ),
                vec![lit],
            )
        }
        4 => {
            let var = ledger.fresh(rng, |r| {
                format!(
                    "{}_{}_{}",
                    p.name.to_ascii_uppercase(),
                    r.pick(FACT_WORDS).to_ascii_uppercase(),
                    r.pick(&["FIXTURES", "STRICT", "SLOW", "LEGACY"])
                )
            });
            (
                format!(
                    "The tests only exercise strict mode when {var}=1 is set, otherwise the slow fixtures are skipped and nothing fails."
                ),
                vec![var],
            )
        }
        _ => {
            let n = ledger.fresh(rng, |r| format!("{} entries", r.range(130, 9000)));
            (
                format!(
                    "The unit table has {n} after the reload, but the strict lookup only scans the first 64, which is why rare units fail."
                ),
                vec![n],
            )
        }
    }
}

/// A runtime error carrying a fact key (a repro's crash or a failing
/// test's error).
pub(super) fn runtime_error(rng: &mut Rng, p: &Project, ledger: &mut Ledger) -> String {
    let key = p.fact_key(rng, ledger);
    let e = match (p.stack, rng.below(3)) {
        (Stack::Python, 0) => format!("KeyError: '{key}'"),
        (Stack::Python, 1) => format!("AttributeError: 'NoneType' object has no attribute '{key}'"),
        (Stack::Python, _) => format!(
            "TypeError: {}() got an unexpected keyword argument '{key}'",
            p.primary_fn()
        ),
        (Stack::Rust, 0) => format!(
            "missing field `{key}` at line 1 column {}",
            rng.range(20, 90)
        ),
        (Stack::Rust, 1) => {
            format!("called `Option::unwrap()` on a `None` value while reading `{key}`")
        }
        (Stack::Rust, _) => format!(
            "index out of bounds: `{key}` has 0 slots but the index is {}",
            rng.range(1, 9)
        ),
        (Stack::TypeScript, 0) => {
            format!("TypeError: Cannot read properties of undefined (reading '{key}')")
        }
        (Stack::TypeScript, 1) => format!("ReferenceError: {key} is not defined"),
        (Stack::TypeScript, _) => format!(
            "RangeError: {key} must be a positive integer, got -{}",
            rng.range(1, 90)
        ),
    };
    ledger.reserve(&e);
    e
}

/// A compiler's or type checker's error carrying a fact key.
pub(super) fn build_error(rng: &mut Rng, p: &Project, ledger: &mut Ledger) -> String {
    let key = p.fact_key(rng, ledger);
    let t = p.types[rng.below(p.types.len() as u64) as usize];
    let e = match (p.stack, rng.below(2)) {
        (Stack::Python, 0) => format!("error: \"{t}\" has no attribute \"{key}\"  [attr-defined]"),
        (Stack::Python, _) => format!("error: Name \"{key}\" is not defined  [name-defined]"),
        (Stack::Rust, 0) => format!(
            "error[E0599]: no method named `{key}` found for struct `{t}` in the current scope"
        ),
        (Stack::Rust, _) => format!("error[E0425]: cannot find value `{key}` in this scope"),
        (Stack::TypeScript, 0) => {
            format!("error TS2339: Property '{key}' does not exist on type '{t}'.")
        }
        (Stack::TypeScript, _) => format!("error TS2304: Cannot find name '{key}'."),
    };
    ledger.reserve(&e);
    e
}

/// The error every reproduction and failing test shows until the fix
/// (noise: it recurs).
pub(super) fn bug_error(p: &Project) -> &'static str {
    match p.stack {
        Stack::Python => "ValueError: unsupported unit 'wk' (strict mode)",
        Stack::Rust => {
            "called `Result::unwrap()` on an `Err` value: UnsupportedUnit { unit: \"wk\", strict: true }"
        }
        Stack::TypeScript => "RangeError: Unsupported unit \"wk\" (strict)",
    }
}

/// The assertion a failing test shows until the fix (noise).
pub(super) fn bug_assertion(p: &Project) -> &'static str {
    match p.stack {
        Stack::Python => "AssertionError: assert None == 1209600",
        Stack::Rust => "assertion `left == right` failed\n  left: None\n right: Some(1209600)",
        Stack::TypeScript => {
            "expect(received).toEqual(expected) // deep equality\n\n    Expected: 1209600\n    Received: undefined"
        }
    }
}

/// A reply with no tool call (which the framework answers with
/// [`NUDGE`]).
pub(super) fn no_call(rng: &mut Rng, p: &Project) -> String {
    let pfn = p.primary_fn();
    rng.pick(&[
        format!("I've changed `{pfn}` so that the unit is normalized before the strict lookup. The reproduction now returns the expected value and the tests for {} pass.", p.primary()),
        format!("Let me think about the remaining edge cases before running anything else. Negative spans and units with trailing whitespace both go through `{pfn}`, so they should be covered by the same change."),
        "The fix is in place. To summarize: the strict lookup now accepts the plural and abbreviated forms, and the error message names the unit it rejected.".to_string(),
        format!("Next I would run the full suite:\n\n```bash\n{}\n```", match p.stack {
            Stack::Python => "python -m pytest -q",
            Stack::Rust => "cargo test",
            Stack::TypeScript => "npx jest",
        }),
    ])
    .clone()
}
