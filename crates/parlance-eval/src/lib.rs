//! The peers' parse-case harness, kept out of the library (it is a test and benchmark tool, with its
//! own overlay file and note heuristics, not something parlance's users call).
//!
//! `parlance eval parse`: runs the peers' parse cases (`corpus/parse/*.jsonl`) through parlance's
//! parser, each against the corpus template that renders its format. [`Evaluator::check_grammar`]
//! runs the same outputs through the grammar parlance derives for the same request (outputs its
//! parser reads right must be outputs its grammar admits: real model text no one here wrote).
//!
//! A case's template is `format.template_id`, else parlance's overlay `case_templates.json` (case
//! ids, `*` a wildcard: cases whose peer parser covers several versions of a model and whose case
//! names the version, mapped to that version's own corpus template; each entry says why), else the
//! template map's entry for `format.parser` (`reasoning_map` first for
//! `options.reasoning_parser_only` cases); cases with none are skipped. The template is analyzed once; the case's options become `ParseOptions`:
//! `thinking_forced_open` → the prompt ended inside reasoning; `enable_thinking` picks the
//! generation prompt (thinking on / off) whose end decides it otherwise; llama.cpp's
//! `reasoning_format: none` → reasoning not separated (left in content with its markers);
//! `reasoning_parser_only` → `tool_choice: none`; vLLM's `deepseek_r1` / `qwen3` reasoning parsers take
//! output to start inside reasoning (as `thinking_forced_open`). Chunked cases are streamed chunk by chunk.
//!
//! Comparison rules, the same for every source:
//! - `content` and `reasoning_content`: `null` equals an empty or absent value; strings are
//!   compared with leading and trailing whitespace trimmed;
//! - except a `null` expected `content` whose `notes` say what the test asserted about content
//!   instead (the corpus README: null "when the test does not check content (see notes)"), read
//!   from these phrasings only (`content_check`), anywhere in the notes:
//!   - `content only asserted to contain "X"`, optionally followed by ` and not "Y"`; SGLang's
//!     `normal_text contains "X"` (its normal text is the content) → the trimmed content must
//!     contain X (and not Y);
//!   - SGLang's `normal_text.strip().startswith("X")` → the trimmed content must start with X;
//!   - otherwise `content not asserted`, `content not checked` or `test does not check content`
//!     (also as `id and content not asserted`, `name and content not checked`) → content is not
//!     compared.
//!
//!   An assertion phrase wins over a not-checked phrase in the same notes (`exact content not
//!   checked` beside a `startswith`). Notes with none of these keep the rule above (content must
//!   be empty), as does a non-null expected content whatever its notes say;
//! - `tool_calls`: same count, in order; names equal; arguments compared as JSON values (an
//!   expected string that is not JSON is compared with the text as written, both with their ends
//!   trimmed, since whitespace around a JSON value is insignificant; an expected `null` with empty
//!   arguments text: a call cut before its arguments began); an id is compared only when the case
//!   pins one;
//! - `invalid_tool_calls` (renderers cases: call attempts the peer reports as failed, neither
//!   dropped nor kept as content): parlance reports a failed call attempt as a
//!   `malformed-arguments` or `unparsed-call` issue in `ParsedMessage::issues`, so the number of
//!   such issues must equal the number of entries. The entries' `index`, `raw_contains` and
//!   `name` are not compared: an issue carries only a byte offset and a message, not the call's
//!   index or raw text. (A failed attempt parlance also returns as a tool call still fails the
//!   `tool_calls` count, since the expected list holds only the good calls.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};

use parlance::analyze::{AnalyzeOptions, analyze};
use parlance::format::Format;
use parlance::parse::{IssueKind, ParseOptions, Parser, ToolChoice};
use parlance::template::{ChatTemplate, RenderLimits, TemplateSource};

/// Where templates come from and how peer parser names map to them.
#[derive(Debug, Clone, Default)]
pub struct EvalSetup {
    /// Folder of `<id>.jinja` templates (and maybe `manifest.json` with their special tokens).
    pub templates: PathBuf,
    /// `map` of the template map: peer parser name → template id (or null).
    pub map: HashMap<String, Option<String>>,
    /// `reasoning_map`: overrides `map` for reasoning-parser-only cases.
    pub reasoning_map: HashMap<String, Option<String>>,
    /// Case-id pattern (`*` a wildcard) → template id, tried before the maps: parlance's overlay
    /// (`case_templates.json`) unless replaced.
    pub case_templates: Vec<(String, String)>,
}

/// parlance's overlay on the corpus template map (see the module docs).
const CASE_TEMPLATES: &str = include_str!("case_templates.json");

/// The entries of `CASE_TEMPLATES`.
fn overlay() -> Vec<(String, String)> {
    let json: Json = serde_json::from_str(CASE_TEMPLATES).unwrap_or_default();
    json["cases"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(pattern, entry)| Some((pattern.clone(), entry["template"].as_str()?.to_owned())))
        .collect()
}

/// Whether `id` matches `pattern`, where each `*` matches any run of characters.
fn matches_pattern(pattern: &str, id: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = id.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl EvalSetup {
    /// Reads a template map file (`template_map.json`); a missing file gives empty maps.
    pub fn with_template_map(templates: PathBuf, map_file: Option<&Path>) -> Result<EvalSetup, String> {
        let mut setup = EvalSetup { templates, case_templates: overlay(), ..EvalSetup::default() };
        let Some(path) = map_file else { return Ok(setup) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let json: Json = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let read = |key: &str| -> HashMap<String, Option<String>> {
            json.get(key)
                .and_then(Json::as_object)
                .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned))).collect())
                .unwrap_or_default()
        };
        setup.map = read("map");
        setup.reasoning_map = read("reasoning_map");
        Ok(setup)
    }
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Matched the expectation.
    Pass,
    /// Differs; the reason.
    Fail(String),
    /// Not run; the reason.
    Skip(String),
}

/// Runs cases, caching one `Format` per template.
#[derive(Debug, Default)]
pub struct Evaluator {
    setup: EvalSetup,
    formats: HashMap<String, Result<Format, String>>,
    /// The EOS token of each template (from the manifest): engines may return it.
    eos: HashMap<String, Option<String>>,
    /// The last grammar check's template, structural tag and output.
    last_grammar: Option<(String, Json, String)>,
}

impl Evaluator {
    /// An evaluator over `setup`.
    pub fn new(setup: EvalSetup) -> Evaluator {
        Evaluator { setup, formats: HashMap::new(), eos: HashMap::new(), last_grammar: None }
    }

    fn template_id(&self, case: &Json) -> Option<String> {
        if let Some(id) = case.pointer("/format/template_id").and_then(Json::as_str) {
            return Some(id.to_owned());
        }
        let id = case["id"].as_str().unwrap_or_default();
        if let Some((_, template)) = self.setup.case_templates.iter().find(|(p, _)| matches_pattern(p, id)) {
            return Some(template.clone());
        }
        let parser = case.pointer("/format/parser").and_then(Json::as_str)?;
        let reasoning_only = case.pointer("/options/reasoning_parser_only").and_then(Json::as_bool) == Some(true);
        if reasoning_only && let Some(entry) = self.setup.reasoning_map.get(parser) {
            return entry.clone();
        }
        self.setup.map.get(parser).cloned().flatten()
    }

    fn format(&mut self, id: &str) -> Result<Format, String> {
        if let Some(found) = self.formats.get(id) {
            return found.clone();
        }
        let (result, eos) = self.load(id);
        self.formats.insert(id.to_owned(), result.clone());
        self.eos.insert(id.to_owned(), eos);
        result
    }

    fn load(&self, id: &str) -> (Result<Format, String>, Option<String>) {
        let mut eos = None;
        let format = self.analyze(id, &mut eos);
        (format, eos)
    }

    fn analyze(&self, id: &str, eos: &mut Option<String>) -> Result<Format, String> {
        let path = self.setup.templates.join(format!("{id}.jinja"));
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let template =
            ChatTemplate::from_source(TemplateSource::from_text(format!("{id}.jinja"), text), RenderLimits::default())
                .map_err(|e| e.to_string())?;
        let mut options = AnalyzeOptions::default();
        // Special tokens the templates read, from the corpus manifest when it is there.
        if let Ok(text) = std::fs::read_to_string(self.setup.templates.join("manifest.json"))
            && let Ok(Json::Array(entries)) = serde_json::from_str::<Json>(&text)
            && let Some(entry) = entries.iter().find(|e| e["id"] == id)
        {
            *eos = entry["eos_token"].as_str().map(str::to_owned);
            for (k, v) in entry["special_tokens"].as_object().into_iter().flatten() {
                if v.is_string() {
                    options.variables.insert(k.clone(), v.clone());
                }
            }
        }
        analyze(&template, &options).map_err(|e| e.to_string())
    }

    /// Runs one case: its result line (`id`, `status`, `got`, `expected`, `diff`) and status.
    pub fn run(&mut self, case: &Json) -> (Json, Status) {
        let id = case["id"].as_str().unwrap_or("?").to_owned();
        let expected = case["expected"].clone();
        let line = |status: &Status, got: Json| {
            let (word, diff) = match status {
                Status::Pass => ("pass", Json::Null),
                Status::Fail(why) => ("fail", json!(why)),
                Status::Skip(why) => ("skip", json!(why)),
            };
            json!({"id": id, "status": word, "quirk": case["quirk"] == true, "got": got, "expected": expected, "diff": diff})
        };
        let Some(template_id) = self.template_id(case) else {
            let status = Status::Skip("no corpus template for this format".into());
            return (line(&status, Json::Null), status);
        };
        if case.pointer("/options/continue_final_message").is_some_and(|v| !v.is_null()) {
            let status = Status::Skip("continues a message whose start the case does not carry".into());
            return (line(&status, Json::Null), status);
        }
        let format = match self.format(&template_id) {
            Ok(format) => format,
            Err(why) => {
                let status = Status::Fail(format!("template {template_id}: {why}"));
                return (line(&status, Json::Null), status);
            }
        };
        let options = case_options(case, &format, self.eos.get(&template_id).cloned().flatten());
        let parser = Parser::new(&format, &options);
        let message = match case.get("chunks").and_then(Json::as_array) {
            Some(chunks) => {
                let mut stream = parser.stream();
                for chunk in chunks {
                    stream.push(chunk.as_str().unwrap_or_default());
                }
                stream.finish();
                stream.message()
            }
            None => parser.parse(case["input"].as_str().unwrap_or_default()),
        };
        let got = json!({
            "content": message.content,
            "reasoning_content": message.reasoning_content,
            "tool_calls": message.tool_calls.iter().map(|c| json!({
                "name": c.name,
                "arguments": c.arguments_value.clone().unwrap_or_else(|| json!(c.arguments)),
                "id": c.id,
            })).collect::<Vec<_>>(),
        });
        let failed_calls = message.issues.iter().filter(|i| FAILED_CALL_ISSUES.contains(&i.kind)).count();
        let check = content_check(&case["expected"], case["notes"].as_str().unwrap_or_default());
        let status = match compare(&got, &case["expected"], &check, failed_calls) {
            Ok(()) => Status::Pass,
            Err(why) => Status::Fail(format!("{why} (template {template_id})")),
        };
        (line(&status, got), status)
    }
}

impl Evaluator {
    /// Whether the grammar derived from the case's template for the case's request (its tools, or
    /// tools typed by the values its expected calls pass; its reasoning state) accepts the case's
    /// output, byte by byte, up to a stop marker. Only cases whose parse passes are checked (a
    /// grammar admitting what the parser misreads proves nothing); the others, quirks, and formats
    /// the grammar does not cover yet are skipped, saying why. An output the grammar admits only
    /// once an end marker is added (a stop token the engine stripped) is skipped, saying which,
    /// when the marker leaves the parse unchanged; otherwise it fails.
    pub fn check_grammar(&mut self, case: &Json) -> Status {
        self.check_grammar_with_record(case).0
    }

    /// [`Evaluator::check_grammar`], and for an admitted output the record XGrammar's check reads
    /// (`tests/data/xgrammar/check_constrain.py` in the `parlance` crate: template, case, the
    /// structural tag, the output, `accept: true`).
    pub fn check_grammar_with_record(&mut self, case: &Json) -> (Status, Option<Json>) {
        let status = self.grammar_status(case);
        let record = match (&status, self.last_grammar.take()) {
            (Status::Pass, Some((template, doc, output))) => Some(json!({
                "template": template, "case": case["id"], "doc": doc, "output": output, "accept": true,
            })),
            _ => None,
        };
        (status, record)
    }

    fn grammar_status(&mut self, case: &Json) -> Status {
        self.last_grammar = None;
        if case["quirk"] == true {
            return Status::Skip("a quirk case".into());
        }
        match self.run(case).1 {
            Status::Pass => {}
            Status::Fail(_) => return Status::Skip("the parse fails".into()),
            Status::Skip(why) => return Status::Skip(why),
        }
        let Some(template_id) = self.template_id(case) else { return Status::Skip("no template".into()) };
        let Ok(format) = self.format(&template_id) else { return Status::Skip("no format".into()) };
        let mut request = case_options(case, &format, self.eos.get(&template_id).cloned().flatten());
        // A reasoning parser's test is a model thinking: where the case leaves the switch unset and
        // the template's default prompt turns thinking off, the prompt is the thinking-on one.
        let reasoning_test = case.pointer("/options/reasoning_parser_only") == Some(&Json::Bool(true));
        if reasoning_test && request.generation_prompt.is_none() && request.in_reasoning.is_none() {
            let details = format.reasoning_details.as_ref();
            request.generation_prompt = details.and_then(|d| d.generation_prompt_thinking_on.clone());
        }
        if request.tools.is_empty() {
            request.tools = tools_called(&case["expected"]);
        }
        let text = match case.get("chunks").and_then(Json::as_array) {
            Some(chunks) => chunks.iter().filter_map(Json::as_str).collect::<String>(),
            None => case["input"].as_str().unwrap_or_default().to_owned(),
        };
        // The model's turn ends at its stop token, which the grammar leaves to the engine.
        let mut output = text.as_str();
        for stop in &request.stop_markers {
            if let Some(at) = output.find(stop.as_str()).filter(|_| !stop.is_empty()) {
                output = &output[..at];
            }
        }
        let grammar = match parlance::constrain::grammar(&format, &request) {
            Ok(grammar) => grammar,
            Err(parlance::ConstrainError::Unsupported { what, .. }) => {
                return Status::Skip(format!("cannot constrain {what}"));
            }
            Err(e) => return Status::Fail(format!("no grammar: {e} (template {template_id})")),
        };
        if let Ok(doc) = parlance::constrain::structural_tag(&format, &request) {
            self.last_grammar = Some((template_id.clone(), doc, output.to_owned()));
        }
        match grammar_refuses(&grammar, output) {
            Ok(None) => Status::Pass,
            // The grammar wants more at the end. An engine strips the stop token it stops at
            // (gpt-oss's `<|call|>`) and a reasoning test may stop inside reasoning: the output is
            // admitted when one such end marker completes it; otherwise it is refused at its end.
            // (The marker must also leave the parse as it was: a grammar that reads an answer as
            // reasoning text is completed by reasoning's end, but disagrees with the parser.)
            Ok(Some(at)) if at == output.len() => match end_markers(&format, &request).into_iter().find(|m| {
                let completed = format!("{output}{m}");
                matches!(grammar_refuses(&grammar, &completed), Ok(None))
                    && same_parse(&Parser::new(&format, &request), output, &completed)
            }) {
                Some(marker) => Status::Skip(format!("admitted once its end marker is added ({marker:?})")),
                None => Status::Fail(format!(
                    "admitted as a prefix but not complete, nor with an end marker added: {:?} (template {template_id})",
                    tail(output)
                )),
            },
            Ok(Some(at)) => Status::Fail(format!("refused at byte {at} of {output:?} (template {template_id})")),
            Err(e) => Status::Fail(format!("{e} (template {template_id})")),
        }
    }
}

/// The markers a model's output may stop at or before (a call's or section's end, the turn's end,
/// reasoning's end, the request's stop markers): trimmed, each once.
fn end_markers(format: &Format, request: &parlance::parse::ParseOptions) -> Vec<String> {
    let tools = format.tools.as_ref();
    let candidates = [
        tools.map(|t| t.call_end.as_str()),
        tools.map(|t| t.section_end.as_str()),
        Some(format.turn_end.as_str()),
        Some(format.content.end.as_str()),
        format.reasoning.as_ref().map(|r| r.end.as_str()),
    ];
    let mut markers: Vec<String> = Vec::new();
    for m in candidates.into_iter().flatten().chain(request.stop_markers.iter().map(String::as_str)) {
        let m = m.trim();
        if !m.is_empty() && !markers.iter().any(|k| k == m) {
            markers.push(m.to_owned());
        }
    }
    markers
}

/// Whether `a` and `b` parse to the same content, reasoning and calls.
fn same_parse(parser: &Parser, a: &str, b: &str) -> bool {
    let summary = |text: &str| {
        let m = parser.parse(text);
        let calls: Vec<(String, String)> = m.tool_calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
        (m.content.unwrap_or_default(), m.reasoning_content.unwrap_or_default(), calls)
    };
    summary(a) == summary(b)
}

/// The last characters of `text`, for a message.
fn tail(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(60)..].iter().collect()
}

/// The tools an expected message calls, each argument typed by the value it passes.
fn tools_called(expected: &Json) -> Vec<Json> {
    let mut tools: Vec<Json> = Vec::new();
    for call in expected["tool_calls"].as_array().into_iter().flatten() {
        let name = call["name"].as_str().or_else(|| call.pointer("/function/name").and_then(Json::as_str));
        let Some(name) = name else { continue };
        if tools.iter().any(|t| t["function"]["name"] == name) {
            continue;
        }
        let arguments = call.get("arguments").or_else(|| call.pointer("/function/arguments"));
        let arguments = match arguments {
            Some(Json::String(text)) => serde_json::from_str(text).unwrap_or(Json::Null),
            Some(value) => value.clone(),
            None => Json::Null,
        };
        let mut properties = serde_json::Map::new();
        for (key, value) in arguments.as_object().into_iter().flatten() {
            let typ = match value {
                Json::String(_) => "string",
                Json::Number(n) if n.is_i64() || n.is_u64() => "integer",
                Json::Number(_) => "number",
                Json::Bool(_) => "boolean",
                Json::Null => "null",
                Json::Array(_) => "array",
                Json::Object(_) => "object",
            };
            properties.insert(key.clone(), json!({"type": typ}));
        }
        tools.push(json!({"type": "function", "function": {"name": name,
            "parameters": {"type": "object", "properties": properties}}}));
    }
    tools
}

/// The byte at which `grammar` refuses `text` (its length: the text is a proper prefix), `None`
/// when it accepts the whole text as a complete output. Every byte is a token here: languages are
/// under test, not token masks.
fn grammar_refuses(grammar: &parlance_grammar::Grammar, text: &str) -> Result<Option<usize>, String> {
    use std::sync::{Arc, OnceLock};
    static VOCAB: OnceLock<Arc<parlance_grammar::TokenVocab>> = OnceLock::new();
    let vocab = VOCAB.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"<eos>".to_vec());
        Arc::new(parlance_grammar::TokenVocab::new(tokens, &[], &[256]).expect("a byte vocabulary"))
    });
    let compiled = parlance_grammar::CompiledGrammar::new(vocab.clone(), grammar).map_err(|e| e.to_string())?;
    let mut matcher = parlance_grammar::Matcher::new(Arc::new(compiled)).map_err(|e| e.to_string())?;
    for (at, &byte) in text.as_bytes().iter().enumerate() {
        if !matcher.accept_bytes(&[byte]) {
            return Ok(Some(at));
        }
    }
    Ok((!matcher.is_accepting()).then_some(text.len()))
}

/// The parse options a case's peer options mean.
fn case_options(case: &Json, format: &Format, eos: Option<String>) -> ParseOptions {
    let options = &case["options"];
    let mut parse = ParseOptions {
        tools: options["tools"].as_array().cloned().unwrap_or_default(),
        parallel_tool_calls: options["parallel_tool_calls"].as_bool(),
        ..ParseOptions::default()
    };
    if options["reasoning_parser_only"] == true {
        parse.tool_choice = ToolChoice::None;
    }
    let appends_think =
        case.pointer("/format/parser").and_then(Json::as_str).is_some_and(|p| p.ends_with("append_think"));
    if options["reasoning_format"] == "none" || appends_think {
        parse.separate_reasoning = Some(false);
    }
    let details = format.reasoning_details.as_ref();
    let prompt = match options["enable_thinking"].as_bool() {
        Some(true) => details.and_then(|d| d.generation_prompt_thinking_on.clone()),
        Some(false) => details.and_then(|d| d.generation_prompt_thinking_off.clone()),
        None => None,
    };
    // vLLM's tool-parser tests run no reasoning parser: their output starts after any reasoning.
    let vllm_tool_test =
        case.pointer("/source/path").and_then(Json::as_str).is_some_and(|p| p.contains("tool_parsers"));
    if appends_think {
        // vLLM's append-think parser assumes the prompt ended with the bare start marker.
        parse.in_reasoning = Some(true);
        parse.generation_prompt = format.reasoning.as_ref().map(|r| r.start.clone());
    } else if vllm_tool_test && options["thinking_forced_open"] != true {
        parse.in_reasoning = Some(false);
    } else if options["thinking_forced_open"] == true || reasoning_parser_starts_inside(case) {
        parse.in_reasoning = Some(true);
    } else if let Some(prompt) = prompt {
        parse.generation_prompt = Some(prompt);
    }
    // parlance's vLLM tool parser drops a call the output ends inside when it extracts calls
    // whole (`extract_tool_calls`), as vLLM's own parsers do; a stream keeps it.
    if vllm_tool_test && options["streaming"] == false {
        parse.truncated_calls = parlance::TruncatedCalls::Drop;
    }
    parse.stop_markers = eos.into_iter().collect();
    parse
}

/// Peer reasoning parsers that take every output to start inside reasoning (the model's prompt
/// opened it): vLLM's `deepseek_r1` and `qwen3`, whose tests feed text with no start marker.
fn reasoning_parser_starts_inside(case: &Json) -> bool {
    let parser = case.pointer("/format/parser").and_then(Json::as_str).unwrap_or_default();
    case.pointer("/options/reasoning_parser_only") == Some(&Json::Bool(true))
        && matches!(parser, "vllm:deepseek_r1" | "vllm:qwen3")
}

/// Issue kinds that report a failed tool-call attempt (compared with `invalid_tool_calls`).
const FAILED_CALL_ISSUES: [IssueKind; 2] = [IssueKind::MalformedArguments, IssueKind::UnparsedCall];

/// What a case asserts about content (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
enum ContentCheck {
    /// Equal to the expected content (`null`: empty), trimmed.
    #[default]
    Exact,
    /// Not asserted.
    Unchecked,
    /// Only these, on the trimmed content.
    Partial {
        /// Substrings it must contain.
        contains: Vec<String>,
        /// Substrings it must not contain.
        lacks: Vec<String>,
        /// A prefix it must start with.
        starts_with: Option<String>,
    },
}

/// The quoted text right after `marker` (up to the next `"`) when `text` starts with `marker`,
/// and where it ends in `text` (after the quote).
fn quoted_prefix(text: &str, marker: &str) -> Option<(String, usize)> {
    let rest = text.strip_prefix(marker)?;
    let len = rest.find('"')?;
    Some((rest[..len].to_owned(), marker.len() + len + 1))
}

/// `quoted_prefix` at each occurrence of `marker` in `notes`, ends as offsets in `notes`.
fn quoted_after(notes: &str, marker: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = notes[from..].find(marker) {
        let Some((text, end)) = quoted_prefix(&notes[from + at..], marker) else { break };
        from += at + end;
        found.push((text, from));
    }
    found
}

/// What the case's notes say was asserted about content, when its expected content is `null`.
fn content_check(expected: &Json, notes: &str) -> ContentCheck {
    if !expected["content"].is_null() {
        return ContentCheck::Exact;
    }
    let (mut contains, mut lacks) = (Vec::new(), Vec::new());
    for (text, end) in quoted_after(notes, "content only asserted to contain \"") {
        contains.push(text);
        lacks.extend(quoted_prefix(&notes[end..], " and not \"").map(|(text, _)| text));
    }
    contains.extend(quoted_after(notes, "normal_text contains \"").into_iter().map(|(text, _)| text));
    let starts_with = quoted_after(notes, "normal_text.strip().startswith(\"").into_iter().next().map(|(t, _)| t);
    if !contains.is_empty() || !lacks.is_empty() || starts_with.is_some() {
        return ContentCheck::Partial { contains, lacks, starts_with };
    }
    let unchecked = ["content not asserted", "content not checked", "test does not check content"];
    if unchecked.iter().any(|phrase| notes.contains(phrase)) {
        return ContentCheck::Unchecked;
    }
    ContentCheck::Exact
}

fn compare(got: &Json, expected: &Json, content: &ContentCheck, failed_calls: usize) -> Result<(), String> {
    let norm = |v: &Json| v.as_str().map(str::trim).unwrap_or_default().to_owned();
    for key in ["content", "reasoning_content"] {
        let (got_text, want_text) = (norm(&got[key]), norm(&expected[key]));
        match content {
            ContentCheck::Unchecked if key == "content" => {}
            ContentCheck::Partial { contains, lacks, starts_with } if key == "content" => {
                if let Some(want) = contains.iter().find(|want| !got_text.contains(want.as_str())) {
                    return Err(format!("content: got {got_text:?}, expected it to contain {want:?}"));
                }
                if let Some(bad) = lacks.iter().find(|bad| got_text.contains(bad.as_str())) {
                    return Err(format!("content: got {got_text:?}, expected it not to contain {bad:?}"));
                }
                if let Some(prefix) = starts_with.as_ref().filter(|p| !got_text.starts_with(p.as_str())) {
                    return Err(format!("content: got {got_text:?}, expected it to start with {prefix:?}"));
                }
            }
            _ if got_text != want_text => {
                return Err(format!("{key}: got {got_text:?}, expected {want_text:?}"));
            }
            _ => {}
        }
    }
    let empty = Vec::new();
    let got_calls = got["tool_calls"].as_array().unwrap_or(&empty);
    let want_calls = expected["tool_calls"].as_array().unwrap_or(&empty);
    if got_calls.len() != want_calls.len() {
        return Err(format!("tool_calls: got {}, expected {}", got_calls.len(), want_calls.len()));
    }
    for (i, (g, w)) in got_calls.iter().zip(want_calls).enumerate() {
        if g["name"] != w["name"] {
            return Err(format!("tool_calls[{i}].name: got {}, expected {}", g["name"], w["name"]));
        }
        // Text that is not JSON (a call cut short) keeps JSON's rule that whitespace around a
        // value is insignificant: compared with its ends trimmed, as content is.
        let text = |s: &str| Json::String(s.trim().to_owned());
        let want_args = match &w["arguments"] {
            Json::String(s) => serde_json::from_str(s).unwrap_or_else(|_| text(s)),
            // The cases write a call whose arguments had not begun (llama.cpp's `""`) as null.
            Json::Null => json!(""),
            other => other.clone(),
        };
        let got_args = match &g["arguments"] {
            Json::String(s) => text(s),
            other => other.clone(),
        };
        if got_args != want_args {
            return Err(format!("tool_calls[{i}].arguments: got {}, expected {want_args}", g["arguments"]));
        }
        if !w["id"].is_null() && g["id"] != w["id"] {
            return Err(format!("tool_calls[{i}].id: got {}, expected {}", g["id"], w["id"]));
        }
    }
    if let Some(invalid) = expected.get("invalid_tool_calls").and_then(Json::as_array)
        && failed_calls != invalid.len()
    {
        return Err(format!(
            "invalid_tool_calls: {failed_calls} failed call attempts reported in issues, expected {}",
            invalid.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_patterns_match_with_wildcards() {
        assert!(matches_pattern("a-*_x31", "a-simple_streaming_x31"));
        assert!(!matches_pattern("a-*_x31", "a-simple_streaming_x3"));
        assert!(!matches_pattern("a-*_x31", "b-simple_x31"));
        assert!(matches_pattern("exact", "exact"));
        assert!(!matches_pattern("exact", "exactly"));
        assert!(matches_pattern("a*b*c", "a-b-c"));
        assert!(!matches_pattern("ab*ba", "aba"));
    }

    fn got(content: &str) -> Json {
        json!({"content": content, "reasoning_content": null, "tool_calls": []})
    }

    fn check(notes: &str, content: &str) -> Result<(), String> {
        let expected = json!({"content": null, "reasoning_content": null, "tool_calls": []});
        compare(&got(content), &expected, &content_check(&expected, notes), 0)
    }

    #[test]
    fn notes_saying_content_contains_x_check_exactly_that() {
        let notes = r#"content only asserted to contain "hello" and not "<tool_call>"; input is tokenized"#;
        assert_eq!(check(notes, "well, hello there"), Ok(()));
        assert!(check(notes, "goodbye").is_err(), "lacks \"hello\"");
        assert!(check(notes, "hello <tool_call>").is_err(), "has \"<tool_call>\"");
        let sglang = r#"SGLang returns "" for absent normal_text; test asserts accumulated normal_text contains "I'll check the weather." and the parameters equal {}"#;
        assert_eq!(check(sglang, "  I'll check the weather.\n"), Ok(()));
        assert!(check(sglang, "I'll check.").is_err());
        assert!(check(sglang, "").is_err(), "an empty content no longer passes a contains check");
        let prefix =
            r#"test asserts 1 call and normal_text.strip().startswith("Some intro."); exact content not checked"#;
        assert_eq!(check(prefix, " Some intro. more"), Ok(()));
        assert!(check(prefix, "Intro: Some intro.").is_err(), "the assertion wins over `content not checked`");
    }

    #[test]
    fn notes_saying_content_is_not_asserted_pass_any_content() {
        for notes in [
            "malformed JSON kept; content not asserted; input is tokenized",
            "id and content not asserted",
            "SGLang returns \"\" for absent normal_text; content not checked",
            "non-streaming; name and content not checked (name taken from the input)",
            "test does not check content; other test params: {\"streaming\": false}",
        ] {
            assert_eq!(check(notes, "anything <tool_call> at all"), Ok(()), "{notes}");
            assert_eq!(check(notes, ""), Ok(()), "{notes}");
        }
    }

    #[test]
    fn a_null_content_without_such_notes_must_be_empty() {
        for notes in [
            "",
            "other test params: {\"streaming\": false}",
            "non-streaming extract_tool_calls; content asserted None: text around the JSON object is dropped",
            "test may check only a subset of fields",
        ] {
            assert_eq!(check(notes, "  "), Ok(()), "{notes}");
            assert!(check(notes, "text").is_err(), "{notes}");
        }
        // A non-null expected content is compared exactly whatever the notes say.
        let expected = json!({"content": "a", "reasoning_content": null, "tool_calls": []});
        let check = content_check(&expected, "content not checked");
        assert_eq!(check, ContentCheck::Exact);
        assert!(compare(&got("b"), &expected, &check, 0).is_err());
    }

    #[test]
    fn invalid_tool_calls_count_failed_call_issues() {
        let expected = json!({"content": "", "reasoning_content": null, "tool_calls": [],
            "invalid_tool_calls": [{"index": 0, "status": "INVALID_JSON"}]});
        assert_eq!(compare(&got(""), &expected, &ContentCheck::Exact, 1), Ok(()));
        assert!(compare(&got(""), &expected, &ContentCheck::Exact, 0).is_err(), "not reported");
        assert!(compare(&got(""), &expected, &ContentCheck::Exact, 2).is_err(), "one too many");
        // Cases without the field do not look at issues.
        let plain = json!({"content": "", "reasoning_content": null, "tool_calls": []});
        assert_eq!(compare(&got(""), &plain, &ContentCheck::Exact, 3), Ok(()));
    }

    #[test]
    fn the_overlay_reads_and_comes_before_the_map() {
        let overlay = overlay();
        assert!(!overlay.is_empty(), "case_templates.json has entries");
        let mut setup = EvalSetup { case_templates: overlay, ..EvalSetup::default() };
        setup.map.insert("vllm:gigachat3".into(), Some("GigaChat3-10B-A1.8B".into()));
        let evaluator = Evaluator::new(setup);
        let case = |id: &str| json!({"id": id, "format": {"template_id": null, "parser": "vllm:gigachat3"}});
        let v31 = evaluator.template_id(&case("vllm-tool-gigachat3-tool_call-simple_nonstreaming_gigachat31"));
        let v3 = evaluator.template_id(&case("vllm-tool-gigachat3-tool_call-simple_nonstreaming_gigachat3"));
        assert_eq!(v31.as_deref(), Some("GigaChat3.1-10B-A1.8B"));
        assert_eq!(v3.as_deref(), Some("GigaChat3-10B-A1.8B"));
    }
}
