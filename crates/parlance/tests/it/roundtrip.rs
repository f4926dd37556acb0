//! The parse-render roundtrip over the corpus: every scenario for every template at string level,
//! token level for the templates of the families in `shared/tokenizers`, the bridge over random
//! sessions, and `message_indices` against each message's place in the render.
//!
//! The scenario table is an insta snapshot (`snapshots/it__roundtrip__scenario_table.snap`); its
//! verdicts for the tokenizer families were checked against the templates' code (see the note of
//! issue 6).

use std::collections::BTreeMap;

use parlance::roundtrip::{Report, RoundtripOptions, ScenarioResult, Status, run};
use parlance::{Conversation, RenderOptions, Renderer, Tokenizer, TurnError, analyze};
use proptest::prelude::*;
use serde_json::{Value as Json, json};
use std::sync::Arc;

use crate::analyze::{corpus_template, manifest_ids};
use crate::corpus;

/// Corpus templates checked at token level, with the tokenizer of their family. (DeepSeek V3.1 and
/// V3.2 add `<think>` tokens the V3 tokenizer lacks, so they are checked at string level only.)
/// Qwen3.5 runs with the Qwen3 tokenizer (same chat special tokens): a template whose generation
/// prompt opens reasoning that history leaves out, which the bridge must still find its way in.
const TOKEN_LEVEL: [(&str, &str); 8] = [
    ("Qwen-Qwen3-0.6B", "qwen3"),
    ("Qwen3.5-4B", "qwen3"),
    ("lenml-llama3_1", "llama3_1"),
    ("meta-llama-Llama-3.1-8B-Instruct", "llama3_1"),
    ("meta-llama-Llama-3.2-3B-Instruct", "llama3_1"),
    ("meta-llama-Llama-3.3-70B-Instruct", "llama3_1"),
    ("lenml-deepseek_v3", "deepseek_v3"),
    ("openai-gpt-oss-120b", "gptoss"),
];

fn verdict(ok: Option<bool>, result: &ScenarioResult) -> String {
    match (result.status == Status::NotApplicable, ok) {
        (true, _) | (false, None) => "n/a".to_owned(),
        (false, Some(true)) => "ok".to_owned(),
        (false, Some(false)) => {
            let cause = result.cause.map(|c| serde_json::to_value(c).unwrap().as_str().unwrap().to_owned());
            format!("break ({})", cause.unwrap_or_default())
        }
    }
}

fn report_for(
    corpus: &std::path::Path,
    id: &str,
    tokenizer: Option<&Arc<Tokenizer>>,
    sessions: usize,
) -> Option<Report> {
    let (template, options) = corpus_template(corpus, id);
    let format = analyze(&template, &options).ok()?;
    let roundtrip = RoundtripOptions { variables: options.variables.clone(), sessions, ..RoundtripOptions::default() };
    Some(run(&template, &format, tokenizer, &roundtrip))
}

#[test]
fn scenario_table_of_every_corpus_template() {
    let Some(corpus) = corpus::corpus() else { return };
    let mut table: BTreeMap<String, BTreeMap<&str, String>> = BTreeMap::new();
    for id in manifest_ids(&corpus) {
        let Some(report) = report_for(&corpus, &id, None, 0) else {
            table.insert(id, BTreeMap::from([("*", "analysis failed".to_owned())]));
            continue;
        };
        assert_eq!(report.scenarios.len(), parlance::roundtrip::Scenario::ALL.len());
        let row = report.scenarios.iter().map(|r| (r.scenario, verdict(r.string_prefix_ok, r))).collect();
        table.insert(id, row);
    }
    insta::assert_json_snapshot!("scenario_table", table);
}

#[test]
fn token_level_table_and_bridge_sessions() {
    let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return };
    let mut table: BTreeMap<&str, Json> = BTreeMap::new();
    let mut loaded: BTreeMap<&str, Arc<Tokenizer>> = BTreeMap::new();
    for (id, family) in TOKEN_LEVEL {
        let tokenizer =
            loaded.entry(family).or_insert_with(|| Arc::new(Tokenizer::from_path(tokenizers.join(family)).unwrap()));
        let report = report_for(&corpus, id, Some(tokenizer), 64).expect("the family's template analyzes");
        let bridge = report.bridge.as_ref().unwrap_or_else(|| panic!("{id}: no bridge: {:?}", report.bridge_error));
        // The bridge keeps every previous prompt and completion, in every session.
        assert_eq!(bridge.bridge_breaks, 0, "{id}: {:?}", bridge.first_problem);
        // Where the re-render keeps the prefix, the bridge is token for token the re-render.
        assert_eq!(bridge.bridge_equals_rerender, bridge.compared, "{id}: {:?}", bridge.first_problem);
        assert!(bridge.compared > 0, "{id}: no transition compared");
        let scenarios: BTreeMap<&str, String> = report
            .scenarios
            .iter()
            .map(|r| (r.scenario, format!("{} / {}", verdict(r.string_prefix_ok, r), verdict(r.token_prefix_ok, r))))
            .collect();
        table.insert(
            id,
            json!({
                "scenarios": scenarios,
                "sessions": bridge.sessions,
                "rerender_breaks": bridge.rerender_breaks,
                "bridge_breaks": bridge.bridge_breaks,
                "bridge_equals_rerender": format!("{}/{}", bridge.bridge_equals_rerender, bridge.compared),
            }),
        );
    }
    insta::assert_json_snapshot!("token_table", table);
}

#[test]
fn bridge_refuses_assistant_messages_and_templates_without_a_token_close() {
    let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return };
    let (template, options) = corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = analyze(&template, &options).unwrap();
    let qwen = Arc::new(Tokenizer::from_path(tokenizers.join("qwen3")).unwrap());
    let format = Arc::new(format);
    let render =
        RenderOptions { add_generation_prompt: true, variables: options.variables.clone(), ..Default::default() };
    let renderer = Renderer::new(template.clone(), format.clone(), qwen.clone(), render.clone()).unwrap();
    let messages = vec![json!({"role": "user", "content": "Hi"})];
    let prompt = renderer.render(&Conversation { messages, tools: None, documents: None }).unwrap();
    let completion = qwen.encode_rendered("<think>\nhm\n</think>\n\nHello.<|im_end|>").unwrap();
    let error =
        renderer.bridge(&prompt, &completion, &[json!({"role": "assistant", "content": "again"})], None).unwrap_err();
    assert!(matches!(error, TurnError::AssistantInNewMessages { index: 0 }), "{error}");
    // A cut-off completion is closed with the template's turn close, then the new turn follows.
    let cut = qwen.encode_rendered("<think>\nhm").unwrap();
    let bridged = renderer.bridge(&prompt, &cut, &[json!({"role": "user", "content": "Go on"})], None).unwrap();
    let tail = qwen.decode(&bridged.ids[prompt.ids.len()..]).unwrap();
    assert_eq!(tail, "<think>\nhm<|im_end|>\n<|im_start|>user\nGo on<|im_end|>\n<|im_start|>assistant\n");
    assert_eq!(bridged.message_count, 3);
    // Llama 3's vocabulary has no `<|im_end|>` token: the join would not be a token boundary.
    let llama = Arc::new(Tokenizer::from_path(tokenizers.join("llama3_1")).unwrap());
    let error = Renderer::new(template, format, llama, render).unwrap_err();
    assert!(error.to_string().contains("not a single token"), "{error}");
}

/// Random conversations: words, punctuation, newlines, non-ASCII.
fn conversation() -> impl Strategy<Value = Vec<Json>> {
    let text = proptest::collection::vec(
        prop_oneof![Just("hello"), Just("world."), Just("Paris"), Just("\n"), Just("ünï"), Just("42"), Just("a-b")],
        1..8,
    )
    .prop_map(|words| words.join(" "));
    proptest::collection::vec(text, 1..4).prop_map(|turns| {
        let mut messages = Vec::new();
        for (i, t) in turns.iter().enumerate() {
            messages.push(json!({"role": "user", "content": format!("Q{i} {t}")}));
            messages.push(json!({"role": "assistant", "content": format!("A{i} {t}")}));
        }
        messages.push(json!({"role": "user", "content": "last question"}));
        messages
    })
}

/// Templates and tokenizers of the attribution property test, loaded once.
struct Fixture {
    id: &'static str,
    close: &'static str,
    template: parlance::ChatTemplate,
    format: Arc<parlance::Format>,
    tokenizer: Arc<Tokenizer>,
    variables: indexmap::IndexMap<String, Json>,
}

fn fixtures() -> &'static [Fixture] {
    static FIXTURES: std::sync::OnceLock<Vec<Fixture>> = std::sync::OnceLock::new();
    FIXTURES.get_or_init(|| {
        let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return Vec::new() };
        [("Qwen-Qwen3-0.6B", "qwen3", "<|im_end|>"), ("meta-llama-Llama-3.1-8B-Instruct", "llama3_1", "<|eot_id|>")]
            .into_iter()
            .map(|(id, family, close)| {
                let (template, options) = corpus_template(&corpus, id);
                let format = analyze(&template, &options).unwrap();
                let tokenizer = Arc::new(Tokenizer::from_path(tokenizers.join(family)).unwrap());
                Fixture { id, close, template, format: Arc::new(format), tokenizer, variables: options.variables }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Tokens attributed to a message are one run that holds the message's content; assistant
    /// runs end with the turn close; the loss mask holds no headers.
    #[test]
    fn message_indices_agree_with_message_spans(messages in conversation()) {
        for Fixture { id, close, template, format, tokenizer, variables } in fixtures() {
            let render = RenderOptions { add_generation_prompt: true, variables: variables.clone(), ..Default::default() };
            let renderer = Renderer::new(template.clone(), format.clone(), tokenizer.clone(), render).unwrap();
            let rendered = renderer.render(&Conversation { messages: messages.clone(), tools: None, documents: None }).unwrap();
            prop_assert_eq!(rendered.ids.len(), rendered.message_indices.len());
            for (i, message) in messages.iter().enumerate() {
                let at: Vec<usize> = (0..rendered.ids.len()).filter(|&k| rendered.message_indices[k] == i as i32).collect();
                prop_assert!(!at.is_empty(), "{}: message {} has no tokens", id, i);
                prop_assert_eq!(at.len(), at[at.len() - 1] - at[0] + 1, "{}: message {}'s tokens are not one run", id, i);
                let ids: Vec<u32> = at.iter().map(|&k| rendered.ids[k]).collect();
                let text = tokenizer.decode(&ids).unwrap();
                let content = message["content"].as_str().unwrap().trim();
                prop_assert!(text.contains(content), "{}: message {}: {:?} lacks {:?}", id, i, text, content);
                if message["role"] == "assistant" {
                    prop_assert!(text.ends_with(close), "{}: assistant {}: {:?}", id, i, text);
                } else {
                    // At most the bytes of the first and last token stick out of the content.
                    prop_assert!(text.len() <= content.len() + 16, "{}: message {}: {:?}", id, i, text);
                }
            }
            let mask = rendered.assistant_mask(&messages);
            let masked: Vec<u32> = rendered.ids.iter().zip(&mask).filter(|(_, m)| **m).map(|(id, _)| *id).collect();
            let masked_text = tokenizer.decode(&masked).unwrap();
            prop_assert!(!masked_text.contains("<|im_start|>") && !masked_text.contains("<|start_header_id|>"), "{}: {:?}", id, masked_text);
        }
    }
}

// See: issue 19, item 1 (a whole-run budget): a template that is expensive only once a tool result
// is in the conversation costs the roundtrip one render budget, not one per scenario render.
#[test]
fn a_render_limit_is_paid_once_per_roundtrip() {
    let text = "{% if messages | selectattr('role', 'equalto', 'tool') | list | length > 0 %}\
                {% set s = 'x' * 4000000 %}{% for i in range(10000) %}{% for j in range(10000) %}{% set t = s ~ s %}\
                {% endfor %}{% endfor %}{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}\
                {% for c in m.tool_calls or [] %}<call>{{ c.function | tojson }}</call>{% endfor %}</s>{% endfor %}\
                {% if add_generation_prompt %}<assistant>{% endif %}";
    let budget = std::time::Duration::from_millis(500);
    let limits = parlance::RenderLimits { max_wall_time: budget, ..parlance::RenderLimits::default() };
    let template =
        parlance::ChatTemplate::from_source(parlance::TemplateSource::from_text("late.jinja", text), limits).unwrap();
    let format = analyze(&template, &Default::default()).unwrap();
    assert!(format.tools.is_some(), "{}", format.summary());
    let started = std::time::Instant::now();
    let report = run(&template, &format, None, &RoundtripOptions::default());
    let elapsed = started.elapsed();
    assert!(elapsed < budget * 5, "the roundtrip took {elapsed:?} for a {budget:?} budget");
    let limited = report.scenarios.iter().filter(|s| s.status == Status::Break).count();
    assert!(limited > 0, "{:?}", report.scenarios);
}

/// The turn loop a server runs, through the public API: render → (the model writes) → parse →
/// `to_assistant_message` + a tool result → bridge. The renderer renders with the caller's options
/// (gpt-oss prints today's date; no variable is injected) and its ids are the tokenized render.
#[test]
fn the_turn_loop_renders_with_the_callers_options_and_bridges() {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<Renderer>();
    let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return };
    let tool = json!({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let today = chrono::Local::now().format("%Y-%m-%d").to_string();
    for (id, family, completion) in [
        (
            "deepseek-ai-DeepSeek-V3.1",
            "deepseek_v3",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        ),
        (
            "openai-gpt-oss-120b",
            "gptoss",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        ),
    ] {
        let (template, options) = corpus_template(&corpus, id);
        let format = Arc::new(analyze(&template, &options).unwrap());
        let tokenizer = Arc::new(Tokenizer::from_path(tokenizers.join(family)).unwrap());
        let render = RenderOptions { add_generation_prompt: true, ..Default::default() };
        let renderer = Renderer::new(template.clone(), format.clone(), tokenizer.clone(), render.clone()).unwrap();
        let conversation = Conversation {
            messages: vec![json!({"role": "user", "content": "Weather in Paris?"})],
            tools: Some(vec![tool.clone()]),
            documents: None,
        };
        let prompt = renderer.render(&conversation).unwrap();
        let text = template.render(&conversation, &render).unwrap();
        assert_eq!(prompt.ids, tokenizer.encode_rendered(&text).unwrap(), "{id}: ids are the tokenized render");
        if id.contains("gpt-oss") {
            assert!(text.contains(&today), "{id}: the real date is printed: {text}");
        }
        // No thinking switch injected: the prompt ends as the template's default does (DeepSeek
        // V3.1: `<think></think>`, thinking off).
        assert!(text.ends_with(&format.generation_prompt), "{id}: {text:?}");
        // The model's completion, parsed back into the message the client sends.
        let completion_ids = tokenizer.encode_rendered(completion).unwrap();
        let request = parlance::ParseOptions { tools: vec![tool.clone()], ..Default::default() };
        let stop =
            completion_ids.iter().position(|t| renderer.stop_token_ids().contains(t)).unwrap_or(completion_ids.len());
        let parsed =
            parlance::Parser::new(&format, &request).parse(&tokenizer.decode(&completion_ids[..stop]).unwrap());
        assert_eq!(parsed.tool_calls.len(), 1, "{id}: {parsed:?}");
        let assistant = parsed.to_assistant_message(parlance::ArgumentsAs::Object);
        assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], json!({"city": "Paris"}));
        let result = json!({"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "name": "get_weather",
            "content": "{\"temperature\": 21}"});
        let next = renderer
            .bridge(&prompt, &completion_ids, std::slice::from_ref(&result), Some(std::slice::from_ref(&tool)))
            .unwrap();
        // The bridge keeps the prompt and the completion, then the tool result as the template writes it.
        assert_eq!(&next.ids[..prompt.ids.len()], &prompt.ids[..]);
        assert_eq!(&next.ids[prompt.ids.len()..prompt.ids.len() + completion_ids.len()], &completion_ids[..]);
        let tail = tokenizer.decode(&next.ids[prompt.ids.len() + completion_ids.len()..]).unwrap();
        // As a full render of the next request writes it.
        let mut messages = conversation.messages.clone();
        messages.extend([assistant.clone(), result.clone()]);
        let full = template.render(&Conversation { messages, ..conversation.clone() }, &render).unwrap();
        assert!(tail.contains("temperature") && full.ends_with(&tail), "{id}: {tail:?} vs {full:?}");
        assert_eq!(next.message_count, 3);
    }
}

/// MiniCPM3's template reads past reasoning from `message.thought`: the renderer's
/// `to_assistant_message` puts the parsed reasoning there as well as in `reasoning_content`, so the
/// next render writes it back as the model wrote it; the plain `ParsedMessage` one loses it.
#[test]
fn the_turn_loop_keeps_reasoning_under_the_templates_own_key() {
    let Some(tokenizers) = corpus::tokenizers() else { return };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/outside/serving/vllm-minicpm3.jinja");
    let template = parlance::ChatTemplate::from_path(&path).unwrap();
    let format = Arc::new(analyze(&template, &parlance::AnalyzeOptions::default()).unwrap());
    assert_eq!(format.reasoning_details.as_ref().and_then(|d| d.field.as_deref()), Some("thought"));
    // Text only matters here; ChatML's `<|im_end|>` is a special token of Qwen3's tokenizer.
    let tokenizer = Arc::new(Tokenizer::from_path(tokenizers.join("qwen3")).unwrap());
    let renderer = Renderer::new(template.clone(), format.clone(), tokenizer, RenderOptions::default()).unwrap();
    let completion = "<|thought_start|>\nParis is in France.\n<|thought_end|>\nIt is sunny in Paris.";
    let parsed = parlance::Parser::new(&format, &Default::default()).parse(completion);
    assert_eq!(parsed.reasoning_content.as_deref(), Some("Paris is in France."));
    let user = json!({"role": "user", "content": "Weather in Paris?"});
    let render = |assistant: Json| {
        let conversation = Conversation { messages: vec![user.clone(), assistant], tools: None, documents: None };
        template.render(&conversation, &RenderOptions::default()).unwrap()
    };
    let message = renderer.to_assistant_message(&parsed, parlance::ArgumentsAs::Object);
    assert_eq!(message["thought"], "Paris is in France.");
    assert_eq!(message["reasoning_content"], "Paris is in France.");
    let kept = render(message);
    assert!(kept.contains("<|thought_start|>\nParis is in France.\n<|thought_end|>\nIt is sunny in Paris."), "{kept}");
    let lost = render(parsed.to_assistant_message(parlance::ArgumentsAs::Object));
    assert!(!lost.contains("Paris is in France."), "{lost}");
}
