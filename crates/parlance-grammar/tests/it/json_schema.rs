//! JSON Schema: hand-written cases, and real MaskBench schemas from the W1 workload (valid instances
//! accepted, invalid ones rejected, token by token with a real vocabulary when available).

use crate::common::{real_vocab, synthetic_vocab};
use parlance_grammar::{CompiledGrammar, JsonSchemaOptions, Matcher, SchemaError, TokenVocab, Whitespace};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

fn compile(vocab: &Arc<TokenVocab>, schema: &Value, options: &JsonSchemaOptions) -> Arc<CompiledGrammar> {
    let (g, _) =
        CompiledGrammar::from_json_schema(vocab.clone(), schema, options).unwrap_or_else(|e| panic!("{schema}: {e}"));
    Arc::new(g)
}

fn accepts(g: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = Matcher::new(g.clone()).expect("matcher");
    m.accept_bytes(text.as_bytes()) && m.is_accepting()
}

#[track_caller]
fn check(schema: Value, good: &[&str], bad: &[&str]) {
    let vocab = synthetic_vocab();
    let g = compile(&vocab, &schema, &JsonSchemaOptions::default());
    for s in good {
        assert!(accepts(&g, s), "{schema}\nshould accept {s}");
    }
    for s in bad {
        assert!(!accepts(&g, s), "{schema}\nshould reject {s}");
    }
}

#[test]
fn objects_follow_required_order_and_additional_properties() {
    let props = json!({"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}});
    check(
        json!({"type": "object", "properties": props, "required": ["b"]}),
        &[r#"{"b":"x"}"#, r#"{"a":1,"b":"x","c":true}"#, r#"{ "b" : "x" , "zz": [1, {"q": null}] }"#],
        &[r#"{}"#, r#"{"a":1}"#, r#"{"b":"x","a":1}"#, r#"{"b":1}"#, r#"{"b":"x","c":true,"a":1}"#],
    );
    check(
        json!({"type": "object", "properties": props, "additionalProperties": false}),
        &[r#"{}"#, r#"{"c":false}"#, r#"{"a":-3,"c":false}"#],
        &[r#"{"d":1}"#, r#"{"a":1,"a":2}"#, r#"{"ab":1}"#],
    );
    check(
        json!({"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": {"type": "number"}}),
        &[r#"{"a":null,"x":1.5}"#, r#"{"x":1,"y":2}"#, r#"{"aa":3}"#],
        &[r#"{"x":"s"}"#, r#"{"a":1}"#],
    );
}

#[test]
fn arrays_strings_numbers_and_enums() {
    check(
        json!({"type": "array", "items": {"type": "integer", "minimum": -2, "maximum": 20}, "minItems": 1, "maxItems": 3}),
        &["[1]", "[-2,20,0]"],
        &["[]", "[1,2,3,4]", "[21]", "[-3]", "[1.5]"],
    );
    check(
        json!({"prefixItems": [{"const": "a"}, {"type": "number"}], "items": false, "type": "array"}),
        &[r#"["a"]"#, r#"["a",2]"#],
        &[r#"["a",2,3]"#, r#"[2]"#],
    );
    check(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &[r#""ab""#, r#""a\nb""#, r#""éé""#],
        &[r#""a""#, r#""abcd""#],
    );
    check(json!({"type": "string", "pattern": "^[a-z]+\\d$"}), &[r#""abc1""#], &[r#""abc""#, r#""1""#]);
    check(json!({"type": "string", "pattern": "x\"y"}), &[r#""ax\"yb""#], &[r#""axyb""#]);
    check(json!({"type": "string", "format": "date"}), &[r#""2024-02-29""#], &[r#""2024-2-29""#]);
    check(json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1}), &["0.5", "1", "1.0"], &["0", "1.5", "-0.5"]);
    check(
        json!({"type": "number", "multipleOf": 0.01, "minimum": 0}),
        &["1", "1.5", "2.25", "3.100"],
        &["1.005", "-1", "1e2"],
    );
    check(json!({"type": "number", "minimum": 0.25, "maximum": 2}), &["0.25", "1.9", "2"], &["0.2", "2.1"]);
    check(
        json!({"enum": ["a", 1, null, {"k": [true]}]}),
        &[r#""a""#, "1", "null", r#"{"k":[true]}"#],
        &[r#""b""#, "2"],
    );
    check(json!({"type": ["string", "null"], "maxLength": 1}), &["null", r#""x""#], &[r#""xy""#, "1"]);
}

#[test]
fn pattern_properties_and_intersected_string_constraints() {
    check(
        json!({"type": "object", "properties": {"x_1": {"type": "integer"}},
               "patternProperties": {"^x_": {"type": "integer", "maximum": 5}, "^s": {"type": "string"}}}),
        &[r#"{"x_1":3}"#, r#"{"x_2":4,"sa":"q","other":[1]}"#, r#"{"zz":true}"#],
        &[r#"{"x_1":7}"#, r#"{"x_2":"a"}"#, r#"{"sa":1}"#],
    );
    check(
        json!({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "null"}}, "additionalProperties": false}),
        &[r#"{"ab":null}"#, r#"{}"#],
        &[r#"{"Ab":null}"#, r#"{"ab":1}"#],
    );
    check(
        json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}),
        &[r#""abc""#, r#""a""#],
        &[r#""abcd""#, r#""ab1""#, "\"\""],
    );
    check(
        json!({"type": "string", "format": "date", "pattern": "^2024"}),
        &[r#""2024-01-02""#],
        &[r#""2023-01-02""#, r#""2024""#],
    );
}

#[test]
fn dependencies_are_exact() {
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
               "dependencies": {"a": ["b"], "c": {"properties": {"b": {"maximum": 3}}}}}),
        &[r#"{}"#, r#"{"b":9}"#, r#"{"a":1,"b":2}"#, r#"{"b":3,"c":1}"#, r#"{"c":1}"#],
        &[r#"{"a":1}"#, r#"{"b":4,"c":1}"#],
    );
}

#[test]
fn combinators_and_references() {
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}),
        &["12", r#""a""#],
        &[r#""ab""#, "true"],
    );
    check(
        json!({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"a": {"minimum": 5}}}]}),
        &[r#"{"a":5}"#],
        &[r#"{"a":4}"#, r#"{}"#],
    );
    check(
        json!({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                                   "additionalProperties": false}}, "$ref": "#/$defs/node"}),
        &[r#"{"next":{"next":{"v":2}},"v":1}"#, "{}"],
        &[r#"{"next":{"w":1}}"#],
    );
    check(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}), &[r#""s""#, "3"], &["true"]);
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        &[r#"{"a":1}"#, r#"{"b":2,"c":3}"#],
        &[r#"{"a":1,"b":2}"#, r#"{}"#, r#"{"c":3}"#],
    );
    check(
        json!({"type": "object", "properties": {"r": {"type": "number"}, "l": {"type": "number"}, "w": {"type": "number"}},
               "oneOf": [{"required": ["r"]}, {"required": ["l", "w"]}]}),
        &[r#"{"r":1}"#, r#"{"l":1,"w":2}"#, r#"{"r":1,"l":2}"#],
        &[r#"{"r":1,"l":1,"w":2}"#, r#"{"l":1}"#],
    );
}

#[test]
fn branch_properties_come_before_sibling_properties() {
    // As `allOf` merges its subschemas before the siblings, a `oneOf` branch's own properties may
    // come first (MaskBench's `calculate_area` schemas write `shape` from the branch before
    // `radius`), or in the parent's order.
    check(
        json!({"type": "object", "properties": {"radius": {"type": "number"}, "shape": {"type": "string"}},
               "oneOf": [{"properties": {"shape": {"const": "circle"}}, "required": ["radius"]},
                         {"properties": {"shape": {"const": "square"}}, "required": ["side"]}]}),
        &[r#"{"shape":"circle","radius":10}"#, r#"{"radius":10,"shape":"circle"}"#, r#"{"radius":10}"#],
        &[r#"{"shape":"square","radius":10}"#],
    );
}

#[test]
fn unsupported_keywords_are_errors_naming_keyword_and_pointer() {
    let vocab = synthetic_vocab();
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true}}});
    let e = CompiledGrammar::from_json_schema(vocab.clone(), &schema, &JsonSchemaOptions::default()).unwrap_err();
    assert!(e.to_string().contains("#/properties/a/uniqueItems") && e.to_string().contains("`uniqueItems`"), "{e}");
    let lenient = JsonSchemaOptions { lenient: true, ..Default::default() };
    let (_, report) = CompiledGrammar::from_json_schema(vocab.clone(), &schema, &lenient).expect("lenient compiles");
    assert_eq!(report.ignored, vec![("#/properties/a/uniqueItems".to_string(), "uniqueItems".to_string())]);
    assert!(report.enforced.contains("properties") && report.enforced.contains("type"));
    let overlapping = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
    let e = parlance_grammar::json_schema_to_grammar(&overlapping, &JsonSchemaOptions::default()).unwrap_err();
    assert!(matches!(e, SchemaError::Unsupported { ref keyword, .. } if keyword == "oneOf"), "{e}");
}

#[test]
fn whitespace_options() {
    let vocab = synthetic_vocab();
    let schema = json!({"type": "object", "properties": {"a": {"type": "array"}}, "required": ["a"]});
    let compact =
        compile(&vocab, &schema, &JsonSchemaOptions { whitespace: Whitespace::Compact, ..Default::default() });
    assert!(accepts(&compact, r#"{"a":[1,2]}"#) && !accepts(&compact, r#"{"a": [1,2]}"#));
    let fixed = Whitespace::Fixed { item: ", ".into(), key: ": ".into() };
    let fixed = compile(&vocab, &schema, &JsonSchemaOptions { whitespace: fixed, ..Default::default() });
    assert!(accepts(&fixed, r#"{"a": [1, 2]}"#) && !accepts(&fixed, r#"{"a":[1,2]}"#));
    let flexible = compile(&vocab, &schema, &JsonSchemaOptions::default());
    assert!(accepts(&flexible, "{\n  \"a\" :[ 1 ,2 ]\n}") && accepts(&flexible, r#"{"a":[1,2]}"#));
}

#[test]
fn pathological_schemas_end_with_clear_errors() {
    let vocab = synthetic_vocab();
    let mut deep = json!({"type": "integer"});
    for _ in 0..500 {
        deep = json!({"type": "array", "items": deep});
    }
    let e = CompiledGrammar::from_json_schema(vocab.clone(), &deep, &JsonSchemaOptions::default()).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    let no_base =
        json!({"$ref": "#/$defs/a", "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}});
    let e = CompiledGrammar::from_json_schema(vocab.clone(), &no_base, &JsonSchemaOptions::default()).unwrap_err();
    assert!(e.to_string().contains("`$ref` recursion with no end"), "{e}");
    let huge_enum: Vec<Value> = (0..20_000).map(|i| json!(format!("value-{i}"))).collect();
    let r =
        CompiledGrammar::from_json_schema(vocab.clone(), &json!({"enum": huge_enum}), &JsonSchemaOptions::default());
    assert!(r.as_ref().is_ok_or_limit(), "a large enum compiles or hits a limit: {:?}", r.err());
    let catastrophic = json!({"type": "string", "pattern": "^(a|aa)*(a{1,30}){1,30}b$"});
    let _ = CompiledGrammar::from_json_schema(vocab, &catastrophic, &JsonSchemaOptions::default());
}

trait OkOrLimit {
    fn is_ok_or_limit(&self) -> bool;
}

impl<T> OkOrLimit for Result<&T, &parlance_grammar::CompileError> {
    fn is_ok_or_limit(&self) -> bool {
        match self {
            Ok(_) => true,
            Err(e) => e.to_string().contains("limit"),
        }
    }
}

fn workload() -> Option<Vec<Value>> {
    let path = std::env::var("PARLANCE_WORKLOADS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/workloads"));
    let path = path.join("w1_maskbench_subset.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipping: workload not found at {}", path.display());
        return None;
    };
    Some(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

/// Every 40th W1 schema: valid instances accepted and invalid ones rejected (byte level), unless the
/// schema is reported as unsupported.
#[test]
fn maskbench_schemas_accept_valid_and_reject_invalid() {
    let Some(rows) = workload() else { return };
    let vocab = synthetic_vocab();
    let (mut failures, mut checked) = (Vec::new(), 0);
    for row in rows.iter().step_by(40) {
        let id = row["id"].as_str().unwrap_or("?");
        let Ok((g, _)) =
            CompiledGrammar::from_json_schema(vocab.clone(), &row["schema"], &JsonSchemaOptions::default())
        else {
            continue;
        };
        let g = Arc::new(g);
        checked += 1;
        for v in row["valid"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !accepts(&g, v) {
                failures.push(format!("{id}: valid rejected: {v}"));
            }
        }
        for v in row["invalid"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if accepts(&g, v) {
                failures.push(format!("{id}: invalid accepted: {v}"));
            }
        }
    }
    assert!(checked >= 10, "only {checked} schemas compiled");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Token-level: W1 valid instances forced token by token with the Llama 3.1 vocabulary (greedy longest
/// match tokenization is enough: masks must allow any tokenization of a valid text).
#[test]
fn maskbench_valid_instances_pass_token_by_token() {
    let Some(rows) = workload() else { return };
    let Some((vocab, toks)) = real_vocab("llama3_1", "<|eot_id|>") else { return };
    let mut by_bytes: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    for (id, t) in toks.iter().enumerate() {
        if !t.is_empty() && !vocab.is_special(id as u32) {
            by_bytes.entry(t.as_slice()).or_insert(id as u32);
        }
    }
    let eos = vocab.eos_ids()[0];
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut failures = Vec::new();
    for row in rows.iter().skip(7).step_by(150) {
        let id = row["id"].as_str().unwrap_or("?");
        let Ok((g, _)) =
            CompiledGrammar::from_json_schema(vocab.clone(), &row["schema"], &JsonSchemaOptions::default())
        else {
            continue;
        };
        let g = Arc::new(g);
        for v in row["valid"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let bytes = v.as_bytes();
            let mut m = Matcher::new(g.clone()).expect("matcher");
            let mut pos = 0;
            while pos < bytes.len() {
                let len = (1..=bytes.len() - pos)
                    .rev()
                    .find(|&l| by_bytes.contains_key(&bytes[pos..pos + l]))
                    .expect("bytes covered");
                let t = by_bytes[&bytes[pos..pos + len]];
                m.fill_next_token_bitmask(&mut mask).expect("mask");
                if mask[t as usize / 32] >> (t % 32) & 1 == 0 || !m.accept_token(t) {
                    failures.push(format!("{id}: token at byte {pos} rejected in {v}"));
                    break;
                }
                pos += len;
            }
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            if pos == bytes.len() && mask[eos as usize / 32] >> (eos % 32) & 1 == 0 {
                failures.push(format!("{id}: EOS not allowed after {v}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn count_keywords_are_integers_or_errors_never_ignored() {
    // `2.0` is an integer since draft 6: enforced as 2.
    check(json!({"type": "string", "minLength": 2.0}), &["\"ab\""], &["\"a\""]);
    check(json!({"type": "array", "maxItems": 1.0}), &["[1]"], &["[1,2]"]);
    for (schema, pointer) in [
        (json!({"type": "string", "minLength": "x"}), "#/minLength"),
        (json!({"type": "string", "maxLength": -1}), "#/maxLength"),
        (json!({"type": "array", "minItems": 1.5}), "#/minItems"),
        (json!({"type": "number", "multipleOf": 0}), "#/multipleOf"),
    ] {
        let err = parlance_grammar::json_schema_to_grammar(&schema, &JsonSchemaOptions::default()).unwrap_err();
        let named = match &err {
            SchemaError::Invalid { pointer: p, .. } | SchemaError::Unsupported { pointer: p, .. } => p == pointer,
            _ => false,
        };
        assert!(named, "{schema}: {err}");
    }
}

#[test]
fn unsatisfiable_schemas_are_said_of_the_schema() {
    let vocab = synthetic_vocab();
    // Said of the keyword that leaves no value (see `schema_limits` for nested ones).
    for (schema, pointer) in [
        (json!(false), "#"),
        (json!({"type": []}), "#/type"),
        (json!({"type": "integer", "minimum": 5, "maximum": 1}), "#/minimum"),
    ] {
        let err = CompiledGrammar::from_json_schema(vocab.clone(), &schema, &JsonSchemaOptions::default()).unwrap_err();
        let shown = err.to_string();
        let want = format!("{pointer}: invalid schema: no JSON value satisfies the schema");
        assert!(shown.starts_with(&want), "{schema}: {shown}");
        assert!(!shown.contains("rule `"), "{shown}");
    }
}

#[test]
fn keys_are_checked_as_the_keys_they_spell() {
    // A key escaped as another spelling (`\u0061` is `a`, `\u0078` is `x`) must not pass for an
    // additional property: the independent validator is the judge of what is invalid, and what the
    // grammar accepts must be valid. Non-canonical spellings of additional keys are refused (a
    // narrowing the module docs list); canonical escapes of control characters stay accepted.
    let vocab = synthetic_vocab();
    let schemas = [
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
        json!({"type": "object", "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
        json!({"type": "object", "properties": {"a/b": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
        json!({"type": "object", "properties": {"é": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
    ];
    let instances = [
        r#"{"\u0061": 5}"#,
        r#"{"\u0078y": 5}"#,
        r#"{"a\/b": 5}"#,
        r#"{"\u00e9": 5}"#,
        r#"{"\u00E9": 5}"#,
        r#"{"a": "s"}"#,
        r#"{"b": 5}"#,
        r#"{"xy": "s"}"#,
        r#"{"a\nb": 5}"#,
        r#"{"a\u000bb": 5}"#,
        r#"{"\u0062": 5}"#,
    ];
    for schema in &schemas {
        let g = compile(&vocab, schema, &JsonSchemaOptions::default());
        let validator = jsonschema::validator_for(schema).expect("valid schema");
        for text in instances {
            let value: Value = serde_json::from_str(text).expect("JSON");
            if accepts(&g, text) {
                assert!(validator.is_valid(&value), "{schema}: the grammar accepts {text}, which is invalid");
            }
        }
        // Canonical spellings of valid instances are accepted.
        for text in [r#"{"b": 5}"#, r#"{"a\nb": 5}"#, r#"{"a\u000bb": 5}"#] {
            assert!(accepts(&g, text), "{schema}: {text}");
        }
    }
    // The refusals the fix makes, each of which the grammar accepted as an additional property.
    let g = compile(&vocab, &schemas[0], &JsonSchemaOptions::default());
    assert!(!accepts(&g, r#"{"\u0061": 5}"#));
    let g = compile(&vocab, &schemas[1], &JsonSchemaOptions::default());
    assert!(!accepts(&g, r#"{"\u0078y": 5}"#));
}

/// A tiny seeded generator (the tests must be reproducible without a `rand` dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// A spelling of `v` chosen at random: characters raw or escaped (short escapes, `\u` in either
/// case, surrogate pairs beyond the BMP), numbers with trailing zeros, whitespace between tokens;
/// with `free`, also exponent forms, shuffled keys, `\uDxxx` escapes (surrogate pairs) and `\u`
/// escapes of printable ASCII, which the grammar may refuse (narrowings the module docs list).
fn respell(v: &Value, rng: &mut Lcg, free: bool) -> String {
    let ws = |rng: &mut Lcg| [" ", "", "", "\n  "][rng.below(4)].to_string();
    match v {
        Value::Null | Value::Bool(_) => v.to_string(),
        Value::Number(n) => {
            let text = n.to_string();
            let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
            let zeros = "0".repeat(rng.below(3));
            match (rng.below(4), free) {
                (0, _) | (1, false) if frac.is_empty() && !text.contains('e') => {
                    if zeros.is_empty() {
                        text.clone()
                    } else {
                        format!("{int}.{zeros}")
                    }
                }
                (1, _) | (0, _) if !frac.is_empty() && !text.contains('e') => format!("{int}.{frac}{zeros}"),
                (2, true) if !text.contains('e') => {
                    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
                    let mantissa = format!("{digits}{frac}");
                    let mantissa = mantissa.trim_start_matches('0');
                    format!("{sign}{}e-{}", if mantissa.is_empty() { "0" } else { mantissa }, frac.len())
                }
                (3, true) if !text.contains('e') => format!("{text}E+0"),
                _ => text,
            }
        }
        Value::String(s) => {
            let mut out = String::from("\"");
            for c in s.chars() {
                let short = match c {
                    '"' => Some("\\\""),
                    '\\' => Some("\\\\"),
                    '\n' => Some("\\n"),
                    '\t' => Some("\\t"),
                    '/' => Some("\\/"),
                    _ => None,
                };
                let raw_ok = c >= ' ' && c != '"' && c != '\\';
                match rng.below(4) {
                    0 | 1 if raw_ok => out.push(c),
                    _ if !free && (c >= '\u{d000}' || c >= ' ' && c.is_ascii() && !matches!(c, '"' | '\\' | '/')) => {
                        out.push(c)
                    }
                    2 if short.is_some() => out.push_str(short.unwrap_or_default()),
                    k => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units).iter() {
                            out.push_str(&if k % 2 == 0 { format!("\\u{u:04x}") } else { format!("\\u{u:04X}") });
                        }
                    }
                }
            }
            out.push('"');
            out
        }
        Value::Array(items) => {
            let parts: Vec<String> =
                items.iter().map(|x| format!("{}{}{}", ws(rng), respell(x, rng, free), ws(rng))).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => {
            let mut members: Vec<(&String, &Value)> = m.iter().collect();
            if free && members.len() > 1 && rng.below(2) == 0 {
                members.reverse();
            }
            let parts: Vec<String> = members
                .iter()
                .map(|(k, x)| {
                    let key = respell(&Value::String((*k).clone()), rng, free);
                    format!("{}{key}{}:{}{}{}", ws(rng), ws(rng), ws(rng), respell(x, rng, free), ws(rng))
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
    }
}

#[test]
fn values_are_compared_as_values_by_the_grammar_and_the_validator() {
    // Issue 24.4: what the grammar accepts, the independent validator must find valid, for any
    // spelling of any value; and the spellings the module docs promise (escapes, surrogate pairs,
    // trailing zeros, whitespace) are accepted wherever the value is valid. Exponent forms,
    // reordered keys and `\uDxxx` escapes are generated too (`free`), and only the first half is
    // asserted of them.
    let vocab = synthetic_vocab();
    let astral = "a\u{1F600}\u{10348}";
    // (schema, values to spell, whether every admitted spelling of a valid value must be accepted)
    let cases: Vec<(Value, Vec<Value>, bool)> = vec![
        (
            json!({"type": "string", "minLength": 2}),
            vec![json!("\u{1F600}"), json!("\u{1F600}\u{1F600}"), json!("ab"), json!("a")],
            true,
        ),
        (
            json!({"type": "string", "maxLength": 1}),
            vec![json!("\u{1F600}"), json!("é"), json!("\u{1F600}\u{1F600}"), json!("")],
            true,
        ),
        (
            json!({"type": "string", "minLength": 3, "maxLength": 3}),
            vec![json!(astral), json!("a\"/"), json!("\u{1F600}\u{1F600}"), json!("abcd")],
            true,
        ),
        (json!({"const": 1.0}), vec![json!(1), json!(1.0), json!(2), json!(1.5), json!("1")], true),
        (json!({"const": 0.25}), vec![json!(0.25), json!(0.2), json!(0.5)], true),
        (json!({"const": 1e-7}), vec![json!(1e-7), json!(1e-6)], true),
        (
            json!({"enum": [2.0, "a/b", null, -3]}),
            vec![json!(2), json!("a/b"), json!(null), json!(-3), json!(3), json!("a")],
            true,
        ),
        (
            json!({"const": {"a": 1, "b": [1, "é"]}}),
            vec![json!({"a": 1, "b": [1, "é"]}), json!({"a": 1, "b": [1, "e"]}), json!({"a": 1})],
            true,
        ),
        (json!({"enum": [astral, "x\n\"y\\"]}), vec![json!(astral), json!("x\n\"y\\"), json!("a")], true),
        (
            json!({"type": "object", "properties": {"é": {"const": "ü"}}, "required": ["é"]}),
            vec![json!({"é": "ü"}), json!({"é": "u"})],
            false,
        ),
        (json!({"type": "integer", "minimum": 3}), vec![json!(3), json!(100), json!(2)], false),
        (json!({"type": "number", "maximum": 1e2}), vec![json!(1), json!(100), json!(100.5)], false),
        (json!({"type": "string", "pattern": "^.é$"}), vec![json!("\u{1F600}é"), json!("aé"), json!("é")], false),
    ];
    let mut rng = Lcg(24);
    let mut accepted = 0;
    for (schema, values, admitted) in &cases {
        let g = compile(&vocab, schema, &JsonSchemaOptions::default());
        let validator = jsonschema::validator_for(schema).expect("valid schema");
        for value in values {
            let valid = validator.is_valid(value);
            for round in 0..200 {
                let free = round % 2 == 1;
                let text = respell(value, &mut rng, free);
                let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                // The judge is asked about the value as generated: jsonschema 0.33 built with
                // serde_json's `preserve_order` compares objects' keys in order, so a reordered
                // spelling would be judged wrongly. Other spellings must get the same verdict.
                if !free {
                    assert_eq!(validator.is_valid(&parsed), valid, "{text} is a spelling of {value}");
                }
                let verdict = accepts(&g, &text);
                assert!(!verdict || valid, "{schema}: the grammar accepts {text}, which is invalid");
                if *admitted && valid && !free {
                    assert!(verdict, "{schema}: the grammar refuses {text}, a spelling of the valid {value}");
                }
                accepted += usize::from(verdict);
            }
        }
    }
    assert!(accepted > 1000, "{accepted}");
    // Surrogate pairs: a `const` / `enum` value's spelling; under a length bound no `\uDxxx` at all.
    let pair = r#""\ud83d\uDE00""#;
    check(json!({"type": "string"}), &[pair, r#""\u00e9""#], &[]);
    check(json!({"enum": ["\u{1F600}"]}), &[pair, "\"\u{1F600}\""], &[r#""\ud83d""#]);
    check(
        json!({"type": "string", "maxLength": 1}),
        &["\"\u{1F600}\"", r#""\u00e9""#],
        &[r#""\ud83d""#, pair, r#""\ud7ff""#],
    );
}

// See: issue 15 (`format: date` accepted February 30, and February 29 of a non-leap year).
#[test]
fn dates_are_days_of_the_calendar_as_the_validator_says() {
    let vocab = synthetic_vocab();
    for format in ["date", "date-time"] {
        let schema = json!({"type": "string", "format": format});
        let g = compile(&vocab, &schema, &JsonSchemaOptions::default());
        let validator = jsonschema::options().should_validate_formats(true).build(&schema).expect("valid schema");
        let mut valid = 0;
        for year in [0, 4, 100, 400, 1900, 1996, 2000, 2023, 2024, 2100, 2400, 9996] {
            for month in 0..=13 {
                for day in 0..=32 {
                    let date = format!("{year:04}-{month:02}-{day:02}");
                    let text = if format == "date" { format!("\"{date}\"") } else { format!("\"{date}T12:00:00Z\"") };
                    let value: Value = serde_json::from_str(&text).expect("a JSON string");
                    let judged = validator.is_valid(&value);
                    assert_eq!(accepts(&g, &text), judged, "{format}: {text} (validator: {judged})");
                    valid += usize::from(judged);
                }
            }
        }
        // 12 years, 8 of them leap years (0, 4, 400, 1996, 2000, 2024, 2400, 9996).
        assert_eq!(valid, 12 * 365 + 8, "{format}");
    }
}

// See: issue 15 (a branch that narrows a property of its parent moved it first in the key order,
// so instances in the parent's own order were refused).
#[test]
fn a_branch_narrowing_a_parent_property_keeps_the_parents_order_too() {
    let parent = |combinator: &str| {
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}},
               combinator: [{"properties": {"c": {"const": "x"}}}], "additionalProperties": false})
    };
    for combinator in ["anyOf", "oneOf", "allOf"] {
        check(
            parent(combinator),
            &[r#"{"a":"1","b":"2","c":"x"}"#, r#"{"c":"x","a":"1","b":"2"}"#, r#"{"a":"1"}"#, r#"{"c":"x"}"#],
            &[r#"{"a":"1","b":"2","c":"y"}"#, r#"{"c":"y"}"#, r#"{"a":"1","c":"x","d":"2"}"#],
        );
    }
}

#[test]
fn nested_narrowing_branches_cost_linear_not_exponential() {
    // Each level narrows `y` in an `allOf`: two key orders per level, 2^14 orderings of the
    // whole, which the grammar holds by sharing each level's members between its two orders.
    let mut schema = json!({"type": "string"});
    for _ in 0..14 {
        schema = json!({"type": "object", "properties": {"x": schema, "y": {"type": "string"}}, "required": ["x", "y"],
                        "allOf": [{"properties": {"y": {"const": "v"}}}], "additionalProperties": false});
    }
    let started = std::time::Instant::now();
    let g = compile(&synthetic_vocab(), &schema, &JsonSchemaOptions::default());
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    let (mut yx, mut xy) = (String::from("\"s\""), String::from("\"s\""));
    for level in 0..14 {
        yx = format!(r#"{{"y":"v","x":{yx}}}"#);
        // Alternate the orders level by level: each level may take either.
        xy = if level % 2 == 0 { format!(r#"{{"x":{xy},"y":"v"}}"#) } else { format!(r#"{{"y":"v","x":{xy}}}"#) };
    }
    assert!(accepts(&g, &yx) && accepts(&g, &xy));
    assert!(!accepts(&g, &xy.replacen("\"v\"", "\"w\"", 1)));
}

// See: issue 15 (`uniqueItems` was refused outright; W1 has arrays of distinct enum strings).
#[test]
fn unique_items_of_a_few_strings_are_exact() {
    let vocab = synthetic_vocab();
    let letters = ["a", "b", "c", "d"];
    for (min, max) in [(0, None), (1, Some(2)), (2, None), (0, Some(0))] {
        let mut schema = json!({"type": "array", "items": {"type": "string", "enum": ["a", "b", "c", "b"]}, "uniqueItems": true, "minItems": min});
        if let Some(max) = max {
            schema["maxItems"] = json!(max);
        }
        let g = compile(&vocab, &schema, &JsonSchemaOptions::default());
        let validator = jsonschema::validator_for(&schema).expect("valid schema");
        // Every array of up to four of the letters, a `d` (not in the enum) and repeats included.
        let mut arrays: Vec<Vec<&str>> = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<&str>> = arrays
                .iter()
                .filter(|a| a.len() == arrays.last().map_or(0, Vec::len))
                .flat_map(|a| letters.iter().map(move |l| [a.clone(), vec![*l]].concat()))
                .collect();
            arrays.extend(longer);
        }
        let mut valid = 0;
        for a in &arrays {
            let value = json!(a);
            let judged = validator.is_valid(&value);
            assert_eq!(accepts(&g, &value.to_string()), judged, "{schema}: {value}");
            valid += usize::from(judged);
        }
        assert!(max == Some(0) || valid > 0, "{schema}");
    }
    // Uniqueness is by value: another spelling of a string is that string again.
    check(
        json!({"type": "array", "items": {"enum": ["é", "b"]}, "uniqueItems": true}),
        &[r#"["é","b"]"#, r#"["\u00e9"]"#, "[]"],
        &[r#"["é","\u00e9"]"#, r#"["b","b"]"#],
    );
    // Strings of any kind, or more than a few, are still refused.
    let vocab = synthetic_vocab();
    for items in [json!({"type": "string"}), json!({"enum": (0..9).map(|i| i.to_string()).collect::<Vec<_>>()})] {
        let schema = json!({"type": "array", "items": items, "uniqueItems": true});
        let err = CompiledGrammar::from_json_schema(vocab.clone(), &schema, &JsonSchemaOptions::default()).unwrap_err();
        assert!(err.to_string().contains("uniqueItems"), "{err}");
    }
}

#[test]
fn property_counts_are_exact() {
    // `minProperties` / `maxProperties` (issue 15) against the validator, on every object of up to
    // five members written in the grammar's order (declared members first, then extra ones).
    let vocab = synthetic_vocab();
    let names = ["a", "b", "c", "x", "y"];
    let additional = [json!(false), json!(true), json!({"type": "integer"})];
    let bounds: [(Option<u64>, Option<u64>); 7] = [
        (Some(2), None),
        (None, Some(1)),
        (Some(1), Some(2)),
        (Some(3), Some(3)),
        (None, Some(0)),
        (Some(4), None),
        (Some(3), Some(1)),
    ];
    let mut checked = 0;
    for extra in &additional {
        for required in [json!([]), json!(["b"])] {
            for (least, most) in bounds {
                let mut schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
                    "required": required, "additionalProperties": extra});
                if let Some(n) = least {
                    schema["minProperties"] = json!(n);
                }
                if let Some(n) = most {
                    schema["maxProperties"] = json!(n);
                }
                // A schema no object satisfies is said to be one.
                let g = match CompiledGrammar::from_json_schema(vocab.clone(), &schema, &JsonSchemaOptions::default()) {
                    Ok((g, _)) => Some(Arc::new(g)),
                    Err(e) if e.to_string().contains("no JSON value satisfies") => None,
                    Err(e) => panic!("{schema}: {e}"),
                };
                let validator = jsonschema::validator_for(&schema).expect("valid schema");
                for subset in 0u32..32 {
                    let members: Vec<String> = names
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| subset & (1 << i) != 0)
                        .map(|(_, n)| format!("\"{n}\":1"))
                        .collect();
                    let text = format!("{{{}}}", members.join(","));
                    let value: Value = serde_json::from_str(&text).expect("json");
                    let accepted = g.as_ref().is_some_and(|g| accepts(g, &text));
                    assert_eq!(accepted, validator.is_valid(&value), "{schema}: {text}");
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 3 * 2 * 7 * 32);
    // A `const` or `enum` object keeps the counts itself: refused where a value breaks them.
    check(json!({"enum": [{"a": 1}, 2], "maxProperties": 1}), &[r#"{"a":1}"#, "2"], &[r#"{}"#]);
    let e = CompiledGrammar::from_json_schema(
        vocab.clone(),
        &json!({"enum": [{"a": 1, "b": 2}], "maxProperties": 1}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("maxProperties"), "{e}");
    // Counting more extra members than the grammar can unroll is refused, naming the keyword.
    let e = CompiledGrammar::from_json_schema(
        vocab.clone(),
        &json!({"type": "object", "additionalProperties": true, "maxProperties": 1000}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("#/maxProperties") && e.to_string().contains("`maxProperties`"), "{e}");
}

#[test]
fn fractional_bounds_of_either_sign_and_exclusive_are_exact() {
    // Issue 15: bounds with fractions, negative or exclusive (`minimum: -0.5`, `exclusiveMaximum:
    // 2.75`), against the validator on numbers from -3 to 3 in steps of 0.05, spelled positionally
    // with and without trailing zeros.
    let vocab = synthetic_vocab();
    let bounds = [-2.5, -1.0, -0.5, -0.25, 0.0, 0.1, 0.5, 1.0, 1.25, 2.75];
    let mut values: Vec<String> = Vec::new();
    for i in -60i32..=60 {
        let (sign, magnitude) = (if i < 0 { "-" } else { "" }, i.unsigned_abs());
        let (whole, hundredths) = (magnitude * 5 / 100, magnitude * 5 % 100);
        values.push(format!("{sign}{whole}.{hundredths:02}"));
        values.push(match hundredths {
            0 => format!("{sign}{whole}"),
            h if h % 10 == 0 => format!("{sign}{whole}.{}", h / 10),
            h => format!("{sign}{whole}.{h:02}0"),
        });
    }
    let mut schemas = 0;
    for (i, &lo) in bounds.iter().enumerate() {
        for &hi in &bounds[i..] {
            for shape in 0..6 {
                let schema = match shape {
                    0 => json!({"type": "number", "minimum": lo, "maximum": hi}),
                    1 => json!({"type": "number", "exclusiveMinimum": lo, "maximum": hi}),
                    2 => json!({"type": "number", "minimum": lo, "exclusiveMaximum": hi}),
                    3 => json!({"type": "number", "exclusiveMinimum": lo, "exclusiveMaximum": hi}),
                    4 => json!({"type": "number", "exclusiveMinimum": lo}),
                    _ => json!({"type": "number", "maximum": hi}),
                };
                // Only schemas with a fraction somewhere take this path; the others are checked too.
                let g = match CompiledGrammar::from_json_schema(vocab.clone(), &schema, &JsonSchemaOptions::default()) {
                    Ok((g, _)) => Some(Arc::new(g)),
                    Err(e) if e.to_string().contains("no JSON value satisfies") => None,
                    Err(e) => panic!("{schema}: {e}"),
                };
                let validator = jsonschema::validator_for(&schema).expect("valid schema");
                for text in &values {
                    let value: Value = serde_json::from_str(text).expect("number");
                    let accepted = g.as_ref().is_some_and(|g| accepts(g, text));
                    assert_eq!(accepted, validator.is_valid(&value), "{schema}: {text}");
                }
                schemas += 1;
            }
        }
    }
    assert_eq!(schemas, 55 * 6);
    // Exponents in a bound are read exactly.
    check(
        json!({"type": "number", "minimum": 2.5e-1, "maximum": 1.5e1}),
        &["0.25", "15", "14.99", "3"],
        &["0.2499", "15.01"],
    );
}
