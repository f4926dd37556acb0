//! The analyzer on real templates from outside the corpus (`tests/data/outside/*/manifest.json`:
//! serving projects' example templates, training frameworks' collections, llama.cpp files the
//! corpus lacks), against what each template's syntax is *by reading it* (the manifests were written
//! from the Jinja text, not from parlance's output).
//!
//! A template is right when:
//! - `derivable: true`: the analyzed family and reasoning markers are the manifest's, the
//!   self-roundtrip passes, and the manifest's `call_example` (a call turn as the template writes
//!   it, read off the template) parses into that one call;
//! - `derivable: false` (the syntax appears only in prose, or the template renders no calls): the
//!   analysis claims no syntax it cannot show — for calls, family `none` or `unknown` or the
//!   manifest's; for reasoning, none or the manifest's — or it fails with its reason (a template that
//!   renders nothing, as transformers too would refuse it).
//!
//! `tests/expected/outside.json` lists the misses with their reasons (a ratchet, as for the corpus);
//! the rate is printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parlance::{AnalyzeOptions, ChatTemplate, Format, ParseOptions, RenderLimits, TemplateSource, analyze, self_check};
use serde_json::{Value as Json, json};

/// The folder of outside templates.
fn outside_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/outside")
}

/// Every manifest entry with the folder it lives in.
pub(crate) fn outside_entries() -> Vec<(PathBuf, Json)> {
    let mut entries = Vec::new();
    let mut folders: Vec<PathBuf> =
        std::fs::read_dir(outside_dir()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    folders.sort();
    for folder in folders {
        let manifest: Json =
            serde_json::from_str(&std::fs::read_to_string(folder.join("manifest.json")).unwrap()).unwrap();
        for entry in manifest.as_array().unwrap() {
            entries.push((folder.clone(), entry.clone()));
        }
    }
    entries
}

/// The template of `entry`, labelled `{id}.jinja`, with the manifest's special tokens as variables.
pub(crate) fn outside_template(folder: &Path, entry: &Json) -> (ChatTemplate, AnalyzeOptions) {
    let id = entry["id"].as_str().unwrap();
    let text = std::fs::read_to_string(folder.join(format!("{id}.jinja"))).unwrap();
    let mut options = AnalyzeOptions::default();
    for key in ["bos_token", "eos_token"] {
        if let Some(token) = entry[key].as_str() {
            options.variables.insert(key.to_owned(), json!(token));
        }
    }
    let template =
        ChatTemplate::from_source(TemplateSource::from_text(format!("{id}.jinja"), text), RenderLimits::default())
            .unwrap();
    (template, options)
}

/// Whether `format`'s reasoning markers are the ones read (`{"start", "end"}` or null). Markers
/// compare trimmed (a Format's markers are trimmed; the whitespace around them is optional to the
/// parser). An end read as the end marker plus the turn's repeated header (`<|im_end|>\n
/// <|im_start|>assistant`) is the Format's end: the parser reads a header after reasoning as a marker.
/// Likewise a start read without the format's output prefix.
fn same_reasoning(format: &Format, want: &Json) -> bool {
    match (&format.reasoning, want) {
        (None, Json::Null) => true,
        (Some(found), Json::Object(read)) => {
            let (start, end) = (read["start"].as_str().unwrap_or("").trim(), read["end"].as_str().unwrap_or("").trim());
            let header = format.generation_prompt.trim();
            let end_with_header =
                end.strip_prefix(found.end.as_str()).is_some_and(|rest| !header.is_empty() && rest.trim() == header);
            // A start read without the output prefix, which the prompt holds and every later
            // block repeats (`<|message_model|>`), is the Format's start with it.
            let prefix = format.output_prefix.trim();
            let start_with_prefix =
                !prefix.is_empty() && found.start.strip_prefix(prefix).is_some_and(|rest| rest.trim() == start);
            (found.start == start || start_with_prefix) && (found.end == end || end_with_header)
        }
        _ => false,
    }
}

/// Why `format` is not what the manifest entry says, if it is not.
fn miss(template: &ChatTemplate, options: &AnalyzeOptions, format: &Format, entry: &Json) -> Option<String> {
    let family = serde_json::to_value(format.tool_format).unwrap();
    let reasoning = serde_json::to_value(&format.reasoning).unwrap();
    let (want_family, want_reasoning) = (&entry["tool_format"], &entry["reasoning"]);
    if entry["derivable"] == json!(false) {
        // Calls and reasoning each: claimed only as read, or not at all (SmolLM3 writes its empty
        // reasoning block while its calls are prose only).
        let family_ok = family == "none" || family == "unknown" || family == *want_family;
        let reasoning_ok = reasoning.is_null() || same_reasoning(format, want_reasoning);
        return (!family_ok || !reasoning_ok)
            .then(|| format!("claims family {family}, reasoning {reasoning} (not derivable)"));
    }
    if family != *want_family || !same_reasoning(format, want_reasoning) {
        return Some(format!("family {family}, reasoning {reasoning} (read: {want_family}, {want_reasoning})"));
    }
    let failed: Vec<String> = self_check(template, format, options)
        .into_iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{}: {}", c.case, c.reason.unwrap_or_default()))
        .collect();
    if !failed.is_empty() {
        return Some(format!("self-roundtrip: {}", failed.join("; ")));
    }
    let example = entry["call_example"].as_str()?;
    let tool = json!({"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let options = ParseOptions { tools: vec![tool], ..ParseOptions::default() };
    let message = parlance::parse(format, &options, example);
    let calls: Vec<(String, Option<Json>)> =
        message.tool_calls.iter().map(|c| (c.name.clone(), c.arguments_value.clone())).collect();
    let want = vec![("get_weather".to_owned(), Some(json!({"city": "Paris"})))];
    let content = message.content.as_deref().unwrap_or_default().trim();
    (calls != want || !content.is_empty())
        .then(|| format!("the template's own call {example:?} parses to {calls:?}, content {content:?}"))
}

#[test]
fn outside_templates_are_analyzed_as_read() {
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected/outside.json");
    let expected: Json = serde_json::from_str(&std::fs::read_to_string(expected_path).unwrap()).unwrap();
    let known: BTreeMap<String, String> = expected["misses"]
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        .unwrap_or_default();
    let mut misses = BTreeMap::new();
    let (mut total, mut tool_total, mut tool_right) = (0, 0, 0);
    for (folder, entry) in outside_entries() {
        let id = entry["id"].as_str().unwrap().to_owned();
        let (template, options) = outside_template(&folder, &entry);
        let found = match analyze(&template, &options) {
            Ok(format) => miss(&template, &options, &format, &entry),
            // A template whose syntax cannot be derived may also fail to analyze, saying why.
            Err(_) if entry["derivable"] == json!(false) => None,
            Err(err) => Some(format!("error: {err}")),
        };
        total += 1;
        let calls = entry["call_example"].is_string();
        tool_total += usize::from(calls);
        tool_right += usize::from(calls && found.is_none());
        if let Some(why) = found {
            misses.insert(id, why);
        }
    }
    let right = total - misses.len();
    eprintln!(
        "outside templates: {right} of {total} right ({:.0}%); with tool calls: {tool_right} of {tool_total}",
        100.0 * right as f64 / total as f64
    );
    for (id, why) in &misses {
        eprintln!("  miss {id}: {why}");
    }
    let fixed: Vec<&String> = known.keys().filter(|id| !misses.contains_key(*id)).collect();
    if !fixed.is_empty() {
        eprintln!("note: now right, remove from tests/expected/outside.json: {fixed:?}");
    }
    let unexpected: Vec<String> =
        misses.iter().filter(|(id, _)| !known.contains_key(*id)).map(|(id, why)| format!("{id}: {why}")).collect();
    assert!(unexpected.is_empty(), "{} outside templates missed:\n{}", unexpected.len(), unexpected.join("\n"));
    assert!(total >= 50, "only {total} outside templates");
}

#[test]
fn every_outside_template_has_its_source_and_licence() {
    for (folder, entry) in outside_entries() {
        let id = entry["id"].as_str().unwrap();
        assert!(folder.join(format!("{id}.jinja")).is_file(), "{id}: no template file");
        let source = &entry["source"];
        for key in ["repo", "path", "commit"] {
            assert!(source[key].as_str().is_some_and(|s| !s.is_empty()), "{id}: source has no {key}");
        }
        assert!(source["commit"].as_str().unwrap().len() == 40, "{id}: commit is not a full hash");
        assert!(entry["licence"].as_str().is_some_and(|s| !s.is_empty()), "{id}: no licence");
        assert!(entry["derivable"].is_boolean(), "{id}: derivable unset");
    }
}

/// Templates that print an arguments mapping with Python's `str()` (`{'city': 'Paris'}`, where
/// the wire's JSON string prints as JSON): their own history holds Python literals where the
/// arguments go. The analysis says so (`value_encoding: python`), and the parser reads either
/// spelling into JSON arguments, whole and streamed alike; a template that prints JSON does not
/// read Python literals.
#[test]
fn arguments_printed_as_python_literals_read_as_json() {
    let entries = outside_entries();
    let by_id = |id: &str| entries.iter().find(|(_, e)| e["id"] == id).unwrap_or_else(|| panic!("no {id}"));
    let tool = json!({"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}});
    let options = ParseOptions { tools: vec![tool], ..ParseOptions::default() };
    // (template, how a call is written around `ARGS`)
    let cases = [
        ("vllm-phi4-mini", r#"{"name": "get_weather", "arguments": ARGS}"#),
        (
            "llama-cpp-ochafik-apriel-1.5-15b-thinker",
            "\n<tool_calls>[{\"name\": \"get_weather\", \"arguments\": ARGS}]</tool_calls>",
        ),
        ("ovms-gpt-oss", " to=functions.get_weather <|channel|>commentary json<|message|>ARGS<|end|>"),
    ];
    let arguments = [
        (r#"{'city': 'Paris'}"#, json!({"city": "Paris"})),
        (r#"{"city": "Paris"}"#, json!({"city": "Paris"})),
        (
            r#"{'city': 'it\'s "x"', 'n': -1.5, 'ok': True, 'no': False, 'none': None, 'l': ['a', {'b': [1, 2]}]}"#,
            json!({"city": "it's \"x\"", "n": -1.5, "ok": true, "no": false, "none": null, "l": ["a", {"b": [1, 2]}]}),
        ),
        (r"{'city': 'Z\xfcrich\n\u6771\u4eac'}", json!({"city": "Zürich\n東京"})),
        (r#"{'city': 'a}]b'}"#, json!({"city": "a}]b"})),
    ];
    for (id, call) in cases {
        let (folder, entry) = by_id(id);
        let (template, analyze_options) = outside_template(folder, entry);
        let format = analyze(&template, &analyze_options).unwrap();
        let tools = format.tools.as_ref().unwrap();
        assert_eq!(tools.value_encoding, parlance::ValueEncoding::Python, "{id}");
        let parser = parlance::Parser::new(&format, &options);
        for (written, want) in &arguments {
            let output = call.replace("ARGS", written);
            let message = parser.parse(&output);
            assert_eq!(message.tool_calls.len(), 1, "{id}: {output:?} gives {message:?}");
            let parsed = &message.tool_calls[0];
            assert_eq!(parsed.arguments_value.as_ref(), Some(want), "{id}: {output:?}");
            assert_eq!(serde_json::from_str::<Json>(&parsed.arguments).ok().as_ref(), Some(want), "{id}: not JSON");
            assert!(message.issues.iter().all(|i| i.kind != parlance::IssueKind::MalformedArguments), "{id}");
            for (at, _) in output.char_indices().skip(1) {
                crate::parse::assert_chunking_invariant(&parser, &output, &[&output[..at], &output[at..]], id);
            }
        }
    }
    // A template that prints JSON arguments keeps a Python literal as written, reported.
    let (folder, entry) = by_id("unsloth-qwen3-thinking");
    let (template, analyze_options) = outside_template(folder, entry);
    let format = analyze(&template, &analyze_options).unwrap();
    assert_ne!(format.tools.as_ref().unwrap().value_encoding, parlance::ValueEncoding::Python);
    let output = "<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {'city': 'Paris'}}\n</tool_call>";
    let message = parlance::Parser::new(&format, &options).parse(output);
    assert_eq!(message.tool_calls.len(), 1);
    assert!(message.tool_calls[0].arguments.starts_with("{'city': 'Paris'}"), "{message:?}");
    assert_eq!(message.tool_calls[0].arguments_value, None);
    assert!(message.issues.iter().any(|i| i.kind == parlance::IssueKind::MalformedArguments));
}

/// The first-release Llama 4 template writes a call turn as `<|python_start|>` + content +
/// `<|python_end|>` + calls (the pair empty without content): the analysis says so, and the parser
/// reads the content between the two and the calls after, whole and streamed alike; a turn without
/// calls is bare content.
#[test]
fn llama4_content_inside_python_markers_reads_beside_its_calls() {
    let entries = outside_entries();
    let tool = json!({"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}});
    let options = ParseOptions { tools: vec![tool], ..ParseOptions::default() };
    let call = r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#;
    let cases = [
        (format!("<|python_start|><|python_end|>{call}"), "", 1),
        (format!("<|python_start|>Let me check.<|python_end|>{call}"), "Let me check.", 1),
        (format!("<|python_start|>Both.<|python_end|>{call}{call}"), "Both.", 2),
        ("It is sunny in Paris.".to_owned(), "It is sunny in Paris.", 0),
    ];
    for id in ["axolotl-llama4", "hfjs-ollama-llama4"] {
        let (folder, entry) = entries.iter().find(|(_, e)| e["id"] == id).unwrap();
        let (template, analyze_options) = outside_template(folder, entry);
        let format = analyze(&template, &analyze_options).unwrap();
        let tools = format.tools.as_ref().unwrap();
        assert_eq!(
            (tools.content_start_with_calls.as_str(), tools.section_start.as_str()),
            ("<|python_start|>", "<|python_end|>"),
            "{id}"
        );
        let parser = parlance::Parser::new(&format, &options);
        for (output, content, calls) in &cases {
            let message = parser.parse(output);
            assert_eq!(message.content.as_deref().unwrap_or_default(), *content, "{id}: {output:?}");
            assert_eq!(message.tool_calls.len(), *calls, "{id}: {output:?}");
            assert!(message.tool_calls.iter().all(|c| c.arguments_value == Some(json!({"city": "Paris"}))), "{id}");
            assert!(message.issues.is_empty(), "{id}: {output:?} gives {:?}", message.issues);
            for (at, _) in output.char_indices().skip(1) {
                crate::parse::assert_chunking_invariant(&parser, output, &[&output[..at], &output[at..]], id);
            }
        }
    }
}
