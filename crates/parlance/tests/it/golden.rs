//! Every corpus template × every conversation fixture against the Hugging Face reference renders.
//!
//! Rules (issue #2): where the reference rendered, parlance renders the same bytes; where the
//! reference raised, parlance raises too, unless the case is listed under `python_quirks` in
//! `tests/expected/render.json` with the reason (the reference raised only because of a Python
//! quirk). Cases listed under `known_failures` are a ratchet: they may only be removed.
//! `PARLANCE_GOLDEN_DIFF=1` prints the first difference of every failing case.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use parlance::{ChatTemplate, RenderLimits, RenderRequest, TemplateSource};
use serde_json::Value as Json;

use crate::corpus;

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Same bytes as the reference, or both raised.
    Match,
    /// The reference raised, parlance rendered.
    RenderedWhereReferenceRaised,
    /// The reference rendered, parlance raised.
    RaisedWhereReferenceRendered(String),
    /// Both rendered, different bytes.
    Differs(String),
}

fn expected() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected/render.json");
    let text = std::fs::read_to_string(&path).expect("tests/expected/render.json is committed");
    let json: Json = serde_json::from_str(&text).expect("tests/expected/render.json is valid JSON");
    let map = |key: &str| -> BTreeMap<String, String> {
        json[key]
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default()
    };
    (map("known_failures"), map("python_quirks"))
}

fn first_difference(want: &str, got: &str) -> String {
    let at = want.bytes().zip(got.bytes()).take_while(|(a, b)| a == b).count();
    let window = |s: &str| {
        let mut start = at.saturating_sub(40);
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (at + 60).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        format!("{:?}", &s[start.min(s.len())..end])
    };
    format!("byte {at}: want {} got {}", window(want), window(got))
}

#[test]
fn corpus_renders_match_transformers() {
    let Some(corpus) = corpus::corpus() else { return };
    let (known_failures, python_quirks) = expected();
    let mut fixtures = Vec::new();
    for entry in std::fs::read_dir(corpus.join("conversations")).expect("conversations folder") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            fixtures.push((stem, RenderRequest::from_path(&path).expect("fixture parses")));
        }
    }
    fixtures.sort_by(|a, b| a.0.cmp(&b.0));
    let mut golden_files: Vec<_> = std::fs::read_dir(corpus.join("golden"))
        .expect("golden folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    golden_files.sort();
    let show_diffs = std::env::var_os("PARLANCE_GOLDEN_DIFF").is_some();

    let mut table = String::new();
    let mut failures: BTreeMap<String, Outcome> = BTreeMap::new();
    let (mut reference_ok, mut identical, mut both_raised, mut quirk_renders) = (0, 0, 0, 0);
    for golden_path in &golden_files {
        let golden: Json = serde_json::from_str(&std::fs::read_to_string(golden_path).unwrap()).unwrap();
        let id = golden["template_id"].as_str().expect("template_id").to_owned();
        let now = chrono::NaiveDateTime::parse_from_str(golden["fixed_date"].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S")
            .expect("fixed_date is ISO 8601");
        let text = std::fs::read_to_string(corpus.join("templates").join(format!("{id}.jinja"))).unwrap();
        let mut source = TemplateSource::from_text(format!("{id}.jinja"), text);
        if let Some(vars) = golden["template_variables"].as_object() {
            for (k, v) in vars {
                source.special_tokens.insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
            }
        }
        let template = ChatTemplate::from_source(source, RenderLimits::default());
        let (mut ok, mut total) = (0, 0);
        for case in golden["cases"].as_array().expect("cases") {
            let fixture = case["fixture"].as_str().unwrap();
            let key = format!("{id}/{fixture}");
            let request = &fixtures.iter().find(|(name, _)| name == fixture).expect("fixture exists").1;
            let (conversation, mut options) = request.clone().into_parts().unwrap();
            options.now = Some(now);
            let ours = match &template {
                Ok(t) => t.render(&conversation, &options).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let reference_rendered = case["ok"].as_bool() == Some(true);
            let outcome = match (&ours, reference_rendered) {
                (Ok(got), true) => {
                    let want = case["output"].as_str().unwrap();
                    if got == want { Outcome::Match } else { Outcome::Differs(first_difference(want, got)) }
                }
                (Err(e), true) => Outcome::RaisedWhereReferenceRendered(e.clone()),
                (Err(_), false) => Outcome::Match,
                (Ok(_), false) => Outcome::RenderedWhereReferenceRaised,
            };
            total += 1;
            if reference_rendered {
                reference_ok += 1;
            }
            match outcome {
                Outcome::Match if reference_rendered => identical += 1,
                Outcome::Match => both_raised += 1,
                Outcome::RenderedWhereReferenceRaised if python_quirks.contains_key(&key) => quirk_renders += 1,
                _ => {}
            }
            let passed = outcome == Outcome::Match
                || (outcome == Outcome::RenderedWhereReferenceRaised && python_quirks.contains_key(&key));
            if passed {
                ok += 1;
            } else {
                if show_diffs {
                    let reference = case.get("error").and_then(Json::as_str).unwrap_or("rendered");
                    eprintln!("{key}: {outcome:?} (reference: {reference})");
                }
                failures.insert(key, outcome);
            }
        }
        writeln!(table, "{id:<55} {ok:>3}/{total}").unwrap();
    }
    eprintln!("{table}");
    eprintln!(
        "{identical} of {reference_ok} reference renders identical; {both_raised} raised by both; \
         {quirk_renders} rendered where only a Python quirk made the reference raise"
    );

    let regressions: Vec<String> = failures
        .iter()
        .filter(|(key, _)| !known_failures.contains_key(*key))
        .map(|(key, outcome)| format!("{key}: {outcome:?}"))
        .collect();
    let fixed: Vec<&String> = known_failures.keys().filter(|key| !failures.contains_key(*key)).collect();
    if !fixed.is_empty() {
        eprintln!("note: now passing, remove from tests/expected/render.json known_failures: {fixed:?}");
    }
    let spurious_errors = failures.values().filter(|o| matches!(o, Outcome::RaisedWhereReferenceRendered(_))).count();
    assert!(
        regressions.is_empty(),
        "{} cases fail that are not known failures:\n{}",
        regressions.len(),
        regressions.join("\n")
    );
    assert!(identical + known_failures.len() >= reference_ok, "ratchet: every reference render is identical or known");
    assert_eq!(spurious_errors, 0, "no render may fail where the reference rendered");
}
