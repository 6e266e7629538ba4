//! The artifact trail: what an agent did, kept as a colleague would note it.
//! Files it viewed, created, edited, ran or tested (with the declarations it
//! saw in them), and the commands it ran with their outcome (exit status,
//! test summary, failing tests, the error they ended with). Every peer's
//! summary loses these first; here they are ledger items of their own
//! (`Kind::Touched`, `Kind::Command`), deduplicated (a file once, a command
//! once with its latest outcome), ranked above the bulk of tool output, and
//! they survive every compaction.
//!
//! A code file's content is not a fact: it is still on disk. What viewing it
//! taught the agent is its declarations; what the agent concluded is in its
//! own words (prose). So the output of a recognised view, search or run is
//! read here instead of line by line.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::lexicon::{clip_middle, floor_boundary, re};
use super::outcome;
use super::shell::{self, Purpose, Touch};
use super::{Kind, Ledger, clip};

/// What the trail keeps beside an item's text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Trail {
    /// For a file: the [`Touch`] bits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub touches: u8,
    /// For a command: its [`Purpose`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<u8>,
    /// For a command: its latest outcome, rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// For a command: its latest run failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// For a test command: tests that failed in an earlier run and not in
    /// the latest (what was fixed along the way is part of the story).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_before: Vec<String>,
    /// For a test command: the failing ids of its latest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_ids: Option<Vec<String>>,
}

fn is_zero(b: &u8) -> bool {
    *b == 0
}

/// Longest outcome kept, in bytes.
const MAX_OUTCOME: usize = 1000;
/// Most earlier failures a test command keeps (the summary's budget
/// decides how many it shows: a few in the short form, all in the full).
const MAX_FAILED_BEFORE: usize = 16;
/// Most declarations kept per file.
const MAX_DECLS: usize = 6;
/// Longest declaration kept, in bytes.
const MAX_DECL: usize = 70;

/// A declaration as a reader wants it: `class Window(Expression)`,
/// `def get_cache_name(self)`, `fn parse`.
static DECLARATION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?m)^[\s\d:-]*(?:(?:pub(?:\([^)]*\))?|export|async|public|private|protected|static|abstract|final|default)\s+)*((?:fn|def|func|function|class|struct|enum|trait|interface|impl|type)\s+[A-Za-z_][A-Za-z0-9_]*(?:\([^)\n]{0,60}\))?)",
    )
});

impl Purpose {
    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(c: u8) -> Option<Purpose> {
        [
            Purpose::View,
            Purpose::Search,
            Purpose::Edit,
            Purpose::Run,
            Purpose::Test,
            Purpose::Setup,
            Purpose::Vcs,
            Purpose::Other,
        ]
        .into_iter()
        .find(|p| p.code() == c)
    }
}

/// The rank of a trail item (see `extractive::rank`): what the agent made
/// and tested first, then what it ran, then what it looked at; searches
/// are bulk.
pub(crate) fn rank(kind: Kind, text: &str, t: &Trail) -> Option<u8> {
    match kind {
        Kind::Touched => {
            let has = |x: Touch| t.touches & x.bit() != 0;
            let ran = has(Touch::Ran) || has(Touch::Tested);
            Some(if has(Touch::Edited) || has(Touch::Deleted) {
                9
            } else if has(Touch::Created)
                || ran
                || (has(Touch::Viewed) && (shell::is_code(text) || shell::is_project_data(text)))
            {
                8
            } else if has(Touch::Viewed) {
                // A page or a document read: what it said is in its facts.
                5
            } else {
                2
            })
        }
        Kind::Command => Some(match t.purpose.and_then(Purpose::from_code) {
            // A scratch script run: a step of the way, unless it failed.
            Some(Purpose::Run) if runs_scratch(text) => {
                if t.failed {
                    6
                } else {
                    5
                }
            }
            Some(Purpose::Test) => 9,
            // A run that showed something (a value, a result line, an
            // error) is a finding; one that only exited 0 is a step.
            Some(Purpose::Run) if t.failed || showed(t) => 8,
            Some(Purpose::Run) => 5,
            // A search that found a few lines found something.
            Some(Purpose::Search) if showed(t) => 6,
            // A look that failed (`hexdump: command not found`, a missing
            // file) says something about the machine.
            Some(Purpose::View | Purpose::Search) if t.failed => 6,
            Some(Purpose::Setup) => 5,
            Some(Purpose::Other) => 4,
            Some(Purpose::Edit | Purpose::Vcs) => 3,
            _ => 2,
        }),
        _ => None,
    }
}

/// Whether a command runs a script in a scratch place (`python
/// /tmp/fix.py`).
fn runs_scratch(cmd: &str) -> bool {
    let script = cmd
        .split_whitespace()
        .take_while(|w| !matches!(*w, "|" | "&&" | ";" | "||"))
        .find(|w| !w.starts_with('-') && w.contains(['/', '.']) && !w.starts_with("python"));
    script.is_some_and(shell::is_scratch)
}

/// Whether a command's outcome says more than how it exited.
fn showed(t: &Trail) -> bool {
    t.outcome.as_deref().is_some_and(|o| {
        o.split("; ").any(|part| {
            let tests = ["passed", "failed", "tests", "warning", "error"]
                .iter()
                .any(|w| part.contains(w) && part.starts_with(|c: char| c.is_ascii_digit()));
            !(part.starts_with("exit ") || part.starts_with("timed out") || tests)
        })
    })
}

/// The touches of a file, in display order: `created, tested`.
pub(crate) fn touches_text(bits: u8) -> String {
    Touch::ALL
        .iter()
        .filter(|t| bits & t.bit() != 0)
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The three forms (key, short, full) of a trail item.
pub(crate) fn forms(kind: Kind, text: &str, apis: &[String], t: &Trail) -> [String; 3] {
    match kind {
        Kind::Touched => {
            let key = text.to_owned();
            let touched = touches_text(t.touches);
            let short = if touched.is_empty() {
                key.clone()
            } else {
                format!("{text} ({touched})")
            };
            let full = if apis.is_empty() {
                short.clone()
            } else {
                format!("{short}: {}", apis.join(", "))
            };
            [key, short, full]
        }
        _ => match t.outcome.as_deref().filter(|o| !o.is_empty()) {
            None => [
                format!("`{}`", clip_command(text, KEY_COMMAND)),
                format!("`{}`", clip_command(text, 120)),
                format!("`{text}`"),
            ],
            // Even the key says how it ended: a test run without its
            // result is a test nobody knows the state of.
            // A short command leaves room for more of what it showed.
            Some(o) => [
                format!(
                    "`{}` → {}",
                    clip_command(text, KEY_COMMAND),
                    clip(
                        if showed_value(t) { o } else { status(o) },
                        KEY_LINE.saturating_sub(text.len()).max(40)
                    )
                ),
                // What failed along the way (then passed) is the story of
                // the run: kept, shortened, before the latest output's detail.
                if t.failed_before.is_empty() {
                    format!("`{}` → {}", clip_command(text, 120), clip(o, 80))
                } else {
                    format!(
                        "`{}` → {}; failed before: {}",
                        clip_command(text, 120),
                        clip(status(o), 60),
                        clip(&t.failed_before.join(", "), 320)
                    )
                },
                if t.failed_before.is_empty() {
                    format!("`{text}` → {o}")
                } else {
                    format!(
                        "`{text}` → {o}; failed before: {}",
                        t.failed_before.join(", ")
                    )
                },
            ],
        },
    }
}

/// Which words of a command line may name its run: not an option
/// (`--settings=django.conf.global_settings`, `-xvs`: the longest word of a
/// Django test command is often its settings), not a quoted argument, not a
/// redirection (`2>&1`), and nothing of a filter the output is piped through
/// (`| grep "FAIL\|ERROR"`), up to the next `&&`, `||` or `;`.
fn may_name_the_run(words: &[&str]) -> Vec<bool> {
    let mut piped = false;
    words
        .iter()
        .map(|w| match *w {
            "|" => {
                piped = true;
                false
            }
            "&&" | "||" | ";" => {
                piped = false;
                false
            }
            w => {
                !piped
                    && !w.starts_with('-')
                    && !w.starts_with(['"', '\''])
                    && !w.contains(['>', '<'])
            }
        })
        .collect()
}

/// `cmd` cut to about `max` bytes, keeping its longest word whole: that is
/// what names the run (`annotations.tests.AnnotationTest.test_empty_…`, the
/// script's path), and a cut through it keeps neither half findable.
/// The command is kept as written up to that word when that fits (and on
/// as far as there is room); else options before the word
/// go first, from the end (`--settings=test_sqlite`, `-xvs`), then the
/// text around it is cut. A word longer than `max` (but not twice as long)
/// is kept whole however long the result.
fn clip_command(cmd: &str, max: usize) -> String {
    if cmd.len() <= max {
        return cmd.to_owned();
    }
    let words: Vec<&str> = cmd.split(' ').collect();
    // A script written inline is text, not a command line to pick from.
    if words.len() > 64 {
        return clip_middle(cmd, max);
    }
    let names = may_name_the_run(&words);
    let longest_of = |only_names: bool| {
        words
            .iter()
            .enumerate()
            .filter(|(i, _)| !only_names || names[*i])
            .max_by_key(|(i, w)| (w.len(), std::cmp::Reverse(*i)))
    };
    let Some((long, longest)) = longest_of(true).or_else(|| longest_of(false)) else {
        return clip_middle(cmd, max);
    };
    // A word longer than the room is not a name (a blob, a one-line
    // script): cut in the middle like any text.
    if longest.len() > max * 2 {
        return clip_middle(cmd, max);
    }
    // The command as written up to that word, when it fits, and on as far
    // as there is room: the head is how the agent (and a search) knows the
    // command.
    let mut head = words[..=long].join(" ");
    if head.len() + " …".len() <= max {
        for w in &words[long + 1..] {
            if head.len() + 1 + w.len() + " …".len() > max {
                break;
            }
            head.push(' ');
            head.push_str(w);
        }
        head.push_str(" …");
        return head;
    }
    let join = |keep: &[bool], range: std::ops::Range<usize>| {
        let mut out = String::new();
        let mut gap = false;
        for i in range {
            if keep[i] {
                if gap {
                    out.push_str("… ");
                    gap = false;
                }
                out.push_str(words[i]);
                out.push(' ');
            } else {
                gap = true;
            }
        }
        if gap {
            out.push('…');
        }
        out.trim_end().to_owned()
    };
    let render = |keep: &[bool]| {
        let before = join(keep, 0..long);
        let after = join(keep, long + 1..words.len());
        let whole = [before.as_str(), longest, after.as_str()]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        (before, after, whole)
    };
    let mut keep = vec![true; words.len()];
    let (mut before, mut after, mut whole) = render(&keep);
    for i in (1..long).rev() {
        if whole.len() <= max {
            break;
        }
        if words[i].len() > 2 && words[i].starts_with('-') {
            keep[i] = false;
            (before, after, whole) = render(&keep);
        }
    }
    if whole.len() <= max {
        return whole;
    }
    // Still long: cut what stands before and after the word, the head
    // (the program) kept longer than the tail.
    // A name longer than the room is kept whole all the same, with a
    // little of the program before it: the key form is there to keep it.
    let room = max.saturating_sub(longest.len() + 2).max(16);
    let head_room = (room * 2 / 3).min(before.len());
    let tail_room = room - head_room;
    let head = if before.len() <= head_room {
        before.clone()
    } else {
        format!(
            "{}…",
            before[..floor_boundary(&before, head_room)].trim_end()
        )
    };
    let tail = if after.len() <= tail_room {
        after.clone()
    } else {
        let mut at = after.len() - tail_room;
        while at < after.len() && !after.is_char_boundary(at) {
            at += 1;
        }
        format!("…{}", after[at..].trim_start())
    };
    [head.as_str(), longest, tail.as_str()]
        .iter()
        .filter(|p| !p.is_empty() && **p != "…")
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Longest command in a key form, in bytes.
const KEY_COMMAND: usize = 80;
/// Longest key form of a command and what it showed, in bytes.
const KEY_LINE: usize = 120;

/// Whether what a run or a search showed is its point: a value or a line
/// it found, not a test summary (the status carries that).
fn showed_value(t: &Trail) -> bool {
    matches!(
        t.purpose.and_then(Purpose::from_code),
        Some(Purpose::Run | Purpose::Search | Purpose::View | Purpose::Other)
    ) && showed(t)
}

/// The status part of an outcome: up to its first `; ` after the exit
/// status and a test summary (`exit 1; 3 failed, 41 passed`).
fn status(outcome: &str) -> &str {
    let mut end = outcome.len();
    let mut parts = 0;
    for (i, _) in outcome.match_indices("; ") {
        parts += 1;
        let head = &outcome[..i];
        let tests = head.contains("passed") || head.contains("failed") || head.contains("tests");
        if parts >= 2 || !(head.starts_with("exit") || head.starts_with("timed")) || tests {
            end = i;
            break;
        }
    }
    &outcome[..end]
}

/// Reads a trail line of a previous summary back (`path (edited): decls`,
/// `` `cmd` → outcome ``): `(text, apis, trail)`.
pub(crate) fn parse_line(kind: Kind, line: &str) -> Option<(String, Vec<String>, Trail)> {
    match kind {
        Kind::Touched => {
            let (head, apis) = match line.split_once("): ") {
                Some((h, a)) => (format!("{h})"), a.split(", ").map(str::to_owned).collect()),
                None => (line.to_owned(), Vec::new()),
            };
            let (path, touches) = match head.rsplit_once(" (") {
                Some((p, rest)) if rest.ends_with(')') => {
                    let bits = rest
                        .trim_end_matches(')')
                        .split(", ")
                        .filter_map(Touch::from_name)
                        .fold(0, |b, t| b | t.bit());
                    (p.to_owned(), bits)
                }
                _ => (head.clone(), 0),
            };
            Some((
                path,
                apis,
                Trail {
                    touches,
                    ..Trail::default()
                },
            ))
        }
        Kind::Command => {
            let rest = line.strip_prefix('`')?;
            let (cmd, outcome) = match rest.rsplit_once("` → ") {
                Some((c, o)) => (c, Some(o.to_owned())),
                None => (rest.strip_suffix('`').unwrap_or(rest), None),
            };
            let purpose = shell::read_shell(cmd).purpose;
            Some((
                cmd.to_owned(),
                Vec::new(),
                Trail {
                    purpose: Some(purpose.code()),
                    outcome,
                    ..Trail::default()
                },
            ))
        }
        _ => None,
    }
}

impl Ledger {
    /// A tool result whose call is known (`input`: the call's arguments).
    /// Records the trail; returns whether the output was read here (and so
    /// must not be read line by line as well). `whole`: `output` is the
    /// whole output, not a piece a cap cut out.
    pub(super) fn extract_trail(
        &mut self,
        tool: &str,
        input: &str,
        output: &str,
        whole: bool,
    ) -> bool {
        let Some(call) = shell::read_call(tool, input) else {
            return false;
        };
        // A placeholder a clear left says nothing of how the command went
        // (its outcome was read when the output was cleared).
        let whole = whole && !output.contains("⟦removed:");
        self.note_output_shapes(output);
        if let Some(dir) = &call.cwd {
            self.workdir = Some(dir.clone());
        }
        let call = shell::Call {
            files: call
                .files
                .iter()
                .map(|(p, t)| (self.located(p), *t))
                .collect(),
            ..call
        };
        for (path, touch) in &call.files {
            self.touch_file(path, *touch);
        }
        let code_view = |files: &[(String, Touch)]| {
            !files.is_empty() && files.iter().all(|(p, _)| shell::is_code(p))
        };
        let looked = matches!(call.purpose, Purpose::View | Purpose::Search);
        let read = whole.then(|| outcome::read(output));
        // A look that failed (`hexdump: command not found`, a missing file)
        // is a finding of its own: kept as a command with its outcome.
        if looked && let Some(o) = read.as_ref().filter(|o| o.failed() || o.error.is_some()) {
            if let Some(cmd) = &call.command {
                self.record_command(
                    cmd,
                    call.purpose,
                    Some(o.render(MAX_OUTCOME)),
                    true,
                    Vec::new(),
                );
            }
            return true;
        }
        match call.purpose {
            Purpose::View | Purpose::Search => {
                let viewed: Vec<&str> = call
                    .files
                    .iter()
                    .filter(|(_, t)| *t == Touch::Viewed)
                    .map(|(p, _)| p.as_str())
                    .collect();
                if call.purpose == Purpose::View && !code_view(&call.files) {
                    return false;
                }
                // One file viewed: its declarations are its.
                if let [path] = viewed.as_slice() {
                    self.note_declarations(path, output);
                }
                if call.purpose == Purpose::Search
                    && let Some(cmd) = &call.command
                {
                    // A search that found a line or three: those lines
                    // are what it found (`493: if isinstance(uinput,
                    // Sequence)…`); more are a listing, in the files.
                    let hits = read
                        .filter(|o| o.whole && !o.lines.is_empty() && o.tests.is_none())
                        .map(|o| o.render(MAX_OUTCOME));
                    self.record_command(cmd, call.purpose, hits, false, Vec::new());
                }
                true
            }
            _ => {
                let Some(cmd) = &call.command else {
                    // A file tool's edit: the file says it all.
                    return true;
                };
                // A file written or copied (`cat > f.py << EOF`, `cp a b`):
                // the file says it all, unless the command failed.
                if call.purpose == Purpose::Edit
                    && !read
                        .as_ref()
                        .is_some_and(|o| o.failed() || o.error.is_some())
                {
                    return true;
                }
                let failed = read.as_ref().is_some_and(outcome::Outcome::failed);
                // What failed: the tests, and a checker's errors (once
                // fixed, they are what the run was about).
                let failing = read
                    .as_ref()
                    .filter(|o| o.failed())
                    .map(|o| {
                        // The error it ended with too: run again, it may end
                        // with another, and the first was a step of the way.
                        let errors = o.diagnostics.iter().filter(|d| d.contains(": error"));
                        let mut failing: Vec<String> = Vec::new();
                        for f in o
                            .test_ids
                            .iter()
                            .chain(&o.failures)
                            .chain(errors)
                            .chain(o.error.iter())
                        {
                            if !failing.contains(f) {
                                failing.push(f.clone());
                            }
                        }
                        failing
                    })
                    .unwrap_or_default();
                let rendered = read.map(|o| o.render(MAX_OUTCOME));
                self.record_command(cmd, call.purpose, rendered, failed, failing);
                call.purpose != Purpose::Other
            }
        }
    }

    /// `path` as an absolute path when the working directory is known, and
    /// without a leading `./`: one spelling per file however the agent
    /// wrote it (`cd /testbed && cat a.py`, `sed -n 1,9p /testbed/a.py`),
    /// and one that still names the file after the agent changes
    /// directory. It also holds both spellings the agent may look for.
    fn located(&self, path: &str) -> String {
        let path = path.trim_start_matches("./");
        match &self.workdir {
            Some(dir) if !path.starts_with(['/', '~', '$']) && !path.is_empty() => {
                format!("{dir}/{path}")
            }
            _ => path.to_owned(),
        }
    }

    /// Records that `path` was touched.
    fn touch_file(&mut self, path: &str, touch: Touch) {
        let path = path.trim_start_matches("./");
        let Some(i) = self.add(Kind::Touched, path, true) else {
            return;
        };
        let item = &mut self.items[i];
        item.trail.get_or_insert_with(Trail::default).touches |= touch.bit();
    }

    /// Records a command run (or run again: its latest outcome stands).
    fn record_command(
        &mut self,
        cmd: &str,
        purpose: Purpose,
        outcome: Option<String>,
        failed: bool,
        failing: Vec<String>,
    ) {
        let Some(i) = self.add(Kind::Command, cmd, true) else {
            return;
        };
        let t = self.items[i].trail.get_or_insert_with(Trail::default);
        t.purpose = Some(purpose.code());
        if let Some(o) = outcome {
            // The tests the previous run failed that this one does not name.
            if let Some(prev) = &t.failed_ids {
                for id in prev {
                    if !failing.contains(id) && !t.failed_before.contains(id) {
                        t.failed_before.push(id.clone());
                    }
                }
                // Failing again is not "before".
                t.failed_before.retain(|id| !failing.contains(id));
                let n = t.failed_before.len();
                if n > MAX_FAILED_BEFORE {
                    t.failed_before.drain(..n - MAX_FAILED_BEFORE);
                }
            }
            t.failed_ids = Some(failing);
            let changed = t.outcome.as_deref() != Some(o.as_str());
            t.outcome = Some(o);
            t.failed = failed;
            if changed {
                self.trail_rev += 1;
            }
        }
    }

    /// The declarations a view of `path` showed: those the conversation
    /// names first, then the rest in order, up to [`MAX_DECLS`].
    fn note_declarations(&mut self, path: &str, output: &str) {
        let mut found: Vec<String> = DECLARATION
            .captures_iter(output)
            .filter_map(|c| c.get(1).map(|m| clip(m.as_str().trim(), MAX_DECL)))
            .collect();
        found.dedup();
        if found.is_empty() {
            return;
        }
        let named: Vec<bool> = found
            .iter()
            .map(|d| {
                let name = d
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.split('(').next())
                    .unwrap_or("");
                self.mentioned.contains(name)
            })
            .collect();
        let path = path.trim_start_matches("./");
        let Some(i) = self.add(Kind::Touched, path, true) else {
            return;
        };
        let item = &mut self.items[i];
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by_key(|&k| (!named[k], k));
        for k in order {
            let d = &found[k];
            if item.apis.contains(d) {
                continue;
            }
            if item.apis.len() < MAX_DECLS {
                item.apis.push(d.clone());
            } else if named[k] {
                // A named declaration displaces the last one nobody named.
                item.apis.pop();
                item.apis.push(d.clone());
            }
        }
    }

    /// Restores a trail line of a previous summary.
    pub(crate) fn restore_trail(&mut self, kind: Kind, line: &str) {
        let Some((text, apis, trail)) = parse_line(kind, line) else {
            return;
        };
        let Some(i) = self.add(kind, &text, true) else {
            return;
        };
        let item = &mut self.items[i];
        for a in apis {
            if !item.apis.contains(&a) {
                item.apis.push(a);
            }
        }
        let t = item.trail.get_or_insert_with(Trail::default);
        t.touches |= trail.touches;
        if trail.purpose.is_some() {
            t.purpose = trail.purpose;
        }
        if trail.outcome.is_some() {
            t.outcome = trail.outcome;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_records_its_files_and_outcome_and_a_code_view_its_declarations() {
        let mut l = Ledger::default();
        l.mention("_repr_name");
        let handled = l.extract_trail(
            "bash",
            r#"{"command": "sed -n '1,80p' astroid/nodes/node_ng.py"}"#,
            "<returncode>0</returncode><output>\nclass NodeNG:\n    def _repr_name(self) -> str:\n        return ''\n    def other(self):\n</output>",
            true,
        );
        assert!(handled);
        let handled = l.extract_trail(
            "bash",
            r#"{"command": "python -m pytest tests/unittest_nodes.py::test_unknown -q"}"#,
            "<returncode>1</returncode>\n<output>\nFAILED tests/unittest_nodes.py::test_unknown - AssertionError\n1 failed in 0.2s\n</output>",
            true,
        );
        assert!(handled);
        let touched: Vec<(&str, u8, &[String])> = l
            .items
            .iter()
            .filter(|i| i.kind == Kind::Touched)
            .map(|i| {
                (
                    i.text.as_str(),
                    i.trail.as_ref().map_or(0, |t| t.touches),
                    i.apis.as_slice(),
                )
            })
            .collect();
        assert_eq!(touched.len(), 2, "{touched:?}");
        assert_eq!(touched[0].0, "astroid/nodes/node_ng.py");
        assert_eq!(touched[0].2[0], "def _repr_name(self)");
        assert_eq!(touched[1].1, Touch::Tested.bit());
        let cmd = l
            .items
            .iter()
            .find(|i| i.kind == Kind::Command)
            .expect("the test command");
        let t = cmd.trail.as_ref().expect("its trail");
        assert!(t.failed);
        assert_eq!(
            t.outcome.as_deref(),
            Some("exit 1; 1 failed; tests/unittest_nodes.py::test_unknown")
        );
        let [key, short, full] = forms(Kind::Command, &cmd.text, &cmd.apis, t);
        assert!(key.starts_with("`python -m pytest"));
        assert!(short.contains(" → exit 1"));
        assert!(full.ends_with("test_unknown"));
        // The forms read back.
        let (text, _, back) = parse_line(Kind::Command, &full).expect("parses");
        assert_eq!(text, cmd.text);
        assert_eq!(back.outcome, t.outcome);
        let file = &l.items[0];
        let [_, _, full] = forms(
            Kind::Touched,
            &file.text,
            &file.apis,
            file.trail.as_ref().expect("trail"),
        );
        let (path, apis, back) = parse_line(Kind::Touched, &full).expect("parses");
        assert_eq!(
            (path.as_str(), apis, back.touches),
            (file.text.as_str(), file.apis.clone(), Touch::Viewed.bit())
        );
    }

    fn command<'a>(l: &'a Ledger, text: &str) -> &'a super::super::Item {
        l.items
            .iter()
            .find(|i| i.kind == Kind::Command && i.text == text)
            .unwrap_or_else(|| panic!("no command {text}: {:?}", l.items))
    }

    fn rank_of(i: &super::super::Item) -> Option<u8> {
        rank(
            i.kind,
            &i.text,
            i.trail.as_ref().unwrap_or(&Trail::default()),
        )
    }

    #[test]
    fn a_project_fixture_read_weighs_what_code_does_and_a_page_less() {
        let viewed = |path: &str| {
            let t = Trail {
                touches: Touch::Viewed.bit(),
                ..Trail::default()
            };
            rank(Kind::Touched, path, &t)
        };
        let created = Trail {
            touches: Touch::Created.bit(),
            ..Trail::default()
        };
        let scratch = rank(Kind::Touched, "fix_error_message.patch", &created);
        // sqlfluff-1625: the rule's test cases, read once, lost behind the
        // agent's scratch files when they ranked below them.
        let fixture = viewed("test/fixtures/rules/std_rule_cases/L031.yml");
        assert_eq!(fixture, viewed("src/sqlfluff/rules/L031.py"));
        assert_eq!(fixture, scratch);
        assert_eq!(viewed(".github/workflows/ci.yml"), fixture);
        // A page, a bare name or a file in /tmp is not the project's data.
        assert!(viewed("README.md") < fixture);
        assert!(viewed("config.yml") < fixture);
        assert!(viewed("/tmp/out/result.json") < fixture);
    }

    #[test]
    fn what_a_run_or_a_search_showed_is_a_finding_and_a_bare_exit_is_a_step() {
        let mut l = Ledger::default();
        let rc = |code: i32, out: &str| {
            format!("<returncode>{code}</returncode>\n<output>\n{out}</output>")
        };
        l.extract_trail(
            "bash",
            r#"{"command": "grep -n \"isinstance.*Sequence\" pyvista/core/grid.py"}"#,
            &rc(
                0,
                "493:        if isinstance(uinput, Sequence) and not isinstance(uinput, str):\n",
            ),
            true,
        );
        l.extract_trail(
            "bash",
            r#"{"command": "grep -rn open src"}"#,
            &rc(0, &"src/a.py:1: open(x)\n".repeat(12)),
            true,
        );
        l.extract_trail(
            "bash",
            r#"{"command": "python bytepos.py"}"#,
            &rc(0, "Byte position 120 is within character 118 'O'\n"),
            true,
        );
        l.extract_trail(
            "bash",
            r#"{"command": "python -m py_compile x.py"}"#,
            &rc(0, ""),
            true,
        );
        l.extract_trail(
            "bash",
            r#"{"command": "hexdump -C test.sql"}"#,
            &rc(127, "bash: line 1: hexdump: command not found\n"),
            true,
        );

        let hit = command(&l, "grep -n \"isinstance.*Sequence\" pyvista/core/grid.py");
        assert_eq!(
            hit.trail.as_ref().and_then(|t| t.outcome.as_deref()),
            Some(
                "exit 0; \"493: if isinstance(uinput, Sequence) and not isinstance(uinput, str):\""
            )
        );
        assert_eq!(rank_of(hit), Some(6));
        // Twelve hits are a listing: the files say where they are.
        let listing = command(&l, "grep -rn open src");
        assert_eq!(
            listing.trail.as_ref().and_then(|t| t.outcome.as_deref()),
            None
        );
        assert_eq!(rank_of(listing), Some(2));
        let run = command(&l, "python bytepos.py");
        assert_eq!(rank_of(run), Some(8));
        // Its key form carries what it showed, not only how it exited.
        let [key, _, _] = forms(
            run.kind,
            &run.text,
            &run.apis,
            run.trail.as_ref().expect("trail"),
        );
        assert!(key.contains("Byte position 120"), "{key}");
        assert_eq!(rank_of(command(&l, "python -m py_compile x.py")), Some(5));
        let failed = command(&l, "hexdump -C test.sql");
        assert_eq!(rank_of(failed), Some(6));
        assert!(
            forms(
                failed.kind,
                &failed.text,
                &failed.apis,
                failed.trail.as_ref().expect("trail")
            )[0]
            .contains("hexdump: command not found")
        );
    }

    #[test]
    fn a_checkers_error_that_a_later_run_no_longer_reports_stays_as_failed_before() {
        let mut l = Ledger::default();
        let cmd = r#"{"command": "mypy src"}"#;
        l.extract_trail("bash", cmd, "src/k.py:224: error: \"Schema\" has no attribute \"orbit_mode\"  [attr-defined]\nFound 1 error\n[exit code: 1]\n", true);
        l.extract_trail("bash", cmd, "src/t.py:9: error: Name \"x\" is not defined  [name-defined]\nFound 1 error\n[exit code: 1]\n", true);
        let t = command(&l, "mypy src").trail.clone().expect("trail");
        assert_eq!(
            t.failed_before,
            ["src/k.py:224: error: \"Schema\" has no attribute \"orbit_mode\"  [attr-defined]"]
        );
        assert!(
            t.outcome
                .as_deref()
                .is_some_and(|o| o.contains("name-defined"))
        );
    }

    #[test]
    fn a_package_runners_test_is_a_test_and_the_error_a_later_run_fixed_is_kept() {
        let mut l = Ledger::default();
        let failing = "  ● Filters › inlet large values\n\n    TypeError: Cannot read properties of undefined (reading 'umberMargin')\n\nTests:       1 failed, 9 passed, 10 total\n[exit code: 1]\n";
        l.extract_trail(
            "bash",
            r#"{"command": "npx jest 2>&1 | tail -n 30"}"#,
            failing,
            true,
        );
        l.extract_trail(
            "bash",
            r#"{"command": "npx jest"}"#,
            "Tests:       10 passed, 10 total\n[exit code: 0]\n",
            true,
        );
        let jest = command(&l, "npx jest");
        let t = jest.trail.as_ref().expect("trail");
        assert_eq!(t.purpose, Some(Purpose::Test.code()));
        assert_eq!(rank_of(jest), Some(9));
        assert_eq!(
            t.failed_before,
            [
                "Filters › inlet large values",
                "TypeError: Cannot read properties of undefined (reading 'umberMargin')"
            ]
        );
        // The short form tells the story: passing now, failing before.
        let [_, short, _] = forms(jest.kind, &jest.text, &jest.apis, t);
        assert!(
            short.contains("10 passed") && short.contains("failed before: Filters › inlet"),
            "{short}"
        );
    }

    #[test]
    fn a_cut_command_keeps_the_name_it_ran_whole() {
        let id = "annotations.tests.AnnotationTest.test_empty_expression_annotation";
        let cmd = format!("python -m django test {id} --settings=test_sqlite --verbosity=2");
        let short = clip_command(&cmd, 120);
        assert!(short.contains(id) && short.len() <= 120, "{short}");
        assert!(short.starts_with("python -m django test"), "{short}");
        // Narrower than the name: the name stays, with the program before it.
        let key = clip_command(&cmd, 60);
        assert!(key.contains(id) && key.starts_with("python"), "{key}");
        // What is not a name (a blob far wider than the room) is cut.
        let blob = format!("echo {}", "x".repeat(400));
        assert!(clip_command(&blob, 80).len() < 100);
        // Short enough: as it was.
        assert_eq!(clip_command("pytest -x tests", 80), "pytest -x tests");
        // Options go first, from the end, marked.
        let opts = clip_command(
            "python -m pytest tests/migrations/test_state.py::StateTests::test_x -xvs --tb=short",
            72,
        );
        assert_eq!(
            opts,
            "python -m pytest tests/migrations/test_state.py::StateTests::test_x …"
        );
        // A settings option longer than the name does not name the run,
        // nor does the filter the output goes through.
        let settings = clip_command(
            "python -m django test migrations.test_writer --settings=django.conf.global_settings --verbosity=0",
            60,
        );
        assert!(
            settings.starts_with("python -m django test migrations.test_writer"),
            "{settings}"
        );
        let piped = clip_command(
            r#"cd /testbed && python -m django test migrations.test_autodetector 2>&1 | grep "order_with_respect_to\|FAIL\|ERROR\|test_""#,
            60,
        );
        assert!(piped.contains("migrations.test_autodetector"), "{piped}");
        // With no word that may name it, the longest word still does.
        let only_options = format!("--{} -y", "x".repeat(50));
        assert!(clip_command(&only_options, 40).contains(&"x".repeat(50)));
    }

    #[test]
    fn a_file_has_one_spelling_that_holds_the_ones_the_agent_wrote() {
        let mut l = Ledger::default();
        let rc = "<returncode>0</returncode>\n<output>\nclass A:\n    pass\n</output>";
        l.extract_trail(
            "bash",
            r#"{"command": "cd /testbed && cat ./pkg/a.py"}"#,
            rc,
            true,
        );
        l.extract_trail(
            "bash",
            r#"{"command": "sed -n '1,9p' /testbed/pkg/a.py"}"#,
            rc,
            true,
        );
        let files: Vec<&str> = l
            .items
            .iter()
            .filter(|i| i.kind == Kind::Touched)
            .map(|i| i.text.as_str())
            .collect();
        assert_eq!(files, ["/testbed/pkg/a.py"]);
    }

    #[test]
    fn remembered_forms_follow_a_commands_new_outcome() {
        let mut l = Ledger::default();
        let run = |l: &mut Ledger, out: &str| {
            l.extract_trail(
                "bash",
                r#"{"command": "python -m pytest tests/test_a.py -q"}"#,
                &format!("<returncode>1</returncode>\n<output>\n{out}\n</output>"),
                true,
            );
            let it = l.items.iter().find(|i| i.kind == Kind::Command).cloned();
            let it = it.expect("the command is recorded");
            (l.forms.of(&it), super::super::super::forms::forms(&it))
        };
        let (memo, fresh) = run(
            &mut l,
            "FAILED tests/test_a.py::test_x - KeyError\n1 failed in 0.1s",
        );
        assert_eq!(memo, fresh);
        assert!(memo[2].contains("1 failed"), "{:?}", memo);
        // Same command, new outcome: the memo does not answer with the old.
        let (memo, fresh) = run(&mut l, "3 passed in 0.1s");
        assert_eq!(memo, fresh);
        assert!(memo[2].contains("3 passed"), "{:?}", memo);
    }
}
