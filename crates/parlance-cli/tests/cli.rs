//! The `parlance` binary: output, exit status and error messages of the command-line contract.

use std::path::PathBuf;
use std::process::Command;

fn parlance() -> Command {
    Command::new(env!("CARGO_BIN_EXE_parlance"))
}

fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("PARLANCE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"));
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var_os("PARLANCE_CORPUS").is_some() {
        panic!("PARLANCE_CORPUS is set to {}, which is not a folder", dir.display());
    } else {
        eprintln!("skipping: corpus not found at {}", dir.display());
        None
    }
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

#[test]
fn render_prints_the_reference_render() {
    let Some(corpus) = corpus() else { return };
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("golden/Qwen-Qwen3-0.6B.json")).unwrap()).unwrap();
    let case = golden["cases"].as_array().unwrap().iter().find(|c| c["fixture"] == "06_parallel_tool_calls").unwrap();
    let out = parlance()
        .args(["render", "--template"])
        .arg(corpus.join("templates/Qwen-Qwen3-0.6B.jinja"))
        .arg("--conversation")
        .arg(corpus.join("conversations/06_parallel_tool_calls.json"))
        .args(["--now", "2025-01-15T12:00:00"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), case["output"].as_str().unwrap());
}

#[test]
fn render_example_with_vars() {
    let out = parlance()
        .args(["render", "--template"])
        .arg(example("chat_template.jinja"))
        .arg("--conversation")
        .arg(example("conversation.json"))
        .args(["--var", "bos_token=<s>", "--var", "enable_thinking=false"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("<s>"), "{text}");
    assert!(text.ends_with("<|assistant|>\n<think>\n\n</think>\n\n"), "{text:?}");
}

#[test]
fn render_ids_match_transformers_token_ids() {
    // Expected ids: `crates/parlance/tests/expected/token_ids.json`, written by transformers itself.
    let Some(corpus) = corpus() else { return };
    let tokenizers = corpus.join("../tokenizers/qwen3");
    if !tokenizers.is_dir() {
        eprintln!("skipping: tokenizers not found at {}", tokenizers.display());
        return;
    }
    let expected_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../parlance/tests/expected/token_ids.json");
    let expected: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(expected_path).unwrap()).unwrap();
    let case = expected["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tokenizer"] == "qwen3" && c["fixture"] == "05_tool_call_roundtrip")
        .expect("the qwen3 / 05 case");
    let out = parlance()
        .args(["render", "--template"])
        .arg(&tokenizers)
        .arg("--conversation")
        .arg(corpus.join("conversations/05_tool_call_roundtrip.json"))
        .args(["--now", "2025-01-15T12:00:00", "--ids", "--tokenizer"])
        .arg(&tokenizers)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ids: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--ids prints a JSON array");
    assert_eq!(ids, case["ids"]);
}

#[test]
fn template_errors_exit_1_with_the_message_on_stderr() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_errors");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("raises.jinja"), "{{ raise_exception('system message required') }}").unwrap();
    let out = parlance()
        .args(["render", "--template"])
        .arg(dir.join("raises.jinja"))
        .arg("--conversation")
        .arg(example("conversation.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("raises.jinja:1: template raised: system message required"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_file_is_said_once_on_every_template_command() {
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-template.jinja");
    for command in ["analyze", "parse", "roundtrip"] {
        let out = parlance().args([command, "--template"]).arg(&missing).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{command}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("no-such-template.jinja"), "{command}: {stderr}");
        // The OS's reason once, not again as the cause of the cause.
        assert_eq!(stderr.matches("os error").count(), 1, "{command}: {stderr}");
    }
}

#[test]
fn deep_templates_exit_1_on_every_template_command_never_a_signal() {
    // See: issue 24. Each once aborted the process with a stack overflow: a chain after a `}}` that
    // closes a brace, a chain after a quote in a raw block, and a chain of a million operators.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_deep");
    std::fs::create_dir_all(&dir).unwrap();
    // In lines of a thousand characters: longer lines are refused by their own limit.
    let chain = ["~1".repeat(500), "\n".into()].concat().repeat(400);
    let conversation = example("conversation.json");
    let templates = [
        ("braces.jinja", format!("{{{{ {{'a': {{'b': 1}}}}{chain} }}}}")),
        ("raw_quote.jinja", format!("{{% raw %}}{{% \"{{% endraw %}}{{{{ 1{chain} }}}}")),
        ("million.jinja", format!("ok\n{{{{ {}1 }}}}", ["-".repeat(1000), "\n".into()].concat().repeat(1000))),
    ];
    for (file, text) in templates {
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        let commands: [&[&str]; 4] =
            [&["render", "--conversation", conversation.to_str().unwrap()], &["analyze"], &["parse"], &["roundtrip"]];
        for args in commands {
            let out = parlance().args(args).arg("--template").arg(&path).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{file} {args:?}: {:?} {stderr}", out.status);
            assert!(stderr.contains(file) && stderr.contains("expression nesting depth"), "{file} {args:?}: {stderr}");
        }
    }
}

#[test]
fn parse_reads_stdin_and_streams_the_same_message() {
    use std::io::Write as _;
    let Some(corpus) = corpus() else { return };
    let output = "<think>\nweighing it\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    let run = |extra: &[&str]| {
        let mut child = parlance()
            .args(["parse", "--template"])
            .arg(corpus.join("templates/Qwen-Qwen3-0.6B.jinja"))
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(output.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let whole = run(&["--id-seed", "1"]);
    assert_eq!(whole["reasoning_content"], "weighing it");
    assert_eq!(whole["content"], "Sure.");
    assert_eq!(whole["tool_calls"][0]["function"]["name"], "f");
    assert_eq!(whole["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
    let streamed = run(&["--chunk", "3", "--id-seed", "1"]);
    for key in ["content", "reasoning_content", "tool_calls", "spans", "issues"] {
        assert_eq!(streamed[key], whole[key], "{key}");
    }
    // Unseeded runs give their calls fresh ids.
    assert_ne!(run(&[])["tool_calls"][0]["id"], run(&[])["tool_calls"][0]["id"]);
    let deltas = streamed["deltas"].as_array().unwrap();
    let arguments: String =
        deltas.iter().filter_map(|d| d["tool_calls"][0]["function"]["arguments"].as_str()).collect();
    assert_eq!(arguments, "{\"a\": 1}");
}

// See: issue 19 (item 6, and a bare message array as the conversation).
#[test]
fn parse_refuses_chunk_zero_and_render_takes_a_bare_message_array() {
    let Some(corpus) = corpus() else { return };
    let template = corpus.join("templates/Qwen-Qwen3-0.6B.jinja");
    let out = parlance().args(["parse", "--chunk", "0", "--template"]).arg(&template).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--chunk"));
    let dir = std::env::temp_dir().join(format!("parlance-bare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bare = dir.join("bare.json");
    std::fs::write(&bare, r#"[{"role": "user", "content": "hi"}]"#).unwrap();
    let out =
        parlance().args(["render", "--template"]).arg(&template).arg("--conversation").arg(&bare).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), "<|im_start|>user\nhi<|im_end|>");
    let scalar = dir.join("scalar.json");
    std::fs::write(&scalar, "\"hi\"").unwrap();
    let out =
        parlance().args(["render", "--template"]).arg(&template).arg("--conversation").arg(&scalar).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("or an array of messages"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn eval_parse_reports_each_case_and_a_summary() {
    let Some(corpus) = corpus() else { return };
    let dir = std::env::temp_dir().join(format!("parlance-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = dir.join("cases.jsonl");
    let case = |id: &str, input: &str, content: &str| {
        serde_json::json!({"id": id, "format": {"template_id": "Qwen-Qwen3-0.6B", "parser": "x"}, "options": {},
            "input": input, "expected": {"content": content, "reasoning_content": null, "tool_calls": []}})
        .to_string()
    };
    let lines = [case("good", "Hello", "Hello"), case("bad", "Hello", "Bye"),
        r#"{"id": "none", "format": {"template_id": null, "parser": "nobody"}, "options": {}, "input": "", "expected": {}}"#.to_owned()];
    std::fs::write(&cases, lines.join("\n")).unwrap();
    let out = parlance()
        .args(["eval", "parse", "--cases"])
        .arg(&cases)
        .arg("--templates")
        .arg(corpus.join("templates"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let results: Vec<serde_json::Value> =
        stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    let status: Vec<&str> = results.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["pass", "fail", "skip"]);
    assert!(results[1]["diff"].as_str().unwrap().contains("content"), "{}", results[1]);
    assert!(stdout.contains("1 passed, 1 failed, 1 skipped"), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_grammar_writes_the_runners_summary_fields() {
    let tokenizer = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tokenizers/llama3_1");
    let tokenizer = std::env::var_os("PARLANCE_TOKENIZERS").map_or(tokenizer, |d| PathBuf::from(d).join("llama3_1"));
    if !tokenizer.is_dir() {
        eprintln!("skipping: no llama3_1 tokenizer at {}", tokenizer.display());
        return;
    }
    let dir = std::env::temp_dir().join(format!("parlance-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let workload = dir.join("w1.jsonl");
    let items = [
        serde_json::json!({"id": "a", "split": "s", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "valid": ["{\"n\": 12}"], "invalid": ["{\"n\": \"x\"}", "{}"]}),
        serde_json::json!({"id": "b", "split": "s", "schema": {"not": {"type": "string"}}, "valid": ["1"], "invalid": []}),
    ];
    std::fs::write(&workload, items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("\n")).unwrap();
    let out = dir.join("r.json");
    let run = parlance()
        .args(["bench", "grammar", "--workload"])
        .arg(&workload)
        .arg("--tokenizer")
        .arg(&tokenizer)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let summary = &result["summary"];
    assert_eq!(summary["items"], 2);
    assert_eq!(summary["valid_passed"], 1, "{summary}");
    assert_eq!(summary["invalid_instances"], 2);
    assert_eq!(summary["invalidation_errors"], 0);
    assert_eq!(summary["compile_errors"], 1, "`not` is not enforced, so it must not compile: {summary}");
    assert!(summary["tbm_us"]["p99"].as_f64().is_some() && summary["ttfm_us"]["p50"].as_f64().is_some());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn roundtrip_reports_every_scenario_and_the_bridge() {
    let Some(corpus) = corpus() else { return };
    let tokenizer = corpus.join("../tokenizers/qwen3");
    if !tokenizer.is_dir() {
        eprintln!("skipping: tokenizers not found at {}", tokenizer.display());
        return;
    }
    let out = parlance()
        .args(["roundtrip", "--json", "--sessions", "8", "--template"])
        .arg(corpus.join("templates/Qwen-Qwen3-0.6B.jinja"))
        .arg("--tokenizer")
        .arg(&tokenizer)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenarios = report["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios.iter().map(|s| s["scenario"].as_str().unwrap()).collect();
    for name in ["tool_call_reasoning", "history_reasoning_default", "args_as_string", "stop_token_not_returned"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    // Qwen3 drops reasoning of turns before the last user message (`loop.index0 > ns.last_query_index`).
    let dropped = scenarios.iter().find(|s| s["scenario"] == "history_reasoning_default").unwrap();
    assert_eq!(dropped["string_prefix_ok"], false);
    assert_eq!(dropped["cause"], "reasoning-dropped");
    assert!(dropped["first_divergence"]["byte"].as_u64().is_some());
    let bridge = &report["bridge"];
    assert_eq!(bridge["sessions"], 8);
    assert_eq!(bridge["bridge_breaks"], 0);
    assert!(bridge["rerender_breaks"].as_u64().unwrap() > 0);
}

#[test]
fn constrain_prints_the_grammar_and_checks_outputs() {
    let Some(corpus) = corpus() else { return };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_constrain");
    std::fs::create_dir_all(&dir).unwrap();
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]"#,
    )
    .unwrap();
    let template = corpus.join("templates/Qwen-Qwen3-0.6B.jinja");
    let run = |args: &[&str], stdin: &str| {
        use std::io::Write as _;
        let mut child = parlance()
            .arg("constrain")
            .arg("--template")
            .arg(&template)
            .arg("--tools")
            .arg(&tools)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let doc = run(&[], "");
    assert!(doc.status.success(), "{}", String::from_utf8_lossy(&doc.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).unwrap();
    assert_eq!(doc["type"], "structural_tag");
    let ebnf = run(&["--emit", "ebnf"], "");
    assert!(String::from_utf8_lossy(&ebnf.stdout).contains("TagDispatch((\"<tool_call>\""));
    let hf = run(&["--emit", "response-template"], "");
    let hf: serde_json::Value = serde_json::from_slice(&hf.stdout).unwrap();
    assert_eq!(hf["fields"]["tool_calls"]["close_pattern"], r"</tool_call>\s*");
    // A reasoning budget rides in the structural tag; allowed_tools as OpenAI writes it limits calls.
    let budget = run(&["--reasoning-budget", "64"], "");
    assert!(String::from_utf8_lossy(&budget.stdout).contains("\"max_tokens\": 64"));
    let allowed = r#"{"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}"#;
    let none_allowed = run(&["--tool-choice", allowed, "--check"], "Just text.");
    assert_eq!(none_allowed.status.code(), Some(1), "required with no allowed tool admits text");
    assert!(String::from_utf8_lossy(&none_allowed.stderr).contains("allows no tool"));
    let call = "<think>\nok\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let ok = run(&["--check"], call);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    // Samples are outputs the grammar admits: each passes `--check`, and the same seed repeats them.
    let samples = run(
        &["--tool-choice", "required", "--thinking", "off", "--sample", "3", "--seed", "9", "--max-tokens", "4000"],
        "",
    );
    assert!(samples.status.success(), "{}", String::from_utf8_lossy(&samples.stderr));
    let again = run(
        &["--tool-choice", "required", "--thinking", "off", "--sample", "3", "--seed", "9", "--max-tokens", "4000"],
        "",
    );
    assert_eq!(samples.stdout, again.stdout);
    let lines: Vec<String> =
        String::from_utf8(samples.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    for sample in &lines {
        let checked = run(&["--tool-choice", "required", "--thinking", "off", "--check"], sample);
        assert!(checked.status.success(), "{sample:?}: {}", String::from_utf8_lossy(&checked.stderr));
    }
    // An unknown tool, a call under `none`, arguments against the schema: exit 1 naming the byte.
    for (args, output) in [
        (&[][..], call.replace("get_weather", "get_time")),
        (&["--tool-choice", "none"][..], call.to_owned()),
        (&[][..], call.replace("\"Paris\"", "3")),
        (&["--tool-choice", "required"][..], "Just text.".to_owned()),
    ] {
        let refused = run(&[&["--check"][..], args].concat(), &output);
        assert_eq!(refused.status.code(), Some(1), "{args:?} accepted {output:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("refused at byte") || stderr.contains("incomplete"), "{stderr}");
    }
}

#[test]
fn input_files_above_the_bound_are_refused_before_reading() {
    // See: issue 24 (a 3 GiB conversation was read whole, then refused as JSON). A sparse file:
    // its size is known without writing it.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_large");
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.json");
    std::fs::File::create(&big).unwrap().set_len(3 << 30).unwrap();
    let started = std::time::Instant::now();
    let out = parlance()
        .args(["render", "--template"])
        .arg(example("chat_template.jinja"))
        .arg("--conversation")
        .arg(&big)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("big.json: 3221225472 bytes, above the input-file limit"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "refused at once");
    // The flag raises (or lowers) the bound.
    let out = parlance()
        .args(["--max-input-bytes", "100", "render", "--template"])
        .arg(example("chat_template.jinja"))
        .arg("--conversation")
        .arg(example("conversation.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("above the input-file limit of 100 bytes"));
    std::fs::remove_file(&big).unwrap();
}
