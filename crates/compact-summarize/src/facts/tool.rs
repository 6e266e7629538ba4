//! Reading tool output. Machine output is mostly template: the same log
//! line with another request id, a 500-row listing, a page of boilerplate.
//! What an agent needs from it later is what stands out: a line or a value
//! whose shape ([`super::shape`]) is rare in this output and in the
//! session's earlier ones, a row or line naming something the conversation
//! mentions, a decision or firm requirement stated in a document.
//!
//! Read by its structure: a JSON document by its fields (prose fields
//! sentence by sentence, scalar fields when their value stands out), a
//! table by its rows (a row that names a mentioned identifier or holds a
//! cell that stands out from its column, as `column: value` pairs), any
//! other text line by line (a long line sentence by sentence). What is
//! found becomes a salient fact labelled `[tool]`, never a constraint or a
//! decision: a fetched page saying "you must…" is not the user speaking.
//! The rest contributes bulk at the lowest priority: a few error lines and
//! measurements that are not templated, and identifiers that stand out.
use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use serde_json::Value;

use super::lexicon::{
    CALL, CONSTRAINT, DECISION, DECL, DIFF_FILE, ERROR, NAMED_NUMBER, QUANTITY, identifiers,
    is_date, is_error, is_weak_cue, split_sentences, strip_marker, window, word_count,
};
use super::shape::{KeyMap, OutputShapes, shape_key};
use super::{Kind, Ledger, clip, strip_timestamp};

/// Longest tool line kept, in bytes.
const MAX_TOOL_LINE: usize = 240;
/// Most salient facts taken from one output.
const SALIENT_PER_OUTPUT: usize = 12;
/// Of those, most sentences kept for their cue alone (documents are full of
/// "must" and "never"; a few carry the point).
const CUES_PER_OUTPUT: usize = 3;
/// Shorter lines say nothing.
const MIN_LINE: usize = 8;
/// A value seen more often than this (in this output, or before it in the
/// session) is part of a template.
const RARE: u32 = 2;
/// An output naming more distinct identifiers of one kind without digits
/// than this (paths, URLs, emails) is a listing: those are not remarkable
/// in it.
const DENSE: usize = 6;
/// Bulk per output: error lines, measurement lines, identifiers.
const BULK_ERRORS: usize = 3;
const BULK_MEASURES: usize = 2;
const BULK_IDENTIFIERS: usize = 12;

/// One output being read: its shapes and what is left of its quotas.
struct Reading<'a> {
    label: &'a str,
    /// The whole output, to count how often a mentioned name comes up.
    text: &'a str,
    shapes: OutputShapes,
    /// The distinct identifiers without digits per class (email, URL,
    /// path, snake_case…), to tell a listing (many names of a class) from
    /// a log that repeats a few.
    digitless: HashMap<u8, KeyMap<()>>,
    salient_left: usize,
    cues_left: usize,
    /// Free-text facts that name something without standing out.
    weak_left: usize,
    /// Line shapes already recorded as salient.
    taken: Vec<u64>,
    /// Whether a mentioned name comes up at most `RARE` times in `text`,
    /// per name asked about: each line that names it would count the
    /// whole output again.
    rare: std::cell::RefCell<HashMap<String, bool>>,
}

impl Reading<'_> {
    /// Whether `name` comes up at most `RARE` times in the output.
    fn is_rare(&self, name: &str) -> bool {
        if let Some(&rare) = self.rare.borrow().get(name) {
            return rare;
        }
        let rare = self.text.matches(name).take(RARE as usize + 1).count() <= RARE as usize;
        self.rare.borrow_mut().insert(name.to_owned(), rare);
        rare
    }
}

/// The whole objects inside a piece of a JSON document: what a cap cut out
/// of the middle of a one-line JSON array (`…"line":217},{"path":…},{…`) is
/// no document, but the objects it holds whole are read as if it were, not
/// as one long line of quotes and braces. `None` when it holds fewer than
/// two whole objects, or when they cover less than half of it.
fn json_fragment(text: &str) -> Option<Value> {
    if !text.contains("{\"") {
        return None;
    }
    let bytes = text.as_bytes();
    let mut objects = Vec::new();
    let (mut at, mut covered) = (0, 0);
    while let Some(found) = text[at..].find('{') {
        let start = at + found;
        // An object of the array starts after `,` or `[` (or the cut).
        let before = text[..start].trim_end().as_bytes().last().copied();
        if !matches!(before, None | Some(b',' | b'[')) {
            at = start + 1;
            continue;
        }
        let mut stream = serde_json::Deserializer::from_slice(&bytes[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v @ Value::Object(_))) => {
                let end = start + stream.byte_offset();
                covered += end - start;
                objects.push(v);
                at = end;
            }
            _ => at = start + 1,
        }
    }
    (objects.len() >= 2 && covered * 2 >= text.len()).then_some(Value::Array(objects))
}

/// A tool sentence kept for its cue alone: a decision, or a firm
/// requirement (`must`, `never`, `do not`, `required`; not a bare `only`
/// or `always`, not a status word like `pending`).
fn states_something(unit: &str) -> bool {
    DECISION.is_match(unit) || CONSTRAINT.find_iter(unit).any(|m| !is_weak_cue(m.as_str()))
}

/// Counts of things (`40 connections`, `3 replicas`): a measure, like a
/// quantity with a unit.
pub(crate) static COUNT: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern; a typo is caught by the first test that reads a
    // tool output, never by user input.
    // `41 tests`, `3 read-only replicas`, `2887 duplicate rows`.
    #[allow(clippy::expect_used)]
    Regex::new(r"(?-u:\b)\d[\d,.]*\s+(?:[a-z]+[- ])?[a-z]{3,}s(?-u:\b)").expect("constant regex")
});

/// The measures of a unit: quantities with units, named numbers (`port
/// 8443`), counts of things, calls (`parse_config()`).
fn measures(unit: &str) -> impl Iterator<Item = &str> {
    QUANTITY
        .find_iter(unit)
        .chain(NAMED_NUMBER.find_iter(unit))
        .chain(COUNT.find_iter(unit))
        .chain(CALL.find_iter(unit))
        .map(|m| m.as_str())
}

/// A line of a stack trace: `at pkg.Class.method(File.java:12)` (JVM,
/// JavaScript), `File "x.py", line 3, in f` (Python), `  4: crate::f`
/// (Rust backtraces).
fn is_stack_frame(line: &str) -> bool {
    let t = line.trim_start();
    (t.starts_with("at ") && t.contains('('))
        || (t.starts_with("File \"") && t.contains(", line "))
        || t.split_once(": ").is_some_and(|(n, rest)| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && rest.contains("::")
        })
}

/// An identifier or a measure of a line, with its shape key.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    /// The identifier's kind; `None` for a measure.
    kind: Option<Kind>,
    text: &'a str,
    shape: u64,
}

/// The identifiers and measures of `unit`, each with its shape.
fn tokens(unit: &str) -> Vec<Token<'_>> {
    // Every identifier has a digit or one of these marks, every measure a
    // digit or a call's `()`: most lines of prose and many of a log have
    // neither, and skip the regexes (a cleared 100k-token history is read
    // line by line on the triggered path).
    let bytes = unit.as_bytes();
    let digit = bytes.iter().any(u8::is_ascii_digit);
    let marked = digit
        || bytes
            .iter()
            .any(|b| matches!(b, b'/' | b'@' | b'.' | b'_' | b'-' | b':' | b'\\' | b'#'));
    if !marked {
        return Vec::new();
    }
    let mut out: Vec<Token<'_>> = identifiers(unit)
        .map(|(_, kind, text)| Token {
            kind: Some(kind),
            text,
            shape: shape_key(text),
        })
        .collect();
    if !digit && !unit.contains("()") {
        return out;
    }
    out.extend(measures(unit).map(|text| Token {
        kind: None,
        text,
        shape: shape_key(text),
    }));
    out
}

/// A line of the output, read once: the raw line, its text without the
/// timestamp, its shape and its tokens.
struct Line<'a> {
    raw: &'a str,
    text: &'a str,
    shape: u64,
    tokens: Vec<Token<'a>>,
}

/// The class of an identifier, for telling a listing: an email, a URL, a
/// path, a snake_case name, a kebab-case name, or anything else.
fn class(token: &str) -> u8 {
    if token.contains('@') {
        0
    } else if token.contains("://") {
        1
    } else if token.contains('/') || token.contains('\\') {
        2
    } else if token.contains('_') {
        3
    } else if token.contains('-') {
        4
    } else {
        5
    }
}

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

/// A placeholder or cut mark of ours inside a capped or cleared output: not
/// the tool's words.
fn is_our_mark(s: &str) -> bool {
    s.contains("⟦truncated:") || s.contains("⟦removed:")
}

impl Ledger {
    /// A tool call's arguments, or fenced code: identifiers and paths, as
    /// bulk; no sentence of it is a statement.
    pub(super) fn extract_call(&mut self, text: &str) {
        let mut left = BULK_IDENTIFIERS;
        let found: Vec<(Kind, String)> = identifiers(text)
            .map(|(_, k, t)| (k, t.to_owned()))
            .collect();
        for (kind, token) in found {
            if left == 0 {
                break;
            }
            left -= 1;
            match kind {
                Kind::File => self.add_file(&token, &[], true),
                k => {
                    self.add(k, &token, true);
                }
            }
        }
    }

    /// Counts an output's line and token shapes into the session's, as
    /// [`Ledger::extract_tool`] does, for an output read another way (the
    /// trail's): a template's lines stay a template's, whichever tool
    /// printed them.
    pub(super) fn note_output_shapes(&mut self, text: &str) {
        let mut shapes = OutputShapes::default();
        for raw in text.lines() {
            let line = strip_timestamp(raw.trim());
            if line.is_empty() || is_our_mark(line) {
                continue;
            }
            shapes.bump(shape_key(line));
            for t in tokens(line) {
                shapes.bump(t.shape);
            }
        }
        self.shapes.add(&shapes.counts);
    }

    /// A tool's output, labelled `label` (`[name] `).
    pub(super) fn extract_tool(&mut self, text: &str, label: &str) {
        let mut r = Reading {
            label,
            text,
            shapes: OutputShapes::default(),
            digitless: HashMap::new(),
            salient_left: SALIENT_PER_OUTPUT,
            cues_left: CUES_PER_OUTPUT,
            weak_left: SALIENT_PER_OUTPUT,
            taken: Vec::new(),
            rare: std::cell::RefCell::default(),
        };
        // Every line is tokenized once; the passes below reuse it. The
        // halves of the two lines a cap cut through, beside its mark, are
        // not lines: they were read whole when the cap was made.
        let raw_lines: Vec<&str> = text.lines().collect();
        let beside_mark = |i: usize| {
            (i > 0 && is_our_mark(raw_lines[i - 1]))
                || raw_lines.get(i + 1).is_some_and(|next| is_our_mark(next))
        };
        // A line whose shape this output has already shown more than
        // `RARE` times is a template's: its tokens have the shapes of the
        // first ones, and none of them can stand out. Its token shapes are
        // counted from those, without reading it again (a 2,000-line log
        // is one template, read a few times, not 2,000).
        let mut seen: KeyMap<(u32, Vec<u64>)> = KeyMap::default();
        let lines: Vec<Line<'_>> = raw_lines
            .iter()
            .enumerate()
            .filter(|&(i, _)| !beside_mark(i))
            .filter_map(|(_, raw)| {
                let text = strip_timestamp(raw.trim());
                if text.is_empty() {
                    return None;
                }
                let shape = shape_key(text);
                r.shapes.bump(shape);
                let entry = seen.entry(shape).or_default();
                entry.0 += 1;
                if entry.0 > RARE + 1 {
                    for &k in &entry.1 {
                        r.shapes.bump(k);
                    }
                    return Some(Line {
                        raw,
                        text,
                        shape,
                        tokens: Vec::new(),
                    });
                }
                let tokens = tokens(text);
                entry.1 = tokens.iter().map(|t| t.shape).collect();
                for t in &tokens {
                    r.shapes.bump(t.shape);
                    if t.kind.is_some() && !has_digit(t.text) {
                        r.digitless
                            .entry(class(t.text))
                            .or_default()
                            .insert(t.shape, ());
                    }
                }
                Some(Line {
                    raw,
                    text,
                    shape,
                    tokens,
                })
            })
            .collect();
        let trimmed = text.trim();
        let json = (trimmed.starts_with('{') || trimmed.starts_with('['))
            .then(|| serde_json::from_str::<Value>(trimmed).ok())
            .flatten()
            .or_else(|| json_fragment(trimmed));
        let is_json = json.is_some();
        match json {
            Some(doc) => self.read_json(&doc, &mut r),
            None => {
                if !self.read_table(text, &mut r) {
                    self.read_lines(&lines, &mut r);
                }
            }
        }
        self.read_bulk(&lines, &r, is_json);
        self.shapes.add(&r.shapes.counts);
    }

    /// Whether `value` stands out: its shape is rare here and was rare in
    /// the session's earlier output, and it is not one of many names of a
    /// kind in a listing.
    fn stands_out(&self, r: &Reading<'_>, t: &Token<'_>) -> bool {
        // A timestamp tells when, in every record of a log or a listing:
        // it stands out of nothing.
        if is_date(t.text) {
            return false;
        }
        // A tool naming itself (`read_file` in its own output) says nothing.
        if t.kind.is_some() && (t.text.len() < 4 || super::label_name(r.label) == t.text) {
            return false;
        }
        if r.shapes.count(t.shape) > RARE || !self.shapes.is_rare(t.shape, RARE) {
            return false;
        }
        match t.kind {
            Some(_) if !has_digit(t.text) => {
                r.digitless.get(&class(t.text)).map_or(0, |d| d.len()) <= DENSE
            }
            _ => true,
        }
    }

    /// Whether one of `tokens` stands out.
    fn has_standout(&self, r: &Reading<'_>, tokens: &[Token<'_>]) -> bool {
        tokens.iter().any(|t| self.stands_out(r, t))
    }

    /// Whether `unit` names an identifier the conversation mentioned, one
    /// that is not itself a template's (a user quoting `src/mod_12.rs` does
    /// not make every warning about some `src/mod_N.rs` salient).
    fn names_mentioned(&mut self, r: &Reading<'_>, unit: &str) -> bool {
        let found = self.mentions_in(unit);
        found.iter().any(|t| self.picks_out(r, t))
    }

    /// The mentioned identifiers `unit` names that are not a template's.
    fn strong_mentions(&mut self, r: &Reading<'_>, unit: &str) -> Vec<String> {
        let mut found = self.mentions_in(unit);
        found.retain(|t| self.picks_out(r, t));
        found
    }

    /// Whether a mentioned name picks out a line or two of the output: not
    /// one that is on every line (a year, a status), nor a template's.
    fn picks_out(&self, r: &Reading<'_>, name: &str) -> bool {
        let k = shape_key(name);
        r.shapes.count(k) + self.shapes.count(k) <= 2 * RARE && r.is_rare(name)
    }

    /// Records a salient unit (a line, a sentence, a row) of the output.
    fn keep(&mut self, r: &mut Reading<'_>, unit: &str, shape: u64) {
        if r.salient_left == 0 {
            return;
        }
        r.salient_left -= 1;
        r.taken.push(shape);
        let kind = if is_error(unit) {
            Kind::Error
        } else {
            Kind::Fact
        };
        let text = if unit.len() > MAX_TOOL_LINE {
            let at = identifiers(unit).next().map_or(0, |(at, _, _)| at);
            window(unit, at, MAX_TOOL_LINE)
        } else {
            unit.to_owned()
        };
        if let Some(i) = self.record(kind, &format!("{}{text}", r.label), true, true, Some(shape)) {
            self.items[i].weak = false;
        }
    }

    /// Decides on one unit of text: kept when it stands out or names what
    /// was mentioned; a sentence with a strong cue, while the cue quota
    /// lasts.
    fn consider(&mut self, r: &mut Reading<'_>, unit: &str, known: Option<(u64, &[Token<'_>])>) {
        let unit = strip_marker(unit);
        if unit.len() < MIN_LINE || r.salient_left == 0 || is_our_mark(unit) {
            return;
        }
        let computed;
        let (shape, unit_tokens) = match known {
            Some(k) => k,
            None => {
                computed = tokens(unit);
                (shape_key(unit), computed.as_slice())
            }
        };
        if r.taken.contains(&shape) {
            return;
        }
        let templated = r.shapes.count(shape) > 1 || self.shapes.count(shape) > 1;
        // A template's line is kept only when it names what was mentioned;
        // another line when it does or something in it stands out (asked
        // first: it is the cheaper question).
        let kept = if templated {
            if !self.names_mentioned(r, unit) {
                return;
            }
            true
        } else {
            self.has_standout(r, unit_tokens) || self.names_mentioned(r, unit)
        };
        if kept {
            self.keep(r, unit, shape);
        } else if r.cues_left > 0 && states_something(unit) {
            r.cues_left -= 1;
            self.keep(r, unit, shape);
        }
    }

    /// A sentence of free text inside structured output (a JSON string
    /// that is a sentence): read as prose, a fact when it names something
    /// (an identifier, a date, a quantity, a count), unless it is the
    /// template of a table's rows (`repeated`).
    fn consider_free_text(&mut self, r: &mut Reading<'_>, sentence: &str, repeated: bool) {
        let unit = strip_marker(sentence);
        if unit.len() < MIN_LINE || r.salient_left == 0 || is_our_mark(unit) {
            return;
        }
        let shape = shape_key(unit);
        if r.taken.contains(&shape) {
            return;
        }
        if repeated && !self.names_mentioned(r, unit) {
            return;
        }
        let left = r.salient_left;
        self.consider(r, unit, None);
        if r.salient_left < left {
            return;
        }
        // Nothing in it stands out, but it names something: a fact of the
        // record, kept when there is room (below the salient ones).
        let specific = identifiers(unit).next().is_some()
            || QUANTITY.is_match(unit)
            || NAMED_NUMBER.is_match(unit)
            || COUNT.is_match(unit);
        if specific && r.weak_left > 0 {
            r.weak_left -= 1;
            let text = clip(unit, MAX_TOOL_LINE);
            if let Some(i) = self.record(
                Kind::Fact,
                &format!("{}{text}", r.label),
                true,
                true,
                Some(shape),
            ) {
                // Said again as a salient fact elsewhere, it stays one.
                if self.items[i].first == self.seq {
                    self.items[i].weak = true;
                }
            }
        }
    }

    /// Plain text: logs line by line, prose sentence by sentence; fenced
    /// code is skipped (its identifiers are bulk).
    fn read_lines(&mut self, lines: &[Line<'_>], r: &mut Reading<'_>) {
        let mut in_fence = false;
        let mut in_frames = false;
        for line in lines {
            if line.raw.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence || r.salient_left == 0 {
                continue;
            }
            let text = line.text;
            if text.starts_with('#') && !text.starts_with("#[") {
                // A heading names a section; it states nothing.
                continue;
            }
            // A stack trace: its top frame says where; the rest is bulk.
            let frame = is_stack_frame(text);
            let first_frame = frame && !in_frames;
            in_frames = frame;
            if frame && !first_frame {
                continue;
            }
            let sentences = split_sentences(text);
            if sentences.len() > 1 {
                let left = r.salient_left;
                for s in sentences {
                    self.consider(r, s, None);
                }
                // A line a sentence was kept from is not bulk as well.
                if r.salient_left < left {
                    r.taken.push(line.shape);
                }
            } else if strip_marker(text).len() == text.len() {
                self.consider(r, text, Some((line.shape, &line.tokens)));
            } else {
                self.consider(r, text, None);
            }
        }
    }

    /// A JSON document: prose fields sentence by sentence; an object's
    /// scalar fields that stand out (or name what was mentioned) as one
    /// `key: value` line. A 500-element listing does not flood the ledger:
    /// its elements share their shapes, so none of them stands out.
    fn read_json(&mut self, v: &Value, r: &mut Reading<'_>) {
        if r.salient_left == 0 {
            return;
        }
        match v {
            Value::Array(items) if rows_of_one_table(items) => self.read_json_rows(items, r),
            Value::Array(items) => {
                for item in items {
                    self.read_json(item, r);
                    if r.salient_left == 0 {
                        return;
                    }
                }
            }
            Value::Object(map) => {
                let mut pairs: Vec<String> = Vec::new();
                for (k, value) in map {
                    match value {
                        Value::String(text) if word_count(text) >= 4 => {
                            for line in text.lines() {
                                for s in split_sentences(line) {
                                    self.consider_free_text(r, s, false);
                                }
                            }
                        }
                        Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                            let scalar = match value {
                                Value::String(t) => t.clone(),
                                other => other.to_string(),
                            };
                            if scalar.len() > 120 {
                                continue;
                            }
                            let stands = matches!(value, Value::String(_))
                                && tokens(&scalar)
                                    .iter()
                                    .any(|t| t.kind.is_some() && self.stands_out(r, t));
                            if stands || self.names_mentioned(r, &scalar) {
                                pairs.push(format!("{k}: {scalar}"));
                            }
                        }
                        Value::Array(_) | Value::Object(_) => self.read_json(value, r),
                        Value::Null => {}
                    }
                }
                if !pairs.is_empty() {
                    pairs.truncate(6);
                    // Say which record it is about.
                    if let Some((k, name)) = name_field(map)
                        && !pairs.iter().any(|p| p.starts_with(&format!("{k}: ")))
                    {
                        pairs.insert(0, format!("{k}: {name}"));
                    }
                    let line = pairs.join(", ");
                    let shape = shape_key(&line);
                    self.keep(r, &line, shape);
                }
            }
            _ => {}
        }
    }

    /// The rows of one table as a JSON array of objects with the same
    /// fields: a value repeated as the same field across the rows is the
    /// table's data, not a fact per row. A row is kept, named by its name
    /// field, when a cell of it is an outlier in its column (the one
    /// exception code among nulls, the one `held` among `delivered`) or
    /// names what the conversation mentioned; free text in a row is read
    /// as prose.
    fn read_json_rows(&mut self, items: &[Value], r: &mut Reading<'_>) {
        let rows: Vec<&serde_json::Map<String, Value>> =
            items.iter().filter_map(Value::as_object).collect();
        let n = rows.len();
        let mut keys: Vec<&String> = Vec::new();
        for row in &rows {
            for k in row.keys() {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        let cell = |row: &serde_json::Map<String, Value>, k: &str| -> Option<String> {
            match row.get(k) {
                None | Some(Value::Null) => Some(String::new()),
                Some(Value::String(t)) if word_count(t) < 4 => Some(t.clone()),
                Some(Value::Number(x)) => Some(x.to_string()),
                Some(Value::Bool(b)) => Some(b.to_string()),
                _ => None,
            }
        };
        let columns: Vec<Option<Column>> = keys
            .iter()
            .map(|k| {
                let cells: Vec<String> = rows.iter().filter_map(|row| cell(row, k)).collect();
                (cells.len() == n).then(|| Column::of(cells.iter()))
            })
            .collect();
        // The shapes of the rows' free text: a sentence every other row
        // repeats with its own values is the table's template, not a fact.
        let mut sentence_shapes: HashMap<u64, usize> = HashMap::new();
        for row in &rows {
            for v in row.values() {
                if let Value::String(text) = v
                    && word_count(text) >= 4
                {
                    for line in text.lines() {
                        for s in split_sentences(line) {
                            *sentence_shapes
                                .entry(shape_key(strip_marker(s)))
                                .or_default() += 1;
                        }
                    }
                }
            }
        }
        for row in &rows {
            if r.salient_left == 0 {
                return;
            }
            let mut pairs: Vec<String> = Vec::new();
            for (k, col) in keys.iter().zip(&columns) {
                match (row.get(k.as_str()), col) {
                    (Some(Value::String(text)), _) if word_count(text) >= 4 => {
                        for line in text.lines() {
                            for s in split_sentences(line) {
                                let repeated = sentence_shapes
                                    .get(&shape_key(strip_marker(s)))
                                    .is_some_and(|&n| n > 1);
                                self.consider_free_text(r, s, repeated);
                            }
                        }
                    }
                    (Some(v @ (Value::Array(_) | Value::Object(_))), _) => self.read_json(v, r),
                    (Some(_), Some(col)) => {
                        let Some(c) = cell(row, k) else { continue };
                        if c.is_empty() || c.len() > 120 {
                            continue;
                        }
                        if col.is_outlier(&c, n) || self.names_mentioned(r, &c) {
                            pairs.push(format!("{k}: {c}"));
                        }
                    }
                    _ => {}
                }
            }
            if pairs.is_empty() {
                continue;
            }
            pairs.truncate(5);
            if let Some((k, name)) = name_field(row)
                && !pairs.iter().any(|p| p.starts_with(&format!("{k}: ")))
            {
                pairs.insert(0, format!("{k}: {name}"));
            }
            let line = clip(&pairs.join(", "), MAX_TOOL_LINE);
            let shape = shape_key(&line);
            self.keep(r, &line, shape);
        }
    }

    /// A table (CSV, TSV, `|` columns, or columns aligned with spaces as
    /// `kubectl` and `ps` print them). Returns whether `text` was one.
    ///
    /// A row is kept when it names a mentioned identifier, or when one of
    /// its cells is an outlier: the column mostly holds one value (or one
    /// shape of value) and this cell does not (`3` restarts where the rest
    /// say `0`, `tenant-hooli-16` among `r-#####` names). It is shown as
    /// `column: value` pairs: its first cell, those reasons, and the cells
    /// that name something no other row does.
    fn read_table(&mut self, text: &str, r: &mut Reading<'_>) -> bool {
        let Some(table) = Table::parse(text) else {
            return false;
        };
        let n = table.rows.len();
        let columns: Vec<Column> = (0..table.width)
            .map(|i| Column::of(table.rows.iter().filter_map(|row| row.get(i))))
            .collect();
        for row in &table.rows {
            if r.salient_left == 0 {
                break;
            }
            let line = row.join(" ");
            let mentioned = self.strong_mentions(r, &line);
            let mut picked: Vec<usize> = Vec::new();
            for (i, c) in row.iter().enumerate() {
                let named = mentioned.iter().any(|m| c.contains(m.as_str()));
                if named || columns[i].is_outlier(c, n) {
                    picked.push(i);
                }
            }
            if picked.is_empty() {
                continue;
            }
            for (i, c) in row.iter().enumerate() {
                let unique = columns[i].count(c) <= 1 && n >= 3;
                let cell_tokens = tokens(c);
                let names = cell_tokens
                    .iter()
                    .any(|t| t.kind.is_none() || self.stands_out(r, t));
                if i == 0 || (unique && names) {
                    picked.push(i);
                }
            }
            picked.sort_unstable();
            picked.dedup();
            let pairs: Vec<String> = picked
                .iter()
                .filter_map(|&i| {
                    let c = row.get(i)?;
                    Some(match table.header.get(i).filter(|h| !h.is_empty()) {
                        Some(h) => format!("{h}: {c}"),
                        None => c.clone(),
                    })
                })
                .collect();
            let text = clip(&pairs.join(", "), MAX_TOOL_LINE);
            let shape = shape_key(&text);
            self.keep(r, &text, shape);
        }
        for line in &table.others {
            self.consider(r, strip_timestamp(line.trim()), None);
        }
        true
    }

    /// The bulk of an output, at the lowest priority: error lines and
    /// measurements that are not templated, identifiers that stand out,
    /// and the files (with their declarations) of a diff.
    fn read_bulk(&mut self, lines: &[Line<'_>], r: &Reading<'_>, json: bool) {
        let mut errors = BULK_ERRORS;
        let mut measures = BULK_MEASURES;
        let mut ids = BULK_IDENTIFIERS;
        let mut error_shapes: Vec<u64> = Vec::new();
        let mut current_file: Option<String> = None;
        for line in lines {
            let (raw, trimmed, shape) = (line.raw, line.text, line.shape);
            if is_our_mark(trimmed) {
                continue;
            }
            if let Some(c) = DIFF_FILE.captures(trimmed) {
                if let Some(path) = c.get(1) {
                    let path = path.as_str().to_owned();
                    self.add_file(&path, &[], true);
                    current_file = Some(path);
                }
                continue;
            }
            let changed = (raw.starts_with('+') && !raw.starts_with("+++"))
                || (raw.starts_with('-') && !raw.starts_with("---"))
                || raw.starts_with("@@");
            if changed && let Some(file) = &current_file {
                let apis: Vec<String> = DECL
                    .captures_iter(raw)
                    .filter_map(|c| c.get(1).map(|m| m.as_str().to_owned()))
                    .collect();
                if !apis.is_empty() {
                    self.add_file(file, &apis, true);
                }
            }
            let templated = r.shapes.count(shape) > 1 || self.shapes.count(shape) > 1;
            if !r.taken.contains(&shape) {
                // An error that repeats is still an error: one line of each
                // shape is kept.
                if errors > 0 && is_error(trimmed) && !error_shapes.contains(&shape) {
                    errors -= 1;
                    error_shapes.push(shape);
                    let at = ERROR.find(trimmed).map_or(0, |m| m.start());
                    let text = format!("{}{}", r.label, window(trimmed, at, MAX_TOOL_LINE));
                    self.record(Kind::Error, &text, true, false, Some(shape));
                } else if measures > 0
                    // A JSON document's measures were read by its fields;
                    // its lines are no sentences (a one-line document is
                    // one long line of quotes).
                    && !json
                    && !templated
                    && let Some(m) = QUANTITY.find(trimmed)
                {
                    measures -= 1;
                    let text = format!("{}{}", r.label, window(trimmed, m.start(), MAX_TOOL_LINE));
                    self.record(Kind::Fact, &text, true, false, Some(shape));
                }
            }
            for t in &line.tokens {
                if ids == 0 {
                    break;
                }
                let Some(kind) = t.kind else { continue };
                if !self.stands_out(r, t) {
                    continue;
                }
                ids -= 1;
                match kind {
                    Kind::File => self.add_file(t.text, &[], true),
                    k => {
                        self.add(k, t.text, true);
                    }
                }
            }
        }
    }
}

/// Whether a JSON array is the rows of one table: three or more objects
/// that share most of their fields.
fn rows_of_one_table(items: &[Value]) -> bool {
    if items.len() < 3 || !items.iter().all(Value::is_object) {
        return false;
    }
    let Some(first) = items[0].as_object() else {
        return false;
    };
    let shared = |o: &serde_json::Map<String, Value>| {
        let common = o.keys().filter(|k| first.contains_key(*k)).count();
        common * 2 >= o.len().max(first.len())
    };
    items.iter().filter_map(Value::as_object).all(shared)
}

/// The field that names a record: `name`, `title`, an `…_name` or `…_id`,
/// a customer or consignee; else its first short text that is not a number.
fn name_field(map: &serde_json::Map<String, Value>) -> Option<(&str, &str)> {
    fn text(v: &Value) -> Option<&str> {
        v.as_str().filter(|t| !t.is_empty() && t.len() <= 80)
    }
    const NAMES: &[&str] = &[
        "name",
        "title",
        "customer",
        "consignee",
        "account",
        "company",
        "client",
        "user",
        "service",
        "host",
        "id",
        "key",
    ];
    let by_name = NAMES.iter().find_map(|n| {
        map.iter()
            .find(|(k, _)| k.as_str() == *n)
            .and_then(|(k, v)| Some((k.as_str(), text(v)?)))
    });
    by_name
        .or_else(|| {
            map.iter().find_map(|(k, v)| {
                (k.ends_with("_name") || k.ends_with("_id"))
                    .then(|| Some((k.as_str(), text(v)?)))
                    .flatten()
            })
        })
        .or_else(|| {
            map.iter().find_map(|(k, v)| {
                let t = text(v)?;
                (word_count(t) <= 4 && t.parse::<f64>().is_err()).then_some((k.as_str(), t))
            })
        })
}

/// How a table's lines split into cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    Char(char),
    /// Two or more spaces: columns aligned for a terminal.
    Spaces,
}

impl Split {
    /// `line` trimmed, a `|` table's row without its outer pipes.
    fn row(self, line: &str) -> &str {
        let line = line.trim();
        match self {
            Split::Char('|') => line.trim_matches('|'),
            _ => line,
        }
    }

    /// How many cells [`Split::cells`] finds in `line`, without building
    /// them (every output is tried as a table, each way of splitting).
    fn count(self, line: &str) -> usize {
        let line = self.row(line);
        match self {
            Split::Char(sep) => line.matches(sep).count() + 1,
            Split::Spaces => line.split("  ").filter(|c| !c.trim().is_empty()).count(),
        }
    }

    fn cells(self, line: &str) -> Vec<String> {
        let line = self.row(line);
        match self {
            Split::Char(sep) => line
                .split(sep)
                .map(|c| c.trim().trim_matches('"').to_owned())
                .collect(),
            Split::Spaces => line
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// A table read from a tool's output.
struct Table<'a> {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    width: usize,
    /// The lines that are not rows (a note above the table, a total, an
    /// error after it): read as lines.
    others: Vec<&'a str>,
}

impl Table<'_> {
    /// The table `text` is, if it is one: most lines split into the same
    /// number (two or more) of cells. A capped output's first line may be a
    /// cut row, so the width is the most common one, and the first line is
    /// a header only when it has that width and no digits.
    fn parse(text: &str) -> Option<Table<'_>> {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !is_our_mark(l))
            .collect();
        if lines.len() < 3 {
            return None;
        }
        let candidates = [
            Split::Char(','),
            Split::Char('\t'),
            Split::Char('|'),
            Split::Spaces,
        ];
        let (split, width) = candidates.into_iter().find_map(|split| {
            let mut widths: HashMap<usize, usize> = HashMap::new();
            for l in &lines {
                *widths.entry(split.count(l)).or_default() += 1;
            }
            let (&width, &n) = widths.iter().max_by_key(|&(w, n)| (*n, *w))?;
            (width >= 2 && n * 10 >= lines.len() * 8).then_some((split, width))
        })?;
        let first = split.cells(lines[0]);
        // A header names its columns: each cell a word (`p50_ms` is one),
        // none a number.
        // A header is not one of the rows: a line shaped like the next one
        // is data (a log whose every line has one comma has no header).
        let has_header = first.len() == width
            && lines
                .get(1)
                .is_none_or(|next| shape_key(lines[0]) != shape_key(next))
            && first.iter().all(|c| {
                c.chars()
                    .next()
                    .is_some_and(|ch| ch.is_alphabetic() || ch == '_')
            });
        // Aligned columns, or two columns, without a header are as likely
        // prose or a log with a comma on every line.
        if !has_header && (split == Split::Spaces || width < 3) {
            return None;
        }
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut others: Vec<&str> = Vec::new();
        for l in &lines[usize::from(has_header)..] {
            let row = split.cells(l);
            if row.len() != width {
                others.push(l);
            } else if !row
                .iter()
                .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
            {
                rows.push(row);
            }
        }
        Some(Table {
            header: if has_header { first } else { Vec::new() },
            rows,
            width,
            others,
        })
    }
}

/// What a column holds: how often each value and each shape occurs, and
/// the most common of each.
struct Column {
    values: HashMap<String, usize>,
    shapes: KeyMap<usize>,
    mode_value: usize,
    mode_shape: usize,
}

impl Column {
    fn of<'a>(cells: impl Iterator<Item = &'a String>) -> Self {
        let mut values: HashMap<String, usize> = HashMap::new();
        let mut shapes: KeyMap<usize> = KeyMap::default();
        for c in cells {
            *values.entry(c.clone()).or_default() += 1;
            *shapes.entry(shape_key(c)).or_default() += 1;
        }
        Column {
            mode_value: values.values().copied().max().unwrap_or(0),
            mode_shape: shapes.values().copied().max().unwrap_or(0),
            values,
            shapes,
        }
    }

    fn count(&self, cell: &str) -> usize {
        self.values.get(cell).copied().unwrap_or(0)
    }

    /// Whether `cell` is the only one of its kind in a column (of `rows`
    /// rows) that mostly holds one shape of value (`tenant-hooli-16` among
    /// `r-#####`), or, in a longer table, one value (`3` restarts where the
    /// rest say `0`). A small table of a few random values has a "mode" by
    /// chance; that is not an outlier.
    fn is_outlier(&self, cell: &str, rows: usize) -> bool {
        if cell.is_empty() || self.count(cell) > 1 {
            return false;
        }
        // A field set where the other rows leave it empty (an
        // `exception_code` on one shipment of three) is a flag, in a table
        // of any size.
        let set = rows - self.count("");
        if rows >= 2 && set <= (rows / 4).max(1) {
            return true;
        }
        if rows < 4 {
            return false;
        }
        let dominant = |n: usize| n * 10 >= rows * 6;
        let (mode_value, mode_shape) = (self.mode_value, self.mode_shape);
        let shape_count = self.shapes.get(&shape_key(cell)).copied().unwrap_or(0);
        (rows >= 8 && dominant(mode_value) && self.count(cell) < mode_value)
            || (dominant(mode_shape) && shape_count == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_out_piece_of_a_json_array_is_read_by_its_whole_objects() {
        let piece = r#"07_sessions.sql","line":217,"text":"lock() // match 0.926"},{"path":"config/prod.yaml","line":220,"text":"lock() // match 70","score":0.147},{"path":"tests/auth_flow.rs","line":223,"text":"lock()","score":0.621},{"pat"#;
        let Some(Value::Array(objects)) = json_fragment(piece) else {
            panic!("no objects read from {piece}");
        };
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["path"], "config/prod.yaml");
        assert_eq!(objects[1]["line"], 223);
        // Prose with a brace in it is not JSON.
        assert!(json_fragment(r#"the map {"a": 1} was printed"#).is_none());
    }

    #[test]
    fn the_halves_of_lines_beside_a_cut_mark_are_not_read() {
        let mut ledger = Ledger::default();
        let capped = "test api::case_170 ... FAILED (546 ms): token expired for tenant-hooli-16\n\
                      test token::refresh::case_12\n\
                      \u{27e6}truncated: 900 of 2000 chars removed from tool output for run_tests (call_id=c1); reason=tool_result_budget\u{27e7}\n\
                      resh::case_281 ... FAILED (665 ms)\n\
                      test session::case_9 ... FAILED (12 ms): lock poisoned at src/auth/session.rs:212";
        ledger.extract_tool(capped, "[run_tests] ");
        let texts: Vec<&str> = ledger.items.iter().map(|i| i.text.as_str()).collect();
        assert!(
            texts
                .iter()
                .all(|t| !t.contains("resh::case_281") && !t.contains("case_12")),
            "{texts:?}"
        );
        assert!(
            texts.iter().any(|t| t.contains("session.rs:212")),
            "{texts:?}"
        );
    }

    #[test]
    fn facts_from_a_cut_json_array_name_fields_not_fragments() {
        let mut ledger = Ledger::default();
        let mut piece = String::from(r#"s.sql","line":1},"#);
        for i in 0..40 {
            piece.push_str(&format!(
                r#"{{"path":"src/mod_{i}.rs","line":{i},"text":"lock()","score":0.5}},"#
            ));
        }
        piece.push_str(r#"{"path":"deploy/eu-west-3.tf","line":9,"text":"region = \"eu-west-3\" // forbidden","score":0.99},{"pa"#);
        ledger.extract_tool(&piece, "search");
        for it in &ledger.items {
            assert!(
                !it.text.contains("\",\""),
                "a raw fragment became a fact: {}",
                it.text
            );
        }
    }
}
