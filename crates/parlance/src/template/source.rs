//! Finding a chat template and its special tokens on disk, the way transformers does.
//!
//! Accepted: a `.jinja` file; a `tokenizer_config.json` (its `chat_template` a string or a list of
//! `{name, template}`); a `chat_template.json`; a model folder holding these. In a folder (or beside a
//! `tokenizer_config.json`) `chat_template.jinja` wins over `chat_template.json`, which wins over the
//! `chat_template` field, as in transformers 5. Named special tokens (`bos_token`, `eos_token`, ...)
//! come from `tokenizer_config.json`, as strings or `{"content": ...}` objects.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value as Json;

use super::TemplateError;

/// The special-token attributes transformers passes to templates (`SPECIAL_TOKENS_ATTRIBUTES`).
pub const SPECIAL_TOKEN_NAMES: [&str; 7] =
    ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

/// Template text(s) and special tokens read from disk, before compilation.
#[derive(Debug, Clone, Default)]
pub struct TemplateSource {
    /// Where the template came from, used in error messages.
    pub label: String,
    /// `(name, text)`; a single template is named `default`.
    pub templates: Vec<(String, String)>,
    /// Named special tokens, in `SPECIAL_TOKEN_NAMES` order.
    pub special_tokens: IndexMap<String, String>,
}

impl TemplateSource {
    /// One template given as text.
    pub fn from_text(label: impl Into<String>, text: impl Into<String>) -> TemplateSource {
        TemplateSource {
            label: label.into(),
            templates: vec![("default".to_owned(), text.into())],
            special_tokens: IndexMap::new(),
        }
    }

    /// Loads a `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    pub fn from_path(path: &Path) -> Result<TemplateSource, TemplateError> {
        if path.is_dir() {
            return from_folder(path);
        }
        let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if !is_json {
            let text = read(path)?;
            let mut source = TemplateSource::from_text(path.display().to_string(), text);
            // A model folder's `chat_template.jinja` takes its special tokens from the config beside it.
            if path.file_name().is_some_and(|n| n == "chat_template.jinja")
                && let Some(config) = sibling(path, "tokenizer_config.json")
            {
                source.special_tokens = special_tokens(&read_json(&config)?);
            }
            return Ok(source);
        }
        let json = read_json(path)?;
        let is_tokenizer_config = json.get("chat_template").is_some()
            && SPECIAL_TOKEN_NAMES.iter().any(|name| json.get(name).is_some())
            || path.file_name().is_some_and(|n| n == "tokenizer_config.json");
        if is_tokenizer_config {
            // Separate template files beside a tokenizer_config override its field.
            if let Some(jinja) = sibling(path, "chat_template.jinja") {
                let mut source = TemplateSource::from_text(jinja.display().to_string(), read(&jinja)?);
                source.special_tokens = special_tokens(&json);
                return Ok(source);
            }
            if let Some(other) = sibling(path, "chat_template.json") {
                let mut source = templates_from_json(&other, &read_json(&other)?)?;
                source.special_tokens = special_tokens(&json);
                return Ok(source);
            }
        }
        let mut source = templates_from_json(path, &json)?;
        source.special_tokens = special_tokens(&json);
        Ok(source)
    }
}

fn from_folder(dir: &Path) -> Result<TemplateSource, TemplateError> {
    let config = dir.join("tokenizer_config.json");
    let special = if config.is_file() { special_tokens(&read_json(&config)?) } else { IndexMap::new() };
    let jinja = dir.join("chat_template.jinja");
    let json = dir.join("chat_template.json");
    let mut source = if jinja.is_file() {
        TemplateSource::from_text(jinja.display().to_string(), read(&jinja)?)
    } else if json.is_file() {
        templates_from_json(&json, &read_json(&json)?)?
    } else if config.is_file() {
        templates_from_json(&config, &read_json(&config)?)?
    } else {
        return Err(TemplateError::NoTemplate {
            path: dir.to_owned(),
            message: "folder has no chat_template.jinja, chat_template.json or tokenizer_config.json".into(),
        });
    };
    source.special_tokens = special;
    Ok(source)
}

/// The `chat_template` field: a string, or a list of `{name, template}`.
fn templates_from_json(path: &Path, json: &Json) -> Result<TemplateSource, TemplateError> {
    let no_template = |message: String| TemplateError::NoTemplate { path: path.to_owned(), message };
    let field = json.get("chat_template").ok_or_else(|| no_template("no `chat_template` field".into()))?;
    let label = path.display().to_string();
    match field {
        Json::String(text) => Ok(TemplateSource::from_text(label, text.clone())),
        Json::Array(entries) => {
            let mut templates = Vec::new();
            for (i, entry) in entries.iter().enumerate() {
                let name = entry.get("name").and_then(Json::as_str);
                let text = entry.get("template").and_then(Json::as_str);
                match (name, text) {
                    (Some(name), Some(text)) => templates.push((name.to_owned(), text.to_owned())),
                    _ => {
                        return Err(no_template(format!(
                            "`chat_template[{i}]` must be an object with string `name` and `template`"
                        )));
                    }
                }
            }
            if templates.is_empty() {
                return Err(no_template("`chat_template` is an empty list".into()));
            }
            Ok(TemplateSource { label, templates, special_tokens: IndexMap::new() })
        }
        Json::Null => Err(no_template("`chat_template` is null".into())),
        other => Err(no_template(format!(
            "`chat_template` must be a string or a list of {{name, template}}, not {}",
            json_kind(other)
        ))),
    }
}

/// Named special tokens of a tokenizer config: strings, or `{"content": ...}` (AddedToken) objects.
fn special_tokens(json: &Json) -> IndexMap<String, String> {
    let mut tokens = IndexMap::new();
    for name in SPECIAL_TOKEN_NAMES {
        let token = match json.get(name) {
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Object(o)) => o.get("content").and_then(Json::as_str).map(str::to_owned),
            _ => None,
        };
        if let Some(token) = token {
            tokens.insert(name.to_owned(), token);
        }
    }
    tokens
}

fn sibling(path: &Path, name: &str) -> Option<PathBuf> {
    let candidate = path.parent()?.join(name);
    candidate.is_file().then_some(candidate)
}

/// Bytes an input file (template, config, conversation) may hold; default 256 MiB.
static MAX_INPUT_FILE_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(256 << 20);

/// The bound on input files (default 256 MiB): a larger one is refused before it is read.
pub fn max_input_file_bytes() -> u64 {
    MAX_INPUT_FILE_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets the bound on input files for this process (the CLI's `--max-input-bytes`).
pub fn set_max_input_file_bytes(bytes: u64) {
    MAX_INPUT_FILE_BYTES.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

/// Reads a text file within [`max_input_file_bytes`]: its size is checked first (a 3 GiB file is
/// refused at once, not read into memory), and the read stops past the bound either way (a file
/// whose size the system does not know, a pipe).
pub fn read_input_file(path: &Path) -> Result<String, TemplateError> {
    use std::io::Read as _;
    let io = |source| TemplateError::Io { path: path.to_owned(), source };
    let max = max_input_file_bytes();
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > max {
        return Err(TemplateError::TooLarge { path: path.to_owned(), size, max });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(TemplateError::TooLarge { path: path.to_owned(), size: bytes.len() as u64, max });
    }
    String::from_utf8(bytes)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 ({e})"))))
}

fn read(path: &Path) -> Result<String, TemplateError> {
    read_input_file(path)
}

fn read_json(path: &Path) -> Result<Json, TemplateError> {
    let text = read(path)?;
    serde_json::from_str(&text).map_err(|e| TemplateError::json(path, &e))
}

fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}
