//! `parlance bench grammar` on the tool-calling workloads W2 (Llama 3.1 JSON calls) and W3 (gpt-oss
//! Harmony), measured as `shared/bench/peers/run_peers.py`'s `task_tools` measures the peers, with
//! the same item and `summary` fields.
//!
//! Per request: every 10th request first clears every cache and times all 50 tools cold; then all
//! tools again (a hit), the request's own tool subset (new), the subset again (a hit). After that
//! pass, all tools with one never seen per request (its first tool renamed, with one more
//! parameter: `all_one_new`), and 128 tools of which one is new (`many_one_new`): neither is a
//! peer runner figure. TTFM = compile
//! (through one [`GrammarCompiler`], the cache a server would hold) + matcher + first mask. TBM
//! forces the target output under the all-tools grammar, each token's step classified by the
//! segment holding its first byte; the subset grammar must accept the output too. With `--template`,
//! each grammar is derived from the template's Format (`constrain`), the derivation inside TTFM.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use parlance_grammar::{CompiledGrammar, GrammarCompiler, Matcher, StructuralTagOptions};
use serde_json::{Value, json};

use crate::bench_grammar::{Request, force, micros, stats};

pub fn run(request: &Request<'_>) -> anyhow::Result<Value> {
    let (tokenizer, eos, vocab) = crate::bench_grammar::load_tokenizer(request)?;
    let text = crate::read_input(request.workload)?;
    let doc: Value = serde_json::from_str(&text).with_context(|| format!("parsing {}", request.workload.display()))?;
    let workload = Workload::of(&doc).with_context(|| format!("{}: not W2 or W3", request.workload.display()))?;
    // Each tool's schema as JSON text once, as a server holds the request it received.
    let tools: Vec<Tool> = doc["tools"]
        .as_array()
        .context("no `tools` array")?
        .iter()
        .map(|t| Tool {
            name: t["function"]["name"].as_str().unwrap_or_default().to_owned(),
            parameters: t["function"]["parameters"].to_string(),
            definition: t.clone(),
        })
        .collect();
    // With a template: its Format, analyzed once (a server caches it per model), derives each
    // request's structural tag, markers that are special tokens written as token formats.
    let format = match request.template {
        Some(path) => Some(crate::analyzed(path, &[])?.1),
        None => None,
    };
    let special_tokens = parlance::constrain::SpecialTokens::new(vocab.special_tokens().map(|(t, _)| t.to_owned()))?;
    let structural_tag = |tools: &[&Tool]| -> anyhow::Result<String> {
        let Some(format) = &format else { return Ok(workload.structural_tag(tools)) };
        let parse = parlance::ParseOptions {
            tools: tools.iter().map(|t| t.definition.clone()).collect(),
            ..Default::default()
        };
        let options =
            parlance::constrain::ConstrainOptions { special_tokens: special_tokens.clone(), ..Default::default() };
        Ok(parlance::constrain::structural_tag_with(format, &parse, &options)?.to_string())
    };
    let requests = doc["requests"].as_array().context("no `requests` array")?;
    // A request's own tools, by name.
    let subset_of = |req: &Value| -> Vec<&Tool> {
        req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|name| tools.iter().find(|t| name.as_str() == Some(t.name.as_str())))
            .collect()
    };
    let compiler = GrammarCompiler::new(vocab.clone());
    let mut options = StructuralTagOptions::default();
    options.json.limits.compile_threads = request.compile_threads;
    let chosen: Vec<usize> =
        (0..requests.len()).step_by(request.stride.max(1)).take(request.limit.unwrap_or(usize::MAX)).collect();
    let progress = indicatif::ProgressBar::new(chosen.len() as u64);
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut items = Vec::with_capacity(chosen.len());
    // TTFM = compile (through the cache) + matcher + first mask, recorded under `name`.
    let ttfm =
        |item: &mut Value, name: &str, tools: &[&Tool], mask: &mut [u32]| -> anyhow::Result<Arc<CompiledGrammar>> {
            let start = Instant::now();
            let doc = structural_tag(tools)?;
            item[format!("{name}_derive_us")] = json!(micros(start.elapsed()));
            let grammar = compiler.compile_structural_tag(&doc, &options)?;
            let compiled = Instant::now();
            Matcher::new(grammar.clone())?.fill_next_token_bitmask(mask)?;
            let total = start.elapsed();
            item[format!("{name}_compile_us")] = json!(micros(compiled - start));
            item[format!("ttfm_{name}_us")] = json!(micros(total));
            Ok(grammar)
        };
    for &i in &chosen {
        let req = &requests[i];
        let subset = subset_of(req);
        let all: Vec<&Tool> = tools.iter().collect();
        let mut item = json!({"id": req["id"], "n_tools_subset": subset.len()});
        let timed =
            |item: &mut Value, mask: &mut [u32]| -> anyhow::Result<(Arc<CompiledGrammar>, Arc<CompiledGrammar>)> {
                if i % 10 == 0 {
                    compiler.clear();
                    ttfm(item, "all_cold", &all, mask)?;
                }
                let all_grammar = ttfm(item, "all_hit", &all, mask)?;
                ttfm(item, "subset_new", &subset, mask)?;
                let subset_grammar = ttfm(item, "subset_hit", &subset, mask)?;
                Ok((all_grammar, subset_grammar))
            };
        let (all_grammar, subset_grammar) = match timed(&mut item, &mut mask) {
            Ok(grammars) => grammars,
            Err(err) => {
                item["compile_error"] = json!(format!("{err:#}"));
                items.push(item);
                progress.inc(1);
                continue;
            }
        };
        let output = req["output"].as_str().unwrap_or_default();
        let ids = tokenizer.encode_rendered(output)?;
        item["tok_kind"] = json!(token_kinds(&ids, &vocab, req));
        let (mut steps, mut masks) = (Vec::new(), Vec::new());
        let (ok, failure) =
            force(&mut Matcher::new(all_grammar)?, &ids, eos, &mut mask, Some((&mut steps, &mut masks)));
        item["valid"] = json!([{"ok": ok, "ntok": ids.len(), "fail": failure}]);
        item["step_us"] = json!(steps);
        item["mask_us"] = json!(masks);
        let (ok, failure) = force(&mut Matcher::new(subset_grammar)?, &ids, eos, &mut mask, None);
        item["subset_ok"] = json!(ok);
        item["subset_fail"] = failure;
        items.push(item);
        progress.inc(1);
    }
    progress.finish_and_clear();
    // Every tool seen, then each request's first tool renamed with one more parameter: 51 tools of
    // which one is new (a per-tool cache compiles only that one). Not a figure of the peers'
    // runner, so measured after the pass above, which it must not disturb.
    for (item, &i) in items.iter_mut().zip(&chosen) {
        if item.get("compile_error").is_some() {
            continue;
        }
        let fresh = fresh_tool(subset_of(&requests[i]).first().copied().unwrap_or(&tools[0]), i)?;
        let mut with_new: Vec<&Tool> = tools.iter().collect();
        with_new.push(&fresh);
        ttfm(item, "all_one_new", &with_new, &mut mask)?;
    }
    // The issue's size: 128 tools, of which one is new. The workload's tools and renamed copies
    // of them (127, compiled once before, so seen), then per request one more never seen.
    let copies: Vec<Tool> =
        (tools.len()..MANY_TOOLS - 1).map(|i| renamed(&tools[i % tools.len()], &format!("copy{i}"))).collect();
    let many: Vec<&Tool> = tools.iter().chain(&copies).collect();
    if items.iter().any(|item| item.get("compile_error").is_none()) {
        compiler.compile_structural_tag(&structural_tag(&many)?, &options)?;
    }
    for (item, &i) in items.iter_mut().zip(&chosen) {
        if item.get("compile_error").is_some() {
            continue;
        }
        let fresh = fresh_tool(subset_of(&requests[i]).first().copied().unwrap_or(&tools[0]), i + requests.len())?;
        let mut with_new = many.clone();
        with_new.push(&fresh);
        ttfm(item, "many_one_new", &with_new, &mut mask)?;
    }
    let summary = summarize(&items);
    let meta = json!({
        "engine": "parlance", "engine_version": env!("CARGO_PKG_VERSION"), "workload": workload.name(),
        "workload_file": request.workload.display().to_string(), "tokenizer": request.tokenizer.display().to_string(),
        "config": "default", "threads": request.compile_threads, "eos_id": eos, "vocab_size": vocab.len(), "partial": false,
        "template": request.template.map(|t| t.display().to_string()),
    });
    let result = json!({"meta": meta, "summary": summary, "items": items});
    std::fs::write(request.out, serde_json::to_string(&result)?)
        .with_context(|| format!("writing {}", request.out.display()))?;
    Ok(result["summary"].clone())
}

/// Which tool-calling workload a document is.
enum Workload {
    /// Llama 3.1 JSON calls after free text.
    Llama,
    /// gpt-oss Harmony messages.
    Harmony,
}

impl Workload {
    fn of(doc: &Value) -> Option<Workload> {
        match doc["workload"].as_str()? {
            "toolcall-llama" => Some(Workload::Llama),
            "toolcall-harmony" => Some(Workload::Harmony),
            _ => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Workload::Llama => "toolcall-llama",
            Workload::Harmony => "toolcall-harmony",
        }
    }

    /// The workload's constraint for `tools` as structural-tag JSON text, as a server receives it:
    /// for Llama the XGrammar builtin `llama` style the peers' runner compiles; for Harmony the
    /// runner's hand-built document with its markers as token formats (they are special tokens of
    /// the gpt-oss tokenizer, and parlance never matches a special token by its text).
    fn structural_tag(&self, tools: &[&Tool]) -> String {
        let schema = |t: &Tool| format!(r#"{{"type":"json_schema","json_schema":{}}}"#, t.parameters);
        match self {
            Workload::Llama => {
                let tag = |begin: &str, content: &str, end: &str| {
                    format!(r#"{{"type":"tag","begin":{},"content":{content},"end":{}}}"#, json!(begin), json!(end))
                };
                let tags: Vec<String> = tools
                    .iter()
                    .map(|t| tag(&format!("{{\"name\": \"{}\", \"parameters\": ", t.name), &schema(t), "}"))
                    .collect();
                format!(
                    r#"{{"type":"structural_tag","format":{{"type":"triggered_tags","triggers":["{{\"name\": "],"tags":[{}]}}}}"#,
                    tags.join(",")
                )
            }
            Workload::Harmony => {
                // Harmony's markers are special tokens: token formats, never their text. The
                // runner's `tags_with_separator`, its separator `<|start|>assistant` a format (a
                // special token, then text: parlance's extension, as XGrammar takes only a string).
                // Written into one buffer, as a server building the document would.
                use std::fmt::Write as _;
                let token = |t: &str| format!(r#"{{"type":"token","token":{}}}"#, json!(t));
                let text = |t: &str| format!(r#"{{"type":"const_string","value":{}}}"#, json!(t));
                let (channel, message, constrain) =
                    (token("<|channel|>"), token("<|message|>"), token("<|constrain|>"));
                let any = r#"{"type":"any_text"}"#;
                let mut doc = String::with_capacity(tools.iter().map(|t| t.parameters.len() + 400).sum::<usize>());
                doc.push_str(r#"{"type":"structural_tag","format":{"type":"tags_with_separator","tags":["#);
                let message_tag = |doc: &mut String, header: &str, body: &str, end: &str| {
                    let _ = write!(
                        doc,
                        r#"{{"type":"tag","begin":{channel},"content":{{"type":"sequence","elements":[{},{body}]}},"end":{}}},"#,
                        text(header),
                        token(end)
                    );
                };
                let free = format!(r#"{{"type":"sequence","elements":[{message},{any}]}}"#);
                message_tag(&mut doc, "analysis", &free, "<|end|>");
                message_tag(&mut doc, "final", &free, "<|return|>");
                for t in tools {
                    let body = format!(
                        r#"{{"type":"sequence","elements":[{constrain},{},{message},{{"type":"json_schema","json_schema":{}}}]}}"#,
                        text("json"),
                        t.parameters
                    );
                    message_tag(&mut doc, &format!("commentary to=functions.{} ", t.name), &body, "<|call|>");
                }
                doc.pop(); // the last tag's comma
                let _ = write!(
                    doc,
                    r#"],"separator":{{"type":"sequence","elements":[{},{}]}},"at_least_one":true}}}}"#,
                    token("<|start|>"),
                    text("assistant")
                );
                doc
            }
        }
    }
}

/// Tools in the `many_one_new` request (the issue's "128 tools where one is new").
const MANY_TOOLS: usize = 128;

/// `base` under another name (same schema).
fn renamed(base: &Tool, suffix: &str) -> Tool {
    let name = format!("{}_{suffix}", base.name);
    let mut definition = base.definition.clone();
    definition["function"]["name"] = json!(name);
    Tool { name, parameters: base.parameters.clone(), definition }
}

/// A tool no earlier request had: `base` renamed, with one more (string) parameter, so that its
/// schema is new too.
fn fresh_tool(base: &Tool, request: usize) -> anyhow::Result<Tool> {
    let Tool { name, mut definition, .. } = renamed(base, &format!("v{request}"));
    let parameters = &mut definition["function"]["parameters"];
    let properties =
        parameters.get_mut("properties").and_then(Value::as_object_mut).context("a tool without properties")?;
    properties.insert(format!("note_{request}"), json!({"type": "string"}));
    let parameters = parameters.to_string();
    Ok(Tool { name, parameters, definition })
}

/// A tool of the workload: its name, its parameters' schema as JSON text, its OpenAI definition.
struct Tool {
    name: String,
    parameters: String,
    definition: Value,
}

/// Each token's segment kind (`text`, `tool_call`, `structure`), by the segment holding its first
/// byte, then `end` for the EOS check, as the runner classifies them.
fn token_kinds(ids: &[u32], vocab: &parlance_grammar::TokenVocab, req: &Value) -> Vec<&'static str> {
    let mut bounds = Vec::new();
    let mut pos = 0;
    for segment in req["segments"].as_array().into_iter().flatten() {
        let len = segment["text"].as_str().map_or(0, str::len);
        let kind = match segment["kind"].as_str() {
            Some("text" | "message") => "text",
            Some("tool_call") => "tool_call",
            _ => "structure",
        };
        bounds.push((pos, pos + len, kind));
        pos += len;
    }
    let mut kinds = Vec::with_capacity(ids.len() + 1);
    let mut at = 0;
    for &id in ids {
        kinds.push(bounds.iter().find(|(lo, hi, _)| *lo <= at && at < *hi).map_or("structure", |b| b.2));
        at += vocab.token_bytes(id).len();
    }
    kinds.push("end");
    kinds
}

/// The runner's `summarize_items` for W2/W3.
fn summarize(items: &[Value]) -> Value {
    let floats = |v: &Value| v.as_array().into_iter().flatten().filter_map(Value::as_f64).collect::<Vec<_>>();
    let (mut step, mut mask, mut ttfm) = (Vec::new(), Vec::new(), Vec::new());
    let (mut valid, mut passed, mut errors, mut items_passed, mut subset_passed) = (0, 0, 0, 0, 0);
    let mut by_kind: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let keys = [
        "ttfm_all_cold_us",
        "ttfm_all_hit_us",
        "ttfm_subset_new_us",
        "ttfm_subset_hit_us",
        "ttfm_all_one_new_us",
        "ttfm_many_one_new_us",
        "all_cold_compile_us",
        "all_hit_compile_us",
        "subset_new_compile_us",
        "subset_hit_compile_us",
        "all_one_new_compile_us",
        "many_one_new_compile_us",
        "all_cold_derive_us",
        "all_hit_derive_us",
        "subset_new_derive_us",
        "subset_hit_derive_us",
        "all_one_new_derive_us",
        "many_one_new_derive_us",
    ];
    let mut timings: Vec<Vec<f64>> = vec![Vec::new(); keys.len()];
    for item in items {
        if item.get("compile_error").is_some() {
            errors += 1;
            continue;
        }
        step.extend(floats(&item["step_us"]));
        mask.extend(floats(&item["mask_us"]));
        ttfm.push(item["ttfm_subset_new_us"].as_f64().unwrap_or(0.0));
        let instances = item["valid"].as_array().map(Vec::as_slice).unwrap_or_default();
        let ok = instances.iter().filter(|v| v["ok"] == true).count();
        valid += instances.len();
        passed += ok;
        items_passed += usize::from(!instances.is_empty() && ok == instances.len());
        subset_passed += usize::from(item["subset_ok"] == true);
        for (k, v) in keys.iter().zip(&mut timings) {
            v.extend(item[*k].as_f64());
        }
        let kinds = item["tok_kind"].as_array().map(Vec::as_slice).unwrap_or_default();
        for (kind, s) in kinds.iter().zip(floats(&item["step_us"])) {
            by_kind.entry(kind.as_str().unwrap_or("?")).or_default().push(s);
        }
    }
    let tokens = step.len();
    let mut summary = json!({
        "items": items.len(), "tbm_us": stats(&mut step), "mask_only_us": stats(&mut mask),
        "ttfm_us": stats(&mut ttfm), "compile_us": null, "tokens": tokens, "valid_instances": valid,
        "valid_passed": passed, "items_all_valid_passed": items_passed, "compile_errors": errors,
        "timeouts": 0, "crashes": 0, "invalid_instances": 0, "invalidation_errors": 0,
        "subset_passed": subset_passed,
    });
    for (k, mut v) in keys.iter().zip(timings) {
        summary[*k] = stats(&mut v);
    }
    summary["tbm_by_segment_us"] = by_kind.into_iter().map(|(k, mut v)| (k.to_owned(), stats(&mut v))).collect();
    summary
}
