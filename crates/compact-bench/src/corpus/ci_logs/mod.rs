//! `ci-logs`: a coding agent fixing a bug report in a shell loop, the
//! shape of mini-swe-agent, SWE-agent (Chat, one `bash` tool) and Codex
//! (Responses, a `shell` tool, reasoning items, `apply_patch`).
//!
//! One user message holds the task (a bug report inside the framework's
//! instructions); then 30-120 rounds, each one call and its output: `ls`,
//! `find`, `grep -rn`, `cat -n` and `sed -n` views of numbered source
//! lines, a reproduction script and its traceback, pytest / cargo test /
//! jest runs whole or through `tail`, builds, linters, edits (`sed -i`,
//! `apply_patch`) and `git diff`. Now and then the model answers without a
//! call and the framework nudges it with the same message every time, a
//! call's arguments are malformed, or a command times out. Each round is
//! a turn (the agent calls the model, so a preflight, after every output).
//!
//! Facts: the task's identifiers (issue number, versions, the reported
//! input and error, an option, a constraint), files viewed or edited once,
//! test selectors and failing tests, the errors a run hit, and the
//! findings the agent states in its thoughts. What recurs (the module with
//! the bug, its failing tests and error) is noise: an anchor occurs once.

mod project;
mod runner;
mod shell;
mod source;
mod task;

use compact_middleware::model::Format;
use serde_json::{Value, json};

use super::items::{self, Call};
use super::plant::{Header, Ledger, assemble};
use super::{Agent, FactKind, Location, Session};
use crate::rng::Rng;
use project::{Project, Stack};
use runner::{Failure, TestRun};

/// What a round does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Ls,
    Find,
    Readme,
    GitLog,
    Grep,
    View,
    ViewFact,
    Repro,
    Tests,
    TestsTail,
    TestSelect,
    Build,
    Lint,
    Edit,
    EditFact,
    Diff,
    /// A reply without a call, and the framework's nudge.
    NoCall,
    /// A call with malformed arguments, and the framework's error.
    FormatError,
    Timeout,
}

/// A model output cut to what the framework shows: the head and the tail
/// (mini-swe-agent and Codex both cut long outputs in the middle).
const MAX_OUTPUT: usize = 10_000;

/// The session of `seed` in `wire` (Chat or Responses).
pub(super) fn generate(seed: u64, wire: Format) -> Session {
    let salt = u64::from(wire == Format::Responses);
    let mut rng = Rng::new(seed.wrapping_mul(4).wrapping_add(salt) ^ 0xC1_0605);
    let p = Project::new(&mut rng);
    let rounds = rng.range(30, 120) as usize;
    // The whole session is 130-400k characters of mostly code and logs
    // (about 22-75k tokens: indented code is cheap), spread over its rounds.
    let total = rng.range(130_000, 400_000) as usize;
    let mut g = Gen {
        rng,
        p,
        wire,
        ledger: Ledger::default(),
        turns: Vec::new(),
        seq: 0,
        per_round: total / rounds,
        fixed: false,
        repro_written: false,
    };
    let opening = if wire == Format::Responses {
        vec![
            items::system(task::SYSTEM_RESPONSES),
            json!({"role": "developer", "content": task::DEVELOPER_RESPONSES}),
        ]
    } else {
        vec![items::system(task::SYSTEM_CHAT)]
    };
    let t = task::task(&mut g.rng, &g.p, &mut g.ledger, wire == Format::Chat);
    let plan = plan(&mut g.rng, rounds);
    for (i, step) in plan.into_iter().enumerate() {
        let mut items = if i == 0 {
            vec![items::user(&t.text)]
        } else {
            Vec::new()
        };
        items.extend(g.round(step));
        g.turns.push(items);
    }
    let header = Header {
        corpus: "ci-logs",
        agent: Agent::Coding,
        wire,
        seed,
    };
    assemble(header, opening, g.turns, g.ledger)
}

/// A phase of the plan: its share of the rounds, the round it starts
/// with, and the weights of the rounds it draws.
type Phase = (f64, Option<Step>, &'static [(Step, u64)]);

fn weighted(rng: &mut Rng, choices: &[(Step, u64)]) -> Step {
    let total: u64 = choices.iter().map(|c| c.1).sum();
    let mut r = rng.below(total);
    for &(s, w) in choices {
        if r < w {
            return s;
        }
        r -= w;
    }
    choices[0].0
}

/// The rounds in order: explore, reproduce, diagnose, fix, verify, a last
/// look at the diff; nudges, malformed calls and timeouts anywhere after
/// the first rounds.
fn plan(rng: &mut Rng, n: usize) -> Vec<Step> {
    use Step::*;
    let mut steps = vec![Ls];
    if rng.chance(0.7) {
        steps.push(Find);
    }
    let phases: [Phase; 5] = [
        (
            0.25,
            None,
            &[
                (Grep, 30),
                (View, 40),
                (ViewFact, 15),
                (Readme, 5),
                (GitLog, 5),
            ],
        ),
        (
            0.08,
            Some(Repro),
            &[(View, 20), (Grep, 10), (Repro, 10), (ViewFact, 5)],
        ),
        (
            0.22,
            None,
            &[
                (Tests, 20),
                (TestsTail, 15),
                (View, 20),
                (ViewFact, 10),
                (Grep, 10),
                (Lint, 5),
                (Build, 7),
                (TestSelect, 5),
            ],
        ),
        (
            0.15,
            Some(Edit),
            &[
                (Edit, 30),
                (EditFact, 10),
                (View, 15),
                (Diff, 10),
                (Repro, 5),
            ],
        ),
        (
            1.0,
            None,
            &[
                (TestsTail, 20),
                (Tests, 15),
                (TestSelect, 15),
                (Repro, 7),
                (Diff, 7),
                (Build, 5),
                (Lint, 5),
                (Edit, 8),
                (View, 10),
            ],
        ),
    ];
    for (frac, first, weights) in phases {
        let count = ((n as f64 * frac).round() as usize).max(1);
        if let Some(f) = first {
            steps.push(f);
        }
        for _ in 0..count {
            if steps.len() + 1 >= n {
                break;
            }
            steps.push(weighted(rng, weights));
        }
    }
    steps.truncate(n.saturating_sub(1));
    steps.push(Diff);
    // Interruptions replace a round, so the count stays n.
    for s in steps.iter_mut().skip(3) {
        let r = rng.below(1000);
        if r < 40 && *s != Edit {
            *s = NoCall;
        } else if r < 52 && *s != Edit {
            *s = FormatError;
        } else if r < 72 && matches!(*s, Tests | Build) {
            *s = Timeout;
        }
    }
    steps
}

struct Gen {
    rng: Rng,
    p: Project,
    wire: Format,
    ledger: Ledger,
    turns: Vec<Vec<Value>>,
    seq: usize,
    /// Characters of output per round, on average.
    per_round: usize,
    /// The first edit has been made: the bug's tests pass from now on.
    fixed: bool,
    repro_written: bool,
}

/// What one call did.
struct Action {
    thought: String,
    command: String,
    output: String,
    exit: i32,
}

impl Gen {
    fn responses(&self) -> bool {
        self.wire == Format::Responses
    }

    fn turn(&self) -> usize {
        self.turns.len() + 1
    }

    /// A size for a step's output: the average times `factor`, jittered.
    fn size(&mut self, factor: f64) -> usize {
        let jitter = 0.4 + 1.6 * (self.rng.below(1000) as f64 / 1000.0);
        ((self.per_round as f64) * factor * jitter) as usize
    }

    fn round(&mut self, step: Step) -> Vec<Value> {
        match step {
            Step::NoCall | Step::FormatError => {
                let text = if step == Step::NoCall {
                    task::no_call(&mut self.rng, &self.p)
                } else {
                    "Let me run the tests for the module again with more detail.".to_string()
                };
                let nudge = if step == Step::NoCall {
                    task::NUDGE
                } else {
                    task::FORMAT_ERROR
                };
                vec![items::assistant(self.wire, &text), items::user(nudge)]
            }
            _ => {
                let a = self.action(step);
                self.call(step, a)
            }
        }
    }

    /// The items of a round: the thought (with a finding now and then),
    /// the call and its output.
    fn call(&mut self, step: Step, a: Action) -> Vec<Value> {
        let turn = self.turn();
        let heading = title(step);
        let mut thought = a.thought;
        let mut finding_at = None;
        if turn > 3 && self.rng.chance(0.12) {
            let (sentence, probes) = task::finding(&mut self.rng, &self.p, &mut self.ledger);
            let location = if self.responses() && self.rng.chance(0.6) {
                Location::Reasoning
            } else {
                Location::Assistant
            };
            self.ledger
                .plant(FactKind::Finding, location, turn, probes, sentence.clone());
            finding_at = Some(location);
            thought = format!("{sentence} {thought}");
        }
        self.seq += 1;
        let id = format!(
            "call_{:04}{}",
            self.seq,
            if self.responses() { "r" } else { "c" }
        );
        let output = self.wrap(a.output, a.exit);
        if self.responses() {
            let arguments = json!({"command": ["bash", "-lc", a.command], "workdir": "/repo", "timeout_ms": 120_000}).to_string();
            let call = Call {
                id,
                name: "shell",
                arguments,
                output,
            };
            // Codex thinks in reasoning items and sometimes says what it
            // is doing; a finding goes where its fact says.
            let reasoning = match finding_at {
                Some(Location::Reasoning) => true,
                Some(_) => false,
                None => self.rng.chance(0.75),
            };
            let mut items = Vec::new();
            let content = if reasoning {
                items.push(items::reasoning(
                    &format!("rs_{:04}", self.seq),
                    &format!("**{heading}**\n\n{thought}"),
                ));
                None
            } else {
                Some(thought.as_str())
            };
            items.extend(items::calls(self.wire, content, &[call]));
            items
        } else {
            let arguments = json!({"command": a.command}).to_string();
            let call = Call {
                id,
                name: "bash",
                arguments,
                output,
            };
            items::calls(self.wire, Some(&thought), &[call])
        }
    }

    fn wrap(&mut self, output: String, exit: i32) -> String {
        // Long outputs took long to produce.
        let secs = output.len() as u64 / 3000 + self.rng.below(3);
        let output = cut(output);
        if self.responses() {
            format!(
                "Exit code: {exit}\nWall time: {secs}.{} seconds\nOutput:\n{output}",
                self.rng.below(10)
            )
        } else if output.is_empty() {
            format!("[exit code: {exit}]")
        } else {
            format!("{}\n[exit code: {exit}]", output.trim_end())
        }
    }

    fn action(&mut self, step: Step) -> Action {
        let turn = self.turn();
        let p = &self.p;
        let rng = &mut self.rng;
        match step {
            Step::Ls => Action {
                thought: "Let me start by looking at the layout of the repository.".into(),
                command: "ls -la".into(),
                output: shell::ls(rng, p),
                exit: 0,
            },
            Step::Find => Action {
                thought: "Let me list the source and test files.".into(),
                command: match p.stack {
                    Stack::Python => "find src tests -name '*.py' | sort".into(),
                    Stack::Rust => "find src tests -name '*.rs' | sort".into(),
                    Stack::TypeScript => "find src test -name '*.ts' | sort".into(),
                },
                output: shell::find(p),
                exit: 0,
            },
            Step::Readme => Action {
                thought: "Let me read the README to see how the library is meant to be used.".into(),
                command: "head -n 60 README.md".into(),
                output: shell::readme(rng, p),
                exit: 0,
            },
            Step::GitLog => Action {
                thought: format!("Let me check the recent history for changes to {}.", p.primary()),
                command: "git log --oneline -n 15".into(),
                output: shell::git_log(rng, p, 15),
                exit: 0,
            },
            Step::Grep => {
                let needle = if rng.chance(0.4) { p.primary_fn() } else { p.any_function(rng).1 };
                let n = (self.size(0.8) / 70).clamp(2, 120);
                let p = &self.p;
                let include = match p.stack {
                    Stack::Python => " --include='*.py'",
                    Stack::Rust => " --include='*.rs'",
                    Stack::TypeScript => " --include='*.ts'",
                };
                let dirs = if p.stack == Stack::TypeScript { "src test" } else { "src tests" };
                Action {
                    thought: format!("Let me find where `{needle}` is defined and used."),
                    command: format!("grep -rn{include} '{needle}' {dirs}"),
                    output: shell::grep(p, &needle, n),
                    exit: 0,
                }
            }
            Step::View => self.view(),
            Step::ViewFact => self.view_fact(turn),
            Step::Repro => self.repro(turn),
            Step::Tests => self.tests(turn, false),
            Step::TestsTail => self.tests(turn, true),
            Step::TestSelect => {
                let (sel, command) = self.p.fact_selector(&mut self.rng, &mut self.ledger);
                self.ledger.plant(FactKind::Test, Location::Assistant, turn, vec![sel], command.clone());
                let total = self.rng.range(20, 160);
                let output = match self.p.stack {
                    Stack::Python => format!(".{:>71}\n1 passed, {} deselected in 0.{}s\n", "[100%]", total - 1, self.rng.range(10, 99)),
                    Stack::Rust => format!("\nrunning 1 test\n.\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; {} filtered out; finished in 0.0{}s\n", total - 1, self.rng.range(1, 9)),
                    Stack::TypeScript => format!("PASS {}\n\nTest Suites: 1 passed, 1 total\nTests:       {} skipped, 1 passed, {total} total\nSnapshots:   0 total\nTime:        1.{} s\n", self.p.test_file(0), total - 1, self.rng.range(10, 99)),
                };
                Action {
                    thought: "Let me run just the test that covers this case.".into(),
                    command,
                    output,
                    exit: 0,
                }
            }
            Step::Build => self.build(turn),
            Step::Lint => self.lint(turn),
            Step::Edit => self.edit(turn, false),
            Step::EditFact => self.edit(turn, true),
            Step::Diff => {
                let hunks = self.rng.range(1, 3) as usize;
                let file = self.p.src(0);
                let output = if self.fixed { shell::git_diff(&mut self.rng, &self.p, hunks) } else { String::new() };
                Action {
                    thought: "Let me review my change so far.".into(),
                    command: format!("git diff {file}"),
                    output,
                    exit: 0,
                }
            }
            Step::Timeout => Action {
                thought: "Let me run the whole test suite to check for regressions.".into(),
                command: match p.stack {
                    Stack::Python => "python -m pytest tests -q -p no:cacheprovider".into(),
                    Stack::Rust => "cargo test --all-features".into(),
                    Stack::TypeScript => "npx jest --runInBand".into(),
                },
                output: "The command did not finish within 120 seconds and was stopped. Run a narrower command, or put a timeout on it.".into(),
                exit: -1,
            },
            Step::NoCall | Step::FormatError => Action {
                thought: String::new(),
                command: "true".into(),
                output: String::new(),
                exit: 0,
            },
        }
    }

    fn view(&mut self) -> Action {
        let m = if self.rng.chance(0.5) {
            0
        } else {
            self.rng.below(self.p.modules.len() as u64) as usize
        };
        let want = (self.size(1.0) / 40).clamp(8, 400);
        let file = self.p.src(m);
        let src = source::module(&self.p, m);
        let rng = &mut self.rng;
        let p = &self.p;
        let first = rng.range(1, src.len().saturating_sub(want).max(1) as u64) as usize;
        let last = (first + want).min(src.len());
        let part = src.get(first - 1..last).unwrap_or(&src);
        let f = p.function(m, rng.below(4) as usize);
        match rng.below(4) {
            0 => Action {
                thought: format!("Let me read {} in full.", p.modules[m]),
                command: format!("cat -n {file}"),
                output: shell::numbered(&src, 1),
                exit: 0,
            },
            1 => Action {
                thought: "Let me look at this part of the module.".into(),
                command: format!("sed -n '{first},{last}p' {file}"),
                output: part.join("\n") + "\n",
                exit: 0,
            },
            2 => Action {
                thought: "Let me see the code around it with line numbers.".into(),
                command: format!("nl -ba {file} | sed -n '{first},{last}p'"),
                output: shell::numbered(part, first),
                exit: 0,
            },
            _ => {
                let at = src
                    .iter()
                    .position(|l| l.contains(&format!("{f}(")))
                    .unwrap_or(0);
                let k = want.min(40);
                let out: String = src
                    .iter()
                    .enumerate()
                    .skip(at)
                    .take(k + 1)
                    .map(|(i, l)| format!("{}{}{l}\n", i + 1, if i == at { ':' } else { '-' }))
                    .collect();
                Action {
                    thought: format!("Let me find the definition of `{f}`."),
                    command: format!("grep -n -A {k} '{f}(' {file}"),
                    output: out,
                    exit: 0,
                }
            }
        }
    }

    fn view_fact(&mut self, turn: usize) -> Action {
        let file = self.p.fact_file(&mut self.rng, &mut self.ledger);
        self.ledger.plant(
            FactKind::File,
            Location::Assistant,
            turn,
            vec![file.clone()],
            format!("viewed {file}"),
        );
        let lines = (self.size(0.8) / 40).clamp(6, 200);
        let rng = &mut self.rng;
        let p = &self.p;
        let output = if file.ends_with(".json") {
            let mut s = String::from("[\n");
            for i in 0..lines {
                s.push_str(&format!(
                    "  {{\"input\": \"{}{}\", \"expected\": {}, \"strict\": {}}}{}\n",
                    rng.range(1, 90),
                    rng.pick(&["wk", "d", "h", "min", "s"]),
                    rng.range(1, 9_000_000),
                    rng.chance(0.5),
                    if i + 1 < lines { "," } else { "" }
                ));
            }
            s.push_str("]\n");
            s
        } else if file.ends_with(".yml") {
            let run = match p.stack {
                Stack::Python => "python -m pytest -q",
                Stack::Rust => "cargo test --all-features",
                Stack::TypeScript => "npx jest --ci",
            };
            format!(
                "name: {}\non:\n  schedule:\n    - cron: '{} 3 * * *'\n  pull_request:\njobs:\n  test:\n    runs-on: ubuntu-latest\n    timeout-minutes: 30\n    steps:\n      - uses: actions/checkout@v4\n      - name: Install\n        run: make install-dev\n      - name: Test\n        run: {run}\n        env:\n          STRICT_UNITS: '1'\n",
                file.rsplit('/')
                    .next()
                    .unwrap_or("ci")
                    .trim_end_matches(".yml"),
                rng.below(60)
            )
        } else {
            // A file of its own: its text drawn from its own seed.
            let m = rng.below(p.modules.len() as u64) as usize;
            let seed = file
                .bytes()
                .fold(p.seed, |h, b| h.rotate_left(5) ^ u64::from(b));
            let src = source::lines(p, m, seed);
            shell::numbered(&src[..lines.min(src.len())], 1)
        };
        let command = match self.rng.below(3) {
            0 => format!("cat -n {file}"),
            1 => format!("head -n {lines} {file}"),
            _ => format!("sed -n '1,{lines}p' {file}"),
        };
        Action {
            thought: "This file may be involved as well; let me look at it.".into(),
            command,
            output,
            exit: 0,
        }
    }

    fn repro(&mut self, turn: usize) -> Action {
        let (script, run) = match self.p.stack {
            Stack::Python => ("repro_units.py", "python repro_units.py"),
            Stack::Rust => (
                "examples/repro_units.rs",
                "cargo run -q --example repro_units",
            ),
            Stack::TypeScript => (
                "scripts/repro-units.ts",
                "npx ts-node scripts/repro-units.ts",
            ),
        };
        let pfn = self.p.primary_fn();
        let command = if self.repro_written {
            run.to_string()
        } else {
            self.repro_written = true;
            let body = match self.p.stack {
                Stack::Python => format!(
                    "from {}.{} import {pfn}\n\nfor raw in ['2wk', '3 wk', '1wk2d']:\n    print(raw, {pfn}(raw, strict=True))",
                    self.p.name,
                    self.p.primary()
                ),
                Stack::Rust => format!(
                    "fn main() {{\n    for raw in [\"2wk\", \"3 wk\", \"1wk2d\"] {{\n        println!(\"{{raw}} {{:?}}\", {}::{}::{pfn}(raw).unwrap());\n    }}\n}}",
                    self.p.name,
                    self.p.primary()
                ),
                Stack::TypeScript => format!(
                    "import {{ {pfn} }} from '../src/{}';\n\nfor (const raw of ['2wk', '3 wk', '1wk2d']) {{\n  console.log(raw, {pfn}(raw));\n}}",
                    self.p.primary()
                ),
            };
            format!("cat > {script} <<'EOF'\n{body}\nEOF\n{run}")
        };
        if self.fixed && self.rng.chance(0.8) {
            return Action {
                thought: "Let me run the reproduction again to confirm the fix.".into(),
                command,
                output: "2wk 1209600\n3 wk 1814400\n1wk2d 777600\n".into(),
                exit: 0,
            };
        }
        let error = if self.rng.chance(0.35) {
            let e = task::runtime_error(&mut self.rng, &self.p, &mut self.ledger);
            self.ledger.plant(
                FactKind::Error,
                Location::Tool,
                turn,
                vec![e.clone()],
                e.clone(),
            );
            e
        } else {
            task::bug_error(&self.p).to_string()
        };
        Action {
            thought: "Let me write a small script that reproduces the issue and run it.".into(),
            command,
            output: runner::crash(&mut self.rng, &self.p, script, &error),
            exit: 1,
        }
    }

    fn tests(&mut self, turn: usize, tail: bool) -> Action {
        let size = self.size(if tail { 0.3 } else { 2.5 });
        let stack = self.p.stack;
        let mut failures: Vec<Failure> = Vec::new();
        if !self.fixed {
            for i in 0..self.rng.range(2, 4) as usize {
                failures.push(Failure {
                    id: self.p.test_id(0, i),
                    error: task::bug_assertion(&self.p).to_string(),
                });
            }
        }
        // A test that fails once: something the agent should remember.
        let fact = if tail {
            0.55
        } else if stack == Stack::Rust {
            0.0
        } else {
            0.25
        };
        if self.rng.chance(fact) {
            let id = self.p.fact_test(&mut self.rng, &mut self.ledger);
            self.ledger.plant(
                FactKind::Test,
                Location::Tool,
                turn,
                vec![id.clone()],
                format!("{id} failed"),
            );
            let error = if tail && runner::tail_shows_errors(stack) && self.rng.chance(0.45) {
                let e = task::runtime_error(&mut self.rng, &self.p, &mut self.ledger);
                self.ledger.plant(
                    FactKind::Error,
                    Location::Tool,
                    turn,
                    vec![e.clone()],
                    e.clone(),
                );
                e
            } else {
                task::bug_assertion(&self.p).to_string()
            };
            failures.push(Failure { id, error });
        }
        let whole = self.rng.chance(0.5);
        let total = if whole {
            self.rng.range(120, 900)
        } else {
            self.rng.range(20, 120)
        } as usize;
        let target = if whole {
            String::new()
        } else {
            format!(" {}", self.p.test_file(0))
        };
        let base = match stack {
            Stack::Python => format!("python -m pytest{target} -q"),
            Stack::Rust => {
                if whole {
                    "cargo test".to_string()
                } else {
                    format!("cargo test --test {}", self.p.primary())
                }
            }
            Stack::TypeScript => format!("npx jest{target}"),
        };
        let command = if tail {
            format!("{base} 2>&1 | tail -n 30")
        } else {
            base
        };
        let exit = i32::from(!failures.is_empty());
        let run = TestRun {
            total,
            failures,
            tail,
        };
        Action {
            thought: if self.fixed {
                "Let me run the tests again to check the fix.".into()
            } else {
                format!(
                    "Let me run the tests for {} to see what fails.",
                    self.p.primary()
                )
            },
            command,
            output: runner::output(&mut self.rng, &self.p, size, &run),
            exit,
        }
    }

    fn build(&mut self, turn: usize) -> Action {
        let size = self.size(1.5);
        let error = (self.p.stack != Stack::Python && self.rng.chance(0.35)).then(|| {
            let e = task::build_error(&mut self.rng, &self.p, &mut self.ledger);
            self.ledger.plant(
                FactKind::Error,
                Location::Tool,
                turn,
                vec![e.clone()],
                e.clone(),
            );
            e
        });
        let exit = if error.is_some() { 1 } else { 0 };
        Action {
            thought: match self.p.stack {
                Stack::Python => {
                    "Let me reinstall the package so the tests pick up the change.".into()
                }
                _ => "Let me build everything to check that it compiles.".into(),
            },
            command: match self.p.stack {
                Stack::Python => "pip install -e '.[dev]'".into(),
                Stack::Rust => "cargo build --all-targets".into(),
                Stack::TypeScript => "npm ci && npm run build".into(),
            },
            output: shell::build(&mut self.rng, &self.p, size, error.as_deref()),
            exit,
        }
    }

    fn lint(&mut self, turn: usize) -> Action {
        let size = self.size(0.8);
        let mut output = shell::lint(&mut self.rng, &self.p, size);
        let mut exit = 0;
        if self.rng.chance(0.35) {
            let e = task::build_error(&mut self.rng, &self.p, &mut self.ledger);
            self.ledger.plant(
                FactKind::Error,
                Location::Tool,
                turn,
                vec![e.clone()],
                e.clone(),
            );
            let m = self.rng.below(self.p.modules.len() as u64) as usize;
            output.push_str(&format!(
                "{}:{}: {e}\n",
                self.p.src(m),
                self.rng.range(3, 600)
            ));
            exit = 1;
        }
        Action {
            thought: "Let me run the linters and the type checker on the sources.".into(),
            command: match self.p.stack {
                Stack::Python => format!("mypy src/{} && ruff check src", self.p.name),
                Stack::Rust => "cargo clippy --all-targets".into(),
                Stack::TypeScript => "npx tsc --noEmit && npx eslint src --ext .ts".into(),
            },
            output,
            exit,
        }
    }

    fn edit(&mut self, turn: usize, fact: bool) -> Action {
        let file = if fact {
            let f = self.p.fact_file(&mut self.rng, &mut self.ledger);
            self.ledger.plant(
                FactKind::File,
                Location::Assistant,
                turn,
                vec![f.clone()],
                format!("edited {f}"),
            );
            f
        } else {
            self.fixed = true;
            self.p.src(0)
        };
        let src = source::module(&self.p, 0);
        let pick = |rng: &mut Rng| {
            let l = rng.pick(&src).trim().to_string();
            if l.is_empty() {
                "return None".to_string()
            } else {
                l
            }
        };
        let (old, new) = (pick(&mut self.rng), pick(&mut self.rng));
        let (command, output) = if self.responses() {
            (
                format!(
                    "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: {file}\n@@\n-    {old}\n+    {new}\n+    {old}\n*** End Patch\nPATCH"
                ),
                "Success. Patch applied.\n".to_string(),
            )
        } else if self.rng.chance(0.5) {
            let from = self.p.function(0, 1);
            (
                format!("sed -i 's/{from}(raw)/{from}(raw.strip().lower())/' {file}"),
                String::new(),
            )
        } else {
            (
                format!(
                    "python3 - <<'PY'\nfrom pathlib import Path\np = Path('{file}')\ns = p.read_text()\ns = s.replace('{old}', '{new}', 1)\np.write_text(s)\nPY"
                ),
                String::new(),
            )
        };
        Action {
            thought: if fact {
                "The same lookup is duplicated here; let me apply the same change.".into()
            } else {
                "Now let me fix the lookup so that the unit is normalized before the strict check."
                    .into()
            },
            command,
            output,
            exit: 0,
        }
    }
}

/// The bold title of a reasoning summary, as Codex writes them.
fn title(step: Step) -> &'static str {
    match step {
        Step::Ls | Step::Find | Step::Readme | Step::GitLog => "Exploring the repository",
        Step::Grep => "Searching the code",
        Step::View | Step::ViewFact => "Reading the code",
        Step::Repro => "Reproducing the failure",
        Step::Tests | Step::TestsTail | Step::TestSelect | Step::Timeout => "Running the tests",
        Step::Build | Step::Lint => "Checking the build",
        Step::Edit | Step::EditFact => "Patching the lookup",
        Step::Diff => "Reviewing the change",
        Step::NoCall | Step::FormatError => "Planning the next step",
    }
}

/// `output` cut in the middle at line boundaries when it is longer than
/// [`MAX_OUTPUT`]: the head and the tail are what the model sees.
fn cut(output: String) -> String {
    if output.len() <= MAX_OUTPUT {
        return output;
    }
    let lines: Vec<&str> = output.lines().collect();
    let (mut head, mut head_len) = (0, 0);
    while head < lines.len() && head_len + lines[head].len() < MAX_OUTPUT / 2 {
        head_len += lines[head].len() + 1;
        head += 1;
    }
    let (mut tail, mut tail_len) = (lines.len(), 0);
    while tail > head && tail_len + lines[tail - 1].len() < MAX_OUTPUT * 2 / 5 {
        tail -= 1;
        tail_len += lines[tail].len() + 1;
    }
    let elided = output.len().saturating_sub(head_len + tail_len);
    format!(
        "{}\n[... {elided} characters elided ...]\n{}\n",
        lines[..head].join("\n"),
        lines[tail..].join("\n")
    )
}
