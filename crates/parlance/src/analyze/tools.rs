//! Tool-call analysis (seed comparisons T1–T7, A1–A2): one call, two calls, two arguments.
//!
//! The function name is found in the one-call output. If it sits inside a JSON value, the family is
//! JSON-native and the JSON says the field names. Otherwise the arguments are looked for as a JSON
//! object after the name (tag + JSON), else as tagged name/value pairs. Per-call and section markers
//! are told apart by what repeats between the two calls of a two-call output. The family *name*
//! (bracket-tag, special-token, ...) is read off the markers found; it labels, it does not steer.

use serde_json::{Value as Json, json};

use super::diff::{find_from, json_values};
use super::probe::{ARG_1, ARG_2, FN_1, FN_2, ID_1, ID_2, Output, Probe, VALUE_1, VALUE_2, call};
use crate::format::{
    ArgumentEncoding, Confidence, Finding, Format, JsonCallFields, NameEscape, ToolCallFormat, ToolFamily,
    ValueEncoding,
};
use crate::markers::{common_prefix, common_suffix};

/// Analyzes tool calls into `format.tools` / `format.tool_format` and sets `format.turn_end` from
/// `content_tail` (what follows content in a content-only turn).
/// `empty_block` (an empty reasoning block the template writes in every turn) is removed from the
/// start of each output first.
pub(super) fn analyze(probe: &Probe, format: &mut Format, content_tail: &str, empty_block: &str) {
    format.turn_end = content_tail.to_owned();
    // Arguments as an object (what Hugging Face callers pass), else as the JSON string of the
    // OpenAI wire shape: some templates print arguments with `+` or `|string`, which raise on an
    // object or print Python's repr of it, and write JSON only when handed the string.
    let object = |value: Json| value;
    let string = |value: Json| json!(value.to_string());
    let one = rendered_calls(probe, empty_block, &object);
    let found = match &one {
        Some((one, two)) if one.text.contains(FN_1) => {
            let texts = call_texts(&one.text, content_tail, two.as_ref());
            json_families(&texts).map(|found| (found, texts.turn_end, false))
        }
        _ => None,
    };
    // Only where the template prints the arguments value itself: the object form raises, renders
    // no call, or prints the object as Python's `str` does (`{'a': 'b'}`).
    let python_repr = format!("{{'{ARG_1}': '{VALUE_1}'}}");
    let prints_python = one.as_ref().is_some_and(|(one, _)| one.text.contains(FN_1) && one.text.contains(&python_repr));
    let prints_value = match &one {
        None => true,
        Some((one, _)) => !one.text.contains(FN_1) || prints_python,
    };
    let found = found.or_else(|| {
        if !prints_value {
            return None;
        }
        let (one, two) = rendered_calls(probe, empty_block, &string)?;
        if !one.text.contains(FN_1) {
            return None;
        }
        // A call that opens with no marker of its own (functionary-v3.2's `>>>` sits in the
        // generation prompt) cannot be told from content: not a finding.
        let texts = call_texts(&one.text, content_tail, two.as_ref());
        let (family, tools) = json_families(&texts)?;
        let opened = [&tools.section_start, &tools.call_start, &tools.name_prefix].iter().any(|m| !m.trim().is_empty());
        (opened || family == ToolFamily::JsonNative).then_some(((family, tools), texts.turn_end, true))
    });
    // How the calls were shown, for the evidence.
    let shown = |one: &Output, two: bool, arguments: &str| {
        let calls =
            if two { "one-call and two-call messages" } else { "a one-call message (two calls did not render)" };
        let place = if one.from_history {
            "rendered as history (the last turn omits them)"
        } else {
            "rendered as the last turn"
        };
        let confidence =
            if two && !one.from_history && arguments == "objects" { Confidence::High } else { Confidence::Medium };
        (format!("{calls} with arguments as {arguments}, {place}"), confidence)
    };
    if let Some(((family, mut tools), turn_end, from_string)) = found {
        let arguments = if from_string { "the wire's JSON string" } else { "objects" };
        let shown_by = match &one {
            Some((o, two)) if !from_string => shown(o, two.is_some(), arguments),
            _ => (
                format!("call messages with arguments as {arguments} (objects raise or print as Python)"),
                Confidence::Medium,
            ),
        };
        super::evidence(format, Finding::ToolCalls, &shown_by.0, shown_by.1);
        format.turn_end = turn_end;
        tools.arguments_from_string = from_string;
        if from_string && prints_python {
            // History whose arguments came as a mapping holds Python literals there: read them too.
            tools.value_encoding = ValueEncoding::Python;
        }
        tools.optional_call_opener = optional_call_opener(probe, &tools, &one);
        format.tool_format = family;
        format.tools = Some(tools);
        return;
    }
    let Some((one, two)) = one else {
        format.unsupported.push("tool calls: a message with a tool call makes the template raise".into());
        return;
    };
    if !one.text.contains(FN_1) {
        // Kimi K2's own templates write the call's id where others write its name, and only the id:
        // with ids that name the function (`functions.NAME:0`), as the model writes them, the
        // calls show.
        if !super::probe::named_ids() {
            let mut named = format.clone();
            super::probe::with_named_ids(|| analyze(probe, &mut named, content_tail, empty_block));
            if named.tools.is_some() {
                *format = named;
                format.workarounds.push(crate::format::Workaround::CallIdsNameTheFunction);
                super::evidence(
                    format,
                    Finding::ToolCalls,
                    "the calls render only from their ids, given as `functions.NAME:INDEX` (the name is never written otherwise)",
                    Confidence::Medium,
                );
                return;
            }
        }
        let mut finding = "tool calls: the template does not render the calls of a message".to_owned();
        let prose = prose_markers(probe);
        if !prose.is_empty() {
            finding.push_str(&format!(
                "; its tool prompt names {prose:?} in prose only (no render shows how a call is written, so none is derived)"
            ));
        }
        format.unsupported.push(finding);
        return;
    }
    let CallTexts { turn_end, one: one_text, two: two_text } = call_texts(&one.text, content_tail, two.as_ref());
    format.turn_end = turn_end;
    match tag_tagged(probe, &one_text, two_text.as_deref()) {
        Some((family, tools)) => {
            let (shown_by, confidence) = shown(&one, two.is_some(), "objects");
            super::evidence(format, Finding::ToolCalls, &shown_by, confidence);
            format.tool_format = family;
            format.tools = Some(tools);
        }
        None => {
            format.tool_format = ToolFamily::Unknown;
            format.unsupported.push(format!("tool calls: rendered but not understood: {one_text:?}"));
        }
    }
}

/// Bare JSON calls: the special token the template writes before a built-in tool's call (Llama
/// 3.x's `<|python_tag|>`, rendered with `builtin_tools` naming the probe's function), which no
/// plain call shows; empty when there is none.
fn optional_call_opener(probe: &Probe, tools: &ToolCallFormat, one: &Option<(Output, Option<Output>)>) -> String {
    let bare = [&tools.section_start, &tools.call_start, &tools.name_prefix].iter().all(|m| m.trim().is_empty());
    let Some((plain, _)) = one.as_ref().filter(|_| bare && tools.json.is_some()) else { return String::new() };
    let builtin = vec![call(ID_1, FN_1, json!({ARG_1: VALUE_1}))];
    let Some(out) = probe.output_with_calls(builtin, &[("builtin_tools", json!([FN_1]))]) else {
        return String::new();
    };
    let Some(at) = out.text.find(FN_1) else { return String::new() };
    let before = out.text[..at].trim_end();
    let Some(token) = super::markers_in(before).last().cloned() else { return String::new() };
    let special = token.starts_with("<|") && token.ends_with("|>");
    if special && before.ends_with(&token) && !plain.text.contains(&token) { token } else { String::new() }
}

/// Call markers the tool prompt adds to a conversation (`<tool_call>` in "write calls as
/// `<tool_call>{…}</tool_call>`": bracketed words speaking of calls or functions), at most eight: what a template whose calls never render says
/// about them in prose.
fn prose_markers(probe: &Probe) -> Vec<String> {
    let (Some(with), Some(without)) = (probe.render(&[], true, true, &[]), probe.render(&[], false, true, &[])) else {
        return Vec::new();
    };
    let lead = common_prefix(&with, &without);
    let tail = common_suffix(&with[lead..], &without[lead.min(without.len())..]);
    let added = &with[lead..with.len() - tail];
    let mut found: Vec<String> = Vec::new();
    for marker in super::markers_in(added) {
        let plain = marker.trim_matches(|c| c == '<' || c == '>' || c == '[' || c == ']' || c == '/' || c == '|');
        let wordlike =
            !plain.is_empty() && plain.len() <= 40 && plain.chars().all(|c| c.is_alphanumeric() || "_-:|".contains(c));
        // Only markers that speak of calls (`<tool_call>`, `[TOOL_CALLS]`, `<function_call>`).
        let lower = plain.to_lowercase();
        let wordlike = wordlike && (lower.contains("call") || lower.contains("function"));
        if wordlike && !without.contains(&marker) && !found.contains(&marker) && found.len() < 8 {
            found.push(marker);
        }
    }
    found
}

/// The one-call and (when it renders both calls) two-call outputs, with `empty_block` taken off
/// their start; `arguments` shapes the probe arguments. `None` when the one-call message raises.
fn rendered_calls(
    probe: &Probe,
    empty_block: &str,
    arguments: &dyn Fn(Json) -> Json,
) -> Option<(Output, Option<Output>)> {
    let strip = |mut output: Output| {
        if !empty_block.is_empty() && output.text.starts_with(empty_block) {
            output.text.drain(..empty_block.len());
        }
        output
    };
    let one_call = vec![call(ID_1, FN_1, arguments(json!({ARG_1: VALUE_1})))];
    let one = probe.output_with_calls(one_call, &[]).map(strip)?;
    let two_calls = vec![
        call(ID_1, FN_1, arguments(json!({ARG_1: VALUE_1}))),
        call(ID_2, FN_2, arguments(json!({ARG_2: VALUE_2}))),
    ];
    let two =
        probe.output_with_calls(two_calls, &[]).map(strip).filter(|o| o.text.contains(FN_1) && o.text.contains(FN_2));
    Some((one, two))
}

/// The one-call and two-call outputs without the turn end.
struct CallTexts {
    /// What a content turn and a call turn end with.
    turn_end: String,
    one: String,
    two: Option<String>,
}

/// Splits the turn end off the call outputs; `content_tail` is what follows content in a
/// content-only turn.
///
/// A template may close only some call turns: DeepSeek V3's closes the section and the turn after
/// a second call only. The turn end is then read off the two-call output, and the one-call output,
/// which lacks it, loses nothing.
fn call_texts(one: &str, content_tail: &str, two: Option<&Output>) -> CallTexts {
    let two_len = two.map_or(0, |o| common_suffix(content_tail, &o.text));
    let turn_end_len = common_suffix(content_tail, one).max(two_len);
    let turn_end = content_tail[content_tail.len() - turn_end_len..].to_owned();
    let without_end = |text: &str| text[..text.len() - common_suffix(text, &turn_end).min(turn_end.len())].to_owned();
    CallTexts { one: without_end(one), two: two.map(|o| without_end(&o.text)), turn_end }
}

/// The JSON families (JSON-native, tag + JSON) read off call outputs.
fn json_families(texts: &CallTexts) -> Option<(ToolFamily, ToolCallFormat)> {
    let (one, two) = (texts.one.as_str(), texts.two.as_deref());
    let native = json_native(one, two);
    // A header that names the function before a JSON call naming it again (Inkling's
    // `<|message_model|>f<|content_invoke_tool_json|>{"name":"f","args":…}`): the name is the
    // header's, and the JSON up to the arguments is the name written again. The call is still a
    // JSON object holding the name, so the family stays JSON-native.
    if native.as_ref().is_some_and(|(_, tools)| tools.section_start.contains(FN_1))
        && let Some((_, tools)) = tag_json(one, two).filter(|(_, tools)| tools.name_repeat_suffix.is_some())
    {
        return Some((ToolFamily::JsonNative, tools));
    }
    native.or_else(|| tag_json(one, two))
}

fn contains_string(value: &Json, needle: &str) -> bool {
    match value {
        Json::String(s) => s == needle,
        Json::Array(items) => items.iter().any(|v| contains_string(v, needle)),
        Json::Object(map) => map.iter().any(|(k, v)| k == needle || contains_string(v, needle)),
        _ => false,
    }
}

fn is_probe_arguments(value: &Json) -> Option<bool> {
    let expected = json!({ARG_1: VALUE_1});
    if *value == expected {
        return Some(false);
    }
    let text = value.as_str()?;
    (serde_json::from_str::<Json>(text).ok()? == expected).then_some(true)
}

/// Finds the object that holds the call, returning its field names.
fn call_fields(value: &Json, parent_key: Option<&str>, parent: Option<&Json>) -> Option<JsonCallFields> {
    match value {
        Json::Array(items) => items.iter().find_map(|v| call_fields(v, None, None)),
        Json::Object(map) => {
            // Name as a field value.
            if let Some((name_key, _)) = map.iter().find(|(_, v)| v.as_str() == Some(FN_1)) {
                let (args_key, as_string) = map.iter().find_map(|(k, v)| Some((k.clone(), is_probe_arguments(v)?)))?;
                // The call's id, or where the template writes a counter in its place (Command R7B's
                // `"tool_call_id": "0"`), the key named for an id that holds the first call's index.
                let id_in = |m: &serde_json::Map<String, Json>| {
                    m.iter().find(|(_, v)| v.as_str() == Some(ID_1)).map(|(k, _)| k.clone()).or_else(|| {
                        let counter = |v: &Json| v.as_str() == Some("0");
                        m.iter()
                            .find(|(k, v)| k.to_ascii_lowercase().ends_with("id") && counter(v))
                            .map(|(k, _)| k.clone())
                    })
                };
                let (function, id) = match (parent_key, parent.and_then(Json::as_object)) {
                    (Some(key), Some(parent)) => (Some(key.to_owned()), id_in(parent).or_else(|| id_in(map))),
                    _ => (None, id_in(map)),
                };
                // The keys in the order written, kept where it is not the usual one.
                let ours = [Some(name_key), Some(&args_key), id.as_ref()];
                let written: Vec<String> = map.keys().filter(|k| ours.contains(&Some(*k))).cloned().collect();
                let usual: Vec<String> = ours.iter().flatten().map(|k| (*k).clone()).collect();
                let key_order = if written != usual && written.len() == usual.len() { written } else { Vec::new() };
                return Some(JsonCallFields {
                    name: name_key.clone(),
                    arguments: args_key,
                    function,
                    id,
                    array: false,
                    arguments_as_string: as_string,
                    key_order,
                });
            }
            // Name as the key of the arguments.
            if let Some(args) = map.get(FN_1)
                && let Some(as_string) = is_probe_arguments(args)
            {
                return Some(JsonCallFields {
                    name: String::new(),
                    arguments: String::new(),
                    arguments_as_string: as_string,
                    ..JsonCallFields::default()
                });
            }
            map.iter().find_map(|(k, v)| call_fields(v, Some(k), Some(value)))
        }
        _ => None,
    }
}

/// JSON-native: a JSON value holds the function name.
fn json_native(one: &str, two: Option<&str>) -> Option<(ToolFamily, ToolCallFormat)> {
    let (start, end, value) = json_values(one).find(|(_, _, v)| contains_string(v, FN_1))?;
    let mut fields = call_fields(&value, None, None)?;
    fields.array = value.is_array();
    let mut tools = ToolCallFormat {
        section_start: one[..start].to_owned(),
        section_end: one[end..].to_owned(),
        arguments: ArgumentEncoding::Json,
        json: Some(fields.clone()),
        ..ToolCallFormat::default()
    };
    if let Some(two) = two {
        let values: Vec<_> = json_values(two).collect();
        let first = values.iter().position(|(_, _, v)| contains_string(v, FN_1));
        let second = values.iter().position(|(_, _, v)| contains_string(v, FN_2));
        if let (Some(a), Some(b)) = (first, second) {
            tools.parallel = true;
            if a != b {
                let between = &two[values[a].1..values[b].0];
                split_per_call(&mut tools, between);
            }
        }
    }
    // JSON in a fenced code block after a keyword (`Action:\n```json`) is the markdown-block family.
    let family = if tools.section_start.contains("```") || tools.call_start.contains("```") {
        ToolFamily::MarkdownBlock
    } else {
        ToolFamily::JsonNative
    };
    Some((family, tools))
}

/// When the text between two calls repeats the section markers, they are per-call markers.
fn split_per_call(tools: &mut ToolCallFormat, between: &str) {
    let start = tools.section_start.trim();
    let end = tools.section_end.trim();
    if !start.is_empty() && between.contains(start) {
        let closing = if end.is_empty() { 0 } else { between.find(end).map_or(0, |at| at + end.len()) };
        let opening = between.rfind(start).unwrap_or(between.len());
        tools.separator = between[closing..opening.max(closing)].to_owned();
        tools.call_start = std::mem::take(&mut tools.section_start);
        tools.call_end = std::mem::take(&mut tools.section_end);
    } else {
        tools.separator = between.to_owned();
    }
}

/// Tag + JSON: the name outside JSON, the arguments a JSON object after it.
fn tag_json(one: &str, two: Option<&str>) -> Option<(ToolFamily, ToolCallFormat)> {
    let name_at = one.find(FN_1)?;
    let arguments_after = |from: usize| {
        json_values(&one[from..])
            .find(|(_, _, v)| is_probe_arguments(v).is_some())
            .map(|(s, e, _)| (s + from, e + from))
    };
    // The arguments right after the name, or inside a JSON call that writes the name again.
    let again = find_from(one, FN_1, name_at + FN_1.len()).map(|at| at + FN_1.len());
    let (args_start, args_end) = arguments_after(name_at).or_else(|| arguments_after(again?))?;
    let mut tools = ToolCallFormat {
        name_suffix: one[name_at + FN_1.len()..args_start].to_owned(),
        arguments: ArgumentEncoding::Json,
        ..ToolCallFormat::default()
    };
    split_repeated_name(&mut tools);
    // T7: a call id between the name and the arguments.
    if let Some(id_at) = tools.name_suffix.find(ID_1) {
        tools.call_id_suffix = tools.name_suffix[id_at + ID_1.len()..].to_owned();
        tools.name_suffix.truncate(id_at);
    }
    let before = &one[..name_at];
    let after = &one[args_end..];
    // In the two-call output: the text from the end of call 1's arguments to call 2's name, and
    // the text after call 2's arguments.
    let arguments_end = |two: &str, from: usize, arg: &str| {
        let probe_arguments = |v: &Json| contains_string(v, arg) || v.as_str().is_some_and(|s| s.contains(arg));
        let (_, end, _) = json_values(&two[from..]).find(|(_, _, v)| probe_arguments(v))?;
        Some(from + end)
    };
    // Where a call's arguments are looked for: after its name's last writing.
    let repeated = tools.name_repeat_suffix.is_some();
    let body = |two: &str, name: &str, from: usize| {
        let at = find_from(two, name, from)? + name.len();
        if repeated { Some(find_from(two, name, at)? + name.len()) } else { Some(at) }
    };
    let second = two.and_then(|two| {
        let end = arguments_end(two, body(two, FN_1, 0)?, ARG_1)?;
        let second = find_from(two, FN_2, end)?;
        Some((two, end, second))
    });
    let between = second.map(|(two, end, second)| &two[end..second]);
    split_around_calls(&mut tools, before, after, between);
    split_id_before_name(&mut tools);
    // A section end written only after several calls (DeepSeek V3): the two-call output goes on
    // past the one-call output's call end.
    let last_after =
        second.and_then(|(two, _, second)| Some(&two[arguments_end(two, body(two, FN_2, second)?, ARG_2)?..]));
    if let Some(last_after) = last_after.filter(|_| tools.section_end.is_empty() && !tools.call_end.is_empty())
        && let Some(rest) = last_after.strip_prefix(tools.call_end.as_str())
    {
        tools.section_end = rest.to_owned();
        tools.section_end_only_after_several = !rest.trim().is_empty();
    }
    tools.indexed_name_suffix = two.is_some_and(|two| suffix_is_indexed(&tools.name_suffix, two));
    Some((family_of(&tools, one, two), tools))
}

/// A call id written before the name (Solar Open's `<|tool_call:begin|>ID<|tool_call:name|>NAME`):
/// the probe ids end the section start and the separator. They come out of the markers; the text
/// before the id that both share opens every call.
fn split_id_before_name(tools: &mut ToolCallFormat) {
    let Some(start) = tools.section_start.strip_suffix(ID_1) else { return };
    let start = start.to_owned();
    tools.call_id_before_name = true;
    match tools.separator.strip_suffix(ID_2) {
        Some(separator) if tools.call_start.is_empty() => {
            let opener = common_suffix(&start, separator);
            tools.call_start = start[start.len() - opener..].to_owned();
            tools.section_start = start[..start.len() - opener].to_owned();
            tools.separator = separator[..separator.len() - opener].to_owned();
        }
        _ => tools.section_start = start,
    }
}

/// A name suffix that writes the function's name again (a header naming the call, then a body
/// naming it too): the suffix ends before the second writing, and what follows that is
/// `name_repeat_suffix`.
fn split_repeated_name(tools: &mut ToolCallFormat) {
    if let Some(at) = tools.name_suffix.find(FN_1) {
        tools.name_repeat_suffix = Some(tools.name_suffix[at + FN_1.len()..].to_owned());
        tools.name_suffix.truncate(at);
    }
}

/// Splits the text before the first name and after the first call into section and per-call parts,
/// using `between` (from the end of call 1 to call 2's name in a two-call output).
fn split_around_calls(tools: &mut ToolCallFormat, before: &str, after: &str, between: Option<&str>) {
    tools.parallel = between.is_some();
    match between {
        Some(between) => {
            // `between` = call end + separator + call start + name prefix.
            let name_prefix_len = common_suffix(before, between);
            tools.name_prefix = before[before.len() - name_prefix_len..].to_owned();
            tools.section_start = before[..before.len() - name_prefix_len].to_owned();
            let call_end_len = common_prefix(after, between).min(between.len() - name_prefix_len.min(between.len()));
            tools.call_end = after[..call_end_len].to_owned();
            tools.section_end = after[call_end_len..].to_owned();
            let middle_end = between.len().saturating_sub(name_prefix_len).max(call_end_len);
            tools.separator = between[call_end_len..middle_end].to_owned();
        }
        None => {
            tools.name_prefix = before.to_owned();
            tools.call_end = after.to_owned();
        }
    }
}

/// Tag + tagged arguments: name and each argument in markers.
fn tag_tagged(probe: &Probe, one: &str, two_calls: Option<&str>) -> Option<(ToolFamily, ToolCallFormat)> {
    let name_at = one.find(FN_1)?;
    let arg_at = find_from(one, ARG_1, name_at + FN_1.len())?;
    let value_at = find_from(one, VALUE_1, arg_at + ARG_1.len())?;
    let mut tools = ToolCallFormat { arguments: ArgumentEncoding::Tagged, ..ToolCallFormat::default() };
    let head = &one[name_at + FN_1.len()..arg_at];
    tools.arg_name_suffix = one[arg_at + ARG_1.len()..value_at].to_owned();
    let tail = &one[value_at + VALUE_1.len()..];
    // Two arguments tell the argument prefix from the name suffix, and the value suffix.
    let two_args = vec![call(ID_1, FN_1, json!({ARG_1: VALUE_1, ARG_2: VALUE_2}))];
    let two = probe.output_with_calls(two_args, &[]).map(|o| o.text);
    let between_args = two.as_deref().and_then(|two| {
        let v1 = two.find(VALUE_1)? + VALUE_1.len();
        let a2 = find_from(two, ARG_2, v1)?;
        Some(two[v1..a2].to_owned())
    });
    let after_value = match between_args {
        Some(between) => {
            let mut suffix_len = common_prefix(tail, &between);
            let mut prefix_len = common_suffix(head, &between);
            // Text shared by both ends is written once, so suffix + separator + prefix rebuild
            // `between`. It stays with the value suffix (the `\n` of `</parameter>\n<parameter=`,
            // Kimi-K3's `<|sep|>` closing `<|close|>argument`), unless the suffix is a whole tag
            // without it: then it opens the next argument (MiniMax-M3's `]<]minimax[>[`, written
            // before every tag).
            let overlap = (suffix_len + prefix_len).saturating_sub(between.len());
            let shared = between.get(between.len() - prefix_len..suffix_len).unwrap_or_default();
            let own_end = suffix_len - overlap.min(suffix_len);
            let own_closed = tail.get(..own_end).is_some_and(|own| own.trim_end().ends_with(['>', ']']));
            if overlap > 0 && !shared.trim().is_empty() && own_closed {
                suffix_len -= overlap.min(suffix_len);
            } else {
                prefix_len -= overlap.min(prefix_len);
            }
            while !head.is_char_boundary(head.len() - prefix_len) {
                prefix_len -= 1;
            }
            tools.arg_name_prefix = head[head.len() - prefix_len..].to_owned();
            tools.name_suffix = head[..head.len() - prefix_len].to_owned();
            tools.arg_value_suffix = tail[..suffix_len].to_owned();
            tools.arg_separator = between[suffix_len.min(between.len())..between.len() - prefix_len].to_owned();
            &tail[suffix_len..]
        }
        None => {
            tools.name_suffix = head.to_owned();
            tail
        }
    };
    split_repeated_name(&mut tools);
    // Measured before the quote moves from the markers to the values below.
    let rendered_value_suffix_len = tools.arg_value_suffix.len();
    // A closing tag that repeats the argument's name: the name is not part of the marker.
    if let Some(at) = tools.arg_value_suffix.find(ARG_1) {
        let after = tools.arg_value_suffix[at + ARG_1.len()..].to_owned();
        tools.arg_value_suffix.truncate(at);
        tools.arg_value_suffix_after_name = Some(after);
    }
    // How non-string values are written, and whether their name suffix differs (typed markers).
    tools.value_encoding = ValueEncoding::Json;
    let typed = |value: Json| {
        let message = vec![call(ID_1, FN_1, json!({ARG_1: value}))];
        let text = probe.output_with_calls(message, &[])?.text;
        let arg_end = text.find(ARG_1)? + ARG_1.len();
        Some(text[arg_end..].to_owned())
    };
    if let Some(after) = typed(json!(true))
        && after.find("True").is_some_and(|t| after.find("true").is_none_or(|j| t < j))
    {
        tools.value_encoding = ValueEncoding::Python;
    }
    let mut typed_suffixes: Vec<String> = Vec::new();
    for value in [json!(42), json!(3.25), json!(true), json!(null), json!([1, "two"]), json!({"k": 1})] {
        let literal = serde_json::to_string(&value).unwrap_or_default();
        // The ways templates print a value: compact JSON, `json.dumps` spacing, Python `str()`.
        let spaced = literal.replace(",", ", ").replace(":", ": ");
        let python = match &value {
            Json::Bool(true) => "True".to_owned(),
            Json::Null => "None".to_owned(),
            _ => spaced.replace('"', "'"),
        };
        let Some(after) = typed(value) else { continue };
        // The value is the literal right before the value suffix (a type name may come earlier).
        let closing = tools.arg_value_suffix.trim();
        let at = [literal.as_str(), spaced.as_str(), python.as_str()]
            .iter()
            .filter_map(|needle| {
                let with_suffix = format!("{needle}{closing}");
                after.find(&with_suffix).or_else(|| after.find(needle))
            })
            .min();
        if let Some(at) = at {
            let suffix = after[..at].to_owned();
            if suffix != tools.arg_name_suffix && !suffix.is_empty() && !typed_suffixes.contains(&suffix) {
                typed_suffixes.push(suffix);
            }
        }
    }
    // `a="x"` but `a=42`: the quote belongs to string values, not to the markers.
    if let [bare] = typed_suffixes.as_slice()
        && let Some(quote) = tools.arg_name_suffix.strip_prefix(bare.as_str())
        && !quote.is_empty()
        && tools.arg_value_suffix.starts_with(quote)
    {
        tools.string_quote = quote.to_owned();
        tools.arg_value_suffix = tools.arg_value_suffix[quote.len()..].to_owned();
        tools.arg_name_suffix = bare.clone();
        typed_suffixes.clear();
    }
    tools.arg_name_suffixes_typed = typed_suffixes;
    // Names written as XML attribute values (Kimi K3's `key="a&amp;b&quot;c"`).
    let odd_name = format!("{ARG_1}&\"x");
    let odd = vec![call(ID_1, FN_1, json!({odd_name.as_str(): VALUE_1}))];
    if probe.output_with_calls(odd, &[]).is_some_and(|out| {
        let text = &out.text;
        text.contains(&format!("{ARG_1}&amp;&quot;x")) && !text.contains(&odd_name)
    }) {
        tools.name_escape = NameEscape::XmlEntities;
    }
    // Arrays and objects as nested tags written with the argument markers (MiniMax-M3): possible
    // only where a closing tag names its element. The array item's element name is read off.
    if let Some(after_name) = tools.arg_value_suffix_after_name.clone() {
        let element = |name: &str, inner: &str| {
            format!(
                "{}{name}{}{inner}{}{name}{after_name}",
                tools.arg_name_prefix, tools.arg_name_suffix, tools.arg_value_suffix
            )
        };
        let object = typed(json!({ARG_2: VALUE_2})).is_some_and(|after| after.contains(&element(ARG_2, VALUE_2)));
        let item = typed(json!([VALUE_2])).and_then(|after| {
            let open = after.find(tools.arg_name_prefix.as_str()).map(|at| at + tools.arg_name_prefix.len())?;
            let name_len = after[open..].find(tools.arg_name_suffix.as_str())?;
            let name = &after[open..open + name_len];
            (!name.is_empty() && after.contains(&element(name, VALUE_2))).then(|| name.to_owned())
        });
        if object {
            tools.nested_item_name = item;
        }
    }
    // In the two-call output: from the end of call 1's value (and value suffix) to call 2's name.
    let between_calls = two_calls.and_then(|two| {
        let end = two.find(VALUE_1)? + VALUE_1.len() + rendered_value_suffix_len;
        let second = find_from(two, FN_2, end)?;
        Some(two[end..second].to_owned())
    });
    split_around_calls(&mut tools, &one[..name_at], after_value, between_calls.as_deref());
    tools.indexed_name_suffix = two_calls.is_some_and(|two| suffix_is_indexed(&tools.name_suffix, two));
    let family = if tools.name_suffix.trim_end().ends_with('(') && tools.arg_name_suffix.trim_start().starts_with('=') {
        ToolFamily::Pythonic
    } else {
        family_of(&tools, one, two_calls)
    };
    Some((family, tools))
}

/// Whether the second call of `two` has the same name suffix with its index one higher.
fn suffix_is_indexed(suffix: &str, two: &str) -> bool {
    let Some(at) = suffix.find(|c: char| c.is_ascii_digit()) else { return false };
    let digits: String = suffix[at..].chars().take_while(char::is_ascii_digit).collect();
    let Ok(index) = digits.parse::<u64>() else { return false };
    let next = format!("{}{}{}", &suffix[..at], index + 1, &suffix[at + digits.len()..]);
    two.contains(&format!("{FN_2}{next}"))
}

/// Names the family from the markers found (labels only; parsing follows the markers). Tagged
/// arguments make a tag-tagged family whatever the markers look like; for JSON arguments the name's
/// surroundings decide.
fn family_of(tools: &ToolCallFormat, one: &str, two: Option<&str>) -> ToolFamily {
    if tools.arguments == ArgumentEncoding::Tagged {
        return ToolFamily::TagTagged;
    }
    let markers = [&tools.section_start, &tools.name_prefix, &tools.name_suffix, &tools.call_end];
    let joined: String = markers.iter().map(|m| m.as_str()).collect();
    // Special tokens that open or name the call, not a turn end glued to its close (Llama's
    // `</function><|eom_id|>`).
    let opening: String = markers[..3].iter().map(|m| m.as_str()).collect();
    // Counted from 0 (`functions.f:0`, from the call id) or from 1 (`loop.index`).
    let indexed = two.is_some_and(|two| suffix_is_indexed(&tools.name_suffix, two));
    let prefix = tools.name_prefix.trim();
    if indexed {
        ToolFamily::PrefixedIndexed
    } else if tools.name_prefix.contains("to=") {
        ToolFamily::Channel
    } else if opening.contains("<|") || opening.contains("<｜") {
        ToolFamily::SpecialToken
    } else if joined.contains("```") {
        ToolFamily::MarkdownBlock
    } else if prefix.starts_with('[') && prefix.ends_with(']') && !one.contains('<') {
        ToolFamily::BracketTag
    } else if prefix.ends_with(">>>") {
        ToolFamily::RecipientBased
    } else {
        ToolFamily::TagJson
    }
}
