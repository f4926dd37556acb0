//! Probe conversations and the assistant output they make a template render.
//!
//! The unit of analysis is an assistant *output*: the text the model itself would have to write for
//! a given assistant message. It is the rendered conversation ending in that message, minus the
//! prompt the model saw (the conversation before it, rendered with the generation prompt), minus the
//! turn's closing text. Sentinel strings stand for content, reasoning, names and values so that each
//! part can be found again in the render.

use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use crate::markers::{common_prefix, common_prefix_angle, common_suffix};
use crate::message::Conversation;
use crate::message::null_content_beside_calls;
use crate::template::{ChatTemplate, RenderOptions, RunBudget};

pub(crate) const USER: &str = "PLNC user question";
pub(crate) const USER_2: &str = "PLNC second question";
pub(crate) const CONTENT: &str = "PLNC_ANSWER_ALPHA";
pub(crate) const CONTENT_2: &str = "PLNC_ANSWER_BRAVO";
pub(crate) const REASONING: &str = "PLNC_THOUGHT_CHARLIE";
pub(crate) const FN_1: &str = "plnc_fn_alpha";
pub(crate) const FN_2: &str = "plnc_fn_bravo";
pub(crate) const ARG_1: &str = "plnc_arg_one";
pub(crate) const ARG_2: &str = "plnc_arg_two";
pub(crate) const VALUE_1: &str = "PLNC_VALUE_ONE";
pub(crate) const VALUE_2: &str = "PLNC_VALUE_TWO";
/// Call ids of 9 alphanumeric characters: Mistral templates refuse any other shape.
pub(crate) const ID_1: &str = "call00001";
pub(crate) const ID_2: &str = "call99999";

/// Renders probe conversations through one template.
#[derive(Clone)]
pub(crate) struct Probe {
    template: ChatTemplate,
    variables: IndexMap<String, Json>,
    /// Messages before the assistant turn under study (a user message, maybe after a system one).
    prefix: Vec<Json>,
    /// Variables the template needs but nobody gave, set to `""` because nothing rendered without
    /// them (workaround `undeclared-variables-set-empty`).
    pub(crate) emptied: Vec<String>,
    /// Of `emptied`, the names the template calls: bound to a function returning `""`.
    functions: Vec<String>,
    /// Messages with tool calls render with `content: null` (workaround `calls-with-null-content`).
    null_content_with_calls: bool,
    /// The end of the generation prompt that outputs continue (`Format::output_prefix`): put in
    /// front of every output, as the model's own first bytes.
    pub(crate) opened: String,
    /// The input shape the template requires.
    shape: InputShape,
    /// The first render that hit a limit (fuel, memory, wall time, ...), shared by every copy of
    /// this probe: once set, no render runs again, so an expensive template costs one render's
    /// budget, not one per probe.
    limit_hit: Arc<Mutex<Option<String>>>,
    /// The whole analysis's wall-clock budget, shared by every render.
    budget: RunBudget,
    /// Whitespace the template writes after its last tag, once at the end of every render
    /// (R2E-Gym's Qwen3 template ends `{%- endif %} `): no turn's, taken off every render.
    trailer: String,
}

/// One assistant message as the model would write it.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    /// What the model writes (the turn minus the generation prompt); the turn end is still on it.
    pub text: String,
    /// The generation prompt the model saw before writing.
    pub generation_prompt: String,
    /// Generation-prompt text that the rendered turn does not repeat (e.g. an opened `<think>`
    /// that a turn without reasoning omits).
    pub unrepeated_prompt: String,
    /// Read from the turn rendered as history (the template writes the last turn otherwise).
    pub from_history: bool,
}

/// The tools probe conversations declare.
pub(crate) fn probe_tools() -> Vec<Json> {
    let tool = |name: &str, arg: &str| {
        json!({"type": "function", "function": {
            "name": name,
            "description": "Probe tool.",
            "parameters": {"type": "object", "properties": {arg: {"type": "string", "description": "Probe argument."}}, "required": [arg]}
        }})
    };
    vec![tool(FN_1, ARG_1), tool(FN_2, ARG_2)]
}

/// A tool call of the probe shape.
pub(crate) fn call(id: &str, name: &str, arguments: Json) -> Json {
    let id = if NAMED_IDS.get() { format!("functions.{name}:{}", usize::from(id == ID_2)) } else { id.to_owned() };
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

std::thread_local! {
    /// Whether probe calls carry ids that name their function (`functions.NAME:INDEX`), as Kimi
    /// K2's own templates expect: they write the id and never `function.name`.
    static NAMED_IDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether probe calls carry ids that name their function now.
pub(crate) fn named_ids() -> bool {
    NAMED_IDS.get()
}

/// Runs `f` with probe calls carrying ids that name their function (see `NAMED_IDS`).
pub(crate) fn with_named_ids<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            NAMED_IDS.set(self.0);
        }
    }
    let _reset = Reset(NAMED_IDS.replace(true));
    f()
}

/// The input shapes a template may require, tried in order until a conversation renders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct InputShape {
    /// Every render declares the probe tools (templates that read `tools | length` unguarded).
    pub tools_always: bool,
    /// Message content as a list of parts (`[{"type": "text", "text": …}]`), for templates that
    /// read `message['content'][0]['text']`.
    pub content_parts: bool,
}

impl InputShape {
    const ALL: [InputShape; 4] = [
        InputShape { tools_always: false, content_parts: false },
        InputShape { tools_always: true, content_parts: false },
        InputShape { tools_always: false, content_parts: true },
        InputShape { tools_always: true, content_parts: true },
    ];

    /// How the shape is described in errors and in `Format::workarounds`.
    pub(crate) fn describe(self) -> &'static str {
        match (self.tools_always, self.content_parts) {
            (false, false) => "messages as given",
            (true, false) => "tools declared in every render",
            (false, true) => "content as a list of text parts",
            (true, true) => "tools in every render and content as text parts",
        }
    }
}

impl Probe {
    /// A probe whose prefix renders, or what was tried: each input shape with the first error the
    /// template raised on it.
    ///
    /// Shapes are tried in order (`InputShape::ALL`), with a user message alone and after a system
    /// message. When nothing renders, the variables the template reads but nobody defines
    /// (firefunction-v2 concatenates `functions` and `datetime`, which a caller must pass) are set
    /// to `""` and the shapes are tried again: the analysis then describes the template as such a
    /// caller sees it.
    pub(crate) fn new(
        template: &ChatTemplate,
        variables: IndexMap<String, Json>,
        budget: RunBudget,
    ) -> Result<Probe, Vec<String>> {
        let mut tried = Vec::new();
        let limit_hit = Arc::new(Mutex::new(None));
        let first = (Vec::new(), Vec::new());
        if let Some(probe) = Probe::with_variables(template, variables.clone(), first, (&limit_hit, budget), &mut tried)
        {
            return Ok(probe);
        }
        if limit_hit.lock().map(|hit| hit.is_some()).unwrap_or(true) {
            return Err(tried);
        }
        let mut variables = variables;
        let mut emptied = Vec::new();
        let mut functions = Vec::new();
        let sources: Vec<&str> = template.names().filter_map(|name| template.source(name)).collect();
        for name in template.undeclared_variables() {
            if !variables.contains_key(&name) {
                // A name the template calls is a function its caller provides: it returns "".
                let called = sources.iter().any(|source| source.contains(&format!("{name}(")));
                if called {
                    functions.push(name.clone());
                } else {
                    variables.insert(name.clone(), json!(""));
                }
                emptied.push(name);
            }
        }
        if emptied.is_empty() {
            return Err(tried);
        }
        let mut tried_emptied = Vec::new();
        let probe = Probe::with_variables(
            template,
            variables,
            (emptied.clone(), functions),
            (&limit_hit, budget),
            &mut tried_emptied,
        );
        probe.ok_or_else(|| {
            tried.extend(tried_emptied.into_iter().map(|t| format!("{t} (with {emptied:?} set empty)")));
            tried
        })
    }

    /// `(emptied, functions)`: the undeclared names set to `""`, and those of them bound to a
    /// function returning `""`.
    fn with_variables(
        template: &ChatTemplate,
        variables: IndexMap<String, Json>,
        (emptied, functions): (Vec<String>, Vec<String>),
        (limit_hit, budget): (&Arc<Mutex<Option<String>>>, RunBudget),
        tried: &mut Vec<String>,
    ) -> Option<Probe> {
        let trailer = document_trailer(template);
        let prefixes = [
            vec![json!({"role": "user", "content": USER})],
            vec![json!({"role": "system", "content": "PLNC system prompt"}), json!({"role": "user", "content": USER})],
        ];
        for shape in InputShape::ALL {
            let mut first_error = None;
            for prefix in &prefixes {
                let probe = Probe {
                    template: template.clone(),
                    variables: variables.clone(),
                    prefix: prefix.clone(),
                    emptied: emptied.clone(),
                    functions: functions.clone(),
                    null_content_with_calls: false,
                    opened: String::new(),
                    shape,
                    limit_hit: Arc::clone(limit_hit),
                    budget,
                    trailer: trailer.clone(),
                };
                let assistant = json!({"role": "assistant", "content": CONTENT});
                let renders = probe
                    .render_result(&[assistant], false, false, &[])
                    .and_then(|_| probe.render_result(&[], false, true, &[]));
                match renders {
                    // A shape fits only where the messages' text renders (a string read as a
                    // list of parts renders nothing, without an error).
                    Ok(text) if !text.contains(USER) => {
                        first_error.get_or_insert_with(|| "the user message's text does not render".to_owned());
                    }
                    Ok(_) => return Some(probe),
                    Err(err) => {
                        first_error.get_or_insert(err);
                    }
                }
            }
            tried.push(format!("{}: {}", shape.describe(), first_error.unwrap_or_default()));
            if limit_hit.lock().map(|hit| hit.is_some()).unwrap_or(true) {
                // Other shapes would cost the same again.
                break;
            }
        }
        None
    }

    /// This probe over the template with Markup's `+` not escaping (workaround
    /// `markup-add-unescaped`), when the template adds strings to Markup.
    pub(crate) fn with_markup_add_unescaped(&self) -> Option<Probe> {
        let template = self.template.with_markup_add_unescaped()?.ok()?;
        let unescaped = Probe { template, ..self.clone() };
        // Only where it changes what a turn renders (a `+` elsewhere may never meet Markup).
        let renders = |probe: &Probe| {
            let calls = vec![call(ID_1, FN_1, json!({ARG_1: VALUE_1}))];
            let content = json!({"role": "assistant", "content": CONTENT});
            (probe.output_with_calls(calls, &[]).map(|o| o.text), probe.output(&content, false, &[]).map(|o| o.text))
        };
        (renders(&unescaped) != renders(self)).then_some(unescaped)
    }

    /// This probe with the other prefix (a user message alone, or after a system message), when it
    /// renders.
    pub(crate) fn with_other_prefix(&self) -> Option<Probe> {
        let system = self.prefix.first().is_some_and(|m| m["role"] == "system");
        let probe = if system {
            Probe { prefix: vec![json!({"role": "user", "content": USER})], ..self.clone() }
        } else {
            self.with_system("PLNC system prompt")
        };
        probe.if_it_renders()
    }

    /// This probe with tools declared in every render (a template may render the conversation
    /// otherwise without tools: NeMo-RL's reward-model template quotes it in a judging prompt),
    /// when that renders and is not already its shape.
    pub(crate) fn with_tools_always(&self) -> Option<Probe> {
        if self.shape.tools_always {
            return None;
        }
        let probe = Probe { shape: InputShape { tools_always: true, ..self.shape }, ..self.clone() };
        probe.if_it_renders()
    }

    /// This probe, when a conversation and the generation prompt render through it.
    fn if_it_renders(self) -> Option<Probe> {
        let assistant = json!({"role": "assistant", "content": CONTENT});
        (self.render(&[assistant], false, false, &[]).is_some() && self.render(&[], false, true, &[]).is_some())
            .then_some(self)
    }

    /// The first probe render that hit a limit, if one did.
    pub(crate) fn limit_hit(&self) -> Option<String> {
        self.limit_hit.lock().ok().and_then(|hit| hit.clone())
    }

    /// The input shape this probe renders with.
    pub(crate) fn shape(&self) -> InputShape {
        self.shape
    }

    /// This probe over the template with `list.append` ignored (workaround `list-append-ignored`),
    /// when that is what makes a message with a tool call render: Kimi-K2 queues each call's id
    /// with `ids.append(...)` for the tool responses that follow, which transformers' immutable
    /// sandbox refuses as minijinja does. The assistant turn never reads the queue, so ignoring
    /// the append changes nothing in the output under study; `None` when the call renders
    /// already, or still raises without `append`.
    pub(crate) fn with_list_append_ignored(&self) -> Option<Probe> {
        let calls = || vec![call(ID_1, FN_1, json!({ARG_1: VALUE_1}))];
        if self.output_with_calls(calls(), &[]).is_some() {
            return None;
        }
        let template = self.template.with_list_append_ignored().ok()?;
        let lenient = Probe { template, ..self.clone() };
        lenient.output_with_calls(calls(), &[]).map(|_| lenient)
    }

    /// This probe with messages that hold tool calls rendered with `content: null` (workaround
    /// `calls-with-null-content`), when only that makes the calls render: DeepSeek V3's template
    /// writes calls under `message['content'] is none`, which transformers never passes (it drops
    /// `null` keys) but the OpenAI wire shape of such a message has. `None` when the calls render
    /// already, or do not render with `null` content either.
    pub(crate) fn with_null_content_with_calls(&self) -> Option<Probe> {
        let renders = |probe: &Probe| {
            [json!({ARG_1: VALUE_1}), json!(json!({ARG_1: VALUE_1}).to_string())].into_iter().any(|arguments| {
                probe.output_with_calls(vec![call(ID_1, FN_1, arguments)], &[]).is_some_and(|o| o.text.contains(FN_1))
            })
        };
        if renders(self) {
            return None;
        }
        let lenient = Probe { null_content_with_calls: true, ..self.clone() };
        renders(&lenient).then_some(lenient)
    }

    /// This probe with a system message holding `system` before the user message.
    pub(crate) fn with_system(&self, system: &str) -> Probe {
        let prefix = vec![json!({"role": "system", "content": system}), json!({"role": "user", "content": USER})];
        Probe { prefix, ..self.clone() }
    }

    /// The texts of the template's named templates.
    pub(crate) fn template_sources(&self) -> Vec<&str> {
        self.template.names().filter_map(|name| self.template.source(name)).collect()
    }

    /// Renders `prefix + messages`; `None` if the template raises.
    pub(crate) fn render(
        &self,
        messages: &[Json],
        with_tools: bool,
        add_generation_prompt: bool,
        extra: &[(&str, Json)],
    ) -> Option<String> {
        self.render_result(messages, with_tools, add_generation_prompt, extra).ok()
    }

    /// Renders `prefix + messages`, or the template's error (as text, cut for display).
    fn render_result(
        &self,
        messages: &[Json],
        with_tools: bool,
        add_generation_prompt: bool,
        extra: &[(&str, Json)],
    ) -> Result<String, String> {
        let mut all = self.prefix.clone();
        all.extend(messages.iter().cloned());
        if self.null_content_with_calls {
            null_content_beside_calls(&mut all);
        }
        if self.shape.content_parts {
            for message in &mut all {
                if let Some(text) = message.get("content").and_then(Json::as_str).map(str::to_owned) {
                    message["content"] = json!([{"type": "text", "text": text}]);
                }
            }
        }
        let tools = (with_tools || self.shape.tools_always).then(probe_tools);
        let conversation = Conversation { messages: all, tools, documents: None };
        let mut variables = self.variables.clone();
        for (name, value) in extra {
            variables.insert((*name).to_owned(), value.clone());
        }
        let options = RenderOptions {
            add_generation_prompt,
            variables,
            now: chrono::NaiveDate::from_ymd_opt(2025, 1, 15).and_then(|d| d.and_hms_opt(12, 0, 0)),
            keep_null_keys: self.null_content_with_calls,
            empty_functions: self.functions.clone(),
            budget: Some(self.budget),
            ..RenderOptions::default()
        };
        if let Some(hit) = self.limit_hit() {
            return Err(hit);
        }
        let rendered = self.template.render(&conversation, &options);
        rendered
            .map(|mut text| {
                if !self.trailer.is_empty() && text.ends_with(&self.trailer) {
                    text.truncate(text.len() - self.trailer.len());
                }
                text
            })
            .map_err(|err| {
                let text = err.to_string();
                let cut = text.char_indices().nth(300).map_or(text.len(), |(at, _)| at);
                let text = text[..cut].to_owned();
                if matches!(err, crate::template::TemplateError::Limit { .. })
                    && let Ok(mut hit) = self.limit_hit.lock()
                {
                    hit.get_or_insert_with(|| text.clone());
                }
                text
            })
    }

    /// Renders `assistant` followed by a second user message: the turn as history.
    pub(crate) fn render_as_history(
        &self,
        assistant: &Json,
        add_generation_prompt: bool,
        extra: &[(&str, Json)],
    ) -> Option<String> {
        let next = json!({"role": "user", "content": USER_2});
        self.render(&[assistant.clone(), next], false, add_generation_prompt, extra)
    }

    /// The generation prompt: what `add_generation_prompt` appends to the prefix.
    pub(crate) fn generation_prompt(&self, with_tools: bool, extra: &[(&str, Json)]) -> Option<String> {
        let closed = self.render(&[], with_tools, false, extra)?;
        let open = self.render(&[], with_tools, true, extra)?;
        Some(prompt_added(&closed, &open))
    }

    /// The output for `assistant`, rendered as the last message.
    pub(crate) fn output(&self, assistant: &Json, with_tools: bool, extra: &[(&str, Json)]) -> Option<Output> {
        let closed = self.render(&[], with_tools, false, extra)?;
        let open = self.render(&[], with_tools, true, extra)?;
        let full = self.render(std::slice::from_ref(assistant), with_tools, false, extra)?;
        let mut output = split_output(&closed, &open, &full);
        output.text.insert_str(0, &self.opened);
        Some(output)
    }

    /// The output for an assistant message holding `calls`, trying `content` absent, then null,
    /// then empty (templates differ on each), then a text the call turn does not print.
    pub(crate) fn output_with_calls(&self, calls: Vec<Json>, extra: &[(&str, Json)]) -> Option<Output> {
        self.output_with_calls_and(calls, &[], extra)
    }

    /// Like `output_with_calls`, with extra message `fields` (e.g. `reasoning_content`).
    pub(crate) fn output_with_calls_and(
        &self,
        calls: Vec<Json>,
        fields: &[(&str, Json)],
        extra: &[(&str, Json)],
    ) -> Option<Output> {
        let mut bare = json!({"role": "assistant", "tool_calls": calls});
        for (key, value) in fields {
            bare[*key] = value.clone();
        }
        let mut with_null = bare.clone();
        with_null["content"] = Json::Null;
        let mut with_empty = bare.clone();
        with_empty["content"] = json!("");
        let names: Vec<String> = bare["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.pointer("/function/name").and_then(Json::as_str).map(str::to_owned))
            .collect();
        let shows_calls = |o: &Output| names.iter().all(|n| o.text.contains(n.as_str()));
        // `content` absent, then null, then empty (templates differ on each); with `''` a template
        // may write an empty message before the calls.
        let last = self
            .output(&bare, true, extra)
            .or_else(|| self.output(&with_null, true, extra))
            .or_else(|| self.output(&with_empty, true, extra).map(|o| self.without_empty_message(o, extra)))
            .or_else(|| self.output_with_unprinted_content(&bare, extra));
        match last {
            Some(output) if shows_calls(&output) => Some(output),
            // A template may write the last assistant message without its calls (NVIDIA's
            // Nemotron JSON template keeps only its content): the turn as history shows them.
            last => [&bare, &with_null, &with_empty]
                .into_iter()
                .find_map(|message| self.output_as_history(message, extra).filter(|o| shows_calls(o)))
                .or(last),
        }
    }

    /// The call turn `message` rendered with a content text that the turn does not print: a
    /// template that reads the content of every call turn (Command A Reasoning indexes
    /// `message.content[0]`) raises on absent, null and empty content alike. `None` when it raises
    /// anyway or prints the text.
    pub(crate) fn output_with_unprinted_content(&self, message: &Json, extra: &[(&str, Json)]) -> Option<Output> {
        let mut with_text = message.clone();
        with_text["content"] = json!(CONTENT);
        self.output(&with_text, true, extra).filter(|o| !o.text.contains(CONTENT))
    }

    /// A call turn rendered with `content: ''` without the empty message a template may write
    /// before the calls, followed by a new message header (functionary v2.2's `all\n<|content|>`
    /// then `\n<|from|>assistant\n<|recipient|>`): no model writes an empty message, and without
    /// it the calls continue the prompt's own header. Found as what an empty content-only turn
    /// shares with the call turn, when the rest opens with the generation prompt.
    fn without_empty_message(&self, mut output: Output, extra: &[(&str, Json)]) -> Output {
        let header = output.generation_prompt.trim();
        let Some(empty) = self.output(&json!({"role": "assistant", "content": ""}), true, extra) else { return output };
        // Both start with what the prompt left open (`self.opened`), which the calls keep.
        let opened = self.opened.len();
        let shared = common_prefix(&empty.text, &output.text);
        if header.is_empty() || shared <= opened || empty.text[opened..shared].trim().is_empty() {
            return output;
        }
        if let Some(calls) = output.text[shared..].trim_start().strip_prefix(header) {
            output.text = format!("{}{calls}", self.opened);
        }
        output
    }

    /// The output for `assistant` read from a history render (the turn followed by a user
    /// message): the render after the prompt, minus what follows the turn, found as the text a
    /// content-only turn in its place is followed by too. The turn end is not on it.
    pub(crate) fn output_as_history(&self, assistant: &Json, extra: &[(&str, Json)]) -> Option<Output> {
        let next = json!({"role": "user", "content": USER_2});
        let closed = self.render(&[], true, false, extra)?;
        let open = self.render(&[], true, true, extra)?;
        let full = self.render(&[assistant.clone(), next.clone()], true, false, extra)?;
        let plain = json!({"role": "assistant", "content": CONTENT_2});
        let reference = self.render(&[plain, next], true, false, extra)?;
        let mut output = split_output(&closed, &open, &full);
        let reference = split_output(&closed, &open, &reference);
        let after = common_suffix(&output.text, &reference.text);
        // What follows the turn holds its end, then the next user message: that message starts
        // with the header the first user message has too.
        let removed = &output.text[output.text.len() - after..];
        let header = |text: &str, sentinel: &str| text.find(sentinel).map(|at| text[..at].to_owned());
        let turn_end = match (header(removed, USER_2), header(&closed, USER)) {
            (Some(before_next), Some(before_first)) => {
                // The header: the first user message's last line, from its first marker.
                let line = before_first.trim_end().rfind('\n').map_or(0, |at| at + 1);
                let header = before_first[line..].find(['<', '[']).map_or("", |at| &before_first[line + at..]);
                match before_next.strip_suffix(header) {
                    Some(rest) if !header.trim().is_empty() => rest.len(),
                    _ => 0,
                }
            }
            _ => 0,
        };
        output.text.truncate(output.text.len() - after + turn_end);
        output.text.insert_str(0, &self.opened);
        output.from_history = true;
        Some(output)
    }
}

/// The whitespace every render of `template` ends with because its source does after the last
/// tag (read as transformers' Jinja2 environment reads it: a `-` on the tag strips it, `trim_blocks`
/// drops the newline right after a block or comment tag, and a single trailing newline of the
/// source is dropped); empty when there is none, or when the template's sources disagree.
fn document_trailer(template: &ChatTemplate) -> String {
    let trailers: Vec<String> = template.names().filter_map(|name| template.source(name)).map(source_trailer).collect();
    match trailers.split_first() {
        Some((first, rest)) if rest.iter().all(|t| t == first) => first.clone(),
        _ => String::new(),
    }
}

fn source_trailer(source: &str) -> String {
    let Some(close) = ["}}", "%}", "#}"].iter().filter_map(|c| source.rfind(c).map(|at| (at, *c))).max() else {
        return String::new();
    };
    let (at, closer) = close;
    let mut tail = &source[at + closer.len()..];
    if !tail.trim().is_empty() || source[..at].ends_with('-') {
        return String::new();
    }
    if closer != "}}" {
        tail = tail.strip_prefix("\r\n").or_else(|| tail.strip_prefix('\n')).unwrap_or(tail);
    }
    let tail = tail.strip_suffix("\r\n").or_else(|| tail.strip_suffix('\n')).unwrap_or(tail);
    tail.to_owned()
}

/// Where the history form of the probe's user turn ends in `text` (after the user's text and the
/// marker that closes it: `question[/INST]`), for outputs that carry it because the prompt and
/// the history render that turn differently. `None` when `text` holds no user text.
pub(crate) fn after_user_turn(text: &str) -> Option<usize> {
    let at = text.rfind(USER)? + USER.len();
    let after = &text[at..];
    let closer = match after.chars().next()? {
        '<' => after.find('>')? + 1,
        '[' => after.find(']')? + 1,
        _ => return None,
    };
    Some(at + closer)
}

/// Where `text` stops repeating `prompt` when whitespace is ignored on both sides: the end of the
/// last character of `prompt` that is not whitespace, matched in `text`. `None` when `text` does
/// not repeat every such character in order, or `prompt` has none.
fn repeats_modulo_whitespace(text: &str, prompt: &str) -> Option<usize> {
    let mut text_chars = text.char_indices().filter(|(_, c)| !c.is_whitespace());
    let mut end = None;
    for p in prompt.chars().filter(|c| !c.is_whitespace()) {
        let (at, c) = text_chars.next()?;
        if c != p {
            return None;
        }
        end = Some(at + c.len_utf8());
    }
    // As much of the prompt's own trailing whitespace as the text repeats.
    let end = end?;
    let trailing = &prompt[prompt.trim_end().len()..];
    let repeated: usize =
        text[end..].chars().zip(trailing.chars()).take_while(|(a, b)| a == b).map(|(a, _)| a.len_utf8()).sum();
    Some(end + repeated)
}

/// What `add_generation_prompt` adds to the render `closed`, giving `open`: the text after their
/// shared start, or, where the template also writes something earlier when asked for the prompt
/// (a default system block: OpenVINO's Onyx), the text after the whole conversation.
fn prompt_added(closed: &str, open: &str) -> String {
    if open.len() > closed.len()
        && !closed.is_empty()
        && !open.starts_with(closed)
        && let Some(at) = open.rfind(closed)
    {
        return open[at + closed.len()..].to_owned();
    }
    open[common_prefix_angle(closed, open)..].to_owned()
}

/// The output of an assistant turn from three renders of one conversation: without the turn
/// (`closed`), the same with the generation prompt (`open`), and with the turn as the last message
/// (`full`).
pub(crate) fn split_output(closed: &str, open: &str, full: &str) -> Output {
    let generation_prompt = prompt_added(closed, open);
    let shared = common_prefix_angle(closed, full);
    // Text the template writes after every conversation (Command-R+'s closing system turn, an
    // end-of-text token) follows the turn too: it is not the turn's.
    let after_all = &closed[shared..];
    let turn = match full.strip_suffix(after_all) {
        Some(rest) if !after_all.is_empty() && rest.len() >= shared => {
            // `closed = A + T` and `full = A + X + T` split two ways when X ends as A does (both
            // end `<|START_OF_TURN_TOKEN|>`): the turn is the X that starts where A's shared
            // ending starts, so it begins with its own header.
            // Of the splits, the one whose turn starts with the generation prompt.
            let back = common_suffix(&rest[..shared], &rest[shared..]);
            let prompt = generation_prompt.trim();
            let k = (0..=back)
                .filter(|k| rest.is_char_boundary(shared - k))
                .find(|k| !prompt.is_empty() && rest[shared - k..].starts_with(prompt));
            match k {
                Some(k) => &rest[shared - k..rest.len() - k],
                // No prompt to anchor on (Command-R7B prints its trailer whatever the flag):
                // keep the trailer with the turn rather than guess.
                None => &full[shared..],
            }
        }
        _ => &full[shared..],
    };
    // A turn may repeat the prompt with other whitespace: a line break the template writes before
    // every message of the history but not before the generation prompt, or indentation that
    // differs between the two (templates written with indented `{{ … }}` lines).
    if !turn.starts_with(&generation_prompt)
        && let Some(after) = repeats_modulo_whitespace(turn, &generation_prompt)
    {
        return Output {
            text: turn[after..].to_owned(),
            unrepeated_prompt: String::new(),
            generation_prompt,
            from_history: false,
        };
    }
    // Indentation before the turn's header in history that the prompt does not have (the original
    // DeepSeek-R1 template's indented `{{ … }}` lines), then the prompt repeated in part (a turn
    // without reasoning leaves out the `<think>` the prompt opens): the indentation is not the
    // model's either.
    let indent = turn.len() - turn.trim_start().len();
    let turn = match &turn[indent..] {
        rest if indent > 0
            && !generation_prompt.starts_with(char::is_whitespace)
            && !turn.starts_with(&generation_prompt)
            && common_prefix(rest, &generation_prompt) > 0 =>
        {
            rest
        }
        _ => turn,
    };
    let repeated = common_prefix(turn, &generation_prompt);
    let repeated = if turn.starts_with(&generation_prompt) { generation_prompt.len() } else { repeated };
    Output {
        text: turn[repeated..].to_owned(),
        unrepeated_prompt: generation_prompt[repeated..].to_owned(),
        generation_prompt,
        from_history: false,
    }
}

#[cfg(test)]
mod tests {
    use super::{source_trailer, split_output};

    #[test]
    fn indentation_before_a_history_header_is_not_the_models() {
        // The original DeepSeek-R1 template: history turns indented, the prompt not, and a turn
        // without reasoning leaves out the `<think>` the prompt opens.
        let closed = "<U>hi";
        let open = "<U>hi<A><think>\n";
        let full = "<U>hi    <A>answer<E>";
        let output = split_output(closed, open, full);
        assert_eq!(output.text, "answer<E>");
        assert_eq!(output.unrepeated_prompt, "<think>\n");
        // Indentation the prompt has too stays where it was.
        let output = split_output(closed, "<U>hi  <A>", "<U>hi  <A>answer<E>");
        assert_eq!(output.text, "answer<E>");
    }

    #[test]
    fn the_trailer_is_what_jinja2_writes_after_the_last_tag() {
        assert_eq!(source_trailer("a{% if x %}b{%- endif %} "), " ");
        assert_eq!(source_trailer("a{% if x %}b{% endif %}\n \n"), " ");
        assert_eq!(source_trailer("{{ x }}\n\n"), "\n");
        // A single trailing newline is dropped; a `-` strips what follows; text is no trailer.
        assert_eq!(source_trailer("{{ x }}\n"), "");
        assert_eq!(source_trailer("{% if x %}y{% endif -%}  \n"), "");
        assert_eq!(source_trailer("{{ x }} end "), "");
        assert_eq!(source_trailer("no tags "), "");
    }
}
