//! The analyzer over every corpus template, against the corpus manifest's `tool_format` and
//! `reasoning`. `tests/expected/analyze.json` is the ratchet: templates listed there (with the reason)
//! may disagree; any other disagreement fails, and a listed template that now agrees is reported.

use std::collections::BTreeMap;
use std::path::Path;

use parlance::{AnalyzeOptions, ChatTemplate, RenderLimits, TemplateSource, analyze, self_check};
use serde_json::Value as Json;

use crate::corpus;

/// A corpus template labelled `{id}.jinja` (labels stay machine-independent), with the variables
/// its golden renders were made with.
pub(crate) fn corpus_template(corpus: &Path, id: &str) -> (ChatTemplate, AnalyzeOptions) {
    let text = std::fs::read_to_string(corpus.join("templates").join(format!("{id}.jinja"))).unwrap();
    let golden: Json =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("golden").join(format!("{id}.json"))).unwrap())
            .unwrap();
    let mut options = AnalyzeOptions::default();
    for (k, v) in golden["template_variables"].as_object().into_iter().flatten() {
        options.variables.insert(k.clone(), v.clone());
    }
    let template =
        ChatTemplate::from_source(TemplateSource::from_text(format!("{id}.jinja"), text), RenderLimits::default())
            .unwrap();
    (template, options)
}

pub(crate) fn manifest_ids(corpus: &Path) -> Vec<String> {
    let manifest: Json =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("templates/manifest.json")).unwrap()).unwrap();
    manifest.as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
}

/// The Format JSON of every corpus template, as insta snapshots (`tests/it/snapshots/`), each read
/// against its template before it was accepted. A template that cannot be analyzed snapshots its error.
#[test]
fn corpus_format_snapshots() {
    let Some(corpus) = corpus::corpus() else { return };
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        for id in manifest_ids(&corpus) {
            let (template, options) = corpus_template(&corpus, &id);
            let snapshot = match analyze(&template, &options) {
                Ok(format) => serde_json::to_value(&format).unwrap(),
                Err(err) => serde_json::json!({"error": err.to_string()}),
            };
            insta::assert_json_snapshot!(format!("format__{id}"), snapshot);
        }
    });
}

#[test]
fn corpus_formats_agree_with_the_manifest() {
    let Some(corpus) = corpus::corpus() else { return };
    let manifest: Json =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("templates/manifest.json")).unwrap()).unwrap();
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected/analyze.json");
    let expected: Json = serde_json::from_str(&std::fs::read_to_string(expected_path).unwrap()).unwrap();
    let listed = |key: &str| -> BTreeMap<String, String> {
        expected[key]
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default()
    };
    let (known_disagreements, known_self_failures) =
        (listed("manifest_disagreements"), listed("self_roundtrip_failures"));
    let mut self_failures: BTreeMap<String, String> = BTreeMap::new();
    let mut table = String::new();
    let mut disagreements = BTreeMap::new();
    let mut agree = 0;
    for entry in manifest.as_array().unwrap() {
        let id = entry["id"].as_str().unwrap();
        let (template, options) = corpus_template(&corpus, id);
        let started = std::time::Instant::now();
        let format = analyze(&template, &options);
        let elapsed = started.elapsed();
        let (family, reasoning) = match &format {
            Ok(f) => (serde_json::to_value(f.tool_format).unwrap(), serde_json::to_value(&f.reasoning).unwrap()),
            Err(e) => (Json::String(format!("error: {e}")), Json::Null),
        };
        let checks = match &format {
            Ok(f) => self_check(&template, f, &options),
            Err(_) => Vec::new(),
        };
        let failed: Vec<String> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| format!("{}: {}", c.case, c.reason.as_deref().unwrap_or("")))
            .collect();
        let self_ok = !checks.is_empty() && failed.is_empty();
        let skipped = checks.iter().filter(|c| c.skipped).count();
        if std::env::var_os("PARLANCE_ANALYZE_DETAILS").is_some() && !failed.is_empty() {
            eprintln!("{id}: self-roundtrip failures: {failed:?}");
        }
        if !self_ok {
            self_failures.insert(id.to_owned(), failed.join("; "));
        }
        let want_family = &entry["tool_format"];
        let want_reasoning = &entry["reasoning"];
        let ok = family == *want_family && reasoning == *want_reasoning;
        if ok {
            agree += 1;
        } else {
            disagreements.insert(
                id.to_owned(),
                format!("family {family} (manifest {want_family}), reasoning {reasoning} (manifest {want_reasoning})"),
            );
        }
        table.push_str(&format!(
            "{id:<50} {:<18} {} self-roundtrip {:<4} ({}/{}, {skipped} skipped) {:>6.1} ms\n",
            family.as_str().unwrap_or("?"),
            if ok { "agrees " } else { "DIFFERS" },
            if self_ok { "pass" } else { "FAIL" },
            checks.len() - failed.len(),
            checks.len(),
            elapsed.as_secs_f64() * 1e3
        ));
    }
    eprintln!("{table}{agree} of {} templates agree with the manifest", agree + disagreements.len());
    let ratchet = |found: &BTreeMap<String, String>, known: &BTreeMap<String, String>, what: &str| {
        let fixed: Vec<&String> = known.keys().filter(|id| !found.contains_key(*id)).collect();
        if !fixed.is_empty() {
            eprintln!("note: no longer in {what}, remove from tests/expected/analyze.json: {fixed:?}");
        }
        found
            .iter()
            .filter(|(id, _)| !known.contains_key(*id))
            .map(|(id, why)| format!("{id}: {why}"))
            .collect::<Vec<_>>()
    };
    let self_passes = agree + disagreements.len() - self_failures.len();
    eprintln!("{self_passes} templates pass the self-roundtrip");
    let unexpected = ratchet(&disagreements, &known_disagreements, "manifest_disagreements");
    assert!(
        unexpected.is_empty(),
        "{} templates disagree with the manifest:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    let unexpected = ratchet(&self_failures, &known_self_failures, "self_roundtrip_failures");
    assert!(
        unexpected.is_empty(),
        "{} templates fail the self-roundtrip:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

#[test]
fn qwen3_format_json_is_readable_and_round_trips() {
    let Some(corpus) = corpus::corpus() else { return };
    let template = ChatTemplate::from_path(corpus.join("templates/Qwen-Qwen3-0.6B.jinja")).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    let json = serde_json::to_value(&format).unwrap();
    // Outside tools read these two fields with the manifest's words.
    assert_eq!(json["tool_format"], "json-native");
    assert_eq!(json["reasoning"], serde_json::json!({"start": "<think>", "end": "</think>"}));
    assert_eq!(json["generation_prompt"], "<|im_start|>assistant\n");
    assert_eq!(json["turn_end"], "<|im_end|>\n");
    assert_eq!(json["tools"]["call_start"], "<tool_call>\n");
    assert_eq!(json["tools"]["call_end"], "\n</tool_call>");
    let back: parlance::Format = serde_json::from_value(json).unwrap();
    assert_eq!(back, format);
}

#[test]
fn templates_that_raise_on_everything_are_reported_not_panicking() {
    let template = ChatTemplate::from_text("{{ raise_exception('no') }}").unwrap();
    let err = parlance::Format::from_template(&template, &Default::default()).unwrap_err();
    assert!(err.to_string().contains("cannot be analyzed"), "{err}");
    // A template that renders content but no tool calls: family none, reported unsupported.
    let template =
        ChatTemplate::from_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}").unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.tool_format, parlance::ToolFamily::None);
    assert!(format.unsupported.iter().any(|u| u.starts_with("tool calls")), "{:?}", format.unsupported);
    assert_eq!(format.turn_end, "</s>");
}

#[test]
fn stripped_mirror_tag_workaround_finds_a_reasoning_end_no_render_shows() {
    // The shape of the DeepSeek-R1-Distill templates (written here, not copied): the generation
    // prompt opens `<think>`, nothing ever renders its end, and content is cut at `</think>`. Diffs
    // alone find the opener but no end; the workaround guesses `</think>` and keeps it only because
    // the template demonstrably strips it.
    let text = "{% for m in messages %}{% if m.role == 'assistant' %}<A>{{ m.content.split('</think>')[-1] }}</s>\
                {% else %}<U>{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}<A><think>\n{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    let reasoning = format.reasoning.as_ref().expect("reasoning found");
    assert_eq!((reasoning.start.as_str(), reasoning.end.as_str()), ("<think>", "</think>"));
    assert_eq!(format.workarounds, [parlance::Workaround::ReasoningEndFromStrippedMirrorTag]);
    // Without the stripping, the mirror is not confirmed; the end is then taken from the opener's
    // name alone (`<think>` says thought), and said so...
    let text = text.replace(".split('</think>')[-1]", "");
    let format =
        parlance::Format::from_template(&ChatTemplate::from_text(&text).unwrap(), &Default::default()).unwrap();
    let reasoning = format.reasoning.as_ref().expect("reasoning from the opener's name");
    assert_eq!((reasoning.start.as_str(), reasoning.end.as_str()), ("<think>", "</think>"));
    assert_eq!(format.workarounds, [parlance::Workaround::ReasoningEndFromOpenerName]);
    // ...but an opener named for anything else claims nothing.
    let text = text.replace("<think>", "<answer>");
    let format =
        parlance::Format::from_template(&ChatTemplate::from_text(&text).unwrap(), &Default::default()).unwrap();
    assert!(format.reasoning.is_none() && format.workarounds.is_empty(), "{format:?}");
}

#[test]
fn stripped_mirror_tag_workaround_reads_the_stripping_off_history_turns() {
    // NVIDIA-Nemotron-Nano-v2's shape (written here, not copied): the last assistant turn is written
    // after the prompt's `<think>\n` as given, earlier turns are cut at `</think>`. The end is
    // confirmed by the history render alone.
    let text = "{% for m in messages %}{% if m.role == 'assistant' %}{% if loop.last %}<A><think>\n{{ m.content }}</s>\
                {% else %}<A>{{ m.content.split('</think>')[-1] }}</s>{% endif %}\
                {% else %}<U>{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}<A><think>\n{% endif %}";
    let format = parlance::Format::from_template(&ChatTemplate::from_text(text).unwrap(), &Default::default()).unwrap();
    let reasoning = format.reasoning.as_ref().expect("reasoning found");
    assert_eq!((reasoning.start.as_str(), reasoning.end.as_str()), ("<think>", "</think>"));
    assert_eq!(format.workarounds, [parlance::Workaround::ReasoningEndFromStrippedMirrorTag]);
    let parsed = parlance::Parser::new(&format, &parlance::ParseOptions::default()).parse("R\n</think>\n\nC");
    assert_eq!((parsed.reasoning_content.as_deref(), parsed.content.as_deref()), (Some("R"), Some("C")));
    // History kept as written: no stripping shown, and the end comes from the opener's name.
    let text = text.replace(".split('</think>')[-1]", "");
    let format =
        parlance::Format::from_template(&ChatTemplate::from_text(&text).unwrap(), &Default::default()).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::ReasoningEndFromOpenerName], "{format:?}");
}

#[test]
fn arguments_printed_as_values_are_probed_as_json_strings() {
    // internlm2's shape (written here, not copied): the template prints `arguments` itself, which
    // gives Python's repr for an object and JSON for the OpenAI wire string.
    let text = "{% for m in messages %}{% if m.tool_calls %}<A>{% for c in m.tool_calls %}<|act|>\
                {{ '{\"name\": \"' + c.function.name + '\", \"arguments\": ' + c.function.arguments|string + '}' }}<|end_act|>\
                {% endfor %}</s>{% elif m.role == 'assistant' %}<A>{{ m.content }}</s>{% else %}<U>{{ m.content }}{% endif %}\
                {% endfor %}{% if add_generation_prompt %}<A>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.tool_format, parlance::ToolFamily::JsonNative, "{format:?}");
    let tools = format.tools.as_ref().unwrap();
    assert!(tools.arguments_from_string);
    assert_eq!((tools.call_start.as_str(), tools.call_end.as_str()), ("<|act|>", "<|end_act|>"));
    let checks = parlance::self_check(&template, &format, &parlance::AnalyzeOptions::default());
    assert!(checks.iter().all(|c| c.passed), "{checks:?}");
    let parsed = parlance::Parser::new(&format, &parlance::ParseOptions::default())
        .parse("<|act|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}<|end_act|>");
    assert_eq!(parsed.tool_calls.len(), 1);
    assert_eq!(parsed.tool_calls[0].arguments, "{\"a\": 1}");
    // Where the template writes JSON for an object (`tojson`), the object shape stays.
    let text = text.replace("c.function.arguments|string", "c.function.arguments|tojson");
    let format =
        parlance::Format::from_template(&ChatTemplate::from_text(&text).unwrap(), &Default::default()).unwrap();
    assert!(!format.tools.as_ref().unwrap().arguments_from_string, "{format:?}");
}

#[test]
fn null_content_workaround_finds_calls_that_render_only_beside_null_content() {
    // DeepSeek V3's shape (written here, not copied): calls render only under `content is none`,
    // which transformers never passes (it drops null keys); the section and turn close only after
    // a later call, so a one-call turn has neither.
    let text = "{% set ns = namespace(first=true) %}{% for m in messages %}\
                {% if m.role == 'assistant' and m.content is none %}{% for c in m.tool_calls %}\
                {% if ns.first %}<A><calls><call>{{ c.function.name }}:{{ c.function.arguments }}</call>{% set ns.first = false %}\
                {% else %}\n<call>{{ c.function.name }}:{{ c.function.arguments }}</call></calls></s>{% endif %}{% endfor %}\
                {% elif m.role == 'assistant' %}<A>{{ m.content }}</s>{% else %}<U>{{ m.content }}{% endif %}{% endfor %}\
                {% if add_generation_prompt %}<A>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::CallsWithNullContent], "{format:?}");
    assert_eq!(format.turn_end, "</s>");
    let tools = format.tools.as_ref().expect("calls found");
    assert!(tools.arguments_from_string && tools.parallel, "{tools:?}");
    assert_eq!((tools.section_start.as_str(), tools.section_end.as_str()), ("<calls>", "</calls>"));
    assert_eq!((tools.name_prefix.as_str(), tools.call_end.as_str()), ("<call>", "</call>"));
    let checks = parlance::self_check(&template, &format, &parlance::AnalyzeOptions::default());
    assert!(checks.iter().all(|c| c.passed || c.skipped), "{checks:?}");
    let parser = parlance::Parser::new(&format, &parlance::ParseOptions::default());
    for text in ["<calls><call>f:{\"a\": 1}</call>", "<calls><call>f:{\"a\": 1}</call>\n<call>g:{}</call></calls></s>"]
    {
        let parsed = parser.parse(text);
        assert_eq!(parsed.tool_calls[0].arguments, "{\"a\": 1}", "{text}");
        assert!(parsed.content.as_deref().unwrap_or("").is_empty() && parsed.issues.is_empty(), "{text}: {parsed:?}");
    }
    // A template that writes calls whatever the content needs no workaround.
    let text = text.replace("m.content is none", "m.tool_calls");
    let format =
        parlance::Format::from_template(&ChatTemplate::from_text(&text).unwrap(), &Default::default()).unwrap();
    assert!(format.workarounds.is_empty() && format.tools.is_some(), "{format:?}");
}

#[test]
fn undeclared_variables_workaround_analyzes_a_template_that_needs_caller_variables() {
    // firefunction-v2's shape (written here, not copied): the system turn concatenates a variable
    // the caller must pass, so with Jinja's lenient undefined every render raises (`str + undefined`).
    let text = "{% set sys = 'Functions:\\n' + functions %}<S>{{ sys }}</s>\
                {% for m in messages %}<{{ m.role }}>{{ m.content }}\
                {% if m.tool_calls %} calls{{ m.tool_calls | map(attribute='function') | list | tojson }}{% endif %}</s>\
                {% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    assert_eq!(template.undeclared_variables(), ["functions"]);
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::UndeclaredVariablesSetEmpty]);
    assert!(format.unsupported.iter().any(|u| u.contains("\"functions\"")), "{:?}", format.unsupported);
    assert_eq!(format.tool_format, parlance::ToolFamily::JsonNative);
    // A caller who passes the variable gets the same format, without the workaround.
    let mut options = AnalyzeOptions::default();
    options.variables.insert("functions".into(), serde_json::json!("[]"));
    let direct = analyze(&template, &options).unwrap();
    assert!(direct.workarounds.is_empty(), "{:?}", direct.workarounds);
    assert_eq!(direct.tools, format.tools);
}

/// An assistant turn with one call, `f({"a": 1})`.
fn one_call_turn() -> parlance::Conversation {
    parlance::Conversation {
        messages: vec![serde_json::json!({"role": "assistant", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
        ]})],
        tools: None,
        documents: None,
    }
}

#[test]
fn markup_workaround_reads_calls_that_jinja2_escapes() {
    // mistral-common's shape (written here, not copied): a safe string, then strings added to it,
    // which Jinja2's Markup `+` HTML-escapes: transformers renders `[TOOL_CALLS]{&#34;name&#34;: …`.
    // parlance renders that too; the analysis reads the syntax the template means, as a model
    // writes it, and says so.
    let text = "{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}{% for c in m.tool_calls or [] %}\
                {{ '[TOOL_CALLS]'|safe + '{\"name\": \"' + c.function.name + '\", \"arguments\": ' \
                + (c.function.arguments | tojson) + '}' }}{% endfor %}</s>{% endfor %}\
                {% if add_generation_prompt %}<assistant>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let conversation = one_call_turn();
    let rendered = template.render(&conversation, &parlance::RenderOptions::default()).unwrap();
    assert!(rendered.contains("[TOOL_CALLS]{&#34;name&#34;: &#34;f&#34;"), "{rendered}");
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::MarkupAddUnescaped]);
    assert_eq!(format.tool_format, parlance::ToolFamily::JsonNative);
    let tools = format.tools.as_ref().expect("tool calls found");
    assert_eq!(tools.call_start, "[TOOL_CALLS]", "{tools:?}");
    assert_eq!(tools.json.as_ref().map(|j| (j.name.as_str(), j.arguments.as_str())), Some(("name", "arguments")));
    // A `+` that never meets Markup claims nothing.
    let plain = ChatTemplate::from_text(&text.replace("'[TOOL_CALLS]'|safe", "'[TOOL_CALLS]'")).unwrap();
    assert!(parlance::Format::from_template(&plain, &Default::default()).unwrap().workarounds.is_empty());
}

#[test]
fn list_append_workaround_analyzes_calls_of_a_template_that_appends() {
    // Kimi-K2's shape (written here, not copied): each call's id is queued with `list.append` for
    // the tool responses that follow. transformers' immutable sandbox refuses `append`, as
    // minijinja does, so every message with a call raises; the analysis ignores the append (the
    // assistant turn never reads the queue) and says so.
    let text = "{% set queue = namespace(ids=[]) %}{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}\
                {% if m.tool_calls %}<calls>{% for c in m.tool_calls %}{% set _ = queue.ids.append(c.id) %}\
                <call>{{ c.function.name }}|{{ c.function.arguments | tojson }}</call>{% endfor %}</calls>{% endif %}</s>\
                {% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let conversation = one_call_turn();
    let err = template.render(&conversation, &parlance::RenderOptions::default()).unwrap_err();
    assert!(err.to_string().contains("append"), "{err}");
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::ListAppendIgnored]);
    assert_eq!(format.tool_format, parlance::ToolFamily::TagJson);
    let tools = format.tools.as_ref().expect("tool calls found");
    assert_eq!((tools.name_prefix.as_str(), tools.name_suffix.as_str()), ("<call>", "|"));
    // Rendering is untouched: the template still raises outside the analysis.
    assert!(template.render(&conversation, &parlance::RenderOptions::default()).is_err());
    // Without the append, no workaround is claimed.
    let plain = ChatTemplate::from_text(&text.replace("{% set _ = queue.ids.append(c.id) %}", "")).unwrap();
    assert!(parlance::Format::from_template(&plain, &Default::default()).unwrap().workarounds.is_empty());
}

// See: issue 25, class 2. The templates below are written here in the shape of real ones.
#[test]
fn reasoning_is_found_from_thinking_switches_and_stripped_history() {
    let reasoning = |text: &str| {
        let format =
            parlance::Format::from_template(&ChatTemplate::from_text(text).unwrap(), &Default::default()).unwrap();
        let mode = format.reasoning_details.as_ref().map(|d| d.mode.as_str().to_owned());
        (format.reasoning.map(|r| (r.start, r.end)), mode)
    };
    let turns = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}";
    let want = |mode: &str| (Some(("<think>".to_owned(), "</think>".to_owned())), Some(mode.to_owned()));
    // An empty block written after every conversation when thinking is off, generation prompt or
    // not (Hunyuan-A13B).
    let text = format!(
        "{turns}{{% if add_generation_prompt %}}<assistant>{{% endif %}}{{% if enable_thinking is defined and enable_thinking is false %}}<think>\n\n</think>\n{{% endif %}}"
    );
    assert_eq!(reasoning(&text), want("tag"));
    // The switch as a flag in the system prompt (Nemotron's `/no_think`).
    let text = format!(
        "{{% set ns = namespace(on=true) %}}{{% for m in messages %}}{{% if '/no_think' in m.content %}}{{% set ns.on = false %}}{{% endif %}}{{% endfor %}}{turns}{{% if add_generation_prompt %}}<assistant>{{% if not ns.on %}}<think>\n\n</think>\n\n{{% endif %}}{{% endif %}}"
    );
    assert_eq!(reasoning(&text), want("tag"));
    // Past turns cut at `</think>`, the prompt opening nothing (DeepSeek-R1-style): implicit.
    let text = "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{{ m.content.split('</think>')[-1] }}{% else %}{{ m.content }}{% endif %}</s>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
    assert_eq!(reasoning(text), want("implicit"));
    // Without the cut, nothing is claimed.
    assert_eq!(reasoning(&format!("{turns}{{% if add_generation_prompt %}}<assistant>{{% endif %}}")), (None, None));
}

// See: issue 25, class 4 (probes that do not fit the template's inputs).
#[test]
fn templates_that_need_tools_or_content_parts_are_probed_in_that_shape() {
    let analyze =
        |text: &str| parlance::Format::from_template(&ChatTemplate::from_text(text).unwrap(), &Default::default());
    // `tools | length` on an undefined `tools` raises: every render must declare tools.
    let text = "{{ 'T' ~ (tools | length) }}{% for m in messages %}<{{ m.role }}>{{ m.content }}\
                {% for c in m.tool_calls or [] %}<call>{{ c.function | tojson }}</call>{% endfor %}</s>{% endfor %}\
                {% if add_generation_prompt %}<assistant>{% endif %}";
    let format = analyze(text).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::ToolsInEveryRender]);
    assert_eq!(format.tool_format, parlance::ToolFamily::JsonNative);
    // Content read as a list of parts.
    let text = "{% for m in messages %}<{{ m.role }}>{{ m['content'][0]['text'] }}</s>{% endfor %}\
                {% if add_generation_prompt %}<assistant>{% endif %}";
    let format = analyze(text).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::ContentAsTextParts]);
    assert_eq!(format.turn_end, "</s>");
    // Nothing fits: the error names every shape tried and what the template said.
    let err = analyze("{{ raise_exception('no ' ~ (messages | length)) }}").unwrap_err().to_string();
    for shape in ["messages as given", "tools declared in every render", "content as a list of text parts"] {
        assert!(err.contains(shape), "{err}");
    }
    assert!(err.contains("no 2"), "{err}");
}

// See: issue 25, class 3 (a marker that carries the probe's own text).
#[test]
fn a_marker_holding_probe_text_is_a_failed_derivation_and_said_so() {
    // The last user turn is written as a system block in the prompt and as `[INST]` in history:
    // no split of prompt and turn holds; the analysis must not claim a marker made of the question.
    let text = "{% for m in messages %}{% if m.role == 'user' %}{% if loop.last %}<sys>{{ m.content }}</sys>\
                {% else %}[INST]{{ m.content }}[/INST]{% endif %}{% elif m.role == 'assistant' %}\
                {% if m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | map(attribute='function') | list | tojson }}\
                {% else %}{{ m.content }}{% endif %}</s>{% endif %}{% endfor %}";
    let format = parlance::Format::from_template(&ChatTemplate::from_text(text).unwrap(), &Default::default()).unwrap();
    let json = serde_json::to_string(&format).unwrap();
    let markers = json.split("\"unsupported\"").next().unwrap();
    assert!(!markers.contains("PLNC"), "a marker holds probe text: {json}");
    // The history form of the user turn is cut from the front of the markers, and said so.
    assert_eq!(format.tool_format, parlance::ToolFamily::JsonNative, "{json}");
    assert_eq!(format.tools.as_ref().unwrap().section_start, "[TOOL_CALLS]");
    assert!(format.unsupported.iter().any(|u| u.contains("render the last user turn differently")), "{json}");
    // Where no cut explains the probe text, the feature is dropped and said so.
    let text = text.replace("[/INST]", "");
    let format =
        parlance::Format::from_template(&ChatTemplate::from_text(&text).unwrap(), &Default::default()).unwrap();
    let json = serde_json::to_string(&format).unwrap();
    assert!(!json.split("\"unsupported\"").next().unwrap().contains("PLNC"), "{json}");
    assert!(format.unsupported.iter().any(|u| u.contains("holds probe text")), "{json}");
}

// See: issue 25 class 2 (reasoning read from `message.thought`, `message.tool_plan`).
#[test]
fn reasoning_under_a_key_of_the_templates_own_is_found_and_self_checks() {
    use parlance::{ParseOptions, ReasoningMode};
    // Reasoning from a key no standard name fills, in every turn.
    let text = "{% for m in messages %}<|{{ m.role }}|>{% if m.thought %}<thought>{{ m.thought }}</thought>{% endif %}\
                {{ m.content }}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    let reasoning = format.reasoning.as_ref().expect("reasoning found");
    assert_eq!((reasoning.start.as_str(), reasoning.end.as_str()), ("<thought>", "</thought>"));
    let details = format.reasoning_details.as_ref().unwrap();
    assert_eq!(details.field.as_deref(), Some("thought"));
    let failed: Vec<_> =
        self_check(&template, &format, &Default::default()).into_iter().filter(|c| !c.passed).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let parsed = parlance::parse(&format, &ParseOptions::default(), "<thought>hmm</thought>Hi");
    assert_eq!((parsed.reasoning_content.as_deref(), parsed.content.as_deref()), (Some("hmm"), Some("Hi")));
    // Standard names are never described by a key of the template's own.
    let qwen = "{% for m in messages %}<|{{ m.role }}|>{% if m.reasoning_content %}<think>{{ m.reasoning_content }}\
                </think>{% endif %}{{ m.content }}{{ m.metadata }}<|end|>{% endfor %}";
    let format = parlance::Format::from_template(&ChatTemplate::from_text(qwen).unwrap(), &Default::default()).unwrap();
    assert_eq!(format.reasoning_details.as_ref().and_then(|d| d.field.clone()), None);

    // Reasoning written only in call turns, from a key of its own, with an empty block when there is
    // none (Command A's `tool_plan`): the block is the reasoning's, not the call section's opener.
    let text = "{% for m in messages %}<|{{ m.role }}|>{% if m.tool_calls %}<|TH|>{{ m.plan }}<|/TH|><|ACT|>\
                {{ m.tool_calls | map(attribute='function') | list | tojson }}<|/ACT|>{% else %}{{ m.content }}\
                {% endif %}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
    let template = ChatTemplate::from_text(text).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    let details = format.reasoning_details.as_ref().expect("reasoning found");
    assert_eq!((details.mode, details.field.as_deref()), (ReasoningMode::ToolsOnly, Some("plan")));
    assert_eq!(details.empty_block, "<|TH|><|/TH|>");
    assert_eq!(format.tools.as_ref().unwrap().section_start, "<|ACT|>");
    let failed: Vec<_> =
        self_check(&template, &format, &Default::default()).into_iter().filter(|c| !c.passed).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let output = r#"<|TH|>look it up<|/TH|><|ACT|>[{"name": "f", "arguments": {"a": 1}}]<|/ACT|>"#;
    let parsed = parlance::parse(&format, &ParseOptions::default(), output);
    assert_eq!(parsed.reasoning_content.as_deref(), Some("look it up"));
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
}

// See: issue 25 ("analyze shows its evidence").
#[test]
fn every_finding_comes_with_its_evidence_and_a_confidence() {
    use parlance::{Confidence, Finding};
    let Some(corpus) = corpus::corpus() else { return };
    let confidence_of = |id: &str, finding: Finding| {
        let (template, options) = corpus_template(&corpus, id);
        let format = analyze(&template, &options).unwrap();
        format.evidence.iter().find(|e| e.finding == finding).map(|e| e.confidence)
    };
    // Markers read off the message's own renders.
    assert_eq!(confidence_of("Qwen-Qwen3-0.6B", Finding::Reasoning), Some(Confidence::High));
    assert_eq!(confidence_of("Qwen-Qwen3-0.6B", Finding::ToolCalls), Some(Confidence::High));
    // Read off string arguments and a prompt that opens the call syntax.
    let id = "meetkai-functionary-medium-v3.2";
    assert_eq!(confidence_of(id, Finding::ToolCalls), Some(Confidence::Medium));
    assert_eq!(confidence_of(id, Finding::OutputPrefix), Some(Confidence::Medium));
    // Guessed and confirmed: a closing tag the template strips.
    assert_eq!(confidence_of("LFM2.5-Instruct", Finding::Reasoning), Some(Confidence::Low));
    // No evidence for what was not found.
    assert_eq!(confidence_of("LFM2.5-Instruct", Finding::ToolCalls), None);
}

// See: issue 25, class 1 (functionary v2: the prompt ends `<|recipient|>`; its template calls a
// helper the serving code provides). Written here in that shape.
#[test]
fn a_helper_the_caller_provides_is_stubbed_and_an_opened_recipient_found() {
    let text = "{{ 'S:' + describe_tools(tools) }}{% for m in messages %}\n<|from|>{{ m.role }}\n\
                {% if m.role == 'assistant' %}{% if m.content %}<|recipient|>all\n<|content|>{{ m.content }}{% endif %}\
                {% for c in m.tool_calls or [] %}<|recipient|>{{ c.function.name }}\n<|content|>{{ c.function.arguments }}{% endfor %}\
                {% else %}<|recipient|>all\n<|content|>{{ m.content }}{% endif %}<|stop|>{% endfor %}\
                {% if add_generation_prompt %}\n<|from|>assistant\n<|recipient|>{% endif %}";
    let format = parlance::Format::from_template(&ChatTemplate::from_text(text).unwrap(), &Default::default()).unwrap();
    assert_eq!(format.output_prefix, "<|recipient|>", "{}", format.summary());
    assert_eq!(format.tool_format, parlance::ToolFamily::RecipientBased, "{}", format.summary());
    assert!(format.unsupported.iter().any(|u| u.contains("describe_tools")), "{:?}", format.unsupported);
    let options = parlance::ParseOptions::default();
    let message = parlance::parse(&format, &options, "get_weather\n<|content|>{\"city\": \"Paris\"}");
    assert_eq!(message.tool_calls.len(), 1, "{message:?}");
    assert_eq!(message.tool_calls[0].name, "get_weather");
}

#[test]
fn calls_written_only_through_their_ids_are_found_with_ids_that_name_the_function() {
    // Kimi K2's own template shape (written here, not copied): a call is written as its id and
    // arguments, and `function.name` never; callers pass ids as the model writes them
    // (`functions.NAME:INDEX`). With ids that name nothing, no call would show.
    let text = "{%- for m in messages -%}<|im_{{ m.role }}|>{{ m.content or '' }}\
                {%- if m.tool_calls -%}<|tool_calls_section_begin|>{%- for tc in m.tool_calls -%}\
                <|tool_call_begin|>{{ tc.id }}<|tool_call_argument_begin|>{{ tc.function.arguments | tojson }}\
                <|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}<|im_end|>{%- endfor -%}\
                {%- if add_generation_prompt -%}<|im_assistant|>{%- endif -%}";
    let template = ChatTemplate::from_text(text).unwrap();
    let format = parlance::Format::from_template(&template, &Default::default()).unwrap();
    assert_eq!(format.workarounds, [parlance::Workaround::CallIdsNameTheFunction], "{format:?}");
    let tools = format.tools.as_ref().expect("calls found");
    assert_eq!(tools.name_prefix, "<|tool_call_begin|>functions.");
    let output = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>\
                  {\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1\
                  <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
    let parsed = parlance::Parser::new(&format, &parlance::ParseOptions::default()).parse(output);
    let names: Vec<&str> = parsed.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"], "{parsed:?}");
    assert!(parsed.issues.is_empty(), "{:?}", parsed.issues);
    // The self-check renders with such ids too, and passes.
    let results = self_check(&template, &format, &AnalyzeOptions::default());
    assert!(results.iter().all(|r| r.passed || r.skipped), "{results:?}");
}
