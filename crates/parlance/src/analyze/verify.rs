//! Self-roundtrip: render assistant messages of known structure and check that the `Format`'s
//! markers locate exactly those parts again (content, reasoning, each call's name and arguments).
//!
//! This is a proof of the analysis, not the output parser: it reads one whole, well-formed output
//! with the markers alone, and reports the first part it cannot find.

use serde::Serialize;
use serde_json::{Value as Json, json};

use super::diff::{find_from, json_values};
use super::probe::{ARG_1, ARG_2, CONTENT, FN_1, FN_2, ID_1, ID_2, Probe, REASONING, VALUE_1, VALUE_2, call};
use super::{AnalyzeOptions, Format};
use crate::format::{ArgumentEncoding, ReasoningMode, ToolCallFormat, ToolFamily, ValueEncoding, Workaround};
use crate::message::wire_message;
use crate::template::ChatTemplate;

/// The outcome of one self-roundtrip case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// What the case renders (`content`, `reasoning`, `call_integer`, `parallel_calls`, ...).
    pub case: String,
    /// Whether the markers located every part (a skipped case counts as passed).
    pub passed: bool,
    /// The template does not render this message's structure (e.g. it drops content next to calls
    /// or never shows a message's reasoning), so there is nothing to locate.
    pub skipped: bool,
    /// Why not, when it failed.
    pub reason: Option<String>,
}

/// A probe assistant message of known structure and the text the model writes for it under a
/// template (the rendered turn minus the prompt before it); the turn end is still on it.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedCase {
    /// What the case renders (`content`, `reasoning`, `call_integer`, `parallel_calls`, ...).
    pub case: String,
    /// The assistant message (OpenAI-shaped; arguments as objects).
    pub message: Json,
    /// The model's text for it.
    pub output: String,
    /// The generation prompt as the rendered turn continues it: the Format's generation prompt
    /// minus what a rendered turn leaves out (an opened `<think>` that turns without reasoning
    /// omit). Parsing `output` after this prompt is the exact inverse of the render.
    pub prompt: String,
}

/// The self-roundtrip cases of `format` rendered through `template` (cases the template raises on
/// are left out): inputs for parse-render roundtrip tests.
pub fn rendered_cases(template: &ChatTemplate, format: &Format, options: &AnalyzeOptions) -> Vec<RenderedCase> {
    if format.has_workaround(Workaround::CallIdsNameTheFunction) && !super::probe::named_ids() {
        return super::probe::with_named_ids(|| rendered_cases(template, format, options));
    }
    let Some(probe) = probe_for(template, format, options) else { return Vec::new() };
    cases(format)
        .into_iter()
        .filter_map(|(case, message, _)| {
            let with_tools = message.get("tool_calls").is_some();
            let output = without_user_turn(format, probe.output(&wire_message(format, &message), with_tools, &[])?);
            let repeated = output.generation_prompt.len() - output.unrepeated_prompt.len();
            let prompt = output.generation_prompt[..repeated].to_owned();
            Some(RenderedCase { case, message, output: output.text, prompt })
        })
        .collect()
}

/// `output` without the history form of the user turn it carries when the prompt and the history
/// render that turn differently (the analysis derived its markers after it too): through the
/// user turn's closing tag, or else through the turn's header (`format`'s content opener) after it.
fn without_user_turn(format: &Format, mut output: super::probe::Output) -> super::probe::Output {
    if let Some(at) = super::probe::after_user_turn(&output.text) {
        output.text.drain(..at);
    } else if let Some(user) = output.text.rfind(super::probe::USER)
        && let header = format.content.start.trim()
        && !header.is_empty()
        && let Some(at) = output.text[user..].find(header)
    {
        let end = user + at + header.len();
        let end = end + crate::parse::scan::leading_ws(&output.text[end..]);
        output.text.drain(..end);
    }
    output
}

/// The probe the analysis of `format` used: with its workarounds.
fn probe_for(template: &ChatTemplate, format: &Format, options: &AnalyzeOptions) -> Option<Probe> {
    let budget = crate::template::RunBudget::new(options.max_wall_time, "verification wall-clock milliseconds");
    let mut probe = Probe::new(template, options.variables.clone(), budget).ok()?;
    if format.has_workaround(Workaround::ToolsInEveryRender) {
        probe = probe.with_tools_always().unwrap_or(probe);
    }
    if format.has_workaround(Workaround::MarkupAddUnescaped) {
        probe = probe.with_markup_add_unescaped().unwrap_or(probe);
    }
    if format.has_workaround(Workaround::ListAppendIgnored) {
        probe = probe.with_list_append_ignored().unwrap_or(probe);
    }
    if format.has_workaround(Workaround::CallsWithNullContent) {
        probe = probe.with_null_content_with_calls().unwrap_or(probe);
    }
    Some(probe)
}

/// Self-roundtrip of every case that applies to `format`.
pub fn self_check(template: &ChatTemplate, format: &Format, options: &AnalyzeOptions) -> Vec<CaseResult> {
    if format.has_workaround(Workaround::CallIdsNameTheFunction) && !super::probe::named_ids() {
        return super::probe::with_named_ids(|| self_check(template, format, options));
    }
    let Some(probe) = probe_for(template, format, options) else {
        return vec![CaseResult {
            case: "render".into(),
            passed: false,
            skipped: false,
            reason: Some("no conversation renders".into()),
        }];
    };
    cases(format)
        .into_iter()
        .map(|(case, message, expected)| run_case(&probe, format, case, message, expected))
        .collect()
}

fn cases(format: &Format) -> Vec<(String, Json, Expected)> {
    let mut cases: Vec<(String, Json, Expected)> =
        vec![("content".into(), json!({"role": "assistant", "content": CONTENT}), Expected::content(CONTENT))];
    let unicode = "héllo wörld 世界 🎉";
    cases.push((
        "unicode_content".into(),
        json!({"role": "assistant", "content": unicode}),
        Expected::content(unicode),
    ));
    if let Some(details) = format.reasoning_details.as_ref().filter(|d| d.mode != ReasoningMode::ToolsOnly) {
        // Under the template's own key where it reads one (`thought`), else a standard name.
        let key = details.field.as_deref().unwrap_or("reasoning");
        let mut message = json!({"role": "assistant", "content": CONTENT});
        message[key] = json!(REASONING);
        cases.push((
            "reasoning".into(),
            message,
            Expected { reasoning: Some(REASONING.into()), ..Expected::content(CONTENT) },
        ));
    }
    if let Some(tools) = &format.tools {
        let values = [
            ("string", json!(VALUE_1)),
            ("integer", json!(42)),
            ("float", json!(3.25)),
            ("boolean", json!(true)),
            ("null", json!(null)),
            ("array", json!([1, "two"])),
            ("object", json!({"inner": "v", "n": 2})),
            ("unicode", json!("Zürich 東京")),
        ];
        for (kind, value) in values {
            let args = json!({ARG_1: value});
            let message = json!({"role": "assistant", "content": "", "tool_calls": [call(ID_1, FN_1, args.clone())]});
            cases.push((format!("call_{kind}"), message, Expected::calls(vec![(FN_1, args)])));
        }
        if tools.parallel {
            let (a, b) = (json!({ARG_1: VALUE_1}), json!({ARG_2: VALUE_2}));
            let message = json!({"role": "assistant", "content": "", "tool_calls": [call(ID_1, FN_1, a.clone()), call(ID_2, FN_2, b.clone())]});
            cases.push(("parallel_calls".into(), message, Expected::calls(vec![(FN_1, a), (FN_2, b)])));
        }
        let args = json!({ARG_1: VALUE_1});
        let message = json!({"role": "assistant", "content": CONTENT, "tool_calls": [call(ID_1, FN_1, args.clone())]});
        cases.push((
            "content_and_call".into(),
            message,
            Expected { content: CONTENT.into(), ..Expected::calls(vec![(FN_1, args)]) },
        ));
    }
    cases
}

fn run_case(probe: &Probe, format: &Format, case: String, message: Json, expected: Expected) -> CaseResult {
    let with_tools = message.get("tool_calls").is_some();
    let message = wire_message(format, &message);
    let output = probe
        .output(&message, with_tools, &[])
        // Calls alone may render only beside a content text the turn does not print, as the
        // analysis renders them (`Probe::output_with_calls`).
        .or_else(|| {
            let calls_only = with_tools && expected.content.is_empty();
            calls_only.then(|| probe.output_with_unprinted_content(&message, &[]))?
        })
        .map(|output| without_user_turn(format, output));
    let dropped = |text: &str| {
        let content = !expected.content.is_empty() && !text.contains(expected.content.as_str());
        let reasoning = expected.reasoning.as_deref().is_some_and(|r| !text.contains(r));
        let calls = expected.calls.iter().any(|(name, _)| !text.contains(name));
        content
            .then_some("the template drops content next to calls")
            .or(reasoning.then_some("the template does not render a message's reasoning"))
            .or(calls.then_some("the template drops calls next to content"))
            .or_else(|| {
                // Content next to calls written exactly as reasoning (gpt-oss's analysis
                // channel): no marker can tell them apart, so there is nothing to check.
                let as_reasoning = (!expected.content.is_empty() && with_tools).then(|| {
                    let mut moved = message.clone();
                    moved["reasoning_content"] = json!(expected.content);
                    moved["content"] = json!("");
                    probe.output(&moved, true, &[])
                })??;
                let block = format.reasoning.as_ref().map(|r| format!("{}{}{}", r.start, expected.content, r.end));
                (as_reasoning.text == text || block.is_some_and(|b| text.contains(&b)))
                    .then_some("the template writes content next to calls as reasoning")
            })
    };
    // A template may refuse content next to calls outright (mistral-common's v2 raises): the
    // model never writes it, so there is nothing to locate, as long as the calls alone render.
    let refuses_content_next_to_calls = || {
        let mut calls_only = message.clone();
        calls_only["content"] = json!("");
        !expected.content.is_empty() && with_tools && probe.output(&calls_only, true, &[]).is_some()
    };
    match output {
        None if refuses_content_next_to_calls() => CaseResult {
            case,
            passed: true,
            skipped: true,
            reason: Some("the template raises on content next to calls".to_owned()),
        },
        None => CaseResult {
            case,
            passed: false,
            skipped: false,
            reason: Some("the template raised on this message".to_owned()),
        },
        Some(output) => match dropped(&output.text) {
            Some(why) => CaseResult { case, passed: true, skipped: true, reason: Some(why.to_owned()) },
            None => {
                let reason = check(format, &output.text, &expected).err();
                CaseResult { case, passed: reason.is_none(), skipped: false, reason }
            }
        },
    }
}

struct Expected {
    content: String,
    reasoning: Option<String>,
    calls: Vec<(&'static str, Json)>,
}

impl Expected {
    fn content(content: &str) -> Expected {
        Expected { content: content.to_owned(), reasoning: None, calls: Vec::new() }
    }

    fn calls(calls: Vec<(&'static str, Json)>) -> Expected {
        Expected { content: String::new(), reasoning: None, calls }
    }
}

fn check(format: &Format, text: &str, expected: &Expected) -> Result<(), String> {
    // The output continues the marker the prompt ended with.
    let prefixed = format!("{}{text}", format.output_prefix);
    let text = prefixed.as_str();
    let mut text = text.strip_suffix(format.turn_end.as_str()).unwrap_or(text);
    // Reasoning.
    let mut reasoning = None;
    if let (Some(markers), Some(details)) = (&format.reasoning, &format.reasoning_details) {
        let trimmed = text.trim_start();
        if matches!(details.mode, ReasoningMode::ForcedOpen | ReasoningMode::Implicit) {
            if let Some(end) = text.find(markers.end.as_str()) {
                reasoning = Some(text[..end].to_owned());
                text = &text[end + markers.end.len()..];
            }
        } else if !markers.start.is_empty() && trimmed.starts_with(markers.start.as_str()) {
            let body = &trimmed[markers.start.len()..];
            let end = body.find(markers.end.as_str()).ok_or("reasoning start without end")?;
            reasoning = Some(body[..end].to_owned());
            text = &body[end + markers.end.len()..];
        }
        if !details.empty_block.is_empty() {
            text = text.strip_prefix(details.empty_block.as_str()).unwrap_or(text);
        }
        // Content after reasoning may open a new message of the turn (gpt-oss channels); with an
        // output prefix, every block's markers hold that header themselves.
        let header = format.generation_prompt.trim();
        if reasoning.is_some() && !header.is_empty() && format.output_prefix.is_empty() {
            text = text.trim_start().strip_prefix(header).unwrap_or(text);
            // A channel header of its own (`<|channel|>final` before `<|message|>`), where content
            // alone is written without one (gpt-oss's early templates).
            let channel = crate::markers::bracketed_pieces(&markers.start).first().map(|c| c.to_string());
            let opener = format.content.start.trim();
            if format.tool_format == ToolFamily::Channel
                && let Some(channel) = channel
                && !opener.is_empty()
                && let Some(rest) = text.strip_prefix(channel.as_str())
                && let Some(at) = rest.find(opener)
                && rest[..at].chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ')
            {
                text = &rest[at..];
            }
        }
    }
    let found = reasoning.as_deref().map(str::trim).filter(|r| !r.is_empty());
    if found != expected.reasoning.as_deref() {
        return Err(format!("reasoning: expected {:?}, found {found:?}", expected.reasoning));
    }
    // Calls, then content: before the first call, or (templates that write it there) after the last.
    let call_at = match &format.tools {
        Some(tools) => first_call_at(tools, text, format.content.start.trim()),
        None => None,
    };
    let (calls, calls_end) = match (&format.tools, call_at) {
        (Some(tools), Some(at)) => {
            let (calls, len) = read_calls(format.tool_format, tools, &text[at..])?;
            (calls, at + len)
        }
        _ => (Vec::new(), text.len()),
    };
    let before_calls = format.tools.as_ref().map_or("", |t| t.before_calls.trim());
    let unwrap_content = |content: &str| -> String {
        let content = content.trim();
        // The header of the calls' own message, when the template writes them as a second one.
        let content = match before_calls {
            "" => content,
            header => content.strip_suffix(header).unwrap_or(content).trim_end(),
        };
        let content = content.strip_prefix(format.content.start.trim()).unwrap_or(content);
        let opener = format.tools.as_ref().map_or("", |t| t.content_start_with_calls.trim());
        let content = match opener {
            "" => content,
            opener => content.strip_prefix(opener).unwrap_or(content).trim_start(),
        };
        content.strip_suffix(format.content.end.trim()).unwrap_or(content).trim().to_owned()
    };
    let mut content = unwrap_content(&text[..call_at.unwrap_or(text.len())]);
    if content.is_empty() && call_at.is_some() {
        let mut after = text[calls_end..].trim_start();
        if let Some(tools) = &format.tools {
            for marker in [tools.call_end.trim(), tools.section_end.trim()] {
                if !marker.is_empty() {
                    after = after.strip_prefix(marker).unwrap_or(after).trim_start();
                    // Or written after the content that follows the calls (Gemma 4 ends a call
                    // turn with `<|tool_response>` wherever its content goes).
                    after = after.trim_end().strip_suffix(marker).unwrap_or(after);
                }
            }
        }
        content = unwrap_content(after);
    }
    if content != expected.content {
        return Err(format!("content: expected {:?}, found {content:?}", expected.content));
    }
    if calls.len() != expected.calls.len() {
        return Err(format!("calls: expected {}, found {}", expected.calls.len(), calls.len()));
    }
    for ((name, args), (want_name, want_args)) in calls.iter().zip(&expected.calls) {
        if name != want_name {
            return Err(format!("call name: expected {want_name:?}, found {name:?}"));
        }
        if args != want_args {
            return Err(format!("arguments of {name}: expected {want_args}, found {args}"));
        }
    }
    Ok(())
}

/// Where the first call starts: its section, call or name marker; for bare JSON, the first JSON
/// value holding a name. A marker that begins the longer content opener (`>>>` of `>>>all\n`) is
/// the content's there.
fn first_call_at(tools: &ToolCallFormat, text: &str, content_start: &str) -> Option<usize> {
    for marker in [&tools.section_start, &tools.call_start, &tools.name_prefix] {
        let marker = marker.trim();
        if !marker.is_empty() {
            let opens_content = |at: usize| content_start.len() > marker.len() && text[at..].starts_with(content_start);
            return text.match_indices(marker).map(|(at, _)| at).find(|&at| !opens_content(at));
        }
    }
    if tools.json.is_some() {
        return json_values(text).find(|(_, _, v)| v.is_object() || v.is_array()).map(|(s, _, _)| s);
    }
    None
}

/// The calls at the start of `text`, and how far they reach.
fn read_calls(family: ToolFamily, tools: &ToolCallFormat, text: &str) -> Result<(Vec<(String, Json)>, usize), String> {
    if let Some(fields) = &tools.json {
        let mut calls = Vec::new();
        let mut end = 0;
        for (_, value_end, value) in json_values(text) {
            let holds_call = match &value {
                Json::Array(items) => items.iter().any(|item| json_call(fields, item).is_ok()),
                other => json_call(fields, other).is_ok(),
            };
            if !holds_call {
                continue;
            }
            end = value_end;
            let items = match value {
                Json::Array(items) => items,
                other => vec![other],
            };
            for item in items {
                calls.push(json_call(fields, &item)?);
            }
        }
        return Ok((calls, end));
    }
    let mut calls = Vec::new();
    let prefix = tools.name_prefix.trim();
    let suffix = tools.name_suffix.trim();
    let mut at = 0;
    loop {
        // The next call: at its name prefix, or (no prefix) right here after section markers.
        let name_start = if prefix.is_empty() {
            let mut rest = text[at..].trim_start();
            for skip in [tools.section_start.trim(), tools.separator.trim(), tools.call_start.trim()] {
                if !skip.is_empty() {
                    rest = rest.strip_prefix(skip).unwrap_or(rest).trim_start();
                }
            }
            let start = text.len() - rest.len();
            if rest.is_empty() || !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                break;
            }
            start
        } else {
            match find_from(text, prefix, at) {
                Some(start) => start + prefix.len(),
                None => break,
            }
        };
        let name_end = name_end(family, tools, text, name_start)?;
        let name = text[name_start..name_end].trim().to_owned();
        let mut body_start = name_end + if family == ToolFamily::PrefixedIndexed { 0 } else { suffix.len() };
        if tools.indexed_name_suffix && family != ToolFamily::PrefixedIndexed {
            // `index="2"`: the suffix's digits vary; skip its text before the digits, the digits,
            // and its text after them.
            let (pre, post) = split_at_digits(suffix);
            let digits_at = name_end + pre.len();
            let digits =
                text[digits_at..].len() - text[digits_at..].trim_start_matches(|c: char| c.is_ascii_digit()).len();
            body_start = digits_at + digits + post.len();
        }
        if family == ToolFamily::PrefixedIndexed {
            // `name:<index>` then the rest of the suffix.
            let digits = text[name_end + 1..].len()
                - text[name_end + 1..].trim_start_matches(|c: char| c.is_ascii_digit()).len();
            body_start = name_end
                + 1
                + digits
                + suffix.trim_start_matches(':').trim_start_matches(|c: char| c.is_ascii_digit()).len();
        }
        if let Some(again) = &tools.name_repeat_suffix {
            // The name written a second time, then the rest of the header.
            let written = format!("{name}{}", again.trim());
            let rest = &text[body_start..];
            let lead = rest.len() - rest.trim_start().len();
            if !rest[lead..].starts_with(&written) {
                return Err(format!("the name {name:?} is not written again as {written:?}"));
            }
            body_start += lead + written.len();
        }
        if !tools.call_id_suffix.trim().is_empty() {
            let id_end = find_from(text, tools.call_id_suffix.trim(), body_start).ok_or("call id suffix missing")?;
            body_start = id_end + tools.call_id_suffix.trim().len();
        }
        let (args, body_end) = if tools.arguments == ArgumentEncoding::Json {
            let (_, e, value) = json_values(&text[body_start..]).next().ok_or("arguments JSON missing")?;
            (value, body_start + e)
        } else {
            tagged_arguments(tools, &text[body_start..]).map(|(args, len)| (args, body_start + len))?
        };
        calls.push((name, args));
        if body_end <= at {
            break;
        }
        at = body_end;
    }
    Ok((calls, at))
}

/// Where a call's name ends: at the name suffix, or, without one, before what follows the name.
fn name_end(family: ToolFamily, tools: &ToolCallFormat, text: &str, start: usize) -> Result<usize, String> {
    if family == ToolFamily::PrefixedIndexed {
        return find_from(text, ":", start).ok_or_else(|| "index separator missing".to_owned());
    }
    let suffix = tools.name_suffix.trim();
    if !suffix.is_empty() {
        let fixed = if tools.indexed_name_suffix { split_at_digits(suffix).0 } else { suffix };
        return find_from(text, fixed, start).ok_or_else(|| "name suffix missing".to_owned());
    }
    let mut end =
        text[start..].find(|c: char| c.is_whitespace() || c == '{' || c == '(').map_or(text.len(), |i| start + i);
    for marker in [tools.arg_name_prefix.trim(), tools.call_end.trim()] {
        if let Some(at) = (!marker.is_empty()).then(|| find_from(text, marker, start)).flatten() {
            end = end.min(at);
        }
    }
    Ok(end)
}

/// `index="1"` → (`index="`, `"`): the text around a suffix's first digit run.
fn split_at_digits(suffix: &str) -> (&str, &str) {
    match suffix.find(|c: char| c.is_ascii_digit()) {
        Some(at) => {
            let rest = &suffix[at..];
            (&suffix[..at], rest.trim_start_matches(|c: char| c.is_ascii_digit()))
        }
        None => (suffix, ""),
    }
}

fn json_call(fields: &crate::format::JsonCallFields, item: &Json) -> Result<(String, Json), String> {
    if fields.name.is_empty() {
        let (name, args) = item.as_object().and_then(|o| o.iter().next()).ok_or("name-as-key call is not an object")?;
        return Ok((name.clone(), args.clone()));
    }
    let holder = match &fields.function {
        Some(key) => item.get(key).ok_or("function object missing")?,
        None => item,
    };
    let name = holder.get(&fields.name).and_then(Json::as_str).ok_or("name field missing")?.to_owned();
    let args = holder.get(&fields.arguments).ok_or("arguments field missing")?;
    let args = match args {
        Json::String(text) if fields.arguments_as_string => serde_json::from_str(text).map_err(|e| e.to_string())?,
        other => other.clone(),
    };
    Ok((name, args))
}

/// Tagged arguments of one call: `(arguments, bytes read)`. String values are taken raw; other
/// values are decoded as the format writes them (JSON, or Python literals), else kept as strings.
fn tagged_arguments(tools: &ToolCallFormat, text: &str) -> Result<(Json, usize), String> {
    let mut args = serde_json::Map::new();
    let mut at = 0;
    let name_prefix = tools.arg_name_prefix.trim_start();
    let value_suffix = tools.arg_value_suffix.trim_end();
    let call_end = tools.call_end.trim();
    loop {
        let next_end = if call_end.is_empty() { None } else { find_from(text, call_end, at) };
        let next_arg = if name_prefix.is_empty() {
            // No argument prefix (`f(a="x", b=2)`): the next argument starts after the separator,
            // unless the call ends first.
            let separator = tools.arg_separator.trim();
            let rest = text[at..].trim_start();
            let rest =
                if separator.is_empty() { rest } else { rest.strip_prefix(separator).unwrap_or(rest).trim_start() };
            let start = text.len() - rest.len();
            let ends_here = !call_end.is_empty() && rest.starts_with(call_end);
            (!rest.is_empty() && !ends_here && rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
                .then_some(start)
        } else {
            find_from(text, name_prefix, at)
        };
        let Some(arg_at) = next_arg.filter(|a| next_end.is_none_or(|e| *a < e)) else {
            return Ok((Json::Object(args), next_end.map_or(text.len(), |e| e + call_end.len())));
        };
        let key_start = arg_at + name_prefix.len();
        // The name ends at whichever suffix (plain or typed) comes first.
        let mut key_end: Option<(usize, usize)> = None;
        let suffixes = std::iter::once(&tools.arg_name_suffix).chain(&tools.arg_name_suffixes_typed);
        for suffix in suffixes {
            if suffix.is_empty() {
                continue;
            }
            if let Some(found) = find_from(text, suffix, key_start)
                && key_end.is_none_or(|(k, _)| found < k)
            {
                key_end = Some((found, suffix.len()));
            }
        }
        let (key_end, suffix_len) = key_end.ok_or("argument name suffix missing")?;
        let value_start = key_end + suffix_len;
        let key = text[key_start..key_end].trim().to_owned();
        if !tools.string_quote.is_empty() {
            // Literal values: a quoted string, or a bare literal up to the next delimiter.
            let (value, end) =
                read_literal(&text[value_start..], &tools.string_quote).ok_or("argument literal unterminated")?;
            args.insert(key, value);
            at = value_start + end;
            if !value_suffix.is_empty() && text[at..].starts_with(value_suffix) {
                at += value_suffix.len();
            }
            continue;
        }
        // A closing tag that repeats the name (`</city>`).
        let value_suffix = match &tools.arg_value_suffix_after_name {
            Some(after) => format!("{}{key}{after}", tools.arg_value_suffix).trim_end().to_owned(),
            None => value_suffix.to_owned(),
        };
        let value_end = if value_suffix.is_empty() {
            next_end.unwrap_or(text.len())
        } else {
            find_from(text, &value_suffix, value_start).ok_or("argument value suffix missing")?
        };
        let raw = &text[value_start..value_end];
        let nested = match (&tools.nested_item_name, &tools.arg_value_suffix_after_name) {
            (Some(item), Some(close_end)) => {
                let tags = crate::values::NestedTags {
                    open: tools.arg_name_prefix.trim_start(),
                    open_end: &tools.arg_name_suffix,
                    close: &tools.arg_value_suffix,
                    close_end: close_end.trim_end(),
                    item,
                    python: tools.value_encoding == ValueEncoding::Python,
                };
                crate::values::nested(raw, &tags, None, 0)
            }
            _ => None,
        };
        args.insert(key, nested.unwrap_or_else(|| decode_value(raw, tools.value_encoding)));
        at = value_end + value_suffix.len();
    }
}

/// A literal at the start of `text`: `(value, bytes)`. Strings are delimited by `quote` (with
/// backslash escapes); other literals run to the first `,` `)` `}` or newline outside brackets and
/// quotes, and decode as JSON or Python literals.
fn read_literal(text: &str, quote: &str) -> Option<(Json, usize)> {
    if let Some(body) = text.strip_prefix(quote) {
        let mut i = 0;
        while i < body.len() {
            if body[i..].starts_with('\\') {
                i += 1 + body[i + 1..].chars().next().map_or(0, char::len_utf8);
                continue;
            }
            if body[i..].starts_with(quote) {
                let raw = &body[..i];
                let value = if quote == "\"" {
                    serde_json::from_str(&format!("\"{raw}\"")).unwrap_or_else(|_| json!(raw))
                } else {
                    json!(raw.replace("\\'", "'"))
                };
                return Some((value, quote.len() + i + quote.len()));
            }
            i += body[i..].chars().next().map_or(1, char::len_utf8);
        }
        return None;
    }
    let mut depth = 0i32;
    let mut in_string: Option<char> = None;
    let mut end = text.len();
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                in_string = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => in_string = Some(c),
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' if depth > 0 => depth -= 1,
            ',' | ')' | '}' | ']' | '\n' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    // A bare literal is never a string (strings are quoted), so Python's True/False/None are safe to
    // read whatever the encoding; a custom quote inside containers becomes JSON's.
    let raw = text[..end].trim();
    // Containers in a custom quote (Gemma 4's `{k:<|"|>v<|"|>}`, keys bare) read as the parser
    // reads them.
    let raw = if quote == "\"" || quote == "'" {
        raw.to_owned()
    } else {
        crate::values::requote(raw, quote).unwrap_or_else(|| raw.replace(quote, "\""))
    };
    Some((decode_value(&raw, ValueEncoding::Python), end))
}

/// A tagged value: JSON (or, for `python` encoding, a Python literal) when it parses as a non-string,
/// else the raw text.
fn decode_value(raw: &str, encoding: ValueEncoding) -> Json {
    if let Ok(value) = serde_json::from_str::<Json>(raw)
        && !value.is_string()
    {
        return value;
    }
    if encoding == ValueEncoding::Python {
        match raw.trim() {
            "True" => return json!(true),
            "False" => return json!(false),
            "None" => return json!(null),
            literal if literal.starts_with(['[', '{']) => {
                let as_json = literal
                    .replace('\'', "\"")
                    .replace("True", "true")
                    .replace("False", "false")
                    .replace("None", "null");
                if let Ok(value) = serde_json::from_str::<Json>(&as_json) {
                    return value;
                }
            }
            _ => {}
        }
    }
    json!(raw)
}
