//! Loading templates from files, configs and folders, and the render options around them.
//! Templates here are written for these tests.

use std::path::{Path, PathBuf};

use parlance::{ChatTemplate, Conversation, RenderOptions, RenderRequest, TemplateError};
use serde_json::json;

/// A fresh folder under the target directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn user(text: &str) -> Conversation {
    Conversation { messages: vec![json!({"role": "user", "content": text})], ..Conversation::default() }
}

fn with_tools(mut conversation: Conversation) -> Conversation {
    conversation.tools = Some(vec![json!({"type": "function", "function": {"name": "f"}})]);
    conversation
}

#[test]
fn tokenizer_config_with_named_templates_picks_like_transformers() {
    let dir = scratch("named_templates");
    let config = json!({
        "bos_token": {"content": "<s>", "lstrip": false},
        "eos_token": "</s>",
        "chat_template": [
            {"name": "default", "template": "D{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"},
            {"name": "tool_use", "template": "T{{ tools | length }}"}
        ]
    });
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    let template = ChatTemplate::from_path(dir.join("tokenizer_config.json")).unwrap();
    assert_eq!(template.names().collect::<Vec<_>>(), ["default", "tool_use"]);
    assert_eq!(template.special_tokens()["bos_token"], "<s>");
    let options = RenderOptions::default();
    assert_eq!(template.render(&user("hi"), &options).unwrap(), "D<s>hi</s>");
    assert_eq!(template.render(&with_tools(user("hi")), &options).unwrap(), "T1");
    let named = RenderOptions { template_name: Some("default".into()), ..RenderOptions::default() };
    assert_eq!(template.render(&with_tools(user("hi")), &named).unwrap(), "D<s>hi</s>");
    // The folder loads the same way.
    let from_folder = ChatTemplate::from_path(&dir).unwrap();
    assert_eq!(from_folder.render(&user("x"), &options).unwrap(), "D<s>x</s>");
}

#[test]
fn template_files_beside_the_config_win_over_its_field() {
    let dir = scratch("beside_config");
    let config = json!({"eos_token": "<e>", "chat_template": "FIELD"});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    std::fs::write(dir.join("chat_template.json"), json!({"chat_template": "JSON{{ eos_token }}"}).to_string())
        .unwrap();
    let options = RenderOptions::default();
    assert_eq!(ChatTemplate::from_path(&dir).unwrap().render(&user("x"), &options).unwrap(), "JSON<e>");
    std::fs::write(dir.join("chat_template.jinja"), "JINJA{{ eos_token }}\n").unwrap();
    assert_eq!(ChatTemplate::from_path(&dir).unwrap().render(&user("x"), &options).unwrap(), "JINJA<e>");
    let via_config = ChatTemplate::from_path(dir.join("tokenizer_config.json")).unwrap();
    assert_eq!(via_config.render(&user("x"), &options).unwrap(), "JINJA<e>");
}

#[test]
fn malformed_files_are_named_with_line_and_column() {
    let dir = scratch("malformed");
    std::fs::write(dir.join("tokenizer_config.json"), "{\n  \"chat_template\": \"x\",\n  oops\n}").unwrap();
    let err = ChatTemplate::from_path(dir.join("tokenizer_config.json")).unwrap_err();
    assert!(matches!(&err, TemplateError::Json { line: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("tokenizer_config.json:3:"), "{err}");

    std::fs::write(dir.join("conversation.json"), "{\"messages\": [\n{\"role\": \"user\",}\n]}").unwrap();
    let err = RenderRequest::from_path(&dir.join("conversation.json")).unwrap_err();
    assert!(err.to_string().contains("conversation.json:2:"), "{err}");

    std::fs::write(dir.join("no_template.json"), "{\"bos_token\": \"<s>\"}").unwrap();
    let err = ChatTemplate::from_path(dir.join("no_template.json")).unwrap_err();
    assert!(matches!(err, TemplateError::NoTemplate { .. }), "{err:?}");
    let err = ChatTemplate::from_path(dir.join("missing.jinja")).unwrap_err();
    assert!(matches!(err, TemplateError::Io { .. }), "{err:?}");
}

#[test]
fn strftime_now_uses_the_injected_clock() {
    let template = ChatTemplate::from_text("{{ strftime_now('%d %b %Y, %A %H:%M') }}").unwrap();
    let now = chrono::NaiveDate::from_ymd_opt(2025, 1, 15).unwrap().and_hms_opt(12, 0, 0).unwrap();
    let options = RenderOptions { now: Some(now), ..RenderOptions::default() };
    assert_eq!(template.render(&user("x"), &options).unwrap(), "15 Jan 2025, Wednesday 12:00");
}

#[test]
fn variables_override_special_tokens_and_reach_the_template() {
    let dir = scratch("variables");
    std::fs::write(
        dir.join("tokenizer_config.json"),
        json!({"bos_token": "<s>", "chat_template": "{{ bos_token }}|{{ enable_thinking }}"}).to_string(),
    )
    .unwrap();
    let template = ChatTemplate::from_path(&dir).unwrap();
    let mut options = RenderOptions::default();
    options.variables.insert("enable_thinking".into(), json!(false));
    assert_eq!(template.render(&user("x"), &options).unwrap(), "<s>|False");
    options.variables.insert("bos_token".into(), json!("<B>"));
    assert_eq!(template.render(&user("x"), &options).unwrap(), "<B>|False");
    options.variables.insert("messages".into(), json!([]));
    assert!(matches!(template.render(&user("x"), &options), Err(TemplateError::Request(_))));
}

#[test]
fn messages_are_normalized_like_transformers() {
    // null keys dropped; reasoning offered as `thinking` and `reasoning_content`.
    let template = ChatTemplate::from_text(
        "{% for m in messages %}{{ m.keys() | list }}|{{ m.thinking }}|{{ m.reasoning_content }};{% endfor %}",
    )
    .unwrap();
    let conversation = Conversation {
        messages: vec![
            json!({"role": "assistant", "content": null, "reasoning": "r1"}),
            json!({"role": "assistant", "content": "c", "thinking": "own", "reasoning_content": "r2"}),
        ],
        ..Conversation::default()
    };
    assert_eq!(
        template.render(&conversation, &RenderOptions::default()).unwrap(),
        "['thinking', 'role', 'reasoning', 'reasoning_content']|r1|r1;\
         ['thinking', 'role', 'content', 'reasoning_content']|own|r2;"
    );
}

#[test]
fn continue_final_message_cuts_after_the_final_content() {
    let template =
        ChatTemplate::from_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>\n{% endfor %}")
            .unwrap();
    let conversation = Conversation {
        messages: vec![json!({"role": "user", "content": "hi"}), json!({"role": "assistant", "content": "Sure, the"})],
        ..Conversation::default()
    };
    let options = RenderOptions { continue_final_message: Some("content".into()), ..RenderOptions::default() };
    assert_eq!(template.render(&conversation, &options).unwrap(), "<user>hi</user>\n<assistant>Sure, the");
    let both = RenderOptions { add_generation_prompt: true, ..options };
    assert!(matches!(template.render(&conversation, &both), Err(TemplateError::Request(_))));
}

#[test]
fn python_flavoured_filters_and_methods_render_like_jinja2() {
    // Expected strings are what Jinja2 3.1.6 with transformers' tojson prints for the same template.
    let cases = [
        ("{{ {'b': 1, 'a': [1.0, 1e-05, none, true]} | tojson }}", r#"{"b": 1, "a": [1.0, 1e-05, null, true]}"#),
        ("{{ {'b': 'é'} | tojson(ensure_ascii=true, sort_keys=true) }}", r#"{"b": "\u00e9"}"#),
        ("{{ [1, {'a': 2}] | tojson(indent=2) }}", "[\n  1,\n  {\n    \"a\": 2\n  }\n]"),
        ("{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}", r#"{"a":[1,2]}"#),
        ("{{ 'a\nb\n\nc' | indent(2) }}", "a\n  b\n\n  c"),
        ("{{ 'a\nb' | indent(2, first=true, blank=true) }}", "  a\n  b"),
        ("{{ 'x.y.z'.rsplit('.', 1) }}", "['x.y', 'z']"),
        ("{{ 'prefix-body'.removeprefix('prefix-') }}", "body"),
        ("{{ 'abc'.index('c') }}", "2"),
        ("{{ [1, 2] is sequence }}{{ 'x' is iterable }}{{ 3.5 is number }}{{ none is mapping }}", "TrueTrueTrueFalse"),
        ("{{ undefined_thing | length }}", "0"),
        ("{{ 'héllo' | length }}", "5"),
        ("{{ [3, 1, 2][::-1] }}", "[2, 1, 3]"),
        ("{{ dict(a=1, b='x') }}", "{'a': 1, 'b': 'x'}"),
        ("{{ 7 % 3 }}{{ loop_free if false else 'ok' }}", "1ok"),
        ("{% for k, v in {'a': 1} | items %}{{ k }}{{ v }}{% endfor %}", "a1"),
        ("{{ none }}|{{ true }}|{{ 2.50 }}", "None|True|2.5"),
        ("{% generation %}gen{% endgeneration %}", "gen"),
    ];
    let mut failures = Vec::new();
    for (source, want) in cases {
        let got = ChatTemplate::from_text(source)
            .and_then(|t| t.render(&user("x"), &RenderOptions::default()))
            .map_err(|e| e.to_string());
        if got.as_deref() != Ok(want) {
            failures.push(format!("{source}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
