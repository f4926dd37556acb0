//! Python bindings of parlance (`import parlance`), built with maturin: chat templates rendered as
//! transformers renders them (`ChatTemplate.apply_chat_template`), their output syntax
//! (`analyze` → `Format`), model output parsed whole or streamed (`Parser`), and conversations
//! rendered to attributed token ids with the turn bridge (`Renderer`); constrained decoding with
//! XGrammar's names (`grammar.rs`).
//!
//! JSON crosses the boundary through Python's own `json` module, so dictionaries keep their key
//! order (templates see it) and Python values that are not JSON are refused with a clear error.
//! Rendering and parsing release the GIL; renders are bounded in memory and time as the CLI's are
//! (the extension installs parlance's guard allocator).

mod grammar;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value as Json;

// Renders of untrusted templates are bounded in memory and wall time only under the guard (see
// `parlance::template::memory`); the extension's own allocations go through it, as the CLI's do.
#[global_allocator]
static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;

pyo3::create_exception!(parlance, TemplateError, PyValueError, "A chat template failed to load or render.");
pyo3::create_exception!(parlance, AnalyzeError, PyValueError, "A chat template's output syntax could not be derived.");

/// A Python value as JSON (through `json.dumps`, so key order is kept).
fn to_json(py: Python<'_>, value: &Bound<'_, PyAny>, what: &str) -> PyResult<Json> {
    let text: String = py
        .import("json")?
        .call_method1("dumps", (value,))
        .map_err(|e| PyTypeError::new_err(format!("{what} is not JSON-serializable: {e}")))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// JSON as a Python value (through `json.loads`).
fn from_json(py: Python<'_>, value: &Json) -> PyResult<Py<PyAny>> {
    Ok(py.import("json")?.call_method1("loads", (value.to_string(),))?.unbind())
}

/// A list of JSON objects from a Python list (of dicts), or `None`.
fn json_list(py: Python<'_>, value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<Json>>> {
    let Some(value) = value.filter(|v| !v.is_none()) else { return Ok(None) };
    match to_json(py, value, what)? {
        Json::Array(items) => Ok(Some(items)),
        other => Err(PyTypeError::new_err(format!("{what} must be a list, not {other}"))),
    }
}

/// A naive `datetime.datetime` (through its ISO text).
fn datetime(value: &Bound<'_, PyAny>) -> PyResult<chrono::NaiveDateTime> {
    let text: String = value
        .call_method0("isoformat")
        .and_then(|t| t.extract())
        .map_err(|_| PyTypeError::new_err("strftime_now must be a datetime.datetime"))?;
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(&text, f).ok())
        .ok_or_else(|| PyValueError::new_err(format!("strftime_now: a naive datetime, not {text}")))
}

/// Render options from keyword arguments: template variables, except `strftime_now=datetime(...)`,
/// which pins the clock the template's `strftime_now` reads (as transformers users patch it).
fn render_options(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<parlance::RenderOptions> {
    let mut options = parlance::RenderOptions::default();
    for (key, value) in kwargs.into_iter().flat_map(|k| k.iter()) {
        let key: String = key.extract()?;
        if key == "strftime_now" {
            options.now = Some(datetime(&value)?);
            continue;
        }
        let value = to_json(py, &value, &format!("keyword argument {key:?}"))?;
        options.variables.insert(key, value);
    }
    Ok(options)
}

/// A compiled chat template with its special tokens: load once, render many times.
#[pyclass(frozen, module = "parlance")]
struct ChatTemplate {
    inner: parlance::ChatTemplate,
}

#[pymethods]
impl ChatTemplate {
    /// Loads the template of a model folder, a `tokenizer_config.json` / `chat_template.json`, or a
    /// `.jinja` file (with the special tokens the folder's config names).
    #[staticmethod]
    fn from_pretrained(path: PathBuf) -> PyResult<ChatTemplate> {
        let inner = parlance::ChatTemplate::from_path(&path).map_err(|e| TemplateError::new_err(e.to_string()))?;
        Ok(ChatTemplate { inner })
    }

    /// Compiles template text (no special tokens: pass `bos_token` and the like as keyword
    /// arguments of `apply_chat_template`).
    #[staticmethod]
    fn from_string(text: &str) -> PyResult<ChatTemplate> {
        let inner = parlance::ChatTemplate::from_text(text).map_err(|e| TemplateError::new_err(e.to_string()))?;
        Ok(ChatTemplate { inner })
    }

    /// Renders a conversation as transformers' `apply_chat_template(..., tokenize=False)` does, byte
    /// for byte: `conversation` is a list of message dicts; keyword arguments are template
    /// variables (`enable_thinking=False`, `reasoning_effort="high"`, `bos_token=...`), except
    /// `strftime_now=datetime(...)`, which pins the date the template reads (default: now).
    #[pyo3(signature = (conversation, tools=None, documents=None, add_generation_prompt=false, continue_final_message=false, **kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn apply_chat_template(
        &self,
        py: Python<'_>,
        conversation: &Bound<'_, PyAny>,
        tools: Option<&Bound<'_, PyAny>>,
        documents: Option<&Bound<'_, PyAny>>,
        add_generation_prompt: bool,
        continue_final_message: bool,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let messages = json_list(py, Some(conversation), "conversation")?.unwrap_or_default();
        let conversation = parlance::Conversation {
            messages,
            tools: json_list(py, tools, "tools")?,
            documents: json_list(py, documents, "documents")?,
        };
        let mut options = render_options(py, kwargs)?;
        options.add_generation_prompt = add_generation_prompt;
        options.continue_final_message = continue_final_message.then(|| "content".to_owned());
        let template = &self.inner;
        py.detach(|| template.render(&conversation, &options)).map_err(|e| TemplateError::new_err(e.to_string()))
    }

    /// Where the template came from.
    #[getter]
    fn label(&self) -> String {
        self.inner.label().to_owned()
    }

    fn __repr__(&self) -> String {
        format!("ChatTemplate({:?})", self.inner.label())
    }
}

/// A chat template's output syntax (reasoning and tool-call markers), as `analyze` derives it.
#[pyclass(frozen, module = "parlance")]
struct Format {
    inner: Arc<parlance::Format>,
}

#[pymethods]
impl Format {
    /// The Format as a dict (the JSON `parlance analyze --json` prints).
    fn to_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let value = serde_json::to_value(&*self.inner).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        from_json(py, &value)
    }

    /// The Format as JSON text.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&*self.inner).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// A Format from JSON text (as `to_json` writes it, perhaps edited): unknown words in its typed
    /// fields are an error naming them.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Format> {
        let inner: parlance::Format =
            serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("not a Format: {e}")))?;
        Ok(Format { inner: Arc::new(inner) })
    }

    /// A readable summary: family, reasoning, every marker.
    fn summary(&self) -> String {
        self.inner.summary()
    }

    fn __repr__(&self) -> String {
        let family = serde_json::to_value(self.inner.tool_format).ok();
        let family = family.as_ref().and_then(Json::as_str).unwrap_or_default().to_owned();
        let reasoning = self.inner.reasoning.as_ref().map(|r| format!("{:?}…{:?}", r.start, r.end));
        format!("Format(tool_format={family:?}, reasoning={})", reasoning.unwrap_or_else(|| "None".into()))
    }
}

/// Derives a template's output syntax by rendering probe conversations through it. Keyword
/// arguments are template variables of every probe render (`bos_token="<s>"`).
#[pyfunction]
#[pyo3(signature = (template, **variables))]
fn analyze(py: Python<'_>, template: &ChatTemplate, variables: Option<&Bound<'_, PyDict>>) -> PyResult<Format> {
    let inner = &template.inner;
    let mut options = parlance::AnalyzeOptions::default();
    if let Some(variables) = variables {
        for (name, value) in variables.iter() {
            options.variables.insert(name.extract::<String>()?, to_json(py, &value, "a template variable")?);
        }
    }
    let format = py.detach(|| parlance::analyze(inner, &options)).map_err(|e| AnalyzeError::new_err(e.to_string()))?;
    Ok(Format { inner: Arc::new(format) })
}

/// The parser's request: tools, `tool_choice`, parallel calls and the thinking switch.
fn parse_options(
    py: Python<'_>,
    format: &parlance::Format,
    tools: Option<&Bound<'_, PyAny>>,
    tool_choice: &Bound<'_, PyAny>,
    parallel_tool_calls: bool,
    thinking: Option<bool>,
    id_seed: Option<u64>,
) -> PyResult<parlance::ParseOptions> {
    let tool_choice = match to_json(py, tool_choice, "tool_choice")? {
        Json::String(name) => parlance::parse::ToolChoice::from_name(&name),
        other => parlance::parse::ToolChoice::from_openai(&other).map_err(PyValueError::new_err)?,
    };
    let options = parlance::ParseOptions {
        tools: json_list(py, tools, "tools")?.unwrap_or_default(),
        tool_choice,
        parallel_tool_calls: Some(parallel_tool_calls),
        id_seed,
        ..Default::default()
    };
    Ok(options.with_thinking(format, thinking))
}

/// An OpenAI assistant message dict from a parse: `content`, `reasoning_content`, `tool_calls`
/// (`function.arguments` a JSON string), and `issues`.
fn message_dict(py: Python<'_>, message: &parlance::ParsedMessage) -> PyResult<Py<PyAny>> {
    let mut value = message.to_assistant_message(parlance::ArgumentsAs::String);
    if value.get("reasoning_content").is_none() {
        value["reasoning_content"] = Json::Null;
    }
    value["issues"] = serde_json::to_value(&message.issues).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    from_json(py, &value)
}

/// Parses model output with a template's Format: whole (`parse`) or streamed (`stream`).
#[pyclass(frozen, module = "parlance")]
struct Parser {
    inner: parlance::Parser,
}

#[pymethods]
impl Parser {
    /// `template_or_format`: a `ChatTemplate` (analyzed here) or a `Format`. `tool_choice`: `"auto"`,
    /// `"none"`, `"required"`, a function name, or an OpenAI `tool_choice` dict (`allowed_tools`
    /// too). `thinking`: whether the request switched thinking on or off (`None`: the template's
    /// default prompt), which decides whether output starts inside reasoning; `in_reasoning` says it
    /// outright (`False` for text whose reasoning a server already split off). `id_seed`: seed of
    /// the ids of calls the model wrote without one (`None`: fresh ids for every output).
    /// `truncated_calls`: `"keep"` (default) or `"drop"` a call the output ends inside (agents that
    /// execute calls drop them; the issue is reported either way).
    #[new]
    #[pyo3(signature = (template_or_format, tools=None, tool_choice=None, parallel_tool_calls=true, thinking=None, id_seed=None, in_reasoning=None, truncated_calls="keep"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        template_or_format: &Bound<'_, PyAny>,
        tools: Option<&Bound<'_, PyAny>>,
        tool_choice: Option<&Bound<'_, PyAny>>,
        parallel_tool_calls: bool,
        thinking: Option<bool>,
        id_seed: Option<u64>,
        in_reasoning: Option<bool>,
        truncated_calls: &str,
    ) -> PyResult<Parser> {
        let truncated_calls = match truncated_calls {
            "keep" => parlance::TruncatedCalls::Keep,
            "drop" => parlance::TruncatedCalls::Drop,
            other => {
                return Err(PyValueError::new_err(format!("truncated_calls: {other:?} is not \"keep\" or \"drop\"")));
            }
        };
        let format = if let Ok(format) = template_or_format.cast::<Format>() {
            format.get().inner.clone()
        } else if let Ok(template) = template_or_format.cast::<ChatTemplate>() {
            analyze(py, template.get(), None)?.inner
        } else {
            return Err(PyTypeError::new_err("Parser takes a ChatTemplate or a Format"));
        };
        let auto = pyo3::types::PyString::new(py, "auto");
        let choice = tool_choice.cloned().unwrap_or_else(|| auto.into_any());
        let mut options = parse_options(py, &format, tools, &choice, parallel_tool_calls, thinking, id_seed)?;
        options.in_reasoning = in_reasoning.or(options.in_reasoning);
        options.truncated_calls = truncated_calls;
        Ok(Parser { inner: parlance::Parser::new(&format, &options) })
    }

    /// The whole output as an OpenAI assistant message dict, with the `issues` found.
    fn parse(&self, py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
        let parser = &self.inner;
        let message = py.detach(|| parser.parse(text));
        message_dict(py, &message)
    }

    /// A stream: `push(text)` returns OpenAI delta dicts as they are decided, `finish()` the rest;
    /// the deltas add up to what `parse` returns for the whole text.
    fn stream(&self) -> Stream {
        Stream { inner: Mutex::new((self.inner.stream(), false)) }
    }
}

/// A streamed parse (see `Parser.stream`).
#[pyclass(frozen, module = "parlance")]
struct Stream {
    /// The parser, and whether `finish` was called.
    inner: Mutex<(parlance::StreamParser, bool)>,
}

/// Deltas as a list of dicts.
fn deltas_list(py: Python<'_>, deltas: &[parlance::Delta]) -> PyResult<Py<PyAny>> {
    // OpenAI's streaming shape (`{"content"}`, `{"reasoning_content"}`, `{"tool_calls": [...]}`),
    // what servers forward as `choices[0].delta`.
    let value = Json::Array(deltas.iter().map(parlance::Delta::to_openai).collect());
    from_json(py, &value)
}

#[pymethods]
impl Stream {
    /// Feeds a chunk of output; returns the deltas it decided.
    fn push(&self, py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
        let mut guard = self.inner.lock().map_err(|_| PyRuntimeError::new_err("the stream's lock is poisoned"))?;
        let (stream, finished) = &mut *guard;
        if *finished {
            return Err(PyRuntimeError::new_err("the stream is finished"));
        }
        let deltas = py.detach(|| stream.push(text));
        deltas_list(py, &deltas)
    }

    /// Ends the stream; returns the last deltas. With those of `push`, they add up to `message()`,
    /// which is what `Parser.parse` returns for the whole text.
    fn finish(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut guard = self.inner.lock().map_err(|_| PyRuntimeError::new_err("the stream's lock is poisoned"))?;
        let (stream, finished) = &mut *guard;
        if *finished {
            return Err(PyRuntimeError::new_err("the stream is finished"));
        }
        *finished = true;
        let deltas = stream.finish();
        deltas_list(py, &deltas)
    }

    /// The message so far (after `finish`, the whole message, as `Parser.parse` gives it).
    fn message(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let guard = self.inner.lock().map_err(|_| PyRuntimeError::new_err("the stream's lock is poisoned"))?;
        message_dict(py, &guard.0.message())
    }
}

/// Renders conversations to token ids attributed to their messages and bridges turns without
/// re-tokenizing what the model generated (`parlance::Renderer`), for one template and tokenizer.
#[pyclass(frozen, module = "parlance")]
struct Renderer {
    inner: parlance::Renderer,
}

#[pymethods]
impl Renderer {
    /// `tokenizer`: a `tokenizer.json` or the model folder holding it, a transformers tokenizer or a
    /// `tokenizers.Tokenizer`. `format`: the template's
    /// `Format` when it is already known (else analyzed here). Keyword arguments are the template
    /// variables of every render (`enable_thinking=True`, `strftime_now=datetime(...)`).
    #[new]
    #[pyo3(signature = (template, tokenizer, format=None, **kwargs))]
    fn new(
        py: Python<'_>,
        template: &ChatTemplate,
        tokenizer: &Bound<'_, PyAny>,
        format: Option<&Format>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Renderer> {
        let format = match format {
            Some(format) => format.inner.clone(),
            None => analyze(py, template, None)?.inner,
        };
        let tokenizer = grammar::load_tokenizer(tokenizer)?;
        let options = render_options(py, kwargs)?;
        let chat = template.inner.clone();
        let inner = py
            .detach(|| parlance::Renderer::new(chat, format, Arc::new(tokenizer), options))
            .map_err(|e| TemplateError::new_err(e.to_string()))?;
        Ok(Renderer { inner })
    }

    /// `(ids, message_indices)`: the tokenized render (ids equal the tokenizer's encoding of
    /// `apply_chat_template`'s text) and, per id, the index of the message it came from (`-1` for
    /// the template's own text).
    #[pyo3(signature = (conversation, tools=None, add_generation_prompt=true))]
    fn render(
        &self,
        py: Python<'_>,
        conversation: &Bound<'_, PyAny>,
        tools: Option<&Bound<'_, PyAny>>,
        add_generation_prompt: bool,
    ) -> PyResult<(Vec<u32>, Vec<i32>)> {
        let conversation = parlance::Conversation {
            messages: json_list(py, Some(conversation), "conversation")?.unwrap_or_default(),
            tools: json_list(py, tools, "tools")?,
            documents: None,
        };
        let renderer = self.inner.with_generation_prompt(add_generation_prompt);
        let rendered =
            py.detach(|| renderer.render(&conversation)).map_err(|e| TemplateError::new_err(e.to_string()))?;
        Ok((rendered.ids, rendered.message_indices))
    }

    /// The loss mask of a training sample: per id of `render(conversation, tools, False)`, whether
    /// it belongs to an assistant message (what the model generated).
    #[pyo3(signature = (conversation, tools=None))]
    fn loss_mask(
        &self,
        py: Python<'_>,
        conversation: &Bound<'_, PyAny>,
        tools: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<bool>> {
        let messages = json_list(py, Some(conversation), "conversation")?.unwrap_or_default();
        let conversation = parlance::Conversation { messages, tools: json_list(py, tools, "tools")?, documents: None };
        let renderer = self.inner.with_generation_prompt(false);
        let rendered =
            py.detach(|| renderer.render(&conversation)).map_err(|e| TemplateError::new_err(e.to_string()))?;
        Ok(rendered.assistant_mask(&conversation.messages))
    }

    /// The next prompt's ids: `prev_prompt_ids` and `prev_completion_ids` kept as they are (cut
    /// after the first stop token, or closed with the template's turn close), then `new_messages`
    /// (tool results, a user message; never an assistant message) and the generation prompt, as the
    /// template writes them.
    #[pyo3(signature = (prev_prompt_ids, prev_completion_ids, new_messages, tools=None))]
    fn bridge(
        &self,
        py: Python<'_>,
        prev_prompt_ids: Vec<u32>,
        prev_completion_ids: Vec<u32>,
        new_messages: &Bound<'_, PyAny>,
        tools: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<u32>> {
        let new_messages = json_list(py, Some(new_messages), "new_messages")?.unwrap_or_default();
        let tools = json_list(py, tools, "tools")?;
        let prompt = parlance::RenderedTokens::unattributed(prev_prompt_ids, 0);
        let renderer = &self.inner;
        let next = py
            .detach(|| renderer.bridge(&prompt, &prev_completion_ids, &new_messages, tools.as_deref()))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(next.ids)
    }

    /// The ids the model stops on.
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.inner.stop_token_ids().to_vec()
    }

    /// The assistant message a client sends back, from a `Parser.parse` result (its `issues` left
    /// out); where the template reads past reasoning from a key of its own (MiniCPM3's `thought`),
    /// the reasoning under that key too, so the next render writes it back.
    fn to_assistant_message(&self, py: Python<'_>, parsed: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let mut message = to_json(py, parsed, "parsed")?;
        let field = self.inner.format().reasoning_details.as_ref().and_then(|d| d.field.clone());
        if let Some(object) = message.as_object_mut() {
            object.remove("issues");
            if object.get("reasoning_content").is_some_and(Json::is_null) {
                object.remove("reasoning_content");
            }
            if let (Some(field), Some(reasoning)) = (field, object.get("reasoning_content").cloned()) {
                object.insert(field, reasoning);
            }
        }
        from_json(py, &message)
    }
}

/// The extension module, re-exported by `parlance/__init__.py`.
#[pymodule]
fn _parlance(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ChatTemplate>()?;
    m.add_class::<Format>()?;
    m.add_class::<Parser>()?;
    m.add_class::<Stream>()?;
    m.add_class::<Renderer>()?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add("TemplateError", m.py().get_type::<TemplateError>())?;
    m.add("AnalyzeError", m.py().get_type::<AnalyzeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    grammar::register(m)?;
    Ok(())
}
