//! Real agent trajectories, read in place from `../shared/real-trajectories`
//! (never copied into the repository): public runs of an open-source coding
//! agent on real GitHub issues, converted to Chat messages grouped into
//! turns, each with probes (strings the agent still needs later).
//!
//! Every probe becomes a [`Fact`] with one probe, of the kind the probe
//! says (`file`, `test`, `finding`; a `problem` probe, an identifier of the
//! task, is an [`FactKind::Identifier`] planted by the user). Such a fact is
//! retained when its key is a substring of the final context's text (the
//! trajectories' own rule, [`ProbeMatch::Substring`]), not by the line rule
//! of the generated corpus.
//!
//! A fixed set of runs is held out ([`HELD_OUT`]): tune on the others and
//! quote the held-out figures first.

use std::path::{Path, PathBuf};

use compact_middleware::model::{Format, Request};
use serde::Deserialize;
use serde_json::Value;

use super::{Fact, FactKind, Location, ProbeMatch, Split, Transcript};

/// The runs held out from tuning: chosen before any was looked at, one per
/// model family plus the one whose framework injected a format-error nudge.
pub const HELD_OUT: [&str; 3] = [
    "astropy-14182-deepseek",
    "marshmallow-1359-deepseek-reasoner",
    "pvlib-1606-deepseek-noparallel",
];

/// The environment variable that points at another trajectory directory.
pub const DIR_VAR: &str = "COMPACT_TRAJECTORIES";

/// A trajectory file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TrajectoryError {
    /// The file cannot be read.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        #[source]
        error: std::io::Error,
    },
    /// The file is not the documented JSON shape.
    #[error("{path}: {error}")]
    Json {
        /// The file.
        path: String,
        /// The parser's message, with its position.
        error: String,
    },
    /// A turn does not decode as Chat Completions messages.
    #[error("{path}: turn {turn}: {error}")]
    Input {
        /// The file.
        path: String,
        /// The turn, from 0.
        turn: usize,
        /// The decoder's message (with the JSON path).
        error: String,
    },
}

#[derive(Deserialize)]
struct File {
    name: String,
    system: Vec<Value>,
    turns: Vec<Vec<Value>>,
    probes: Vec<ProbeRecord>,
}

#[derive(Deserialize)]
struct ProbeRecord {
    key: String,
    kind: String,
    turn: usize,
}

/// The trajectory directory: `$COMPACT_TRAJECTORIES`, else the first
/// `../shared/real-trajectories` above the crate; `None` when neither exists
/// (a clean clone, CI): callers skip and say so.
pub fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os(DIR_VAR).map(PathBuf::from) {
        return d.is_dir().then_some(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|p| p.join("../shared/real-trajectories"))
        .find(|d| d.is_dir())
}

/// The split file a trajectory directory may hold beside its runs: a JSON
/// object from run name to `"heldout"` (or `"held_out"`) and anything else
/// for tuning, or `{"held_out": [names]}`. Without it, [`HELD_OUT`] says
/// which runs are held out.
pub const SPLIT_FILE: &str = "split.json";

/// The two shapes of [`SPLIT_FILE`].
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum SplitFile {
    List { held_out: Vec<String> },
    ByRun(std::collections::BTreeMap<String, String>),
}

impl SplitFile {
    fn held_out(self) -> Vec<String> {
        match self {
            SplitFile::List { held_out } => held_out,
            SplitFile::ByRun(map) => map
                .into_iter()
                .filter(|(_, v)| matches!(v.as_str(), "heldout" | "held_out"))
                .map(|(k, _)| k)
                .collect(),
        }
    }
}

/// Every `*.json` trajectory of `dir`, by name, each in the split the
/// directory's [`SPLIT_FILE`] gives it (else [`HELD_OUT`]'s).
pub fn load_dir(dir: &Path) -> Result<Vec<Transcript>, TrajectoryError> {
    let split_path = dir.join(SPLIT_FILE);
    let held_out: Option<Vec<String>> = match std::fs::read(&split_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            return Err(TrajectoryError::Io {
                path: split_path.display().to_string(),
                error,
            });
        }
        Ok(bytes) => {
            let split: SplitFile =
                serde_json::from_slice(&bytes).map_err(|e| TrajectoryError::Json {
                    path: split_path.display().to_string(),
                    error: format!(
                        "expected {{\"held_out\": [names]}} or {{name: \"heldout\" | \"tune\"}}: {e}"
                    ),
                })?;
            Some(split.held_out())
        }
    };
    let mut runs = load_runs(dir)?;
    if let Some(held_out) = held_out {
        for t in &mut runs {
            t.split = if held_out.contains(&t.name) {
                Split::HeldOut
            } else {
                Split::Tune
            };
        }
    }
    Ok(runs)
}

fn load_runs(dir: &Path) -> Result<Vec<Transcript>, TrajectoryError> {
    let io = |error| TrajectoryError::Io {
        path: dir.display().to_string(),
        error,
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_name().is_none_or(|n| n != SPLIT_FILE))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

/// One trajectory file as a transcript.
pub fn load(path: &Path) -> Result<Transcript, TrajectoryError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|error| TrajectoryError::Io {
        path: shown.clone(),
        error,
    })?;
    let file: File = serde_json::from_slice(&bytes).map_err(|e| TrajectoryError::Json {
        path: shown.clone(),
        error: e.to_string(),
    })?;
    let decode = |items: &[Value], turn: usize| {
        Request::from_value(Value::Array(items.to_vec()), Format::Chat)
            .map(|r| r.messages)
            .map_err(|e| TrajectoryError::Input {
                path: shown.clone(),
                turn,
                error: e.to_string(),
            })
    };
    let opening = decode(&file.system, 0)?;
    let turns = file
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| decode(t, i))
        .collect::<Result<Vec<_>, _>>()?;
    let facts = file
        .probes
        .iter()
        .enumerate()
        .map(|(i, p)| Fact {
            id: format!("p{i}"),
            kind: match p.kind.as_str() {
                "file" => FactKind::File,
                "test" => FactKind::Test,
                "finding" => FactKind::Finding,
                _ => FactKind::Identifier,
            },
            location: match p.kind.as_str() {
                "problem" => Location::User,
                "finding" => Location::Assistant,
                _ => Location::Tool,
            },
            // Facts count turns from 1.
            turn: p.turn + 1,
            probes: vec![probe_key(&p.kind, &p.key).to_owned()],
            superseded: None,
            text: p.key.clone(),
        })
        .collect();
    let split = if HELD_OUT.contains(&file.name.as_str()) {
        Split::HeldOut
    } else {
        Split::Tune
    };
    Ok(Transcript {
        name: file.name,
        source: "real-trajectories".into(),
        wire: Format::Chat,
        opening,
        turns,
        facts,
        probe_match: ProbeMatch::Substring,
        split,
    })
}

/// What a probe looks for: its key, except that a file's leading `./`
/// is not part of its name. `./pvlib/iam.py` and `pvlib/iam.py` name the
/// same file from the repository's root, and a context that names it
/// either way (or as `/testbed/pvlib/iam.py`) still tells the agent which
/// file it worked on. Without this, a summary that lists the file under
/// one spelling would count as having lost it.
fn probe_key<'a>(kind: &str, key: &'a str) -> &'a str {
    match kind {
        "file" => key.strip_prefix("./").unwrap_or(key),
        _ => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str) -> String {
        serde_json::json!({
            "name": name,
            "system": [{"role": "system", "content": "You are an agent."}],
            "turns": [[{"role": "user", "content": "Fix bug 17 in parse_window."}]],
            "probes": [{"key": "parse_window", "kind": "problem", "turn": 0}]
        })
        .to_string()
    }

    #[test]
    fn a_directorys_split_file_says_which_runs_are_held_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["a-run", "b-run"] {
            std::fs::write(dir.path().join(format!("{name}.json")), run(name)).expect("write");
        }
        // Without a split file, the shared corpus's list decides: neither.
        let runs = load_dir(dir.path()).expect("loads");
        assert!(runs.iter().all(|t| t.split == Split::Tune));
        std::fs::write(
            dir.path().join(SPLIT_FILE),
            r#"{"a-run": "dev", "b-run": "heldout"}"#,
        )
        .expect("write");
        let runs = load_dir(dir.path()).expect("loads");
        let split = |n: &str| runs.iter().find(|t| t.name == n).map(|t| t.split);
        assert_eq!(runs.len(), 2, "the split file is not a run");
        assert_eq!(split("a-run"), Some(Split::Tune));
        assert_eq!(split("b-run"), Some(Split::HeldOut));
        // The list shape says the same.
        std::fs::write(dir.path().join(SPLIT_FILE), r#"{"held_out": ["a-run"]}"#).expect("write");
        let runs = load_dir(dir.path()).expect("loads");
        let split = |n: &str| runs.iter().find(|t| t.name == n).map(|t| t.split);
        assert_eq!(split("a-run"), Some(Split::HeldOut));
        assert_eq!(split("b-run"), Some(Split::Tune));
        // A split file that is not the documented shape is an error naming it.
        std::fs::write(dir.path().join(SPLIT_FILE), "[1, 2]").expect("write");
        let err = load_dir(dir.path()).expect_err("bad split file");
        assert!(err.to_string().contains(SPLIT_FILE), "{err}");
    }

    #[test]
    fn a_file_probe_is_found_however_the_context_spells_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = serde_json::json!({
            "name": "spelled",
            "system": [{"role": "system", "content": "You are an agent."}],
            "turns": [[{"role": "user", "content": "Fix bug 17 in parse_window."}]],
            "probes": [
                {"key": "./pkg/window.py", "kind": "file", "turn": 0},
                {"key": "./run_tests.sh", "kind": "test", "turn": 0}
            ]
        });
        std::fs::write(dir.path().join("spelled.json"), run.to_string()).expect("write");
        let runs = load_dir(dir.path()).expect("loads");
        let t = &runs[0];
        let kept = |text: &str| {
            let context = [compact_middleware::Message::user(text)];
            crate::retention::check(&context, t).0
        };
        // A summary lists files from the root, or under the working directory.
        assert_eq!(kept("- pkg/window.py (edited)"), [true, false]);
        assert_eq!(kept("- /testbed/pkg/window.py (edited)"), [true, false]);
        assert_eq!(kept("ran ./run_tests.sh on ./pkg/window.py"), [true, true]);
        // Only a file's leading `./` is dropped: a test command keeps it.
        assert_eq!(kept("- pkg/window.py; run_tests.sh"), [true, false]);
        assert_eq!(kept("- other/window.py"), [false, false]);
        // The fact still shows the key as the run wrote it.
        assert_eq!(t.facts[0].text, "./pkg/window.py");
    }
}
