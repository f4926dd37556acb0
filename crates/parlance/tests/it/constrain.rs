//! Grammars derived from every tool-capable corpus template accept what the template writes.
//!
//! For each template: analyze it, render the analyzer's verify cases (content, reasoning, each value
//! type, parallel calls, content + call, unicode), derive the grammar for a request holding exactly
//! the tools each case calls (typed by the values it passes), and check that the grammar accepts the
//! model's text byte by byte, and that `tool_choice: none` refuses the calls. `tests/expected/
//! constrain.json` is the ratchet: templates listed there (with the reason) may fail; any other failure
//! fails the test, and a listed template that now passes is reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use parlance::parse::ToolChoice;
use parlance::{ConstrainError, ParseOptions, analyze, constrain, rendered_cases};
use parlance_grammar::{CompiledGrammar, Matcher, TokenVocab};
use serde_json::{Value as Json, json};

use crate::analyze::{corpus_template, manifest_ids};
use crate::corpus;

/// Every byte a token of its own, and an EOS: masks are not under test here, languages are.
fn byte_vocab() -> Arc<TokenVocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"<eos>".to_vec());
    Arc::new(TokenVocab::new(tokens, &[], &[256]).unwrap())
}

/// The tools a message calls, each argument typed by the value it passes.
fn tools_of(message: &Json) -> Vec<Json> {
    let mut tools: BTreeMap<String, Json> = BTreeMap::new();
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let name = call["function"]["name"].as_str().unwrap().to_owned();
        let mut properties = serde_json::Map::new();
        for (key, value) in call["function"]["arguments"].as_object().into_iter().flatten() {
            let typ = match value {
                Json::String(_) => "string",
                Json::Number(n) if n.is_i64() => "integer",
                Json::Number(_) => "number",
                Json::Bool(_) => "boolean",
                Json::Null => "null",
                Json::Array(_) => "array",
                Json::Object(_) => "object",
            };
            properties.insert(key.clone(), json!({"type": typ}));
        }
        tools.insert(name.clone(), json!({"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties}}}));
    }
    if tools.is_empty() {
        let properties = json!({"plnc_arg_one": {"type": "string"}});
        tools.insert("plnc_fn_alpha".into(), json!({"type": "function", "function": {"name": "plnc_fn_alpha", "parameters": {"type": "object", "properties": properties}}}));
    }
    tools.into_values().collect()
}

fn accepts(vocab: &Arc<TokenVocab>, grammar: &parlance_grammar::Grammar, text: &str) -> Result<bool, String> {
    let compiled = CompiledGrammar::new(vocab.clone(), grammar).map_err(|e| e.to_string())?;
    let mut matcher = Matcher::new(Arc::new(compiled)).map_err(|e| e.to_string())?;
    Ok(matcher.accept_bytes(text.as_bytes()) && matcher.is_accepting())
}

/// What goes wrong constraining `template`'s own verify renders (empty: nothing); with `checked`,
/// each structural tag and output checked, with whether the grammar must accept it (the records
/// `tests/data/xgrammar/check_constrain.py` gives XGrammar).
fn grammar_problems(
    vocab: &Arc<TokenVocab>,
    template: &parlance::ChatTemplate,
    format: &parlance::Format,
    options: &parlance::AnalyzeOptions,
    mut checked: Option<&mut Vec<Json>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let record =
        |checked: &mut Option<&mut Vec<Json>>, request: &ParseOptions, case: &str, output: &str, accept: bool| {
            if let Some(records) = checked.as_deref_mut() {
                let doc = constrain::structural_tag(format, request).unwrap();
                records.push(json!({"case": case, "doc": doc, "output": output, "accept": accept}));
            }
        };
    for case in rendered_cases(template, format, options) {
        // The model stops at the turn end; a section end the Format counts into the turn end
        // (DeepSeek R1's `<｜tool▁calls▁end｜>` before its EOS) is still the model's to write.
        let section_end = format.tools.as_ref().map_or("", |t| t.section_end.trim());
        let turn_end = format.turn_end.trim();
        let turn_end = turn_end.strip_prefix(section_end).filter(|s| !s.is_empty()).unwrap_or(turn_end).trim();
        let output = match case.output.rfind(turn_end).filter(|_| !turn_end.is_empty()) {
            Some(at) => &case.output[..at],
            None => case.output.as_str(),
        };
        let request = ParseOptions {
            tools: tools_of(&case.message),
            generation_prompt: Some(case.prompt.clone()),
            ..ParseOptions::default()
        };
        let grammar = match constrain::grammar(format, &request) {
            Ok(g) => g,
            Err(ConstrainError::Unsupported { what, .. }) => {
                problems.push(format!("unsupported: {what}"));
                break;
            }
            Err(e) => {
                problems.push(format!("{}: {e}", case.case));
                continue;
            }
        };
        match accepts(vocab, &grammar, output) {
            Ok(true) => {
                record(&mut checked, &request, &case.case, output, true);
                if let Some(records) = checked.as_deref_mut() {
                    // What the template rendered, for the response-template check.
                    let parsed = parlance::Parser::new(format, &request).parse(output);
                    records.push(json!({"case": case.case, "output": output, "prompt": case.prompt,
                        "message": case.message, "parsed": parsed, "tools": request.tools}));
                }
            }
            Ok(false) => problems.push(format!("{}: refused {output:?}", case.case)),
            Err(e) => problems.push(format!("{}: {e}", case.case)),
        }
        // A call the template did not write (DeepSeek R1's template drops calls beside content)
        // is no call for `none` to refuse: the output must hold one, as the parser reads it.
        let holds_call = !parlance::Parser::new(format, &request).parse(output).tool_calls.is_empty();
        if case.message.get("tool_calls").is_some() && holds_call {
            let none = ParseOptions { tool_choice: ToolChoice::None, ..request.clone() };
            let grammar = constrain::grammar(format, &none).unwrap();
            if accepts(vocab, &grammar, output) == Ok(true) {
                problems.push(format!("{}: tool_choice none accepts the call", case.case));
            } else {
                record(&mut checked, &none, &format!("{} (tool_choice none)", case.case), output, false);
            }
        }
    }
    problems
}

/// Checks every template of `templates` (id, template, options) against the ratchet; returns how
/// many pass.
fn check_grammars(
    what: &str,
    templates: impl Iterator<Item = (String, parlance::ChatTemplate, parlance::AnalyzeOptions)>,
) -> usize {
    let expected: BTreeMap<String, String> = serde_json::from_str(include_str!("../expected/constrain.json")).unwrap();
    let vocab = byte_vocab();
    // `PARLANCE_DUMP_STRUCTURAL_TAGS=DIR`: the checked structural tags and outputs of the passing
    // templates go to `DIR/WHAT.jsonl`, for XGrammar (`tests/data/xgrammar/check_constrain.py`).
    let dump = std::env::var_os("PARLANCE_DUMP_STRUCTURAL_TAGS").map(std::path::PathBuf::from);
    let mut lines = String::new();
    let (mut failures, mut improved, mut passed) = (Vec::new(), Vec::new(), 0);
    for (id, template, options) in templates {
        let Ok(format) = analyze(&template, &options) else { continue };
        if format.tools.is_none() {
            continue;
        }
        let mut checked = Vec::new();
        let problems = grammar_problems(&vocab, &template, &format, &options, dump.is_some().then_some(&mut checked));
        if problems.is_empty() {
            let response_template = parlance::response_template(&format).map_err(|e| e.to_string());
            for mut record in checked {
                record["template"] = json!(id);
                if record.get("message").is_some() {
                    match &response_template {
                        Ok(t) => record["response_template"] = t.clone(),
                        Err(e) => record["response_template_error"] = json!(e),
                    }
                }
                lines.push_str(&format!("{record}\n"));
            }
        }
        match (problems.is_empty(), expected.get(&id)) {
            (true, None) => passed += 1,
            (true, Some(_)) => improved.push(id),
            (false, Some(_)) => {
                if std::env::var_os("PARLANCE_SHOW_EXEMPT").is_some() {
                    eprintln!("{id} (exempt):\n  {}", problems.join("\n  "));
                }
            }
            (false, None) => failures.push(format!("{id}:\n  {}", problems.join("\n  "))),
        }
    }
    if let Some(dir) = dump {
        std::fs::write(dir.join(format!("{what}.jsonl")), lines).unwrap();
    }
    eprintln!("constrain ({what}): {passed} templates pass; now passing, remove from constrain.json: {improved:?}");
    assert!(failures.is_empty(), "{} templates fail:\n{}", failures.len(), failures.join("\n"));
    passed
}

#[test]
fn corpus_grammars_accept_what_templates_write() {
    let Some(corpus) = corpus::corpus() else { return };
    let templates = manifest_ids(&corpus).into_iter().map(|id| {
        let (template, options) = corpus_template(&corpus, &id);
        (id, template, options)
    });
    let passed = check_grammars("corpus", templates);
    assert!(passed >= 20, "only {passed} templates pass");
}

/// The same on the templates from outside the corpus (`tests/data/outside`).
#[test]
fn outside_grammars_accept_what_templates_write() {
    let templates = crate::outside::outside_entries().into_iter().map(|(folder, entry)| {
        let (template, options) = crate::outside::outside_template(&folder, &entry);
        (entry["id"].as_str().unwrap().to_owned(), template, options)
    });
    let passed = check_grammars("outside", templates);
    assert!(passed >= 20, "only {passed} templates pass");
}

/// Templates whose family tokenizer `shared/tokenizers` holds: their grammars accept the verify
/// renders token by token, special tokens included (markers that are special tokens become token
/// formats; their text would not match).
const TOKEN_LEVEL: [(&str, &str); 6] = [
    ("openai-gpt-oss-120b", "gptoss"),
    ("Qwen-Qwen3-0.6B", "qwen3"),
    ("Qwen3.5-4B", "qwen3"),
    ("meta-llama-Llama-3.1-8B-Instruct", "llama3_1"),
    ("meta-llama-Llama-3.2-3B-Instruct", "llama3_1"),
    ("meta-llama-Llama-3.3-70B-Instruct", "llama3_1"),
];

#[test]
fn grammars_accept_verify_renders_token_by_token() {
    let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return };
    let mut failures = Vec::new();
    let mut checked = 0;
    for (id, family) in TOKEN_LEVEL {
        let tokenizer = parlance::Tokenizer::from_path(tokenizers.join(family)).unwrap();
        let eos = tokenizer.eos_token_id().unwrap();
        let vocab = Arc::new(tokenizer.token_vocab(&[eos]).unwrap());
        let (template, options) = corpus_template(&corpus, id);
        let format = analyze(&template, &options).unwrap();
        for case in rendered_cases(&template, &format, &options) {
            let turn_end = format.turn_end.trim();
            let output = case.output.rfind(turn_end).map_or(case.output.as_str(), |at| &case.output[..at]);
            let request = ParseOptions {
                tools: tools_of(&case.message),
                generation_prompt: Some(case.prompt.clone()),
                ..ParseOptions::default()
            };
            let grammar = constrain::grammar_for(&format, &request, &vocab).unwrap();
            let compiled = Arc::new(CompiledGrammar::new(vocab.clone(), &grammar).unwrap());
            let mut matcher = Matcher::new(compiled).unwrap();
            let ids = tokenizer.encode_rendered(output).unwrap();
            let refused = ids.iter().position(|&t| !matcher.accept_token(t));
            checked += 1;
            match refused {
                Some(at) => failures.push(format!(
                    "{id} {}: token {at} ({:?}) refused in {output:?}",
                    case.case,
                    tokenizer.decode(&ids[at..=at]).unwrap()
                )),
                None if !matcher.is_accepting() => failures.push(format!("{id} {}: incomplete", case.case)),
                None => {}
            }
        }
    }
    assert!(failures.is_empty(), "{} of {checked} renders refused:\n{}", failures.len(), failures.join("\n"));
    assert!(checked > 40, "only {checked} renders checked");
}

#[test]
fn markers_that_are_special_tokens_are_matched_as_tokens_only() {
    let Some(corpus) = corpus::corpus() else { return };
    // Every byte a token, and Qwen3's call markers as special tokens.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend([b"<tool_call>".to_vec(), b"</tool_call>".to_vec(), b"<eos>".to_vec()]);
    let (open, close) = (256u32, 257u32);
    let vocab = Arc::new(TokenVocab::new(tokens, &[open, close], &[258]).unwrap());
    let (template, options) = corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = analyze(&template, &options).unwrap();
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}});
    let request = ParseOptions { tools: vec![tool], ..ParseOptions::default() };
    let doc = constrain::structural_tag_with(
        &format,
        &request,
        &constrain::ConstrainOptions {
            special_tokens: constrain::SpecialTokens::new(["<tool_call>", "</tool_call>"]).unwrap(),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(doc.to_string().contains("token_triggered_tags"), "{doc}");
    let grammar = Arc::new(
        CompiledGrammar::new(vocab.clone(), &constrain::grammar_for(&format, &request, &vocab).unwrap()).unwrap(),
    );
    let body = "\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n";
    let mut m = Matcher::new(grammar.clone()).unwrap();
    assert!(
        m.accept_bytes(b"Sure.\n") && m.accept_token(open) && m.accept_bytes(body.as_bytes()) && m.accept_token(close)
    );
    assert!(m.is_accepting());
    // The markers' text is content, never a call: the grammar's free text cannot spell a call.
    let mut m = Matcher::new(grammar).unwrap();
    assert!(m.accept_bytes(format!("<tool_call>{body}</tool_call>").as_bytes()) && m.is_accepting());
}

#[test]
fn an_optional_call_opener_is_admitted_as_its_token_beside_bare_calls() {
    // Llama 3.1 and 3.3 write `<|python_tag|>` before a call (the analyzer finds it through the
    // template's built-in tools), and models write it before custom tools' JSON calls too; the
    // parser accepts it, so the grammar must: as the special token, with or without text before
    // it. XGrammar's `triggered_tags` cannot hold a token tag
    // beside text triggers, so its structural tag leaves it out.
    let Some(corpus) = corpus::corpus() else { return };
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend([b"<|python_tag|>".to_vec(), b"<|eot_id|>".to_vec()]);
    let (tag, eos) = (256u32, 257u32);
    let vocab = Arc::new(TokenVocab::new(tokens, &[tag, eos], &[eos]).unwrap());
    let (template, options) = corpus_template(&corpus, "meta-llama-Llama-3.1-8B-Instruct");
    let format = analyze(&template, &options).unwrap();
    assert_eq!(format.tools.as_ref().unwrap().optional_call_opener, "<|python_tag|>");
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}});
    let call = r#"{"name": "f", "parameters": {"a": 1}}"#;
    let compiled = |request: &ParseOptions| {
        Arc::new(
            CompiledGrammar::new(vocab.clone(), &constrain::grammar_for(&format, request, &vocab).unwrap()).unwrap(),
        )
    };
    let request = ParseOptions { tools: vec![tool.clone()], ..ParseOptions::default() };
    let grammar = compiled(&request);
    // Each output: pieces of text, with `None` for the token.
    let admitted: [&[Option<&str>]; 4] =
        [&[Some(call)], &[None, Some(call)], &[None, Some(" "), Some(call)], &[Some("Sure. "), None, Some(call)]];
    let run = |grammar: &Arc<CompiledGrammar>, pieces: &[Option<&str>]| {
        let mut m = Matcher::new(grammar.clone()).unwrap();
        pieces.iter().all(|p| match p {
            Some(text) => m.accept_bytes(text.as_bytes()),
            None => m.accept_token(tag),
        }) && m.is_accepting()
    };
    for pieces in admitted {
        assert!(run(&grammar, pieces), "{pieces:?}");
    }
    // Not alone, not before an argument the schema refuses; one call (the template
    // raises on more).
    assert!(!format.tools.as_ref().unwrap().parallel);
    for pieces in [
        &[None, Some(call), None, Some(call)][..],
        &[None],
        &[None, Some(r#"{"name": "f", "parameters": {"a": "x"}}"#)],
        &[None, Some(r#"{"name": "g", "parameters": {"a": 1}}"#)],
    ] {
        assert!(!run(&grammar, pieces), "{pieces:?}");
    }
    // `tool_choice: none` admits no call, so no opener either.
    let none = ParseOptions { tools: vec![tool.clone()], tool_choice: ToolChoice::None, ..ParseOptions::default() };
    assert!(!run(&compiled(&none), &[None, Some(call)]));
    // The structural tag for XGrammar is its documented format: no token-begun tag among text triggers.
    let doc = constrain::structural_tag(&format, &request).unwrap();
    assert!(!doc.to_string().contains("python_tag"), "{doc}");
}

#[test]
fn llama4_content_beside_calls_opens_with_its_token() {
    // The first-release Llama 4 template writes a call turn as `<|python_start|>` + content +
    // `<|python_end|>` + calls: the grammar admits that with both markers as their special tokens,
    // content without calls as bare text (the markers' text is text, as everywhere).
    let entries = crate::outside::outside_entries();
    let (folder, entry) = entries.iter().find(|(_, e)| e["id"] == "axolotl-llama4").unwrap();
    let (template, options) = crate::outside::outside_template(folder, entry);
    let format = analyze(&template, &options).unwrap();
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend([b"<|python_start|>".to_vec(), b"<|python_end|>".to_vec(), b"<|eot|>".to_vec()]);
    let (start, end, eot) = (256u32, 257u32, 258u32);
    let vocab = Arc::new(TokenVocab::new(tokens, &[start, end, eot], &[eot]).unwrap());
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}});
    let call = r#"{"name": "f", "parameters": {"a": 1}}"#;
    let compiled = |request: &ParseOptions| {
        Arc::new(
            CompiledGrammar::new(vocab.clone(), &constrain::grammar_for(&format, request, &vocab).unwrap()).unwrap(),
        )
    };
    // Each output: pieces of text, with `Err(token)` for a special token.
    let run = |grammar: &Arc<CompiledGrammar>, pieces: &[Result<&str, u32>]| {
        let mut m = Matcher::new(grammar.clone()).unwrap();
        pieces.iter().all(|p| match p {
            Ok(text) => m.accept_bytes(text.as_bytes()),
            Err(token) => m.accept_token(*token),
        }) && m.is_accepting()
    };
    let request = ParseOptions { tools: vec![tool.clone()], ..ParseOptions::default() };
    let grammar = compiled(&request);
    for pieces in [
        &[Err(start), Err(end), Ok(call)][..],
        &[Err(start), Ok("Let me check."), Err(end), Ok(call)],
        &[Err(start), Ok("Two."), Err(end), Ok(call), Ok(call)],
        &[Ok("Just an answer.")],
    ] {
        assert!(run(&grammar, pieces), "refused {pieces:?}");
    }
    for pieces in [
        // A section start holds a call; its arguments keep the schema; the name is a tool's.
        &[Err(start), Err(end)][..],
        &[Err(start), Err(end), Ok(r#"{"name": "f", "parameters": {"a": "x"}}"#)],
        &[Err(start), Err(end), Ok(r#"{"name": "g", "parameters": {"a": 1}}"#)],
    ] {
        assert!(!run(&grammar, pieces), "admitted {pieces:?}");
    }
    let none = ParseOptions { tools: vec![tool.clone()], tool_choice: ToolChoice::None, ..ParseOptions::default() };
    assert!(!run(&compiled(&none), &[Err(start), Err(end), Ok(call)]));
    let required = ParseOptions { tools: vec![tool], tool_choice: ToolChoice::Required, ..ParseOptions::default() };
    assert!(run(&compiled(&required), &[Err(start), Err(end), Ok(call)]));
    assert!(!run(&compiled(&required), &[Ok("Just an answer.")]));
}

/// A tiny deterministic generator (xorshift) for the samples.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Walks the grammar, each step a byte drawn uniformly among those the mask allows (EOS among them
/// once the output is complete); `None` when no end came within the byte budget.
fn sample(grammar: &Arc<CompiledGrammar>, vocab: &TokenVocab, rng: &mut Rng) -> Option<String> {
    let mut matcher = Matcher::new(grammar.clone()).unwrap();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut out = Vec::new();
    while out.len() < 1500 {
        matcher.fill_next_token_bitmask(&mut mask).unwrap();
        let allowed: Vec<u32> =
            (0..vocab.len() as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect();
        let pick = allowed[rng.below(allowed.len())];
        if vocab.eos_ids().contains(&pick) {
            return String::from_utf8(out).ok();
        }
        assert!(matcher.accept_token(pick));
        out.extend_from_slice(vocab.token_bytes(pick));
    }
    None
}

/// Outputs drawn from a request's grammar (`tool_choice: required`, and a named function with
/// parallel calls off; every template the ratchet does not exempt) parse, with the same Format and request, into calls of the requested tools whose
/// arguments the schema accepts (the `jsonschema` crate as the judge), with no issue reported: the
/// grammar admits nothing the parser reads otherwise.
#[test]
fn sampled_outputs_parse_into_valid_calls() {
    let Some(corpus) = corpus::corpus() else { return };
    let vocab = byte_vocab();
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false});
    let validator = jsonschema::validator_for(&schema).unwrap();
    let tool = json!({"type": "function", "function": {"name": "get_forecast", "parameters": schema}});
    let expected: BTreeMap<String, String> = serde_json::from_str(include_str!("../expected/constrain.json")).unwrap();
    let (mut failures, mut parsed, mut templates) = (Vec::new(), 0, 0);
    for id in manifest_ids(&corpus) {
        let (template, options) = corpus_template(&corpus, &id);
        let Ok(format) = analyze(&template, &options) else { continue };
        if format.tools.is_none() || expected.contains_key(&id) {
            continue;
        }
        templates += 1;
        // `required` with one tool; a named choice among two, parallel calls off.
        let mut other = tool.clone();
        other["function"]["name"] = json!("get_time");
        let requests = [
            (
                ParseOptions {
                    tools: vec![tool.clone()],
                    tool_choice: ToolChoice::Required,
                    ..ParseOptions::default()
                },
                "get_forecast",
                usize::MAX,
            ),
            (
                ParseOptions {
                    tools: vec![other, tool.clone()],
                    tool_choice: ToolChoice::Function("get_forecast".into()),
                    parallel_tool_calls: Some(false),
                    ..ParseOptions::default()
                },
                "get_forecast",
                1,
            ),
        ];
        for (k, (request, name, most)) in requests.iter().enumerate() {
            let grammar =
                Arc::new(CompiledGrammar::new(vocab.clone(), &constrain::grammar(&format, request).unwrap()).unwrap());
            let mut rng = Rng(0x5eed ^ (id.len() * 31 + k) as u64);
            for _ in 0..6 {
                let Some(text) = sample(&grammar, &vocab, &mut rng) else { continue };
                parsed += 1;
                let message = parlance::parse(&format, request, &text);
                let problem = if message.tool_calls.is_empty() {
                    Some("no call".to_owned())
                } else if message.tool_calls.len() > *most {
                    Some(format!("{} calls", message.tool_calls.len()))
                } else if !message.issues.is_empty() {
                    Some(format!("issues {:?}", message.issues))
                } else {
                    message.tool_calls.iter().find_map(|call| match &call.arguments_value {
                        _ if call.name != *name => Some(format!("call of {}", call.name)),
                        Some(args) if validator.is_valid(args) => None,
                        Some(args) => Some(format!("arguments {args} refused by the schema")),
                        None => Some(format!("arguments {:?} are not JSON", call.arguments)),
                    })
                };
                if let Some(problem) = problem {
                    failures.push(format!("{id}: {problem} in {text:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {parsed} samples:\n{}", failures.len(), failures.join("\n"));
    assert!(parsed >= templates * 6, "only {parsed} samples of {templates} templates ended within the budget");
}

#[test]
fn one_bare_json_call_in_a_section_is_not_parallel() {
    // Found by sampling the grammar: with parallel calls off, the parser reported a second call
    // after the only one (a section whose calls open with no marker, GigaChat 3.1's).
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = corpus_template(&corpus, "GigaChat3.1-10B-A1.8B");
    let format = analyze(&template, &options).unwrap();
    let request =
        ParseOptions { tools: tools_of(&json!({})), parallel_tool_calls: Some(false), ..ParseOptions::default() };
    let call = "<|function_call|>{\"name\": \"plnc_fn_alpha\", \"arguments\": {\"plnc_arg_one\": \"x\"}";
    for tail in ["}", "\t}", "}\n", "} \r\n"] {
        let text = format!("{call}{tail}");
        let message = parlance::parse(&format, &request, &text);
        assert_eq!(message.tool_calls.len(), 1, "{text:?}");
        assert!(message.issues.is_empty(), "{text:?}: {:?}", message.issues);
    }
    let two = format!("{call}}}\n{{\"name\": \"plnc_fn_alpha\", \"arguments\": {{}}}}");
    let message = parlance::parse(&format, &request, &two);
    assert!(message.issues.iter().any(|i| i.kind == "parallel-calls"), "{:?}", message.issues);
}

#[test]
fn a_json_response_format_makes_the_content_one_json_value() {
    let Some(corpus) = corpus::corpus() else { return };
    let vocab = byte_vocab();
    let response_format = json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": {
        "type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"], "additionalProperties": false}}});
    let options = constrain::ConstrainOptions { response_format: Some(response_format), ..Default::default() };
    let tool = tools_of(&json!({}));
    let check = |id: &str, request: &ParseOptions, cases: &[(&str, bool)]| {
        let (template, analyze_options) = corpus_template(&corpus, id);
        let format = analyze(&template, &analyze_options).unwrap();
        let doc = constrain::structural_tag_with(&format, request, &options).unwrap();
        let grammar = parlance_grammar::structural_tag_to_grammar(&doc, &Default::default()).unwrap();
        for &(text, want) in cases {
            assert_eq!(accepts(&vocab, &grammar, text), Ok(want), "{id}: {text:?}");
        }
    };
    let auto = ParseOptions { tools: tool.clone(), ..ParseOptions::default() };
    let call = "<tool_call>\n{\"name\": \"plnc_fn_alpha\", \"arguments\": {\"plnc_arg_one\": \"x\"}}\n</tool_call>";
    check(
        "Qwen-Qwen3-0.6B",
        &auto,
        &[
            ("{\"answer\": 42}", true),
            ("<think>\nsum\n</think>\n\n{\"answer\": 4}", true),
            (call, true),
            ("Sure: 42", false),
            ("{\"answer\": \"42\"}", false),
        ],
    );
    let none = ParseOptions { tools: tool, tool_choice: ToolChoice::None, ..ParseOptions::default() };
    check("Qwen-Qwen3-0.6B", &none, &[("{\"answer\": 42}", true), (call, false)]);
    // gpt-oss: the final message's body is the JSON value.
    check(
        "openai-gpt-oss-120b",
        &none,
        &[
            (
                "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>{\"answer\": 1}",
                true,
            ),
            ("<|channel|>final<|message|>one", false),
        ],
    );
}

/// Two tools, one with an integer parameter: which calls a grammar admits is then visible.
fn two_tools(strict: Option<bool>) -> Vec<Json> {
    let tool = |name: &str, key: &str, typ: &str| {
        let mut function = json!({"name": name, "parameters": {"type": "object",
            "properties": {key: {"type": typ}}, "required": [key]}});
        if let Some(strict) = strict {
            function["strict"] = json!(strict);
        }
        json!({"type": "function", "function": function})
    };
    vec![tool("get_weather", "city", "string"), tool("get_time", "offset", "integer")]
}

#[test]
fn allowed_tools_limit_the_calls_and_strict_false_leaves_arguments_to_the_syntax() {
    let Some(corpus) = corpus::corpus() else { return };
    let vocab = byte_vocab();
    let qwen_call =
        |name: &str, args: &str| format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>");
    let coder_call = |name: &str, key: &str, value: &str| {
        format!("<tool_call>\n<function={name}>\n<parameter={key}>\n{value}\n</parameter>\n</function>\n</tool_call>")
    };
    let allowed = |mode: &str| {
        ToolChoice::from_openai(&json!({"type": "allowed_tools", "allowed_tools": {"mode": mode,
            "tools": [{"type": "function", "function": {"name": "get_time"}}]}}))
        .unwrap()
    };
    let check = |id: &str, tools: Vec<Json>, choice: ToolChoice, strict: Option<bool>, cases: &[(String, bool)]| {
        let (template, analyze_options) = corpus_template(&corpus, id);
        let format = analyze(&template, &analyze_options).unwrap();
        let tools_loose = tools.iter().any(|t| t["function"]["strict"] == json!(false));
        let request = ParseOptions { tools, tool_choice: choice.clone(), ..ParseOptions::default() };
        let options = constrain::ConstrainOptions { strict, ..Default::default() };
        let doc = constrain::structural_tag_with(&format, &request, &options).unwrap();
        let grammar = parlance_grammar::structural_tag_to_grammar(&doc, &Default::default()).unwrap();
        for (text, want) in cases {
            assert_eq!(accepts(&vocab, &grammar, text), Ok(*want), "{id} {choice:?} strict {strict:?}: {text:?}");
            // The parser agrees: what a grammar held to the schemas admits parses with no issue
            // (the parser reads arguments against the schemas, and reports what misfits them).
            let loose = strict == Some(false) || (strict.is_none() && tools_loose);
            if *want && !loose {
                let message = parlance::Parser::new(&format, &request).parse(text);
                assert!(message.issues.is_empty(), "{id}: {text:?} parsed with {:?}", message.issues);
            }
        }
    };
    let weather = qwen_call("get_weather", "{\"city\": \"Paris\"}");
    let time = qwen_call("get_time", "{\"offset\": 2}");
    let time_as_text = qwen_call("get_time", "{\"offset\": \"two\"}");
    let qwen = "Qwen-Qwen3-0.6B";
    check(qwen, two_tools(None), ToolChoice::Auto, None, &[(weather.clone(), true), (time.clone(), true)]);
    check(
        qwen,
        two_tools(None),
        allowed("auto"),
        None,
        &[(weather.clone(), false), (time.clone(), true), ("Just text.".into(), true), (time_as_text.clone(), false)],
    );
    check(qwen, two_tools(None), allowed("required"), None, &[(time.clone(), true), ("Just text.".into(), false)]);
    // Not held to the schema: any JSON object, still a JSON object.
    check(qwen, two_tools(Some(false)), ToolChoice::Auto, None, &[(time_as_text.clone(), true)]);
    check(qwen, two_tools(None), ToolChoice::Auto, Some(false), &[(time_as_text.clone(), true)]);
    check(qwen, two_tools(Some(false)), ToolChoice::Auto, Some(true), &[(time_as_text.clone(), false)]);
    check(qwen, two_tools(Some(false)), ToolChoice::Auto, None, &[(qwen_call("get_time", "[1]"), false)]);

    // Tagged arguments: an open schema admits any names, each value raw up to its end.
    let coder = "Qwen3-Coder";
    let loose = coder_call("get_time", "anything", "two");
    check(
        coder,
        two_tools(None),
        ToolChoice::Auto,
        None,
        &[(coder_call("get_time", "offset", "2"), true), (loose.clone(), false)],
    );
    check(coder, two_tools(Some(false)), ToolChoice::Auto, None, &[(loose.clone(), true)]);
    check(
        coder,
        two_tools(None),
        allowed("auto"),
        Some(false),
        &[(loose, true), (coder_call("get_weather", "city", "x"), false)],
    );
}

#[test]
fn allowed_tools_naming_an_unknown_tool_is_an_error() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, analyze_options) = corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = analyze(&template, &analyze_options).unwrap();
    let choice = ToolChoice::AllowedTools { names: vec!["nope".into()], required: false };
    let request = ParseOptions { tools: two_tools(None), tool_choice: choice, ..ParseOptions::default() };
    let error = constrain::structural_tag(&format, &request).unwrap_err();
    assert!(matches!(&error, ConstrainError::Request(m) if m.contains("`nope`")), "{error}");
}

#[test]
fn a_reasoning_budget_ends_reasoning_after_that_many_tokens() {
    let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return };
    let tokenizer = parlance::Tokenizer::from_path(tokenizers.join("qwen3")).unwrap();
    let eos = tokenizer.eos_token_id().unwrap();
    let vocab = Arc::new(tokenizer.token_vocab(&[eos]).unwrap());
    let (template, analyze_options) = corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = analyze(&template, &analyze_options).unwrap();
    let options = constrain::ConstrainOptions { reasoning_budget: Some(6), ..Default::default() };
    let grammar = constrain::grammar_with(&format, &ParseOptions::default(), &vocab, &options).unwrap();
    let doc = constrain::structural_tag_with(&format, &ParseOptions::default(), &options).unwrap();
    assert!(doc.to_string().contains("\"max_tokens\":6"), "{doc}");
    let compiled = Arc::new(CompiledGrammar::new(vocab.clone(), &grammar).unwrap());
    let allowed = |m: &mut Matcher| -> Vec<String> {
        let mut mask = vec![0u32; vocab.mask_words()];
        m.fill_next_token_bitmask(&mut mask).unwrap();
        (0..vocab.len() as u32)
            .filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1)
            .map(|t| String::from_utf8_lossy(vocab.token_bytes(t)).into_owned())
            .collect()
    };
    let mut m = Matcher::new(compiled).unwrap();
    let ids = tokenizer.encode_rendered("<think>\nOne two three four five six seven").unwrap();
    let think = ids.iter().position(|&t| tokenizer.decode(&[t]).unwrap() == "<think>").unwrap();
    // Up to the budget, reasoning is free text.
    for (i, &t) in ids.iter().enumerate() {
        if i <= think + 6 {
            assert!(m.accept_token(t), "token {i} refused");
        } else {
            assert!(!m.fork().accept_token(t), "token {i} accepted past the budget");
        }
    }
    // Then only the end of reasoning.
    let next = allowed(&mut m);
    assert!(!next.is_empty() && next.iter().all(|t| "</think>".starts_with(t.as_str())), "{next:?}");
    let end = tokenizer.encode_rendered("</think>\n\nDone.").unwrap();
    assert!(end.iter().all(|&t| m.accept_token(t)) && m.is_accepting());
    assert!(allowed(&mut m).len() > 1000, "content after reasoning is free text again");
}

/// The Hugging Face response templates of three families, as read here against transformers 5.24's
/// `parse_response` (which `tests/data/xgrammar/check_constrain.py` runs on every render), and the
/// errors of formats a response template cannot express.
#[test]
fn response_templates_follow_the_format() {
    let Some(corpus) = corpus::corpus() else { return };
    let template_of = |id: &str| {
        let (template, options) = corpus_template(&corpus, id);
        parlance::response_template(&analyze(&template, &options).unwrap())
    };
    let qwen = template_of("Qwen-Qwen3-0.6B").unwrap();
    assert_eq!(qwen["start_anchor"], "<|im_start|>assistant\n");
    assert_eq!(qwen["fields"]["reasoning_content"]["open_pattern"], r"<think>|\A(?=\s*</think>)");
    assert_eq!(qwen["fields"]["reasoning_content"]["close"], "</think>");
    let calls = &qwen["fields"]["tool_calls"];
    assert_eq!(calls["open_pattern"], r"\s*<tool_call>");
    assert_eq!(calls["close_pattern"], r"</tool_call>\s*");
    assert_eq!(calls["content"], "json");
    assert_eq!(calls["transform"]["function"]["arguments"], "{content.arguments}");
    assert_eq!(qwen["fields"]["content"]["close_pattern"], r"\s*<\|im_end\|>");

    let coder = template_of("Qwen3-Coder").unwrap();
    let calls = &coder["fields"]["tool_calls"];
    assert_eq!(calls["open_pattern"], r"\s*<tool_call>\s*<function=(?P<name>[^\s<>\[\]{}()]+)>");
    assert_eq!(calls["content"], "xml-inline");
    assert_eq!(calls["content_args"]["tag_pattern"], r"<parameter=(?P<key>[^\s<>]+?)>\s*(?P<value>.*?)\s*</parameter>");
    assert_eq!(calls["transform"]["function"]["name"], "{name}");

    let llama = template_of("meta-llama-Llama-3.1-8B-Instruct").unwrap();
    assert_eq!(llama["fields"]["tool_calls"]["open_pattern"], r#"(?:\A|(?<=\}))\s*(?=\{\s*"name")"#);
    assert_eq!(llama["fields"]["tool_calls"]["transform"]["function"]["arguments"], "{content.parameters}");

    // gpt-oss writes calls in channels, which a response template has no way to say.
    let error = template_of("openai-gpt-oss-120b").unwrap_err();
    assert!(matches!(&error, ConstrainError::ResponseTemplate { what, .. } if what.contains("channel")), "{error}");
}

/// Pythonic calls (LFM2.5: `<|tool_call_start|>[f(a=1, b='x')]<|tool_call_end|>`): keyword
/// arguments in the schema's order, each at most once, the required ones present; strings in
/// either quote with one-character escapes, held to `enum` and `maxLength`; other values as
/// Python literals.
#[test]
fn pythonic_calls_follow_the_schema() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = corpus_template(&corpus, "LFM2.5-8B-A1B");
    let format = analyze(&template, &options).unwrap();
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 5}, "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer"}, "tags": {"type": "array"}, "metric": {"type": "boolean"}},
        "required": ["city"]}}});
    let request = ParseOptions { tools: vec![tool], tool_choice: ToolChoice::Required, ..ParseOptions::default() };
    let vocab = byte_vocab();
    let grammar = constrain::grammar_for(&format, &request, &vocab).unwrap();
    let call = |args: &str| format!("<|tool_call_start|>[f({args})]<|tool_call_end|>");
    for good in [
        "city='Paris'",
        "city=\"Rome\", unit='c'",
        "city='a\\'b', days=-3, tags=['x', (1, 2.5), {'k': None}], metric=True",
        "city='Oslo',unit='f',metric=False",
    ] {
        assert_eq!(accepts(&vocab, &grammar, &call(good)), Ok(true), "{good}");
    }
    for bad in [
        "unit='c'",                  // the required argument missing
        "city='Paris', city='Rome'", // twice
        "unit='c', city='Paris'",    // out of the schema's order
        "city='Berlin'",             // longer than maxLength
        "city='Oslo', unit='k'",     // not in the enum
        "city='Oslo', days='3'",     // a string for an integer
        "city='Oslo', metric=true",  // JSON's spelling, not Python's
        "city='a\\qb'",              // an escape that is not one character
        "city=Oslo",                 // unquoted
    ] {
        assert_eq!(accepts(&vocab, &grammar, &call(bad)), Ok(false), "{bad}");
    }
    // What the grammar admits, the parser reads as the same call.
    let parsed = parlance::parse(&format, &request, &call("city='a\\'b', tags=['x', 1]"));
    assert_eq!(parsed.tool_calls.len(), 1);
    assert_eq!(parsed.tool_calls[0].arguments_value, Some(json!({"city": "a'b", "tags": ["x", 1]})));
}

/// Gemma 4's literals (`call:f{a:<|"|>v<|"|>,b:[1,<|"|>two<|"|>],c:{k:None}}`): strings in its
/// own quote never hold it, containers hold such literals with bare keys, null is `None` (inside a
/// container `null`, which the parser reads).
#[test]
fn gemma_literals_follow_its_quote() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = corpus_template(&corpus, "google-gemma-4-31B-it");
    let format = analyze(&template, &options).unwrap();
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"s": {"type": "string"}, "n": {"type": "null"}, "l": {"type": "array"}, "o": {"type": "object"}}}}});
    let request = ParseOptions { tools: vec![tool], tool_choice: ToolChoice::Required, ..ParseOptions::default() };
    let vocab = byte_vocab();
    let grammar = constrain::grammar_for(&format, &request, &vocab).unwrap();
    let call = |args: &str| format!("<|tool_call>call:f{{{args}}}<tool_call|>");
    let q = "<|\"|>";
    for good in
        [format!("s:{q}a <| b{q}"), format!("n:None,l:[1,{q}two{q},[true]],o:{{inner:{q}v{q},n:2,{q}k k{q}:null}}")]
    {
        assert_eq!(accepts(&vocab, &grammar, &call(&good)), Ok(true), "{good}");
    }
    for bad in [
        format!("s:{q}a{q}b{q}"), // the quote inside a string
        format!("l:[{q}open]"),   // a string that never closes
        "n:nil".to_owned(),       // not a null
        format!("o:[{q}x{q}]"),   // an array for an object
        "o:{k:None}".to_owned(),  // `None` inside a container
    ] {
        assert_eq!(accepts(&vocab, &grammar, &call(&bad)), Ok(false), "{bad}");
    }
    let parsed = parlance::parse(&format, &request, &call(&format!("l:[1,{q}two{q}],o:{{k:null}}")));
    assert_eq!(parsed.tool_calls[0].arguments_value, Some(json!({"l": [1, "two"], "o": {"k": null}})));
}

/// Tagged arguments as models write them (Qwen3-Coder's `<parameter=k>\nv\n</parameter>`): in any
/// order, each at most once, the required ones present; values typed by the schema, in Python's
/// spelling or JSON's between the value markers; a string enum as one of its strings.
#[test]
fn tagged_arguments_come_in_any_order_each_once() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = corpus_template(&corpus, "Qwen3-Coder");
    let format = analyze(&template, &options).unwrap();
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
            "c": {"type": "string", "enum": ["x", "y"]}, "d": {"type": ["boolean", "null"]}},
        "required": ["a", "b"]}}});
    let request = ParseOptions { tools: vec![tool], tool_choice: ToolChoice::Required, ..ParseOptions::default() };
    let vocab = byte_vocab();
    let grammar = constrain::grammar_for(&format, &request, &vocab).unwrap();
    let arg = |k: &str, v: &str| format!("<parameter={k}>\n{v}\n</parameter>\n");
    let call = |args: &[(&str, &str)]| {
        let args: String = args.iter().map(|(k, v)| arg(k, v)).collect();
        format!("<tool_call>\n<function=f>\n{args}</function>\n</tool_call>")
    };
    for good in [
        call(&[("a", "hi there"), ("b", "1")]),
        call(&[("b", "2"), ("a", "x")]),
        call(&[("c", "y"), ("b", "3"), ("d", "True"), ("a", "z")]),
        call(&[("a", "z"), ("d", "true"), ("b", "4")]),
    ] {
        assert_eq!(accepts(&vocab, &grammar, &good), Ok(true), "{good}");
    }
    for bad in [
        call(&[("a", "z")]),                           // `b` is required
        call(&[("a", "z"), ("b", "1"), ("a", "w")]),   // `a` twice
        call(&[("a", "z"), ("b", "one")]),             // not an integer
        call(&[("a", "z"), ("b", "1"), ("c", "w")]),   // not in the enum
        call(&[("a", "z"), ("b", "1"), ("c", "\nx")]), // more whitespace than the parser takes off
        call(&[("a", "z"), ("b", "1"), ("e", "1")]),   // not a property
    ] {
        assert_eq!(accepts(&vocab, &grammar, &bad), Ok(false), "{bad}");
    }
}

/// A call that names its function twice (muse-glimmer: a `to=f` header, then `<atem:invoke
/// name="f">`), in blocks that each repeat the header the prompt ends with: the grammar writes the
/// same name both times, lets reasoning come first, and the parser reads what it admits.
#[test]
fn calls_that_name_the_function_twice_name_the_same_one() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = corpus_template(&corpus, "muse-glimmer");
    let format = analyze(&template, &options).unwrap();
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name, "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
    };
    let request = ParseOptions { tools: vec![tool("get_weather"), tool("get_time")], ..ParseOptions::default() };
    let vocab = byte_vocab();
    let grammar = constrain::grammar_for(&format, &request, &vocab).unwrap();
    let call = |header: &str, body: &str| {
        format!(
            "<|start|>assistant to={header}<|message|><atem:function_calls>\n<atem:invoke name=\"{body}\">\n\
             <atem:parameter name=\"city\">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"
        )
    };
    let first = |text: &str| text.strip_prefix("<|start|>assistant").unwrap().to_owned();
    let reasoning = " to=self<|message|>Let me look.<|eom|>";
    let good = [
        first(&call("get_weather", "get_weather")),
        format!("{reasoning}{}", call("get_time", "get_time")),
        format!("{}<|eom|>{}", first(&call("get_weather", "get_weather")), call("get_time", "get_time")),
        format!("{reasoning}<|start|>assistant to=user<|message|>It is sunny."),
        " to=user<|message|>It is sunny.".to_owned(),
    ];
    for text in &good {
        assert_eq!(accepts(&vocab, &grammar, text), Ok(true), "{text}");
        let parsed = parlance::parse(&format, &request, text);
        assert!(parsed.issues.is_empty(), "{text}: {:?}", parsed.issues);
    }
    let parsed = parlance::parse(&format, &request, &good[2]);
    let names: Vec<&str> = parsed.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
    for bad in [
        first(&call("get_weather", "get_time")), // the body names another function
        first(&call("get_weather", "get_weathe")),
        first(&call("get_wind", "get_wind")), // no such tool
        format!("{reasoning}{reasoning}"),    // reasoning twice
    ] {
        assert_eq!(accepts(&vocab, &grammar, &bad), Ok(false), "{bad}");
    }
    // The parser says so when the second writing names another function.
    let parsed = parlance::parse(&format, &request, &first(&call("get_weather", "get_time")));
    assert!(parsed.tool_calls.is_empty());
    assert!(parsed.issues.iter().any(|i| i.message.contains("not named again")), "{:?}", parsed.issues);
}

/// MiniMax-M3 writes arrays and objects as nested elements with its argument markers: the grammar
/// follows the schema through them (members by name, items as `item`, bounds, leaf types), admits
/// the JSON spelling too, and what it admits parses into the same arguments.
#[test]
fn nested_elements_follow_the_schema() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = corpus_template(&corpus, "MiniMax-M3");
    let format = analyze(&template, &options).unwrap();
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {
            "point": {"type": "object", "properties": {"x": {"type": "integer"}, "label": {"type": "string"}},
                "required": ["x"]},
            "ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "required": ["point"]}}});
    let request = ParseOptions { tools: vec![tool], tool_choice: ToolChoice::Required, ..ParseOptions::default() };
    let vocab = byte_vocab();
    let grammar = constrain::grammar_for(&format, &request, &vocab).unwrap();
    let ns = "]<]minimax[>[";
    let el = |name: &str, inner: &str| format!("{ns}<{name}>{inner}{ns}</{name}>");
    let call = |args: &str| format!("{ns}<tool_call>\n{ns}<invoke name=\"f\">{args}{ns}</invoke>\n{ns}</tool_call>");
    let point = el("point", &format!("{}{}", el("x", "3"), el("label", "a b")));
    let good = [
        (call(&point), json!({"point": {"x": 3, "label": "a b"}})),
        (
            call(&format!("{point}{}", el("ids", &format!("{}{}", el("item", "1"), el("item", "2"))))),
            json!({"point": {"x": 3, "label": "a b"}, "ids": [1, 2]}),
        ),
        (call(&el("point", "{\"x\": 4}")), json!({"point": {"x": 4}})),
    ];
    for (text, arguments) in &good {
        assert_eq!(accepts(&vocab, &grammar, text), Ok(true), "{text}");
        let parsed = parlance::parse(&format, &request, text);
        assert_eq!(parsed.tool_calls.len(), 1, "{text}");
        assert_eq!(parsed.tool_calls[0].arguments_value.as_ref(), Some(arguments), "{text}");
    }
    let items = |n: usize| el("ids", &el("item", "1").repeat(n));
    for bad in [
        call(&el("point", &el("label", "a"))), // a required member missing
        call(&el("point", &el("x", "three"))), // not an integer
        call(&el("point", &el("y", "3"))),     // no such member
        call(&format!("{point}{}", items(3))), // more items than maxItems
        call(&format!("{point}{}", el("ids", &el("entry", "1")))), // items are `item` elements
    ] {
        assert_eq!(accepts(&vocab, &grammar, &bad), Ok(false), "{bad}");
    }
}
