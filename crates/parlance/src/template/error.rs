//! Errors of loading and rendering chat templates; each names the file or template and the line.

use std::path::PathBuf;

/// Why a chat template could not be loaded or rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
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
    #[error("{name}:{line}: syntax error: {message}")]
    Syntax {
        /// The template's name (file and, for named templates, `#name`).
        name: String,
        /// 1-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// The template called `raise_exception(message)`.
    #[error("{name}:{line}: template raised: {message}")]
    Raised {
        /// The template's name.
        name: String,
        /// 1-based line of the `raise_exception` call.
        line: usize,
        /// The template's message.
        message: String,
    },
    /// Rendering failed (type error, undefined value on a strict path, unknown filter, ...).
    #[error("{name}:{line}: {message}")]
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
    #[error("{name}:{line}: {what} limit reached ({limit}); the template is too expensive to render")]
    Limit {
        /// The template's name.
        name: String,
        /// 1-based line where the limit was hit (0 if unknown).
        line: usize,
        /// Which limit: `fuel`, `recursion`, `output bytes`, `memory bytes`, or `expression nesting depth`.
        what: &'static str,
        /// The limit's value.
        limit: u64,
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
