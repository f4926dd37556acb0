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
