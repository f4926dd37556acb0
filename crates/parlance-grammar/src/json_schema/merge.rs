//! `allOf` merging: two schemas into one whose instances are exactly those valid for both, where that
//! is expressible; otherwise an error naming the keyword that could not be merged.

use serde_json::{Map, Value, json};

/// Keywords whose values must simply be equal in both schemas.
const EQUAL_ONLY: &[&str] = &["pattern", "format", "const", "$ref", "contentEncoding"];

fn is_true(v: &Value) -> bool {
    v == &Value::Bool(true) || v.as_object().is_some_and(|m| m.is_empty())
}

/// `allOf: [a, b]` as one schema, or the keyword that could not be merged.
pub(crate) fn merge(a: &Value, b: &Value) -> Result<Value, String> {
    if is_true(a) {
        return Ok(b.clone());
    }
    if is_true(b) {
        return Ok(a.clone());
    }
    let (Some(am), Some(bm)) = (a.as_object(), b.as_object()) else {
        return Ok(Value::Bool(false));
    };
    let mut out = am.clone();
    for (k, bv) in bm {
        let Some(av) = am.get(k) else {
            if k == "properties" || k == "additionalProperties" || k == "patternProperties" {
                continue; // merged below, together
            }
            out.insert(k.clone(), bv.clone());
            continue;
        };
        if av == bv {
            continue;
        }
        let merged = match k.as_str() {
            "properties" | "additionalProperties" | "patternProperties" => continue,
            "required" => {
                let mut r: Vec<Value> = av.as_array().cloned().unwrap_or_default();
                for x in bv.as_array().into_iter().flatten() {
                    if !r.contains(x) {
                        r.push(x.clone());
                    }
                }
                Value::Array(r)
            }
            "type" => {
                let ta = types(av);
                let tb = types(bv);
                let mut t = Vec::new();
                for x in &ta {
                    for y in &tb {
                        let m = match (x.as_str(), y.as_str()) {
                            (p, q) if p == q => Some(p),
                            ("integer", "number") | ("number", "integer") => Some("integer"),
                            _ => None,
                        };
                        if let Some(m) = m
                            && !t.contains(&m)
                        {
                            t.push(m);
                        }
                    }
                }
                json!(t)
            }
            "enum" => {
                let bs = bv.as_array().cloned().unwrap_or_default();
                Value::Array(av.as_array().into_iter().flatten().filter(|x| bs.contains(x)).cloned().collect())
            }
            "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties"
                if av.is_number() && bv.is_number() =>
            {
                if av.as_f64() >= bv.as_f64() {
                    av.clone()
                } else {
                    bv.clone()
                }
            }
            "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties"
                if av.is_number() && bv.is_number() =>
            {
                if av.as_f64() <= bv.as_f64() {
                    av.clone()
                } else {
                    bv.clone()
                }
            }
            "items" | "additionalItems" if av.is_object() || av.is_boolean() => {
                if bv.is_object() || bv.is_boolean() {
                    json!({"allOf": [av, bv]})
                } else {
                    return Err(k.clone());
                }
            }
            "anyOf" | "oneOf" | "allOf" => {
                // Keep one here, push the other into allOf so that it is distributed later.
                let mut all = out.get("allOf").and_then(Value::as_array).cloned().unwrap_or_default();
                all.push(json!({ k.clone(): bv }));
                if k == "allOf" {
                    all.extend(av.as_array().cloned().unwrap_or_default());
                    all.retain(|x| x.get("allOf") != Some(bv));
                    all.extend(bv.as_array().cloned().unwrap_or_default());
                }
                out.insert("allOf".into(), Value::Array(all));
                continue;
            }
            "title" | "description" | "default" | "examples" | "$comment" | "$schema" | "$id" | "id" => continue,
            // Two different constants: nothing satisfies both.
            "const" => return Ok(Value::Bool(false)),
            k if EQUAL_ONLY.contains(&k) => return Err(k.to_string()),
            k => return Err(k.to_string()),
        };
        out.insert(k.clone(), merged);
    }
    merge_properties(am, bm, &mut out)?;
    Ok(Value::Object(out))
}

fn types(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => Vec::new(),
    }
}

/// `properties` and `additionalProperties` of both sides. A property one side does not declare must
/// satisfy that side's `additionalProperties`.
fn merge_properties(
    am: &Map<String, Value>,
    bm: &Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    let has = |m: &Map<String, Value>| {
        m.contains_key("properties") || m.contains_key("additionalProperties") || m.contains_key("patternProperties")
    };
    if !has(am) && !has(bm) {
        return Ok(());
    }
    if am.contains_key("patternProperties") && bm.contains_key("patternProperties") {
        return Err("patternProperties".into());
    }
    let empty = Map::new();
    let pa = am.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let pb = bm.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let add_a = am.get("additionalProperties").cloned().unwrap_or(Value::Bool(true));
    let add_b = bm.get("additionalProperties").cloned().unwrap_or(Value::Bool(true));
    // With patternProperties on one side, only properties both sides declare are merged exactly.
    if (am.contains_key("patternProperties") && (!is_true(&add_a) || pb.keys().any(|k| !pa.contains_key(k))))
        || (bm.contains_key("patternProperties") && (!is_true(&add_b) || pa.keys().any(|k| !pb.contains_key(k))))
    {
        return Err("patternProperties".into());
    }
    let mut props = Map::new();
    for (k, v) in pa {
        let other = pb.get(k).cloned().unwrap_or_else(|| add_b.clone());
        props.insert(k.clone(), merge(v, &other).unwrap_or_else(|_| json!({"allOf": [v, other]})));
    }
    for (k, v) in pb {
        if !pa.contains_key(k) {
            props.insert(k.clone(), merge(&add_a, v).unwrap_or_else(|_| json!({"allOf": [add_a, v]})));
        }
    }
    if !props.is_empty() {
        out.insert("properties".into(), Value::Object(props));
    }
    let add = merge(&add_a, &add_b).unwrap_or_else(|_| json!({"allOf": [add_a, add_b]}));
    if is_true(&add) {
        out.remove("additionalProperties");
    } else {
        out.insert("additionalProperties".into(), add);
    }
    if let Some(pp) = am.get("patternProperties").or(bm.get("patternProperties")) {
        out.insert("patternProperties".into(), pp.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_required_types_and_bounds() {
        let m = merge(
            &json!({"type": ["number", "string"], "required": ["a"], "minimum": 1}),
            &json!({"type": "integer", "required": ["b"], "minimum": 3, "maximum": 9}),
        )
        .expect("merges");
        assert_eq!(m, json!({"type": ["integer"], "required": ["a", "b"], "minimum": 3, "maximum": 9}));
    }

    #[test]
    fn closed_side_constrains_the_other_sides_properties() {
        let m = merge(
            &json!({"properties": {"a": {"type": "string"}}, "additionalProperties": false}),
            &json!({"properties": {"b": {"type": "string"}}}),
        )
        .expect("merges");
        assert_eq!(m["properties"]["b"], json!(false));
        assert_eq!(m["additionalProperties"], json!(false));
    }

    #[test]
    fn conflicting_patterns_are_reported() {
        assert_eq!(merge(&json!({"pattern": "a"}), &json!({"pattern": "b"})), Err("pattern".into()));
    }
}
