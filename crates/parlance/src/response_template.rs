//! A Hugging Face `response_template` derived from a `Format`: the declarative parser description
//! that transformers' `parse_response` / `ResponseParser` read (vLLM's `--tool-call-parser hf`, and
//! SGLang's `response_template`). Nobody writes one per model here: the analysis already knows the
//! markers.
//!
//! The template anchors on the generation prompt (up to any reasoning opener it writes, so a
//! prefilled `<think>` is read as the parser reads it), makes content the implicit region closed by
//! the turn end, reasoning a region between its markers, and tool calls a repeated region whose
//! open pattern captures the function name where the markers hold it. Arguments are JSON
//! (`content: json`), tagged (`xml-inline` with a key/value pattern built from the argument
//! markers; `parse_response(tools=…)` casts the values by the tool schemas), or Python calls
//! (`python-call-list`). What the format cannot say — reasoning without a start marker, content in
//! its own markers, channels, recipients, quoted or nested tagged values, a prompt that opens the
//! call syntax, content opened by a marker of its own when calls follow — is [`ConstrainError::ResponseTemplate`], naming it.

use serde_json::{Value as Json, json};

use crate::constrain::{ConstrainError, escape_regex as escape};
use crate::format::{ArgumentEncoding, Format, JsonCallFields, ReasoningMode, ToolCallFormat, ToolFamily};

/// The response template (version 1) for outputs written under `format`.
pub fn response_template(format: &Format) -> Result<Json, ConstrainError> {
    let unsupported =
        |what: &str| ConstrainError::ResponseTemplate { template: format.template.clone(), what: what.into() };
    if format.tool_format == ToolFamily::Channel {
        return Err(unsupported("messages in channels (the `channel` tool-call family)"));
    }
    if !format.output_prefix.is_empty() {
        return Err(unsupported("a prompt that opens the call syntax"));
    }
    if !format.content.start.trim().is_empty() || !format.content.end.trim().is_empty() {
        return Err(unsupported("content written inside its own markers"));
    }
    let mut fields = serde_json::Map::new();
    // The anchor: the generation prompt up to the reasoning marker it may write (`<think>`, or the
    // `</think>` of a thinking-off default), which the parser then reads from the prompt as the
    // message's own start.
    let prompt = format.generation_prompt.as_str();
    let anchor = match &format.reasoning {
        Some(r) => [r.start.trim(), r.end.trim()]
            .into_iter()
            .filter(|m| !m.is_empty())
            .filter_map(|m| prompt.find(m))
            .min()
            .map_or(prompt, |at| &prompt[..at]),
        None => prompt,
    };
    if anchor.trim().is_empty() {
        return Err(unsupported("a reply with no generation prompt to anchor it on"));
    }
    if let Some(reasoning) = &format.reasoning {
        let mode = format.reasoning_details.as_ref().map_or(ReasoningMode::Tag, |d| d.mode);
        if reasoning.start.trim().is_empty() || matches!(mode, ReasoningMode::Implicit | ReasoningMode::Delimiter) {
            return Err(unsupported("reasoning that starts without a marker"));
        }
        // A reply that starts with the end alone (the prompt opened the block, or a thinking-off
        // prompt closed it) has empty reasoning: the region opens there without consuming.
        let (start, end) = (esc(&reasoning.start), esc(&reasoning.end));
        fields.insert(
            "reasoning_content".into(),
            json!({"open_pattern": format!(r"{start}|\A(?=\s*{end})"), "close": reasoning.end.trim(), "content": "text"}),
        );
    }
    let turn_end = format.turn_end.trim();
    if let Some(tools) = &format.tools {
        fields.insert("tool_calls".into(), tool_calls(format, tools, turn_end)?);
    }
    let mut content = json!({"content": "text"});
    if !turn_end.is_empty() {
        // Whitespace before the end stays out of the region (an empty close would overwrite content).
        content["close_pattern"] = json!(format!(r"\s*{}", escape(turn_end)));
    }
    fields.insert("content".into(), content);
    Ok(json!({"version": 1, "defaults": {"role": "assistant"}, "start_anchor": anchor, "fields": fields}))
}

/// The `tool_calls` region: one match per call, or one per section holding a list.
fn tool_calls(format: &Format, tools: &ToolCallFormat, turn_end: &str) -> Result<Json, ConstrainError> {
    let unsupported = |what: String| ConstrainError::ResponseTemplate { template: format.template.clone(), what };
    let family = serde_json::to_value(format.tool_format).ok().and_then(|v| v.as_str().map(str::to_owned));
    match format.tool_format {
        ToolFamily::Channel | ToolFamily::RecipientBased | ToolFamily::Unknown => {
            return Err(unsupported(format!("the `{}` tool-call family", family.unwrap_or_default())));
        }
        _ => {}
    }
    if !tools.before_calls.is_empty() {
        return Err(unsupported("calls written as a message of their own".into()));
    }
    if !tools.content_start_with_calls.is_empty() {
        // Content would be the implicit region, which starts where the anchor ends: the opener
        // cannot be left out of it.
        return Err(unsupported("content that opens with a marker of its own in a turn with calls".into()));
    }
    let section_start = tools.section_start.trim();
    let section_end = tools.section_end.trim();
    let call_end = tools.call_end.trim();
    // The section's start opens the first call only; later ones follow a separator.
    let section = if section_start.is_empty() { String::new() } else { format!(r"(?:{}\s*)?", esc(section_start)) };
    let separator =
        if tools.separator.trim().is_empty() { String::new() } else { format!(r"(?:{}\s*)?", esc(&tools.separator)) };
    // Where a call ends: its end marker (and the section's, after the last call), else before the
    // next call (`next`), at the section's end or before the turn's end. Whitespace after it is
    // swallowed: an implicit region opened by it would close empty and overwrite the content.
    let close = |end: &str, next: Option<String>| -> String {
        if !end.is_empty() {
            let section = if section_end.is_empty() || section_end == end {
                String::new()
            } else {
                format!(r"(?:\s*{})?", esc(section_end))
            };
            return format!(r"{}{section}\s*", esc(end));
        }
        let mut alternatives: Vec<String> = next.into_iter().collect();
        if !section_end.is_empty() {
            alternatives.push(format!(r"\s*{}\s*", esc(section_end)));
        }
        if !turn_end.is_empty() {
            alternatives.push(format!(r"(?=\s*{})", esc(turn_end)));
        }
        alternatives.join("|")
    };
    // A region per call (repeated), or one per section whose content is the list of calls; without
    // a close (no end marker, no turn end) it runs to the end of the output.
    let region = |open: String, close: String, mut content: Json| {
        content["open_pattern"] = json!(open);
        let list = content.get("transform_each").is_some();
        content["repeats"] = json!(!list);
        if !close.is_empty() {
            content["close_pattern"] = json!(close);
        }
        content
    };
    if format.tool_format == ToolFamily::Pythonic {
        // `python-call-list` reads the list with its brackets: the region opens before the `[`.
        let (Some(open), Some(end)) = (section_start.strip_suffix('['), section_end.strip_prefix(']')) else {
            return Err(unsupported("Python calls not written as one list (`[f(), g()]`)".into()));
        };
        let open = open.trim_end();
        if open.is_empty() {
            return Err(unsupported("Python calls without section markers".into()));
        }
        let each = json!({"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}});
        // After the list's `]`, which stays in the content.
        let close =
            if end.trim().is_empty() { String::new() } else { format!(r"(?<=\])\s*{}\s*", esc(end.trim_start())) };
        return Ok(region(
            format!(r"\s*{}(?=\s*\[)", esc(open)),
            close,
            json!({"content": "python-call-list", "transform": each, "transform_each": true}),
        ));
    }
    if let Some(fields) = &tools.json {
        let function = json_function(fields)
            .ok_or_else(|| unsupported("JSON calls whose name is the key or whose arguments are a string".into()))?;
        let start = tools.call_start.trim();
        if fields.array {
            // One section holding a JSON list of calls.
            let marker = if section_start.is_empty() { start } else { section_start };
            let open = format!(r"\s*{}(?=\s*\[)", esc(marker));
            let end = if section_end.is_empty() { call_end } else { section_end };
            let transform = json_function_transform(&function, "");
            let content = json!({"content": "json", "transform": transform, "transform_each": true});
            return Ok(region(open, close(end, None), content));
        }
        let transform = json_function_transform(&function, "content.");
        let content = json!({"content": "json", "transform": transform});
        if !start.is_empty() {
            let open = format!(r"\s*{separator}{section}{}", esc(start));
            let next = format!(r"(?=\s*{separator}{})", esc(start));
            return Ok(region(open, close(call_end, Some(next)), content));
        }
        // Calls without markers of their own: an object whose first key is the call's opens the
        // region without being consumed, where the reply starts or after another call (as the
        // parser reads them: a JSON object amid text is text); the next such object closes it.
        if tools.parallel && tools.separator.is_empty() {
            return Err(unsupported("JSON calls written back to back with no marker or separator".into()));
        }
        let object = format!(r#"\{{\s*"{}""#, escape(&first_key(fields)));
        let first = if section_start.is_empty() { r"\A".to_owned() } else { format!(r"\s*{}", esc(section_start)) };
        let open = format!(r"(?:{first}|(?<=\}}))\s*{separator}(?={object})");
        let next = format!(r"(?<=\}})(?=\s*{separator}{object})");
        return Ok(region(open, close(call_end, Some(next)), content));
    }
    // The name sits in markers; arguments follow.
    let opener = format!("{}{}", tools.call_start, tools.name_prefix);
    if opener.trim().is_empty() {
        return Err(unsupported("calls without an opening marker".into()));
    }
    if tools.name_repeat_suffix.is_some() {
        return Err(unsupported("calls that write the function's name twice".into()));
    }
    if tools.call_id_before_name {
        return Err(unsupported("call ids written before the function's name".into()));
    }
    let section = if opener.trim().starts_with(section_start) { String::new() } else { section };
    let suffix = tools.name_suffix.trim_end();
    let suffix = if tools.indexed_name_suffix {
        let at = suffix.find(|c: char| c.is_ascii_digit()).unwrap_or(suffix.len());
        let digits = suffix[at..].find(|c: char| !c.is_ascii_digit()).map_or(suffix.len(), |n| at + n);
        format!(r"{}\d+{}", escape(&suffix[..at]), escape(&suffix[digits..]))
    } else {
        escape(suffix)
    };
    let id = if tools.call_id_suffix.is_empty() {
        String::new()
    } else {
        format!(r"(?P<id>[A-Za-z0-9_-]+){}", esc(&tools.call_id_suffix))
    };
    let gap = if opener.ends_with(char::is_whitespace) { r"\s*" } else { "" };
    let name = r"(?P<name>[^\s<>\[\]{}()]+)";
    let open = format!(r"\s*{separator}{section}{}{gap}{name}{suffix}{id}", esc(&opener));
    let next = format!(r"(?=\s*{separator}{})", esc(&opener));
    let mut transform = json!({"type": "function", "function": {"name": "{name}", "arguments": "{content}"}});
    if !id.is_empty() {
        transform["id"] = json!("{id}");
    }
    let mut content = match tools.arguments {
        ArgumentEncoding::Json => json!({"content": "json"}),
        ArgumentEncoding::Tagged => {
            json!({"content": "xml-inline", "content_args": {"tag_pattern": tag_pattern(format, tools)?}})
        }
    };
    content["transform"] = transform;
    Ok(region(open, close(call_end, Some(next)), content))
}

/// A marker as a pattern: as written, its inner whitespace any whitespace (models vary it).
fn esc(text: &str) -> String {
    text.split_whitespace().map(escape).collect::<Vec<_>>().join(r"\s*")
}

/// The `xml-inline` pattern of tagged arguments: a `key` and a `value` group per argument.
fn tag_pattern(format: &Format, tools: &ToolCallFormat) -> Result<String, ConstrainError> {
    let unsupported =
        |what: &str| ConstrainError::ResponseTemplate { template: format.template.clone(), what: what.into() };
    if !tools.string_quote.is_empty() {
        return Err(unsupported("tagged arguments whose strings are quoted literals"));
    }
    if tools.arg_value_suffix_after_name.is_some() || tools.nested_item_name.is_some() {
        return Err(unsupported("tagged arguments whose closing tags name them"));
    }
    let prefix = tools.arg_name_prefix.trim_start();
    let value_end = tools.arg_value_suffix.trim();
    if prefix.is_empty() || value_end.is_empty() {
        return Err(unsupported("tagged arguments without an opening and closing marker"));
    }
    let mut suffixes = vec![escape(tools.arg_name_suffix.trim_end())];
    suffixes.extend(tools.arg_name_suffixes_typed.iter().map(|s| escape(s.trim_end())));
    suffixes.sort();
    suffixes.dedup();
    let suffix = if suffixes.len() == 1 { suffixes.remove(0) } else { format!("(?:{})", suffixes.join("|")) };
    Ok(format!(r"{}(?P<key>[^\s<>]+?){suffix}\s*(?P<value>.*?)\s*{}", escape(prefix), escape(value_end)))
}

/// Where a JSON call object keeps its name and arguments: the wrapper key (if any) and the two keys.
struct JsonFunction {
    wrapper: Option<String>,
    name: String,
    arguments: String,
}

fn json_function(fields: &JsonCallFields) -> Option<JsonFunction> {
    if fields.name.is_empty() || fields.arguments_as_string {
        return None;
    }
    Some(JsonFunction {
        wrapper: fields.function.clone(),
        name: fields.name.clone(),
        arguments: fields.arguments.clone(),
    })
}

/// `{"type": "function", "function": {"name": "{…name}", "arguments": "{…arguments}"}}` with the
/// placeholders reaching into the parsed object (`root` is `content.` for one object, empty for
/// the elements of a list, whose keys are in scope).
fn json_function_transform(function: &JsonFunction, root: &str) -> Json {
    let path = |key: &str| match &function.wrapper {
        Some(wrapper) if root.is_empty() => format!("{{{wrapper}.{key}}}"),
        Some(wrapper) => format!("{{{root}{wrapper}.{key}}}"),
        None => format!("{{{root}{key}}}"),
    };
    json!({"type": "function", "function": {"name": path(&function.name), "arguments": path(&function.arguments)}})
}

/// The first key of a bare call object as written.
fn first_key(fields: &JsonCallFields) -> String {
    if let Some(wrapper) = &fields.function {
        return wrapper.clone();
    }
    fields.key_order.first().cloned().unwrap_or_else(|| fields.name.clone())
}
