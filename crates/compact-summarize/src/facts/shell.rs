//! What a tool call did to the workspace, read from its arguments: the
//! files it viewed, searched, created, edited, ran or tested, and the
//! command a reader would recognise.
//!
//! Coding agents act through a shell (`bash` with a `command`), an editor
//! tool (`str_replace_editor` with `view` / `create` / `str_replace` and a
//! `path`), a patch tool (`apply_patch` with `*** Update File: …`) or file
//! tools (`read_file(path)`, `write_file(path)`). The shell command is read
//! as shell: words and quotes, `&&` / `;` / `|` chains, redirections, and
//! here-documents (`cat > f.py << 'EOF' … EOF`), whose bodies are file
//! contents, not commands.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::lexicon::re;

/// What a command is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Purpose {
    /// Looks at a file (`cat`, `sed -n`, `head`, an editor's `view`).
    View,
    /// Looks for something (`grep`, `find`, `ls`).
    Search,
    /// Changes files (`sed -i`, `cat > f`, a patch, an editor's edit).
    Edit,
    /// Runs a program or a script.
    Run,
    /// Runs tests.
    Test,
    /// Installs or configures (`pip install`, `apt-get`).
    Setup,
    /// Version control.
    Vcs,
    /// Anything else (`curl`, `kubectl`, `psql` …).
    Other,
}

/// What a call did to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Touch {
    Viewed,
    Searched,
    Created,
    Edited,
    Ran,
    Tested,
    Deleted,
}

impl Touch {
    /// The bit of this touch in a file's record.
    pub(crate) fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// Every touch, in display order.
    pub(crate) const ALL: [Touch; 7] = [
        Touch::Created,
        Touch::Edited,
        Touch::Deleted,
        Touch::Tested,
        Touch::Ran,
        Touch::Viewed,
        Touch::Searched,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Touch::Viewed => "viewed",
            Touch::Searched => "searched",
            Touch::Created => "created",
            Touch::Edited => "edited",
            Touch::Ran => "ran",
            Touch::Tested => "tested",
            Touch::Deleted => "deleted",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Touch> {
        Touch::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// A tool call read for the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    /// The command as a reader recognises it (here-document bodies left
    /// out, whitespace folded); `None` for a file tool, whose files say it all.
    pub command: Option<String>,
    /// What the call was mostly for (the strongest purpose of its parts).
    pub purpose: Purpose,
    /// The files it touched, in order.
    pub files: Vec<(String, Touch)>,
    /// The absolute directory it changed to (`cd /testbed && …`), if any.
    pub cwd: Option<String>,
}

/// Longest command kept, in bytes.
const MAX_COMMAND: usize = 200;

/// Tool names that run shell commands.
const SHELLS: &[&str] = &[
    "bash",
    "sh",
    "shell",
    "zsh",
    "terminal",
    "run_command",
    "run_shell_command",
    "execute_command",
    "execute_bash",
    "exec_command",
    "local_shell",
    "local_shell_call",
    "run_terminal_cmd",
    "powershell",
    "cmd",
    "exec",
];

/// Reads one tool call: `name` and its arguments as JSON text (or free text).
pub(crate) fn read_call(name: &str, input: &str) -> Option<Call> {
    let name_l = name.to_ascii_lowercase();
    let args: Option<Value> = serde_json::from_str(input.trim()).ok();
    let field = |keys: &[&str]| -> Option<String> {
        let obj = args.as_ref()?.as_object()?;
        keys.iter().find_map(|k| match obj.get(*k)? {
            Value::String(s) => Some(s.clone()),
            // `["bash", "-lc", "…"]`, as Codex sends its shell calls.
            Value::Array(parts) => {
                let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
                (!words.is_empty()).then(|| match words.as_slice() {
                    [shell, flag, script] if is_shell_word(shell) && flag.starts_with('-') => {
                        (*script).to_owned()
                    }
                    _ => words.join(" "),
                })
            }
            _ => None,
        })
    };
    let patch = field(&["input", "patch"]).or_else(|| {
        (args.is_none() && input.contains("*** Begin Patch")).then(|| input.to_owned())
    });
    if let Some(p) = patch.filter(|p| p.contains("*** Begin Patch")) {
        return Some(read_patch(&p));
    }
    let path = field(&[
        "path",
        "file_path",
        "filepath",
        "filename",
        "file",
        "target_file",
    ]);
    let command = field(&["command", "cmd", "script"]);
    // An editor: `{"command": "view", "path": …}`.
    if let (Some(verb), Some(path)) = (&command, &path)
        && let Some(touch) = editor_verb(verb)
    {
        let purpose = match touch {
            Touch::Viewed => Purpose::View,
            _ => Purpose::Edit,
        };
        return Some(Call {
            command: None,
            purpose,
            files: vec![(path.clone(), touch)],
            cwd: None,
        });
    }
    let shell = SHELLS.contains(&name_l.as_str()) || name_l.contains("shell");
    if let Some(cmd) = command.filter(|_| shell || path.is_none()) {
        return Some(read_shell(&cmd));
    }
    if args.is_none() && shell && !input.trim().is_empty() {
        return Some(read_shell(input));
    }
    // A file tool: what its name says it does to `path`.
    let path = path?;
    let touch = if ["write", "create", "save", "new_file"]
        .iter()
        .any(|w| name_l.contains(w))
    {
        Touch::Created
    } else if [
        "edit", "replace", "patch", "update", "insert", "modify", "append",
    ]
    .iter()
    .any(|w| name_l.contains(w))
    {
        Touch::Edited
    } else if ["delete", "remove"].iter().any(|w| name_l.contains(w)) {
        Touch::Deleted
    } else if ["read", "view", "open", "cat", "show", "get_file", "load"]
        .iter()
        .any(|w| name_l.contains(w))
    {
        Touch::Viewed
    } else {
        return None;
    };
    Some(Call {
        command: None,
        purpose: if touch == Touch::Viewed {
            Purpose::View
        } else {
            Purpose::Edit
        },
        files: vec![(path, touch)],
        cwd: None,
    })
}

fn is_shell_word(w: &str) -> bool {
    matches!(
        w.rsplit('/').next().unwrap_or(w),
        "bash" | "sh" | "zsh" | "dash"
    )
}

fn editor_verb(verb: &str) -> Option<Touch> {
    match verb {
        "view" | "read" | "show" | "open" => Some(Touch::Viewed),
        "create" | "write" => Some(Touch::Created),
        "str_replace" | "insert" | "undo_edit" | "edit" | "replace" | "append" => {
            Some(Touch::Edited)
        }
        _ => None,
    }
}

/// An `apply_patch` body: the files it adds, updates, deletes.
fn read_patch(patch: &str) -> Call {
    let mut files = Vec::new();
    for line in patch.lines() {
        let line = line.trim();
        for (prefix, touch) in [
            ("*** Add File: ", Touch::Created),
            ("*** Update File: ", Touch::Edited),
            ("*** Delete File: ", Touch::Deleted),
            ("*** Move to: ", Touch::Created),
        ] {
            if let Some(p) = line.strip_prefix(prefix) {
                files.push((p.trim().to_owned(), touch));
            }
        }
    }
    Call {
        command: None,
        purpose: Purpose::Edit,
        files,
        cwd: None,
    }
}

/// One simple command of a shell line: its words and where it writes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Simple {
    words: Vec<String>,
    /// Files written by `>` (truncating) and `>>` (appending).
    writes: Vec<(String, bool)>,
    /// Fed by a pipe: a filter of another command's output.
    piped: bool,
    /// The here-document it reads (`python3 - <<'PY' … PY`): a file's
    /// contents for `cat > f`, a script for an interpreter.
    stdin: Option<String>,
}

/// Splits a shell script into simple commands and a display form without
/// here-document bodies.
fn parse(script: &str) -> (Vec<Simple>, String) {
    let chars: Vec<char> = script.chars().collect();
    let mut out: Vec<Simple> = Vec::new();
    let mut display = String::new();
    let mut cur = Simple::default();
    let mut word = String::new();
    let mut in_word = false;
    // Each opened here-document: delimiter, tab stripping, and the index in
    // `out` of the command it feeds (pushed before its body is read).
    let mut pending_heredocs: Vec<(String, bool, usize)> = Vec::new();
    let mut bodies: Vec<(usize, String)> = Vec::new();
    let mut redirect: Option<bool> = None; // Some(append) when the next word is a target
    let mut i = 0;
    let flush_word =
        |word: &mut String, in_word: &mut bool, cur: &mut Simple, redirect: &mut Option<bool>| {
            if *in_word {
                match redirect.take() {
                    Some(append) => cur.writes.push((std::mem::take(word), append)),
                    None => cur.words.push(std::mem::take(word)),
                }
                *in_word = false;
            }
        };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                in_word = true;
                i = quoted(&chars, i, &mut word, &mut display);
            }
            '\\' if i + 1 < chars.len() => {
                if chars[i + 1] != '\n' {
                    in_word = true;
                    word.push(chars[i + 1]);
                    display.push(c);
                    display.push(chars[i + 1]);
                } else {
                    display.push(' ');
                }
                i += 2;
            }
            '\n' | ';' | '&' | '|' => {
                flush_word(&mut word, &mut in_word, &mut cur, &mut redirect);
                // `2>&1`, `&>`: a redirection of descriptors, not a separator.
                if c == '&' && (display.ends_with('>') || chars.get(i + 1) == Some(&'>')) {
                    display.push(c);
                    i += 1;
                    continue;
                }
                let pipe = c == '|' && chars.get(i + 1) != Some(&'|');
                if !cur.words.is_empty() || !cur.writes.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur.piped = pipe;
                if c == '\n' {
                    // Here-document bodies follow the line that opened them.
                    i = read_heredoc_bodies(&chars, i + 1, pending_heredocs.drain(..), &mut bodies);
                    if !display.ends_with(' ') && !display.is_empty() && !display.ends_with('\n') {
                        display.push_str(" ; ");
                    }
                    continue;
                }
                display.push(c);
                i += 1;
            }
            '>' => {
                flush_word(&mut word, &mut in_word, &mut cur, &mut redirect);
                let append = chars.get(i + 1) == Some(&'>');
                display.push('>');
                i += 1;
                if append {
                    display.push('>');
                    i += 1;
                }
                // `>&2`, `2>/dev/null`: descriptors and the null device are no file.
                if chars.get(i) == Some(&'&') {
                    continue;
                }
                redirect = Some(append);
            }
            '<' if chars.get(i + 1) == Some(&'<') && chars.get(i + 2) != Some(&'<') => {
                flush_word(&mut word, &mut in_word, &mut cur, &mut redirect);
                let (next, heredoc) = heredoc_opener(&chars, i, &mut display);
                i = next;
                pending_heredocs
                    .extend(heredoc.map(|(delim, strip_tabs)| (delim, strip_tabs, out.len())));
            }
            c if c.is_whitespace() => {
                flush_word(&mut word, &mut in_word, &mut cur, &mut redirect);
                if !display.ends_with(' ') {
                    display.push(' ');
                }
                i += 1;
            }
            _ => {
                in_word = true;
                word.push(c);
                display.push(c);
                i += 1;
            }
        }
    }
    flush_word(&mut word, &mut in_word, &mut cur, &mut redirect);
    if !cur.words.is_empty() || !cur.writes.is_empty() {
        out.push(cur);
    }
    for (owner, body) in bodies {
        if let Some(c) = out.get_mut(owner) {
            c.stdin = Some(body);
        }
    }
    let display = display
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches([';', ' '])
        .to_owned();
    (out, display)
}

/// A quoted string from its opening quote at `i`: its text goes into
/// `word` (a double-quoted backslash keeps the character after it), the
/// source into `display`. Returns the index after the closing quote.
fn quoted(chars: &[char], mut i: usize, word: &mut String, display: &mut String) -> usize {
    let quote = chars[i];
    display.push(quote);
    i += 1;
    while i < chars.len() && chars[i] != quote {
        if quote == '"' && chars[i] == '\\' && i + 1 < chars.len() {
            display.push(chars[i]);
            i += 1;
        }
        word.push(chars[i]);
        display.push(chars[i]);
        i += 1;
    }
    if i < chars.len() {
        display.push(quote);
    }
    i + 1
}

/// The bodies of the here-documents a line opened (delimiter, whether
/// leading tabs are stripped, the command each feeds), from the line after
/// it at `i`, into `bodies`: returns the index after the last one's closing
/// delimiter.
fn read_heredoc_bodies(
    chars: &[char],
    mut i: usize,
    pending: impl Iterator<Item = (String, bool, usize)>,
    bodies: &mut Vec<(usize, String)>,
) -> usize {
    for (delim, strip_tabs, owner) in pending {
        let mut body = String::new();
        while i < chars.len() {
            let end = chars[i..]
                .iter()
                .position(|&ch| ch == '\n')
                .map_or(chars.len(), |p| i + p);
            let line: String = chars[i..end].iter().collect();
            i = (end + 1).min(chars.len().max(end));
            let line = if strip_tabs {
                line.trim_start_matches('\t')
            } else {
                line.as_str()
            };
            if line.trim_end() == delim {
                break;
            }
            body.push_str(line);
            body.push('\n');
        }
        bodies.push((owner, body));
    }
    i
}

/// A here-document opener `<<DELIM` or `<<-DELIM` at `i`, shown in
/// `display`: the index after it, and its delimiter (quotes removed) and
/// whether it strips leading tabs, when it names one.
fn heredoc_opener(
    chars: &[char],
    mut i: usize,
    display: &mut String,
) -> (usize, Option<(String, bool)>) {
    i += 2;
    display.push_str("<<");
    let strip_tabs = chars.get(i) == Some(&'-');
    if strip_tabs {
        i += 1;
        display.push('-');
    }
    while chars.get(i) == Some(&' ') {
        i += 1;
    }
    let mut delim = String::new();
    while i < chars.len() && !chars[i].is_whitespace() && !";&|<>".contains(chars[i]) {
        if chars[i] != '\'' && chars[i] != '"' {
            delim.push(chars[i]);
        }
        display.push(chars[i]);
        i += 1;
    }
    (i, (!delim.is_empty()).then_some((delim, strip_tabs)))
}

/// Reads a shell script.
pub(crate) fn read_shell(script: &str) -> Call {
    let (commands, display) = parse(script);
    let mut purpose: Option<Purpose> = None;
    let mut files: Vec<(String, Touch)> = Vec::new();
    let add = |files: &mut Vec<(String, Touch)>, path: &str, touch: Touch| {
        let path = path.trim_matches(|c| c == '"' || c == '\'');
        if looks_like_path(path) && !files.iter().any(|(p, t)| p == path && *t == touch) {
            files.push((path.to_owned(), touch));
        }
    };
    let mut cwd: Option<String> = None;
    for c in &commands {
        if let [cd, dir] = c.words.as_slice()
            && cd == "cd"
            && dir.starts_with('/')
        {
            cwd = Some(dir.trim_end_matches('/').to_owned());
        }
        let (p, touched) = classify(c);
        for (path, touch) in touched {
            add(&mut files, &path, touch);
        }
        for (target, append) in &c.writes {
            if target == "/dev/null" {
                continue;
            }
            let touch = if *append || files.iter().any(|(p, _)| p == target) {
                Touch::Edited
            } else {
                Touch::Created
            };
            add(&mut files, target, touch);
        }
        let p = if c.writes.iter().any(|(t, _)| t != "/dev/null") && p < Purpose::Edit {
            Purpose::Edit
        } else {
            p
        };
        // A filter after a pipe does not say what the line is for, nor
        // does changing directory.
        if c.piped && matches!(p, Purpose::Search | Purpose::View | Purpose::Other)
            || c.words.first().is_some_and(|w| {
                matches!(
                    w.as_str(),
                    "cd" | "pushd" | "popd" | "export" | "source" | "set"
                )
            })
        {
            continue;
        }
        purpose = Some(match purpose {
            None => p,
            Some(q) => strongest(q, p),
        });
    }
    Call {
        command: Some(crate::facts::clip(
            &tidy(&display).replace('`', "'"),
            MAX_COMMAND,
        )),
        purpose: purpose.unwrap_or(Purpose::Other),
        files,
        cwd,
    }
}

/// A command as a reader wants it: without the `cd DIR &&` every agent
/// starts with, and without the `cat > f.py << 'EOF'` that wrote a script
/// before it ran (the file is in the trail as created).
fn tidy(display: &str) -> String {
    static CD: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:cd \S+ (?:&&|;) )+"));
    static WRITE: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r#"(?:cat|tee) >{1,2} ?\S+ <<-?\s?['"]?\w+['"]? ; |(?:cat|tee) <<-?\s?['"]?\w+['"]? >{1,2} ?\S+ ; "#,
        )
    });
    // Plumbing that changes nothing a reader needs: `2>&1`, a final
    // `| tail -50`.
    static PLUMBING: LazyLock<Regex> =
        LazyLock::new(|| re(r"\s*2>&1|\s*\|\s*(?:head|tail)(?:\s+-n)?\s*-?\d+\s*$"));
    let s = CD.replace(display, "");
    let s = PLUMBING.replace_all(&s, "");
    let stripped = WRITE.replace_all(&s, "");
    if stripped.trim().is_empty() {
        s.into_owned()
    } else {
        stripped.into_owned()
    }
}

/// The purpose a chain of commands is read by: tests over runs over edits
/// over setup over looking.
fn strongest(a: Purpose, b: Purpose) -> Purpose {
    let weight = |p: Purpose| match p {
        Purpose::Test => 7,
        Purpose::Run => 6,
        Purpose::Edit => 5,
        Purpose::Setup => 4,
        Purpose::Vcs => 3,
        Purpose::Other => 2,
        Purpose::View => 1,
        Purpose::Search => 0,
    };
    if weight(b) > weight(a) { b } else { a }
}

/// Whether a word names a file or a directory rather than a flag, a
/// pattern or a number.
fn looks_like_path(w: &str) -> bool {
    if w.is_empty() || w.starts_with('-') || w.len() > 200 || w.contains(char::is_whitespace) {
        return false;
    }
    if w.contains([
        '*', '?', '$', '{', '}', '(', ')', '=', '\\', '^', '|', '[', ']',
    ]) {
        return false;
    }
    if matches!(w, "." | ".." | "/" | "~") {
        return false;
    }
    let last = w.trim_end_matches('/').rsplit('/').next().unwrap_or(w);
    let has_ext = last.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=8).contains(&ext.len())
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
            && ext.bytes().any(|b| b.is_ascii_alphabetic())
    });
    (w.contains('/') && w.bytes().any(|b| b.is_ascii_alphabetic())) || has_ext
}

/// Whether the last segment of a path has a file extension.
fn has_extension(w: &str) -> bool {
    let last = w.rsplit('/').next().unwrap_or(w);
    last.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=8).contains(&ext.len())
            && ext.bytes().any(|b| b.is_ascii_alphabetic())
    })
}

/// Words after the program that are not flags (and not a flag's value
/// where the flag takes one).
fn operands<'a>(words: &'a [String], valued: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut skip = false;
    for w in words.iter().skip(1) {
        if skip {
            skip = false;
            continue;
        }
        if w.starts_with('-') && w.len() > 1 {
            skip = valued.contains(&w.as_str());
            continue;
        }
        out.push(w.as_str());
    }
    out
}

/// What one simple command is for, and the files it touches.
fn classify(c: &Simple) -> (Purpose, Vec<(String, Touch)>) {
    let words = program_words(&c.words);
    let Some(program) = words.first() else {
        return (Purpose::Other, Vec::new());
    };
    let prog = program.rsplit('/').next().unwrap_or(program).to_owned();
    if let Some(found) = classify_file_command(&prog, words) {
        return found;
    }
    let ops = |valued: &[&str]| operands(words, valued);
    let sub = words.get(1).map(String::as_str).unwrap_or("");
    match prog.as_str() {
        "cd" | "pushd" | "popd" | "export" | "source" | "." | "set" | "true" | "clear" => {
            (Purpose::Other, Vec::new())
        }
        "git" => match sub {
            "apply" | "checkout" | "restore" | "stash" | "reset" | "am" => {
                (Purpose::Edit, Vec::new())
            }
            _ => (Purpose::Vcs, Vec::new()),
        },
        "pip" | "pip3" | "uv" | "poetry" | "conda" | "apt" | "apt-get" | "yum" | "apk" | "brew"
        | "pipx" | "gem" | "bundle" | "composer" => (Purpose::Setup, Vec::new()),
        "npm" | "yarn" | "pnpm" | "bun" => match sub {
            "test" | "t" => (Purpose::Test, Vec::new()),
            "run" if words.get(2).is_some_and(|w| w.contains("test")) => {
                (Purpose::Test, Vec::new())
            }
            "install" | "i" | "add" | "ci" => (Purpose::Setup, Vec::new()),
            _ => (Purpose::Run, Vec::new()),
        },
        "cargo" | "go" | "dotnet" | "mvn" | "gradle" | "./gradlew" | "gradlew" | "make"
        | "bazel" | "ctest" | "swift" | "mix" => {
            if words
                .iter()
                .skip(1)
                .any(|w| w == "test" || w.starts_with("test"))
            {
                (Purpose::Test, Vec::new())
            } else if matches!(sub, "install" | "get" | "add" | "fetch") {
                (Purpose::Setup, Vec::new())
            } else {
                (Purpose::Run, Vec::new())
            }
        }
        "mypy" | "ruff" | "flake8" | "pylint" | "eslint" | "tsc" | "pyright" | "black"
        | "isort" | "rubocop" | "golangci-lint" | "shellcheck" | "clippy-driver" => {
            (Purpose::Test, Vec::new())
        }
        "pytest" | "py.test" | "tox" | "nox" | "jest" | "mocha" | "vitest" | "rspec"
        | "phpunit" | "unittest" => (
            Purpose::Test,
            test_files(&ops(&["-k", "-m", "-p", "-c", "--rootdir"])),
        ),
        p if p.starts_with("python")
            || matches!(
                p,
                "node"
                    | "ruby"
                    | "php"
                    | "deno"
                    | "perl"
                    | "bash"
                    | "sh"
                    | "zsh"
                    | "Rscript"
                    | "julia"
            ) =>
        {
            classify_interpreter(p, words, sub, c.stdin.as_deref())
        }
        // `sqlfluff lint x.sql`, `prog check`, `tool test …`: a check.
        _ if matches!(
            sub,
            "test" | "tests" | "lint" | "check" | "verify" | "validate"
        ) =>
        {
            (Purpose::Test, Vec::new())
        }
        _ if program.starts_with("./") || program.starts_with('/') || looks_like_path(program) => {
            script_run(Some(program.as_str()), words.get(1).map(String::as_str))
        }
        _ => (Purpose::Other, Vec::new()),
    }
}

/// The words from the program on, past variables, wrappers and runners.
fn program_words(words: &[String]) -> &[String] {
    // `FOO=1 timeout 60 sudo python x.py`: the program is `python`; so is
    // it in `npx jest`, `uv run pytest`, `poetry run mypy`.
    let mut words = words;
    while let Some(first) = words.first() {
        let prefix = first.contains('=') && !first.starts_with('-')
            || matches!(
                first.as_str(),
                "sudo" | "time" | "env" | "nohup" | "exec" | "command" | "npx" | "bunx" | "pnpx"
            );
        let runner = matches!(first.as_str(), "uv" | "poetry" | "pipenv" | "pdm" | "hatch")
            && words.get(1).is_some_and(|w| w == "run");
        if first == "timeout" || runner {
            words = &words[words.len().min(2)..];
        } else if prefix {
            words = &words[1..];
        } else {
            break;
        }
    }
    words
}

/// A command that views, searches or changes files (`cat`, `grep`, `sed
/// -i`, `mv` …), with the files it touches; `None` for any other program.
fn classify_file_command(prog: &str, words: &[String]) -> Option<(Purpose, Vec<(String, Touch)>)> {
    let ops = |valued: &[&str]| operands(words, valued);
    let files = |paths: Vec<&str>, touch: Touch| -> Vec<(String, Touch)> {
        paths
            .into_iter()
            .filter(|p| looks_like_path(p))
            .map(|p| (p.to_owned(), touch))
            .collect()
    };
    let has = |flag: &str| words.iter().any(|w| w == flag || w.starts_with(flag));
    Some(match prog {
        "head" | "tail" => (
            Purpose::View,
            files(ops(&["-n", "-c", "--lines", "--bytes"]), Touch::Viewed),
        ),
        "cat" | "less" | "more" | "nl" | "bat" | "view" | "xxd" | "hexdump" | "od" | "strings" => {
            (Purpose::View, files(ops(&["-w", "-s"]), Touch::Viewed))
        }
        "sed" | "perl" | "awk" if has("-i") => {
            let ops = ops(&["-e", "-f"]);
            // The first operand is the script unless `-e` gave it.
            let skip = usize::from(!has("-e"));
            (
                Purpose::Edit,
                files(ops.into_iter().skip(skip).collect(), Touch::Edited),
            )
        }
        "sed" | "awk" => {
            let ops = ops(&["-e", "-f", "-F"]);
            let skip = usize::from(!has("-e"));
            (
                Purpose::View,
                files(ops.into_iter().skip(skip).collect(), Touch::Viewed),
            )
        }
        "grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack" | "git-grep" => {
            let ops = ops(&[
                "-e",
                "-f",
                "-m",
                "-A",
                "-B",
                "-C",
                "--include",
                "--exclude",
                "-g",
                "-t",
            ]);
            let skip = usize::from(!has("-e"));
            // Searching one named file reads it; a directory is a search.
            let targets: Vec<&str> = ops.into_iter().skip(skip).collect();
            let touch = if !has("-r") && !has("-R") && targets.iter().all(|t| has_extension(t)) {
                Touch::Viewed
            } else {
                Touch::Searched
            };
            (Purpose::Search, files(targets, touch))
        }
        "find" | "ls" | "tree" | "fd" | "locate" | "wc" | "file" | "stat" | "du" | "which"
        | "pwd" | "echo" | "printf" | "diff" | "cmp" | "sort" | "uniq" | "cut" | "tr" | "xargs"
        | "jq" | "column" => (Purpose::Search, Vec::new()),
        "touch" | "mkdir" => (Purpose::Edit, files(ops(&[]), Touch::Created)),
        "rm" | "rmdir" | "unlink" => (Purpose::Edit, files(ops(&[]), Touch::Deleted)),
        "mv" | "cp" | "ln" | "install" | "chmod" | "patch" | "tee" | "truncate" => {
            let ops = ops(&["-p", "-m", "-t", "-i"]);
            let touch = if prog == "cp" || prog == "mv" {
                Touch::Created
            } else {
                Touch::Edited
            };
            let n = ops.len();
            let targets = if matches!(prog, "mv" | "cp" | "ln" | "install") {
                ops.into_iter().skip(n.saturating_sub(1)).collect()
            } else {
                ops
            };
            (Purpose::Edit, files(targets, touch))
        }
        _ => return None,
    })
}

/// An interpreter (`python`, `node`, `bash` …): a test run, a setup or a
/// script run, by its `-m` module or its script; a script it runs inline
/// (its `-c` / `-e` argument, or the here-document `stdin` it reads when it
/// names no script file: `python3 - <<'PY'`, `node <<EOF`) by the files
/// that script names.
fn classify_interpreter(
    prog: &str,
    words: &[String],
    sub: &str,
    stdin: Option<&str>,
) -> (Purpose, Vec<(String, Touch)>) {
    if sub == "-m" {
        let module = words.get(2).map(String::as_str).unwrap_or("");
        return match module {
            "pytest" | "unittest" | "nose" | "nose2" | "tox" | "doctest" => (
                Purpose::Test,
                test_files(&operands(&words[2..], &["-k", "-m", "-p", "-c"])),
            ),
            "pip" | "venv" | "ensurepip" => (Purpose::Setup, Vec::new()),
            // `python -m django test app.tests`
            _ if words.get(3).is_some_and(|w| w == "test") => (Purpose::Test, Vec::new()),
            _ => (Purpose::Run, Vec::new()),
        };
    }
    // A shell's inline script is commands; R's and Julia's are not read.
    let reads_scripts = !is_shell_word(prog) && !matches!(prog, "Rscript" | "julia");
    if sub == "-c" || sub == "-e" {
        let files = words
            .get(2)
            .filter(|_| reads_scripts)
            .map_or_else(Vec::new, |script| inline_script_files(script));
        return (Purpose::Run, files);
    }
    if let Some(script) = stdin.filter(|_| reads_scripts && (sub.is_empty() || sub == "-")) {
        return (Purpose::Run, inline_script_files(script));
    }
    let ops = operands(words, &["-W", "-X"]);
    script_run(ops.first().copied(), ops.get(1).copied())
}

/// The files an inline script names, as quoted paths (`Path('src/x.py')`,
/// `open("setup.cfg")`): edited when the script writes a file
/// (`write_text`, `open(…, 'w')`, `os.replace` …), else viewed. Agents edit
/// files this way as often as with `sed -i`; without it the trail keeps the
/// command and loses the file.
fn inline_script_files(script: &str) -> Vec<(String, Touch)> {
    static QUOTED: LazyLock<Regex> =
        LazyLock::new(|| re(r#"'([^'\n\\]{1,200})'|"([^"\n\\]{1,200})""#));
    static WRITES: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r#"\.write_(?:text|bytes)\(|\.write\(|\bopen\([^)\n]*,\s*(?:mode\s*=\s*)?['"][wax]|\bos\.(?:replace|rename|remove|unlink)\(|\bshutil\.(?:copy|move)|writeFileSync\(|File\.write\("#,
        )
    });
    let touch = if WRITES.is_match(script) {
        Touch::Edited
    } else {
        Touch::Viewed
    };
    let mut files: Vec<(String, Touch)> = Vec::new();
    for caps in QUOTED.captures_iter(script) {
        let Some(text) = caps.get(1).or_else(|| caps.get(2)).map(|m| m.as_str()) else {
            continue;
        };
        if names_a_file(text) && !files.iter().any(|(p, _)| p == text) {
            files.push((text.to_owned(), touch));
        }
    }
    files
}

/// Whether a string literal of a script is a file's path: a path with a
/// directory (`src/x.py`, `/testbed/setup.cfg`) or a name with a known
/// extension (`setup.cfg`), as a whole; not a URL, a module path
/// (`django.db.models`) or a format string.
fn names_a_file(text: &str) -> bool {
    use super::lexicon::TOKEN;
    if !looks_like_path(text) || text.contains("://") || text.contains('%') {
        return false;
    }
    TOKEN.captures(text).is_some_and(|caps| {
        ["abs", "rel", "bare"].iter().any(|g| {
            caps.name(g)
                .is_some_and(|m| m.start() == 0 && m.end() == text.len())
        })
    })
}

/// A script run: a test runner or test file is a test, anything else a run.
fn script_run(script: Option<&str>, next: Option<&str>) -> (Purpose, Vec<(String, Touch)>) {
    let Some(script) = script.filter(|s| looks_like_path(s)) else {
        return (Purpose::Run, Vec::new());
    };
    let name = script.rsplit('/').next().unwrap_or(script);
    let tests = name.starts_with("test")
        || name.contains("runtests")
        || name.ends_with("_test.py")
        // `manage.py test app`
        || (name == "manage.py" && next == Some("test"));
    if tests {
        (Purpose::Test, vec![(script.to_owned(), Touch::Tested)])
    } else {
        (Purpose::Run, vec![(script.to_owned(), Touch::Ran)])
    }
}

/// The files a test runner was pointed at (`tests/x.py::test_y` → `tests/x.py`).
fn test_files(ops: &[&str]) -> Vec<(String, Touch)> {
    ops.iter()
        .map(|o| o.split("::").next().unwrap_or(o))
        .filter(|p| looks_like_path(p))
        .map(|p| (p.to_owned(), Touch::Tested))
        .collect()
}

/// A path's extension, lower-cased ("" when it has none).
fn extension(path: &str) -> String {
    path.rsplit_once('.')
        .map_or("", |(_, e)| e)
        .to_ascii_lowercase()
}

/// A file the agent made for itself on the way rather than one of the
/// project's: under a temporary directory, or a copy an editor or a patch
/// left beside the real one (`x.py.orig`, `x.py.bak`, `x.rej`). A run of
/// such a script is a step of the way (what it showed is kept).
pub(crate) fn is_scratch(path: &str) -> bool {
    let path = path.trim_start_matches("./");
    let tmp = ["/tmp/", "/var/tmp/", "/private/tmp/", "tmp/", "/dev/shm/"]
        .iter()
        .any(|d| path.starts_with(d));
    tmp || path.ends_with('~')
        || matches!(
            extension(path).as_str(),
            "orig" | "bak" | "backup" | "rej" | "swp" | "old" | "tmp"
        )
}

/// A data or configuration file inside the project tree (a test fixture,
/// a CI workflow, a schema): read to work on the code, it weighs what code
/// does. A bare name or a scratch file ([`is_scratch`]: under a temporary
/// directory) is more likely the agent's own.
pub(crate) fn is_project_data(path: &str) -> bool {
    matches!(
        extension(path).as_str(),
        "yml" | "yaml" | "toml" | "json" | "cfg" | "ini" | "sql"
    ) && path.contains('/')
        && !is_scratch(path)
}

/// Whether a path is source code: viewing it taught the agent its
/// declarations, not facts (the file is still on disk).
pub(crate) fn is_code(path: &str) -> bool {
    matches!(
        extension(path).as_str(),
        "py" | "pyi"
            | "rs"
            | "js"
            | "jsx"
            | "mjs"
            | "cjs"
            | "ts"
            | "tsx"
            | "go"
            | "java"
            | "kt"
            | "kts"
            | "scala"
            | "c"
            | "h"
            | "cc"
            | "cpp"
            | "cxx"
            | "hpp"
            | "hh"
            | "cs"
            | "rb"
            | "php"
            | "swift"
            | "m"
            | "mm"
            | "sh"
            | "bash"
            | "zsh"
            | "pl"
            | "pm"
            | "lua"
            | "r"
            | "jl"
            | "ex"
            | "exs"
            | "erl"
            | "hs"
            | "ml"
            | "vue"
            | "svelte"
            | "dart"
            | "zig"
            | "sql"
            | "css"
            | "scss"
            | "html"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_files_are_the_agents_own_copies_and_temporaries() {
        for p in [
            "/tmp/fix.py",
            "/var/tmp/x.sh",
            "django/db/models/base.py.orig",
            "src/a.rs.bak",
            "related.py.backup",
            "notes.txt~",
        ] {
            assert!(is_scratch(p), "{p}");
        }
        for p in [
            "src/tmpl.rs",
            "tests/test_tmp.py",
            "reproduce_issue.py",
            "django/db/models/base.py",
        ] {
            assert!(!is_scratch(p), "{p}");
        }
    }

    fn files(c: &Call) -> Vec<(&str, Touch)> {
        c.files.iter().map(|(p, t)| (p.as_str(), *t)).collect()
    }

    #[test]
    fn a_heredoc_creates_its_file_and_its_body_is_not_a_command() {
        let c = read_call(
            "bash",
            r#"{"command": "cat > reproduce.py << 'EOF'\nimport os\nrm -rf /\nEOF\npython reproduce.py"}"#,
        )
        .expect("a shell call");
        assert_eq!(
            files(&c),
            [
                ("reproduce.py", Touch::Created),
                ("reproduce.py", Touch::Ran)
            ]
        );
        assert_eq!(c.purpose, Purpose::Run);
        let cmd = c.command.expect("a command");
        assert!(
            !cmd.contains("import os") && !cmd.contains("rm -rf"),
            "{cmd}"
        );
        assert!(cmd.contains("python reproduce.py"), "{cmd}");
    }

    #[test]
    fn an_inline_script_names_the_files_it_edits_or_reads() {
        // The edit of a real trajectory: a Python script on stdin.
        let c = read_shell(
            "python3 - <<'PY'\nfrom pathlib import Path\np = Path('src/contrib/vault.rs')\ns = p.read_text()\np.write_text(s.replace('}', '\"sec\" => Some(1),', 1))\nPY",
        );
        assert_eq!(files(&c), [("src/contrib/vault.rs", Touch::Edited)]);
        // Reading only; a module path, a URL and a format string are no files.
        let c = read_shell(
            r#"python -c "import django.db.models; print(open('setup.cfg').read(), 'https://x.example/a.py', '%s/b.py')""#,
        );
        assert_eq!(files(&c), [("setup.cfg", Touch::Viewed)]);
        // A here-document written to a file is its contents, not a script;
        // a script file run with a here-document on stdin names its own.
        let c = read_shell(
            "cat > fix.py <<'EOF'\nopen('a/b.py', 'w')\nEOF\npython fix.py <<'EOF'\nopen('c/d.py', 'w')\nEOF",
        );
        assert_eq!(
            files(&c),
            [("fix.py", Touch::Created), ("fix.py", Touch::Ran)]
        );
        // A shell's here-document is left alone.
        let c = read_shell("bash <<'EOF'\necho 'x/y.py'\nEOF");
        assert!(files(&c).is_empty(), "{:?}", files(&c));
    }

    #[test]
    fn views_searches_edits_and_tests_are_told_apart() {
        let c = read_shell("sed -n '771,850p' django/db/models/fields/related.py");
        assert_eq!(c.purpose, Purpose::View);
        assert_eq!(
            files(&c),
            [("django/db/models/fields/related.py", Touch::Viewed)]
        );
        let c =
            read_shell("grep -n \"class ForeignKey\" django/db/models/fields/related.py | head -5");
        assert_eq!(c.purpose, Purpose::Search);
        let c = read_shell(
            "sed -i 's/a/b/' src/lib.rs && cd /testbed && python -m pytest tests/test_x.py::test_y -xvs 2>&1 | tail -20",
        );
        assert_eq!(c.purpose, Purpose::Test);
        assert_eq!(
            files(&c),
            [
                ("src/lib.rs", Touch::Edited),
                ("tests/test_x.py", Touch::Tested)
            ]
        );
        let c = read_shell("pip install -e . -q");
        assert_eq!(c.purpose, Purpose::Setup);
        let c = read_shell("./tests/runtests.py queries.test_query --settings=tests.test_sqlite");
        assert_eq!(c.purpose, Purpose::Test);
        let c = read_shell("echo hi >> notes.txt");
        assert_eq!(files(&c), [("notes.txt", Touch::Edited)]);
    }

    #[test]
    fn editor_patch_and_file_tools_name_their_files() {
        let c = read_call(
            "str_replace_editor",
            r#"{"command":"str_replace","path":"a/b.py","old_str":"x","new_str":"y"}"#,
        )
        .expect("an editor call");
        assert_eq!(files(&c), [("a/b.py", Touch::Edited)]);
        let c = read_call(
            "apply_patch",
            r#"{"input":"*** Begin Patch\n*** Update File: src/x.rs\n@@\n-a\n+b\n*** Add File: src/y.rs\n+z\n*** End Patch"}"#,
        )
        .expect("a patch");
        assert_eq!(
            files(&c),
            [("src/x.rs", Touch::Edited), ("src/y.rs", Touch::Created)]
        );
        let c = read_call("read_file", r#"{"path":"docs/page_1.md"}"#).expect("a file tool");
        assert_eq!(files(&c), [("docs/page_1.md", Touch::Viewed)]);
        assert!(read_call("lookup_customer", r#"{"id":"C-1"}"#).is_none());
        let c = read_call(
            "shell",
            r#"{"command":["bash","-lc","cargo test -p core"]}"#,
        )
        .expect("codex shell");
        assert_eq!(c.purpose, Purpose::Test);
    }
}
