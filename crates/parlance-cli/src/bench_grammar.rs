//! `parlance bench grammar`: the W1 workload (W2/W3 in `bench_tools`) (JSON Schemas with valid and invalid instances, see
//! `shared/bench/workloads/README.md`) measured exactly as `shared/bench/peers/run_peers.py`
//! measures the peers, with the same `summary` fields, so results sit side by side.
//!
//! Single thread. TTFM = compile + matcher creation + first mask. TBM per forced token = fill the
//! mask + test the token's bit + advance; one more fill after the last token checks EOS. A valid
//! instance passes iff every token and then EOS are allowed; an invalid one is wrongly accepted iff
//! the same holds. Instances are tokenized by the Hugging Face tokenizer, no special tokens added.
//! No subprocess per item: an item that exceeds the engine's limits is a compile error, and
//! `timeouts` / `crashes` stay 0 (a crash would end the run). So is a row whose schema cannot be read
//! (nested past serde_json's recursion limit): the other rows still run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use parlance_grammar::{CompiledGrammar, JsonSchemaOptions, Matcher, Whitespace};
use serde_json::{Value, json};

/// What `parlance bench grammar` was asked to do.
pub struct Request<'a> {
    pub workload: &'a Path,
    pub tokenizer: &'a Path,
    pub out: &'a Path,
    pub eos: Option<&'a str>,
    pub limit: Option<usize>,
    pub stride: usize,
    pub compact: bool,
    pub lenient: bool,
    pub template: Option<&'a Path>,
    /// `Limits::compile_threads`.
    pub compile_threads: usize,
}

pub fn run(request: &Request<'_>) -> anyhow::Result<Value> {
    // W2/W3 are one JSON document with tools and requests; W1 is JSON lines.
    if request.workload.extension().is_some_and(|e| e == "json") {
        return crate::bench_tools::run(request);
    }
    let (tokenizer, eos, vocab) = load_tokenizer(request)?;
    let mut options = JsonSchemaOptions::default();
    if request.compact {
        options.whitespace = Whitespace::Compact;
    }
    options.lenient = request.lenient;
    options.limits.compile_threads = request.compile_threads;
    let text = crate::read_input(request.workload)?;
    let rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, l)| read_row(l, &format!("{}:{}", request.workload.display(), n + 1)))
        .collect();
    let chosen: Vec<(usize, &Value)> =
        rows.iter().enumerate().step_by(request.stride.max(1)).take(request.limit.unwrap_or(usize::MAX)).collect();
    let progress = indicatif::ProgressBar::new(chosen.len() as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} items, {elapsed} ({eta} left) {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut items = Vec::with_capacity(chosen.len());
    for (index, row) in chosen {
        items.push(run_item(index, row, &tokenizer, &vocab, &options, eos, &mut mask)?);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let summary = summarize(&items);
    let meta = json!({
        "engine": "parlance", "engine_version": env!("CARGO_PKG_VERSION"), "workload": "w1",
        "workload_file": request.workload.display().to_string(), "tokenizer": request.tokenizer.display().to_string(),
        "config": if request.compact { "compact" } else { "default" }, "lenient": request.lenient, "threads": request.compile_threads,
        "eos_id": eos, "vocab_size": vocab.len(), "partial": false,
    });
    let result = json!({"meta": meta, "summary": summary, "items": items});
    std::fs::write(request.out, serde_json::to_string(&result)?)
        .with_context(|| format!("writing {}", request.out.display()))?;
    Ok(result["summary"].clone())
}

/// One workload line. A row whose schema cannot be read (nested deeper than serde_json's recursion
/// limit, say) is that row's failure, not the workload's: it becomes a row with `unreadable` (the
/// reason) in place of `schema`, reported as its compile error, and the other rows still run.
fn read_row(line: &str, at: &str) -> Value {
    let error = match serde_json::from_str::<Value>(line) {
        Ok(row) => return row,
        Err(error) => error,
    };
    // The row again with the schema left as raw text, so that its id and split are kept: skipping a
    // value has no recursion limit, reading it does.
    #[derive(serde::Deserialize)]
    struct RawRow<'a> {
        #[serde(default)]
        id: Value,
        #[serde(default)]
        split: Value,
        #[serde(borrow)]
        schema: Option<&'a serde_json::value::RawValue>,
    }
    match serde_json::from_str::<RawRow<'_>>(line) {
        Ok(raw) => {
            let reason = match raw.schema.map(|s| serde_json::from_str::<Value>(s.get())) {
                Some(Err(schema_error)) => format!("{at}: schema: {schema_error}"),
                _ => format!("{at}: {error}"),
            };
            json!({"id": raw.id, "split": raw.split, "unreadable": reason})
        }
        Err(_) => json!({"id": at, "split": Value::Null, "unreadable": format!("{at}: {error}")}),
    }
}

/// The workload's tokenizer, its EOS (`--eos`, else the config's `eos_token`) and its vocabulary.
pub(crate) fn load_tokenizer(
    request: &Request<'_>,
) -> anyhow::Result<(parlance::Tokenizer, u32, Arc<parlance_grammar::TokenVocab>)> {
    let tokenizer = parlance::Tokenizer::from_path(request.tokenizer)?;
    let eos = match request.eos {
        Some(token) => tokenizer.token_to_id(token).with_context(|| format!("--eos {token:?} is not a token"))?,
        None => tokenizer
            .eos_token_id()
            .context("no eos_token in the tokenizer_config.json beside the tokenizer; pass --eos")?,
    };
    let vocab = Arc::new(tokenizer.token_vocab(&[eos])?);
    Ok((tokenizer, eos, vocab))
}

fn run_item(
    index: usize,
    row: &Value,
    tokenizer: &parlance::Tokenizer,
    vocab: &Arc<parlance_grammar::TokenVocab>,
    options: &JsonSchemaOptions,
    eos: u32,
    mask: &mut [u32],
) -> anyhow::Result<Value> {
    let mut item = json!({"id": row["id"], "split": row["split"], "index": index});
    if let Some(reason) = row.get("unreadable") {
        item["compile_error"] = reason.clone();
        return Ok(item);
    }
    let started = Instant::now();
    let compiled = CompiledGrammar::from_json_schema(vocab.clone(), &row["schema"], options);
    let compiled_at = Instant::now();
    let compiled = match compiled {
        Ok((grammar, _)) => Arc::new(grammar),
        Err(err) => {
            item["compile_error"] = json!(err.to_string());
            return Ok(item);
        }
    };
    let first = Matcher::new(compiled.clone()).and_then(|mut m| m.fill_next_token_bitmask(mask));
    let first_at = Instant::now();
    if let Err(err) = first {
        item["compile_error"] = json!(format!("first mask: {err}"));
        return Ok(item);
    }
    item["compile_us"] = json!(micros(compiled_at - started));
    item["ttfm_us"] = json!(micros(first_at - started));
    let (mut valid, mut step_us, mut mask_us) = (Vec::new(), Vec::new(), Vec::new());
    for instance in row["valid"].as_array().into_iter().flatten() {
        let ids = tokenizer.encode_rendered(instance.as_str().unwrap_or_default())?;
        let mut matcher = Matcher::new(compiled.clone())?;
        let (ok, failure) = force(&mut matcher, &ids, eos, mask, Some((&mut step_us, &mut mask_us)));
        valid.push(json!({"ok": ok, "ntok": ids.len(), "fail": failure}));
    }
    let invalid = row["invalid"].as_array().cloned().unwrap_or_default();
    let mut accepted = 0;
    for instance in &invalid {
        let ids = tokenizer.encode_rendered(instance.as_str().unwrap_or_default())?;
        let mut matcher = Matcher::new(compiled.clone())?;
        if force(&mut matcher, &ids, eos, mask, None).0 {
            accepted += 1;
        }
    }
    item["valid"] = json!(valid);
    item["step_us"] = json!(step_us);
    item["mask_us"] = json!(mask_us);
    item["invalid_total"] = json!(invalid.len());
    item["invalid_accepted"] = json!(accepted);
    Ok(item)
}

/// Forces `ids`, then checks EOS: whether all were allowed, and the first failure.
pub(crate) fn force(
    matcher: &mut Matcher,
    ids: &[u32],
    eos: u32,
    mask: &mut [u32],
    mut timings: Option<(&mut Vec<f64>, &mut Vec<f64>)>,
) -> (bool, Value) {
    let allowed = |mask: &[u32], id: u32| mask.get(id as usize / 32).is_some_and(|w| w >> (id % 32) & 1 == 1);
    for (i, &id) in ids.iter().enumerate() {
        let start = Instant::now();
        let filled = matcher.fill_next_token_bitmask(mask);
        let filled_at = Instant::now();
        let failure = match filled {
            Err(err) => Some(json!(["error", err.to_string(), i])),
            Ok(_) if !allowed(mask, id) => Some(json!(["masked_out", i])),
            Ok(_) if !matcher.accept_token(id) => Some(json!(["advance_refused", i])),
            Ok(_) => None,
        };
        let done = Instant::now();
        if let Some((steps, masks)) = timings.as_mut() {
            masks.push(micros(filled_at - start));
            steps.push(micros(done - start));
        }
        if let Some(failure) = failure {
            return (false, failure);
        }
    }
    let start = Instant::now();
    let ok = matcher.fill_next_token_bitmask(mask).is_ok() && allowed(mask, eos);
    let done = Instant::now();
    if let Some((steps, masks)) = timings.as_mut() {
        masks.push(micros(done - start));
        steps.push(micros(done - start));
    }
    (ok, if ok { Value::Null } else { json!(["eos_not_allowed", ids.len()]) })
}

pub(crate) fn micros(d: Duration) -> f64 {
    (d.as_nanos() as f64 / 10.0).round() / 100.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let k = ((p / 100.0 * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1);
    sorted[k]
}

pub(crate) fn stats(values: &mut [f64]) -> Value {
    if values.is_empty() {
        return Value::Null;
    }
    values.sort_by(f64::total_cmp);
    let avg = values.iter().sum::<f64>() / values.len() as f64;
    let mut out = json!({"n": values.len(), "avg": (avg * 100.0).round() / 100.0});
    for (name, p) in [("p25", 25.0), ("p50", 50.0), ("p75", 75.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0)] {
        out[name] = json!(percentile(values, p));
    }
    out["p99.9"] = json!(percentile(values, 99.9));
    out["max"] = json!(values[values.len() - 1]);
    out
}

/// The summary fields of `run_peers.py`'s `summarize_items` for W1.
fn summarize(items: &[Value]) -> Value {
    let floats = |v: &Value| v.as_array().into_iter().flatten().filter_map(Value::as_f64).collect::<Vec<_>>();
    let (mut step, mut mask, mut ttfm, mut compile) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut valid, mut passed, mut errors, mut invalid, mut accepted, mut items_passed) = (0, 0, 0, 0, 0, 0);
    #[derive(Default)]
    struct Split {
        items: usize,
        pass: usize,
        compile_errors: usize,
        ttfm: Vec<f64>,
        tbm: Vec<f64>,
    }
    let mut splits: BTreeMap<String, Split> = BTreeMap::new();
    for item in items {
        let split = splits.entry(item["split"].as_str().unwrap_or("?").to_owned()).or_default();
        split.items += 1;
        if item.get("compile_error").is_some() {
            errors += 1;
            split.compile_errors += 1;
            continue;
        }
        split.ttfm.push(item["ttfm_us"].as_f64().unwrap_or(0.0));
        split.tbm.extend(floats(&item["step_us"]));
        step.extend(floats(&item["step_us"]));
        mask.extend(floats(&item["mask_us"]));
        ttfm.push(item["ttfm_us"].as_f64().unwrap_or(0.0));
        compile.push(item["compile_us"].as_f64().unwrap_or(0.0));
        let instances = item["valid"].as_array().map(Vec::as_slice).unwrap_or_default();
        let ok = instances.iter().filter(|v| v["ok"] == true).count();
        valid += instances.len();
        passed += ok;
        if !instances.is_empty() && ok == instances.len() {
            items_passed += 1;
            split.pass += 1;
        }
        invalid += item["invalid_total"].as_u64().unwrap_or(0);
        accepted += item["invalid_accepted"].as_u64().unwrap_or(0);
    }
    let per_split: serde_json::Map<String, Value> = splits
        .into_iter()
        .map(|(name, mut s)| {
            s.ttfm.sort_by(f64::total_cmp);
            s.tbm.sort_by(f64::total_cmp);
            let avg =
                if s.tbm.is_empty() { Value::Null } else { json!(s.tbm.iter().sum::<f64>() / s.tbm.len() as f64) };
            let p = |v: &[f64], q| if v.is_empty() { Value::Null } else { json!(percentile(v, q)) };
            let row = json!({"items": s.items, "pass": s.pass, "compile_errors": s.compile_errors, "timeouts": 0,
                "ttfm_p50_us": p(&s.ttfm, 50.0), "tbm_avg_us": avg, "tbm_p99_us": p(&s.tbm, 99.0)});
            (name, row)
        })
        .collect();
    let tokens = step.len();
    json!({
        "items": items.len(), "tbm_us": stats(&mut step), "mask_only_us": stats(&mut mask),
        "ttfm_us": stats(&mut ttfm), "compile_us": stats(&mut compile), "tokens": tokens,
        "valid_instances": valid, "valid_passed": passed, "items_all_valid_passed": items_passed,
        "compile_errors": errors, "timeouts": 0, "crashes": 0, "invalid_instances": invalid,
        "invalidation_errors": accepted, "per_split": per_split,
    })
}
