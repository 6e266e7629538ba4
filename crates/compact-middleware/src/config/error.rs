//! The configuration error: one line per problem, each naming where it is.

use std::fmt;
use std::path::PathBuf;

/// One problem with one configuration value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the key: `policy.trigger_pct`, `redaction.patterns[2]`.
    /// Empty for the document root.
    pub path: String,
    /// What is wrong, with the rule and the offending value.
    pub message: String,
    /// The environment variable or CLI flag that supplied the value, when it
    /// did not come from a file; the user has to know what to fix.
    pub origin: Option<String>,
}

impl FieldError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            origin: None,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(root)"
        } else {
            &self.path
        };
        match &self.origin {
            Some(origin) => write!(f, "{origin} ({path}): {}", self.message),
            None => write!(f, "{path}: {}", self.message),
        }
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("{}", yaml_line(file.as_ref(), *line, *column, message))]
    Yaml {
        /// The file, when the text came from one.
        file: Option<PathBuf>,
        /// 1-based line of the problem, when the parser knows it.
        line: Option<usize>,
        /// 1-based column of the problem, when the parser knows it.
        column: Option<usize>,
        /// The parser's explanation.
        message: String,
    },
    /// One or more values are unknown, of the wrong type, or break a rule.
    #[error("{}", lines(errors))]
    Invalid {
        /// Every problem found, in document order where there is one.
        errors: Vec<FieldError>,
    },
}

impl ConfigError {
    /// The field problems, empty for I/O and YAML syntax errors.
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            Self::Invalid { errors } => errors,
            Self::Io { .. } | Self::Yaml { .. } => &[],
        }
    }
}

fn yaml_line(
    file: Option<&PathBuf>,
    line: Option<usize>,
    column: Option<usize>,
    message: &str,
) -> String {
    let mut out = String::new();
    if let Some(file) = file {
        out.push_str(&file.display().to_string());
        out.push(':');
    }
    match (line, column) {
        (Some(line), Some(column)) => out.push_str(&format!("{line}:{column}: ")),
        (Some(line), None) => out.push_str(&format!("{line}: ")),
        _ => {
            if file.is_some() {
                out.push(' ');
            }
        }
    }
    out.push_str("invalid YAML: ");
    out.push_str(message);
    out
}

fn lines(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
