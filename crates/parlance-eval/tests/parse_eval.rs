//! The peers' parse cases through parlance's parser, ratcheted per case against
//! `tests/expected/parse_eval.json`. The corpus is found through `PARLANCE_CORPUS` (a missing folder
//! named there fails), else `../shared/corpus` beside the project (the test skips, saying so, when
//! it is absent).

use parlance_eval::{EvalSetup, Evaluator, Status};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

fn corpus() -> Option<PathBuf> {
    let (dir, explicit) = match std::env::var_os("PARLANCE_CORPUS") {
        Some(dir) => (PathBuf::from(dir), true),
        None => (PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"), false),
    };
    if dir.is_dir() {
        Some(dir)
    } else if explicit {
        panic!("PARLANCE_CORPUS is set to {}, which is not a folder", dir.display());
    } else {
        eprintln!("skipping: corpus not found at {} (set PARLANCE_CORPUS)", dir.display());
        None
    }
}

/// The folder of the peers' cases and an evaluator over the corpus templates.
fn evaluator(corpus: &Path) -> (PathBuf, Evaluator) {
    let dir = corpus.join("parse");
    let setup = EvalSetup::with_template_map(corpus.join("templates"), Some(&dir.join("template_map.json"))).unwrap();
    (dir, Evaluator::new(setup))
}

/// Every case of the `.jsonl` files of `dir`.
fn cases(dir: &Path) -> Vec<Json> {
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path).unwrap();
            cases.extend(
                text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str::<Json>(l).unwrap()),
            );
        }
    }
    cases
}

/// A ratchet file of `tests/expected/`.
fn expected(name: &str) -> Json {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The peers' cases, ratcheted per case: every non-quirk case passes unless
/// `tests/expected/parse_eval.json` lists it with the reason; a listed case that now passes is
/// reported, to be removed.
#[test]
fn peer_parse_cases_ratchet() {
    let Some(corpus) = corpus() else { return };
    let (dir, mut evaluator) = evaluator(&corpus);
    let expected = expected("parse_eval.json");
    let listed = expected["failing"].as_object().expect("a `failing` map");
    let mut passed = 0;
    let (mut failed, mut now_pass) = (Vec::new(), Vec::new());
    let mut inputs = Vec::new();
    for case in cases(&dir) {
        let (_, status) = evaluator.run(&case);
        let id = case["id"].as_str().unwrap_or_default();
        match status {
            Status::Pass if case["quirk"] != true => {
                passed += 1;
                if listed.contains_key(id) {
                    now_pass.push(id.to_owned());
                }
            }
            Status::Fail(why) if case["quirk"] != true && !listed.contains_key(id) => {
                failed.push(format!("{id}: {why}"));
            }
            _ => {}
        }
        inputs.push(case["input"].as_str().unwrap_or_default().to_owned());
    }
    eprintln!("{passed} peer cases pass; {} listed as failing with their reasons", listed.len());
    assert!(
        failed.is_empty(),
        "{} peer cases fail that parse_eval.json does not list:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(now_pass.is_empty(), "listed in parse_eval.json but now passing, remove: {now_pass:?}");
    assert!(inputs.len() > 600, "read only {} cases", inputs.len());
}

/// The peers' outputs that parlance parses right, through the grammar parlance derives for the same
/// request: real model text that no one here wrote must be text the grammar admits. Ratcheted
/// against `tests/expected/grammar_eval.json` (case id → why the grammar refuses it).
#[test]
fn peer_outputs_are_admitted_by_the_derived_grammar() {
    let Some(corpus) = corpus() else { return };
    let (dir, mut evaluator) = evaluator(&corpus);
    let expected = expected("grammar_eval.json");
    let listed = expected["refused"].as_object().expect("a `refused` map");
    let (mut admitted, mut skipped) = (0, std::collections::BTreeMap::<String, usize>::new());
    let (mut refused, mut now_pass) = (Vec::new(), Vec::new());
    // With `PARLANCE_DUMP_STRUCTURAL_TAGS=DIR`, each admitted output and its structural tag go to
    // `DIR/peer.jsonl`, for XGrammar (`crates/parlance/tests/data/xgrammar/check_constrain.py`).
    let dump = std::env::var_os("PARLANCE_DUMP_STRUCTURAL_TAGS").map(PathBuf::from);
    let mut records = String::new();
    for case in cases(&dir) {
        let id = case["id"].as_str().unwrap_or_default().to_owned();
        let (status, record) = evaluator.check_grammar_with_record(&case);
        if let Some(record) = record {
            records.push_str(&format!("{record}\n"));
        }
        match status {
            Status::Pass => {
                admitted += 1;
                if listed.contains_key(&id) {
                    now_pass.push(id);
                }
            }
            Status::Fail(why) if !listed.contains_key(&id) => refused.push(format!("{id}: {why}")),
            Status::Fail(_) => {}
            Status::Skip(why) => *skipped.entry(why).or_default() += 1,
        }
    }
    if let Some(dir) = dump {
        std::fs::write(dir.join("peer.jsonl"), records).unwrap();
    }
    eprintln!(
        "{admitted} peer outputs admitted by their grammar; {} listed as refused; skipped: {skipped:?}",
        listed.len()
    );
    assert!(
        refused.is_empty(),
        "{} peer outputs refused that grammar_eval.json does not list:\n{}",
        refused.len(),
        refused.join("\n")
    );
    assert!(now_pass.is_empty(), "listed in grammar_eval.json but now admitted, remove: {now_pass:?}");
    assert!(admitted > 200, "only {admitted} outputs admitted");
}
