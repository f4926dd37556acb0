//! Errors of loading and rendering chat templates; each names the file or template and the line.

use std::path::PathBuf;

/// Why a chat template could not be loaded or rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A file is larger than the input-file bound (checked before reading it).
    #[error("{path}: {size} bytes, above the input-file limit of {max} bytes (raise it with `--max-input-bytes`)", path = path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The bound ([`super::max_input_file_bytes`]).
        max: u64,
    },
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file (`tokenizer_config.json`, `chat_template.json`, a conversation) is malformed.
    #[error("{path}:{line}:{column}: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The file or folder holds no chat template, or holds one in an unexpected shape.
    #[error("{path}: {message}")]
    NoTemplate {
        /// The file or folder.
        path: PathBuf,
        /// What was looked for.
        message: String,
    },
    /// The template text does not compile.
    #[error("{}:{line}: syntax error: {}", shown(name), shown(message))]
    Syntax {
        /// The template's name (file and, for named templates, `#name`).
        name: String,
        /// 1-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// The template called `raise_exception(message)`.
    #[error("{}:{line}: template raised: {}", shown(name), shown(message))]
    Raised {
        /// The template's name.
        name: String,
        /// 1-based line of the `raise_exception` call.
        line: usize,
        /// The template's message, whole (what the error shows of it is bounded and escaped).
        message: String,
    },
    /// Rendering failed (type error, undefined value on a strict path, unknown filter, ...).
    #[error("{}: {}", located(&shown(name), *line), shown(message))]
    Render {
        /// The template's name.
        name: String,
        /// 1-based line where it failed (0 if unknown).
        line: usize,
        /// The engine's message.
        message: String,
    },
    /// A render limit was reached: the template loops too long, recurses too deep or produces too
    /// much text.
    #[error("{}: {what} limit reached ({limit}); the template is too expensive to render", located(name, *line))]
    Limit {
        /// The template's name.
        name: String,
        /// 1-based line where the limit was hit (0 if unknown).
        line: usize,
        /// Which limit: `fuel`, `recursion`, `output bytes`, `memory bytes`, `wall-clock milliseconds`,
        /// `expression nesting depth`, `characters in one line`, or a [`super::RunBudget`]'s `what`.
        what: &'static str,
        /// The limit's value.
        limit: u64,
    },
    /// No bounded render can start: renders refused earlier hold, asleep, as much as the process
    /// allows (see [`super::memory`]); restart the process.
    #[error(
        "renders refused earlier hold {held_bytes} bytes in {threads} sleeping threads (the process allows {limit} bytes, {max_threads} threads): no more bounded renders in this process; restart it",
        max_threads = super::memory::MAX_PARKED_THREADS
    )]
    Exhausted {
        /// Threads left asleep by refused renders.
        threads: usize,
        /// Bytes they hold.
        held_bytes: usize,
        /// [`super::memory::parked_limit`].
        limit: usize,
    },
    /// The request cannot be rendered as given (conflicting options, nothing to continue, ...).
    #[error("invalid render request: {0}")]
    Request(String),
}

impl TemplateError {
    pub(crate) fn json(path: impl Into<PathBuf>, err: &serde_json::Error) -> TemplateError {
        TemplateError::Json { path: path.into(), line: err.line(), column: err.column(), message: err.to_string() }
    }
}

/// `name:line`, or the name alone where the line is unknown (0): a limit hit by the allocator or the
/// clock is not at any line.
fn located(name: &str, line: usize) -> String {
    if line == 0 { name.to_owned() } else { format!("{name}:{line}") }
}

/// Most bytes of a template's (or an input's) own text an error shows.
const SHOWN_BYTES: usize = 2048;

/// Text from a template or its input, fit for a terminal and a log: control characters escaped
/// (an escape sequence in a `raise_exception` message must not clear the screen) and at most
/// [`SHOWN_BYTES`] of it shown, with its full size said.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(SHOWN_BYTES) + 32);
    let mut taken = 0;
    for c in text.chars() {
        if taken + c.len_utf8() > SHOWN_BYTES {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        taken += c.len_utf8();
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_show_bounded_escaped_text() {
        let huge = format!("\u{1b}[2J\u{1b}]0;pwned\u{7}{}", "x".repeat(5_000_000));
        let err = TemplateError::Raised { name: "t.jinja".into(), line: 3, message: huge.clone() };
        let text = err.to_string();
        assert!(text.len() < SHOWN_BYTES + 200, "{} bytes", text.len());
        assert!(!text.chars().any(|c| c == '\u{1b}' || c == '\u{7}'), "{text:.80}");
        assert!(text.starts_with("t.jinja:3: template raised: \\u{1b}[2J"), "{text:.80}");
        assert!(text.ends_with(&format!("({} bytes in all)", huge.len())), "{}", &text[text.len() - 40..]);
        // Short messages are shown whole, line breaks kept.
        let err = TemplateError::Render { name: "t.jinja".into(), line: 1, message: "a\nb".into() };
        assert_eq!(err.to_string(), "t.jinja:1: a\nb");
    }
}
