//! Chat templates: load a model's Jinja template and render conversations exactly as Hugging Face
//! `apply_chat_template(..., tokenize=False)` does.
//!
//! `ChatTemplate` is built once (the template compiled, special tokens read) and shared; `render`
//! takes a `Conversation` and `RenderOptions`. Before rendering, input is normalized as transformers
//! normalizes it: top-level message keys whose value is `null` are dropped (unless
//! `RenderOptions::keep_null_keys`), and a message's reasoning
//! (the first non-null of `reasoning_content`, `thinking`, `reasoning`) is offered both as
//! `reasoning_content` and, unless the message has its own, as `thinking`. Template variables are the
//! named special tokens, overlaid by `RenderOptions::variables`, plus `messages`, `tools`,
//! `documents` and `add_generation_prompt`.
//!
//! Templates are untrusted code: rendering is bounded by `RenderLimits` (instructions, recursion
//! depth, output size and, where the allocator guard is installed, memory; see [`memory`]).

mod casefold_table;
mod char_classes;
mod depth;
mod environment;
mod error;
mod jinja2_filters;
mod loop_controls;
pub mod memory;
mod pprint;
mod pyformat;
mod pyjson;
mod pystr;
mod python_ops;
mod request;
mod source;
mod textwrap;
mod value;

use std::cell::Cell;
use std::io;
use std::sync::Arc;

use chrono::NaiveDateTime;
use indexmap::IndexMap;
use minijinja::value::Value;
use minijinja::{Environment, ErrorKind};
use serde_json::Value as Json;

use crate::message::Conversation;
pub use error::TemplateError;
pub use request::RenderRequest;
pub use source::{
    SPECIAL_TOKEN_NAMES, TemplateSource, max_input_file_bytes, read_input_file, set_max_input_file_bytes,
};
use value::{REASONING_FIELDS, message_value, to_value};

/// Bounds on what rendering one conversation may cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderLimits {
    /// Template instructions per render; default 20,000,000 (a real template needs well under 100,000).
    pub fuel: u64,
    /// Nesting depth of macro calls, includes and recursive loops; default 128.
    pub recursion: usize,
    /// Bytes of rendered text; default 64 MiB.
    pub max_output_bytes: usize,
    /// Bytes a render may allocate in all, enforced only where [`memory::GuardedAllocator`] is the
    /// global allocator; default 512 MiB.
    pub max_memory_bytes: usize,
    /// Wall-clock time a render may take, enforced only where [`memory::GuardedAllocator`] is the
    /// global allocator (the render runs on its own thread, stopped at its next allocation once the
    /// time is up); default 10 s. Fuel counts instructions, not their cost.
    pub max_wall_time: std::time::Duration,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            fuel: 20_000_000,
            recursion: 128,
            max_output_bytes: 64 << 20,
            max_memory_bytes: 512 << 20,
            max_wall_time: std::time::Duration::from_secs(10),
        }
    }
}

/// How to render: generation prompt, continuation, extra template variables, clock.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Append the assistant turn's opening (`add_generation_prompt`); default `false`.
    pub add_generation_prompt: bool,
    /// Leave the final message open for the model to continue: `Some("content")` continues its
    /// content (transformers' `continue_final_message=True`), `Some("reasoning_content")` its
    /// reasoning; default `None`.
    pub continue_final_message: Option<String>,
    /// Extra template variables (`enable_thinking`, `reasoning_effort`, `bos_token`, ...); they
    /// override the special tokens of the same name. Default empty.
    pub variables: IndexMap<String, Json>,
    /// What `strftime_now` sees; default `None`: the local time at the call.
    pub now: Option<NaiveDateTime>,
    /// Which named template to use; default `None`: `tool_use` when tools are given and it exists,
    /// else `default` (as transformers chooses).
    pub template_name: Option<String>,
    /// Keep top-level message keys whose value is `null`, as the OpenAI wire shape has them
    /// (`content: null` beside `tool_calls`); default `false`: dropped, as transformers drops them.
    pub keep_null_keys: bool,
    /// Functions the template calls that its caller must provide (a serving project's helper, as
    /// functionary's `generate_schema_from_functions`), each bound to one that takes any arguments
    /// and returns an empty string; default none. Analysis uses it to render such templates at all;
    /// a real render passes the helper's output as a variable instead.
    pub empty_functions: Vec<String>,
    /// A wall-clock budget this render shares with others (an analysis's probes, a roundtrip's
    /// scenarios): it gets at most what is left of it; default `None`.
    pub budget: Option<RunBudget>,
}

/// A wall-clock budget shared by the renders of one run (an analysis, a roundtrip), so a template
/// that costs a little under the per-render limit each time still ends the run in bounded time.
/// The remaining time bounds each render where [`memory::GuardedAllocator`] is installed; without
/// it, a render that starts after the deadline is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBudget {
    /// When the run must have ended.
    pub deadline: std::time::Instant,
    /// The whole budget (what errors report).
    pub total: std::time::Duration,
    /// What the budget is of, as errors name it (`analysis wall-clock milliseconds`).
    pub what: &'static str,
}

impl RunBudget {
    /// A budget of `total` from now.
    pub fn new(total: std::time::Duration, what: &'static str) -> RunBudget {
        RunBudget { deadline: std::time::Instant::now() + total, total, what }
    }

    /// Time left before the deadline.
    pub fn left(&self) -> std::time::Duration {
        self.deadline.saturating_duration_since(std::time::Instant::now())
    }

    fn total_millis(&self) -> u64 {
        u64::try_from(self.total.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A compiled chat template with its special tokens; build once, render many times (`&self`).
#[derive(Clone)]
pub struct ChatTemplate {
    inner: Arc<Inner>,
}

struct Inner {
    label: String,
    names: Vec<String>,
    sources: Vec<String>,
    env: Environment<'static>,
    special_tokens: IndexMap<String, String>,
    limits: RenderLimits,
    lenient: Lenient,
    /// Whether a template adds strings to Markup (`'…'|safe + str`), which escapes them.
    markup_add: bool,
}

/// Ways the analyzer renders templates otherwise than transformers does (its workarounds).
#[derive(Debug, Clone, Copy, Default)]
struct Lenient {
    /// `list.append(x)` does nothing (see [`ChatTemplate::with_list_append_ignored`]).
    list_append: bool,
    /// `'…'|safe + str` does not escape (see [`ChatTemplate::with_markup_add_unescaped`]).
    markup_add: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("label", &self.inner.label)
            .field("names", &self.inner.names)
            .field("special_tokens", &self.inner.special_tokens)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The instant `strftime_now` reports during the current render on this thread.
    static NOW: Cell<Option<NaiveDateTime>> = const { Cell::new(None) };
}

/// Variables a caller may not set through `RenderOptions::variables`: rendering sets them.
const RESERVED_VARIABLES: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];

/// transformers appends this to the continued message, then cuts the render at it.
const CONTINUE_TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";

impl ChatTemplate {
    /// Loads from a `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    pub fn from_path(path: impl AsRef<std::path::Path>) -> Result<ChatTemplate, TemplateError> {
        ChatTemplate::from_source(TemplateSource::from_path(path.as_ref())?, RenderLimits::default())
    }

    /// Compiles one template given as text, with no special tokens.
    pub fn from_text(text: &str) -> Result<ChatTemplate, TemplateError> {
        ChatTemplate::from_source(TemplateSource::from_text("<template>", text), RenderLimits::default())
    }

    /// Compiles every template of `source` under `limits`.
    pub fn from_source(source: TemplateSource, limits: RenderLimits) -> Result<ChatTemplate, TemplateError> {
        ChatTemplate::compile(source, limits, Lenient::default())
    }

    /// The same templates in an environment where `list.append(x)` does nothing and returns
    /// `None` instead of raising. transformers' immutable sandbox refuses `append` too, so this
    /// renders what no reference renders: only the analyzer uses it (workaround
    /// `list-append-ignored`), for templates that append to a list only read by later messages.
    pub(crate) fn with_list_append_ignored(&self) -> Result<ChatTemplate, TemplateError> {
        self.recompiled(Lenient { list_append: true, ..self.inner.lenient })
    }

    /// The same templates where adding a string to a safe string (`'…'|safe + str`) does not
    /// HTML-escape it, as it does in Jinja2 (transformers renders mistral-common's calls as
    /// `[{&#34;name&#34;: …`, which no model writes): only the analyzer uses it (workaround
    /// `markup-add-unescaped`), so that it reads the syntax the template means. `None` when no
    /// template adds to Markup.
    pub(crate) fn with_markup_add_unescaped(&self) -> Option<Result<ChatTemplate, TemplateError>> {
        (self.inner.markup_add && !self.inner.lenient.markup_add)
            .then(|| self.recompiled(Lenient { markup_add: true, ..self.inner.lenient }))
    }

    fn recompiled(&self, lenient: Lenient) -> Result<ChatTemplate, TemplateError> {
        let source = TemplateSource {
            label: self.inner.label.clone(),
            templates: self.inner.names.iter().cloned().zip(self.inner.sources.iter().cloned()).collect(),
            special_tokens: self.inner.special_tokens.clone(),
        };
        ChatTemplate::compile(source, self.inner.limits.clone(), lenient)
    }

    fn compile(source: TemplateSource, limits: RenderLimits, lenient: Lenient) -> Result<ChatTemplate, TemplateError> {
        let mut env = environment::hf_environment(&limits);
        python_ops::install(&mut env);
        if lenient.list_append {
            environment::ignore_list_append(&mut env);
        }
        environment::set_clock(&mut env, Arc::new(|| NOW.get().unwrap_or_else(|| chrono::Local::now().naive_local())));
        let label = &source.label;
        let templates = source.templates;
        // Parsing and compiling recurse once per nesting level: on a stack sized for the deepest
        // template `depth` admits (see there).
        let loaded = depth::on_load_stack(move || -> Result<_, TemplateError> {
            let mut names = Vec::new();
            let mut sources = Vec::new();
            let mut markup_add = false;
            let count = templates.len();
            for (name, text) in templates {
                let rewritten = python_ops::normalize_newlines(rewrite_generation_tags(&text));
                if let Some(line) = raw_opened_with_plus(&rewritten) {
                    return Err(TemplateError::Syntax {
                        name: display_name(label, &name, count),
                        line,
                        message: "Encountered unknown tag 'raw' (Jinja2 closes a raw block's opening tag only with \
                                  `%}` or `-%}`)"
                            .to_owned(),
                    });
                }
                if let Some(line) = depth::find_long_line(&rewritten) {
                    return Err(TemplateError::Limit {
                        name: display_name(label, &name, count),
                        line,
                        what: "characters in one line",
                        limit: depth::MAX_LINE_CHARS as u64,
                    });
                }
                if let Some(deep) = depth::find_deep_expression(&rewritten) {
                    return Err(TemplateError::Limit {
                        name: display_name(label, &name, count),
                        line: deep.line,
                        what: "expression nesting depth",
                        limit: depth::MAX_EXPRESSION_DEPTH as u64,
                    });
                }
                // Loop controls and `for … else` as Jinja2 runs them (see there).
                let rewritten = match loop_controls::rewrite(&rewritten) {
                    Ok(again) => again.unwrap_or(rewritten),
                    Err(control) => {
                        return Err(TemplateError::Syntax {
                            name: display_name(label, &name, count),
                            line: control.line,
                            message: format!(
                                "`{{% {} %}}` inside a `{{% {} %}}` block body of a loop could not be placed (the \
                                 engine would drop the rest of the output)",
                                control.keyword, control.block
                            ),
                        });
                    }
                };
                // Python's `%` and stepped slices, which minijinja's VM does otherwise (see there).
                let rewrite = python_ops::rewrite(&rewritten, !lenient.markup_add);
                markup_add |= rewrite.markup_add;
                let rewritten = rewrite.text.unwrap_or(rewritten);
                env.add_template_owned(name.clone(), rewritten).map_err(|err| TemplateError::Syntax {
                    name: display_name(label, &name, count),
                    line: err.line().unwrap_or(0),
                    message: err.detail().unwrap_or("invalid syntax").to_owned(),
                })?;
                names.push(name);
                sources.push(text);
            }
            Ok((env, names, sources, markup_add))
        });
        let (env, names, sources, markup_add) = loaded.map_err(|err| TemplateError::NoTemplate {
            path: source.label.clone().into(),
            message: format!("loading stopped: {err:?}"),
        })??;
        if names.is_empty() {
            return Err(TemplateError::NoTemplate { path: source.label.into(), message: "no template text".into() });
        }
        Ok(ChatTemplate {
            inner: Arc::new(Inner {
                label: source.label,
                names,
                sources,
                env,
                special_tokens: source.special_tokens,
                limits,
                lenient,
                markup_add,
            }),
        })
    }

    /// Where the template came from (a path, or `<template>`).
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Names of the templates held (`default` for a single template).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.names.iter().map(String::as_str)
    }

    /// The original text of a named template.
    pub fn source(&self, name: &str) -> Option<&str> {
        let i = self.inner.names.iter().position(|n| n == name)?;
        Some(&self.inner.sources[i])
    }

    /// Named special tokens passed to the template (`bos_token`, `eos_token`, ...).
    pub fn special_tokens(&self) -> &IndexMap<String, String> {
        &self.inner.special_tokens
    }

    /// The limits every render runs under.
    pub fn limits(&self) -> &RenderLimits {
        &self.inner.limits
    }

    /// Variables the templates read but neither define nor receive from rendering (`messages`,
    /// `tools`, ...), the environment's globals or the special tokens: what a caller must pass as
    /// `RenderOptions::variables` (e.g. firefunction-v2's `functions` and `datetime`). Sorted; found
    /// by static analysis, so a name read only on a path never taken is listed too.
    pub fn undeclared_variables(&self) -> Vec<String> {
        // minijinja parses the source again to answer: on the stack loading ran on.
        depth::on_load_stack(|| self.undeclared_variables_here()).unwrap_or_default()
    }

    fn undeclared_variables_here(&self) -> Vec<String> {
        let env = &self.inner.env;
        let globals: std::collections::HashSet<&str> = env.globals().map(|(name, _)| name).collect();
        let mut names: Vec<String> = self
            .inner
            .names
            .iter()
            .filter_map(|name| env.get_template(name).ok())
            .flat_map(|template| template.undeclared_variables(false))
            .filter(|name| {
                !globals.contains(name.as_str())
                    && !RESERVED_VARIABLES.contains(&name.as_str())
                    && !self.inner.special_tokens.contains_key(name)
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The template `render` would use for these inputs.
    pub fn select(&self, conversation: &Conversation, options: &RenderOptions) -> Result<&str, TemplateError> {
        let names = &self.inner.names;
        if let Some(wanted) = &options.template_name {
            return names
                .iter()
                .find(|n| *n == wanted)
                .map(String::as_str)
                .ok_or_else(|| TemplateError::Request(format!("no template named {wanted:?}; have {names:?}")));
        }
        if names.len() == 1 {
            return Ok(&names[0]);
        }
        if conversation.tools.is_some()
            && let Some(name) = names.iter().find(|n| *n == "tool_use")
        {
            return Ok(name);
        }
        names.iter().find(|n| *n == "default").map(String::as_str).ok_or_else(|| {
            TemplateError::Request(format!(
                "this model has several chat templates ({names:?}) and no `default`; name one"
            ))
        })
    }

    /// Renders `conversation`: byte-identical to transformers' `apply_chat_template(tokenize=False)`.
    pub fn render(&self, conversation: &Conversation, options: &RenderOptions) -> Result<String, TemplateError> {
        let name = self.select(conversation, options)?.to_owned();
        // What is left of a shared budget bounds this render when it is less than its own limit.
        let budget = options.budget.filter(|b| b.left() < self.inner.limits.max_wall_time);
        if let Some(budget) = budget.filter(|b| b.left().is_zero()) {
            return Err(self.limit_error(&name, 0, budget.what, budget.total_millis()));
        }
        let (context, continued) = self.context(conversation, options)?;
        let rendered = if memory::is_installed() {
            let this = self.clone();
            let name_for_error = name.clone();
            let now = options.now;
            let max = self.inner.limits.max_memory_bytes;
            let max_time = budget.map_or(self.inner.limits.max_wall_time, |b| b.left());
            match memory::run_bounded(max, max_time, move || this.render_caught(&name, context, now)) {
                Ok(result) => result?,
                Err(memory::Stopped::Memory) => {
                    return Err(self.limit_error(&name_for_error, 0, "memory bytes", max as u64));
                }
                Err(memory::Stopped::Exhausted) => {
                    let (threads, held_bytes) = memory::parked();
                    return Err(TemplateError::Exhausted { threads, held_bytes, limit: memory::parked_limit() });
                }
                Err(memory::Stopped::Time) => {
                    if let Some(budget) = budget {
                        return Err(self.limit_error(&name_for_error, 0, budget.what, budget.total_millis()));
                    }
                    let millis = u64::try_from(max_time.as_millis()).unwrap_or(u64::MAX);
                    return Err(self.limit_error(&name_for_error, 0, "wall-clock milliseconds", millis));
                }
                Err(stopped) => {
                    return Err(TemplateError::Render {
                        name: display_name(&self.inner.label, &name_for_error, self.inner.names.len()),
                        line: 0,
                        message: format!("render stopped: {stopped:?}"),
                    });
                }
            }
        } else {
            self.render_caught(&name, context, options.now)?
        };
        match continued {
            None => Ok(rendered),
            Some(final_text) => cut_at_continue_tag(rendered, &final_text),
        }
    }

    /// [`Self::render_here`], a panic of the engine (minijinja 3.0.5 indexes out of bounds slicing
    /// an empty string or list with a negative step, `''[::-1]`) made a render error naming it
    /// rather than unwinding into the caller's thread.
    fn render_caught(&self, name: &str, context: Value, now: Option<NaiveDateTime>) -> Result<String, TemplateError> {
        let run = std::panic::AssertUnwindSafe(|| self.render_here(name, context, now));
        std::panic::catch_unwind(run).unwrap_or_else(|payload| {
            NOW.set(None);
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(TemplateError::Render {
                name: display_name(&self.inner.label, name, self.inner.names.len()),
                line: 0,
                message: format!("the template engine failed on this template ({what})"),
            })
        })
    }

    fn render_here(&self, name: &str, context: Value, now: Option<NaiveDateTime>) -> Result<String, TemplateError> {
        let template = self.inner.env.get_template(name).expect("every name was added at construction");
        let mut out = CappedWriter { buf: Vec::new(), max: self.inner.limits.max_output_bytes, exceeded: false };
        let previous = NOW.replace(now);
        let result = template.render_captured_to(context, &mut out);
        NOW.set(previous);
        match result {
            Ok(_) => Ok(String::from_utf8(out.buf).expect("templates write whole UTF-8 strings")),
            Err(err) => Err(self.convert_error(name, &err, out.exceeded)),
        }
    }

    /// Builds the template's variables; returns the text being continued, if any.
    fn context(
        &self,
        conversation: &Conversation,
        options: &RenderOptions,
    ) -> Result<(Value, Option<String>), TemplateError> {
        let mut messages = Vec::with_capacity(conversation.messages.len());
        for (i, message) in conversation.messages.iter().enumerate() {
            let Json::Object(object) = message else {
                return Err(TemplateError::Request(format!("messages[{i}] is not a JSON object")));
            };
            messages.push(message_value(object, options.keep_null_keys));
        }
        let mut continued = None;
        if let Some(field) = &options.continue_final_message {
            if options.add_generation_prompt {
                return Err(TemplateError::Request(
                    "continue_final_message and add_generation_prompt are not compatible".into(),
                ));
            }
            // Only the continued message is normalized as JSON, tagged, then converted again.
            let last = conversation.messages.last().and_then(Json::as_object);
            let mut tagged: Vec<_> = last.map(|m| normalize_message(m, options.keep_null_keys)).into_iter().collect();
            continued = Some(self.tag_final_message(&mut tagged, field)?);
            if let (Some(message), Some(slot)) = (tagged.first(), messages.last_mut()) {
                *slot = message_value(message, options.keep_null_keys);
            }
        }
        let mut vars: IndexMap<String, Value> = IndexMap::new();
        for (name, token) in &self.inner.special_tokens {
            vars.insert(name.clone(), Value::from(token.as_str()));
        }
        for (name, value) in &options.variables {
            if RESERVED_VARIABLES.contains(&name.as_str()) {
                return Err(TemplateError::Request(format!(
                    "variable {name:?} is set by rendering itself; pass it as a render option"
                )));
            }
            vars.insert(name.clone(), to_value(value));
        }
        for name in &options.empty_functions {
            let empty =
                |_args: minijinja::value::Rest<Value>| -> Result<String, minijinja::Error> { Ok(String::new()) };
            vars.insert(name.clone(), Value::from_function(empty));
        }
        vars.insert("messages".into(), Value::from(messages));
        let optional_list = |list: &Option<Vec<Json>>| match list {
            Some(items) => Value::from(items.iter().map(to_value).collect::<Vec<_>>()),
            None => Value::from(()),
        };
        vars.insert("tools".into(), optional_list(&conversation.tools));
        vars.insert("documents".into(), optional_list(&conversation.documents));
        vars.insert("add_generation_prompt".into(), Value::from(options.add_generation_prompt));
        Ok((Value::from_pairs(vars), continued))
    }

    /// Appends `CONTINUE_TAG` to the continued field(s) of the last message, as transformers does.
    fn tag_final_message(
        &self,
        messages: &mut [serde_json::Map<String, Json>],
        field: &str,
    ) -> Result<String, TemplateError> {
        let last = messages.last_mut().ok_or_else(|| {
            TemplateError::Request("continue_final_message is set but the conversation is empty".into())
        })?;
        let final_value = last.get(field).cloned().ok_or_else(|| {
            TemplateError::Request(format!("continue_final_message is set but the final message has no {field:?}"))
        })?;
        let fields: Vec<String> = if REASONING_FIELDS.contains(&field) {
            REASONING_FIELDS.iter().filter(|f| last.get(**f) == Some(&final_value)).map(|f| (*f).to_owned()).collect()
        } else {
            vec![field.to_owned()]
        };
        let uses_field = fields.iter().any(|f| self.inner.sources.iter().any(|s| s.contains(f.as_str())));
        if !uses_field {
            return Err(TemplateError::Request(format!(
                "continue_final_message is set to {field:?} but the template never reads that field"
            )));
        }
        match final_value {
            Json::String(text) => {
                for f in &fields {
                    if let Some(Json::String(s)) = last.get_mut(f) {
                        s.push_str(CONTINUE_TAG);
                    }
                }
                Ok(text)
            }
            Json::Array(mut parts) => {
                let block = parts.iter_mut().rev().find_map(|part| match part.get_mut("text") {
                    Some(Json::String(s)) => Some(s),
                    _ => None,
                });
                let Some(text) = block else {
                    return Err(TemplateError::Request(
                        "continue_final_message is set but the final message has no text to continue".into(),
                    ));
                };
                let original = text.clone();
                text.push_str(CONTINUE_TAG);
                last.insert(field.to_owned(), Json::Array(parts));
                Ok(original)
            }
            _ => Err(TemplateError::Request(format!(
                "continue_final_message: the final message's {field:?} is neither text nor content parts"
            ))),
        }
    }

    fn convert_error(&self, name: &str, err: &minijinja::Error, output_exceeded: bool) -> TemplateError {
        let shown = display_name(&self.inner.label, name, self.inner.names.len());
        let line = err.line().unwrap_or(0);
        let limits = &self.inner.limits;
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = cause {
            if let Some(raised) = e.downcast_ref::<environment::RaisedByTemplate>() {
                return TemplateError::Raised { name: shown, line, message: raised.0.clone() };
            }
            cause = e.source();
        }
        if output_exceeded {
            return self.limit_error(name, line, "output bytes", limits.max_output_bytes as u64);
        }
        match err.kind() {
            ErrorKind::OutOfFuel => self.limit_error(name, line, "fuel", limits.fuel),
            ErrorKind::InvalidOperation if err.detail() == Some("recursion limit exceeded") => {
                self.limit_error(name, line, "recursion", limits.recursion as u64)
            }
            kind => TemplateError::Render {
                name: shown,
                line,
                message: match err.detail() {
                    Some(detail) => format!("{kind}: {detail}"),
                    None => kind.to_string(),
                },
            },
        }
    }

    fn limit_error(&self, name: &str, line: usize, what: &'static str, limit: u64) -> TemplateError {
        TemplateError::Limit { name: display_name(&self.inner.label, name, self.inner.names.len()), line, what, limit }
    }
}

/// transformers' normalization of one message, as JSON (the continued message only; every other
/// message is normalized while converting, in `value::message_value`); `keep_nulls` keeps `null`
/// keys (`RenderOptions::keep_null_keys`).
fn normalize_message(message: &serde_json::Map<String, Json>, keep_nulls: bool) -> serde_json::Map<String, Json> {
    let kept = message.iter().filter(|(_, v)| keep_nulls || !v.is_null());
    let reasoning = REASONING_FIELDS.iter().find_map(|f| message.get(*f).filter(|v| !v.is_null())).cloned();
    let Some(reasoning) = reasoning else {
        return kept.map(|(k, v)| (k.clone(), v.clone())).collect();
    };
    // Python: {"thinking": reasoning, **message, "reasoning_content": reasoning}
    let mut out = serde_json::Map::new();
    out.insert("thinking".into(), reasoning.clone());
    for (k, v) in kept {
        out.insert(k.clone(), v.clone());
    }
    out.insert("reasoning_content".into(), reasoning);
    out
}

/// Cuts a continued render where transformers cuts it: at the last continue tag.
fn cut_at_continue_tag(mut rendered: String, final_text: &str) -> Result<String, TemplateError> {
    let tag = CONTINUE_TAG.trim();
    if !rendered.contains(final_text.trim()) || !rendered.contains(tag) {
        return Err(TemplateError::Request(
            "continue_final_message is set but the final message does not appear in the rendered chat; the \
             template deletes part of it"
                .into(),
        ));
    }
    let at = rendered.rfind(tag).expect("checked above");
    if rendered[at..].starts_with(CONTINUE_TAG) {
        rendered.truncate(at);
    } else {
        rendered.truncate(at);
        let trimmed = rendered.trim_end().len();
        rendered.truncate(trimmed);
    }
    Ok(rendered)
}

/// `{% generation %}` / `{% endgeneration %}` (transformers' assistant-mask extension) become an
/// always-true `if` block: same whitespace handling (both are block tags), same line numbers.
/// Only tags are rewritten: the same text inside `{% raw %}`, a comment or a string literal is
/// data and stays as written.
fn rewrite_generation_tags(text: &str) -> String {
    if !text.contains("generation") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut copied = 0;
    for tag in block_tags(text) {
        if tag.keyword == "generation" || tag.keyword == "endgeneration" {
            out.push_str(&text[copied..tag.keyword_at]);
            out.push_str(if tag.keyword == "generation" { "if true" } else { "endif" });
            copied = tag.keyword_at + tag.keyword.len();
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The line of a `{% raw +%}` tag, which Jinja2's lexer does not read as a raw block (only
/// `%}` or `-%}` close its opening tag): it then fails on the unknown tag `raw`, and so does parlance.
fn raw_opened_with_plus(text: &str) -> Option<usize> {
    if !text.contains("raw") {
        return None;
    }
    block_tags(text)
        .into_iter()
        .find(|tag| tag.keyword == "raw" && text[..tag.end - 2].ends_with('+'))
        .map(|tag| text[..tag.open].matches('\n').count() + 1)
}

/// A block tag (`{% … %}`) of a template's code.
struct BlockTag<'t> {
    open: usize,
    end: usize,
    keyword: &'t str,
    keyword_at: usize,
}

/// The block tags of `text` in order, as the lexer meets them: not inside a raw block (its opening
/// tag is listed, then everything up to `{% endraw %}` skipped), a comment or an expression, nor
/// in a tag's string literals.
fn block_tags(text: &str) -> Vec<BlockTag<'_>> {
    static END_RAW: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\{%[-+]?\s*endraw\s*[-+]?%\}").expect("valid regex"));
    let bytes = text.as_bytes();
    let mut tags = Vec::new();
    let mut at = 0;
    while let Some(found) = text[at..].find('{') {
        let open = at + found;
        let closer = match bytes.get(open + 1) {
            Some(b'#') => "#}",
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            _ => {
                at = open + 1;
                continue;
            }
        };
        let Some(end) = code_end(text, open + 2, closer) else { break };
        at = end;
        if closer != "%}" {
            continue;
        }
        let inner = &text[open + 2..end - 2];
        let lead = inner.len() - inner.trim_start_matches(['-', '+']).trim_start().len();
        let keyword_at = open + 2 + lead;
        let word_len = text[keyword_at..end - 2]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(end - 2 - keyword_at);
        let keyword = &text[keyword_at..keyword_at + word_len];
        tags.push(BlockTag { open, end, keyword, keyword_at });
        if keyword == "raw" {
            at = END_RAW.find(&text[end..]).map_or(text.len(), |m| end + m.end());
        }
    }
    tags
}

/// Where the tag, expression or comment whose code starts at `from` ends (after `closer`); string
/// literals in code are skipped (a comment has none). `None` when it never ends.
fn code_end(text: &str, from: usize, closer: &str) -> Option<usize> {
    if closer == "#}" {
        return text[from..].find(closer).map(|i| from + i + 2);
    }
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            _ if bytes[i..].starts_with(closer.as_bytes()) => return Some(i + 2),
            _ => {}
        }
        i += 1;
    }
    None
}

fn display_name(label: &str, name: &str, count: usize) -> String {
    if count > 1 { format!("{label}#{name}") } else { label.to_owned() }
}

/// Collects rendered bytes, refusing to grow past `max`.
struct CappedWriter {
    buf: Vec<u8>,
    max: usize,
    exceeded: bool,
}

impl io::Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.max {
            self.exceeded = true;
            return Err(io::Error::other("output limit reached"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_that_panicked_the_engine_render_without_the_guard() {
        // minijinja 3.0.5 indexes out of bounds on `''[::-1]`; the library's unit tests run without
        // `GuardedAllocator`, so the render is inline, where a panic would unwind into the caller
        // (`render_caught` makes any engine panic an error; the rewrite in `python_ops` keeps this
        // one from happening).
        assert!(!memory::is_installed());
        for (text, want) in
            [("{{ ''[::-1] }}|{{ 'abc'[2:0:-1] }}", "|cb"), ("{% for m in messages[1:][::-1] %}x{% endfor %}", "")]
        {
            let template =
                ChatTemplate::from_source(TemplateSource::from_text("slice.jinja", text), RenderLimits::default())
                    .unwrap();
            let conversation = Conversation {
                messages: vec![serde_json::json!({"role": "user", "content": "hi"})],
                ..Conversation::default()
            };
            assert_eq!(template.render(&conversation, &RenderOptions::default()).unwrap(), want);
        }
    }

    #[test]
    fn generation_tags_become_if_blocks() {
        assert_eq!(
            rewrite_generation_tags("a{% generation %}b{%- endgeneration -%}c"),
            "a{% if true %}b{%- endif -%}c"
        );
        // Data stays data: a raw block, a comment, a string literal.
        for data in [
            "{% raw %}{% generation %}{% endraw %}",
            "{# {% generation %} #}",
            "{{ '{% generation %}' }}",
            "{% set x = \"{% endgeneration %}\" %}",
        ] {
            assert_eq!(rewrite_generation_tags(data), data);
        }
        assert_eq!(
            rewrite_generation_tags("{% raw %}{% generation %}{%- endraw %}{%+ generation %}"),
            "{% raw %}{% generation %}{%- endraw %}{%+ if true %}"
        );
        // Jinja2 refuses `{% raw +%}`, not `{%+ raw %}` nor `{% endraw +%}`.
        assert_eq!(raw_opened_with_plus("a\n{%- raw +%}x{% endraw %}"), Some(2));
        assert_eq!(raw_opened_with_plus("{%+ raw %}x{% endraw +%}{{ '{% raw +%}' }}"), None);
    }

    #[test]
    fn normalize_drops_nulls_and_aliases_reasoning() {
        let message = serde_json::json!({"role": "assistant", "content": null, "reasoning_content": "r"});
        let normalized = normalize_message(message.as_object().unwrap(), false);
        assert_eq!(
            serde_json::to_string(&normalized).unwrap(),
            r#"{"thinking":"r","role":"assistant","reasoning_content":"r"}"#
        );
        let kept = normalize_message(message.as_object().unwrap(), true);
        assert_eq!(
            serde_json::to_string(&kept).unwrap(),
            r#"{"thinking":"r","role":"assistant","content":null,"reasoning_content":"r"}"#
        );
    }

    #[test]
    fn null_content_reaches_the_template_only_when_kept() {
        let template = ChatTemplate::from_text(
            "{% for m in messages %}{% if m.content is none %}none{% elif m.content is defined %}set{% else %}absent{% endif %}{% endfor %}",
        )
        .unwrap();
        let conversation = Conversation {
            messages: vec![serde_json::json!({"role": "assistant", "content": null})],
            tools: None,
            documents: None,
        };
        let render = |keep_null_keys| {
            template.render(&conversation, &RenderOptions { keep_null_keys, ..RenderOptions::default() }).unwrap()
        };
        assert_eq!(render(false), "absent");
        assert_eq!(render(true), "none");
    }
}
