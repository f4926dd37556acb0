//! Request JSON to template values, with transformers' message normalization on the way.
//!
//! Rendering converts every message each time, so this is on the hot path: values are built
//! directly from `serde_json` (not through serde's serializer), and the small objects that chat
//! data is made of become `SmallMap`s — insertion-ordered, looked up by a linear scan, which beats
//! hashing for a handful of keys. Large objects use minijinja's own (hashed) map.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use serde_json::Value as Json;

/// Objects with at most this many keys become `SmallMap`s.
const SMALL_MAP_MAX: usize = 16;

/// Names a message's reasoning may come under; the first is what templates read.
pub(crate) const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// An insertion-ordered map with linear lookup, for the small objects of chat data.
#[derive(Debug)]
struct SmallMap {
    entries: Vec<(Value, Value)>,
}

impl Object for SmallMap {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str() {
            Some(key) => self.get_value_by_str(key),
            None => self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        }
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<Value> {
        self.entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let this = Arc::clone(self);
        Enumerator::RevKeyValueIter(Box::new((0..self.entries.len()).map(move |i| this.entries[i].clone())))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.entries.len())
    }
}

fn map_value(entries: Vec<(Value, Value)>) -> Value {
    if entries.len() <= SMALL_MAP_MAX { Value::from_object(SmallMap { entries }) } else { Value::from_pairs(entries) }
}

/// Any JSON value as a template value.
pub(crate) fn to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::from(items.iter().map(to_value).collect::<Vec<_>>()),
        Json::Object(map) => map_value(map.iter().map(|(k, v)| (Value::from(k.as_str()), to_value(v))).collect()),
    }
}

/// A message as transformers hands it to the template: top-level `null` keys dropped, and the
/// reasoning (first non-null of `REASONING_FIELDS`) offered as in Python's
/// `{"thinking": reasoning, **message, "reasoning_content": reasoning}`; `keep_nulls` keeps the
/// `null` keys (`RenderOptions::keep_null_keys`).
pub(crate) fn message_value(message: &serde_json::Map<String, Json>, keep_nulls: bool) -> Value {
    let reasoning = REASONING_FIELDS.iter().find_map(|f| message.get(*f).filter(|v| !v.is_null()));
    let mut entries: Vec<(Value, Value)> = Vec::with_capacity(message.len() + 2);
    if let Some(reasoning) = reasoning {
        let thinking = message.get("thinking").filter(|v| !v.is_null()).unwrap_or(reasoning);
        entries.push((Value::from("thinking"), to_value(thinking)));
    }
    for (key, item) in message {
        if (item.is_null() && !keep_nulls) || (reasoning.is_some() && key == "thinking") {
            continue;
        }
        entries.push((Value::from(key.as_str()), to_value(item)));
    }
    // A non-null `reasoning_content` is the reasoning and keeps its place; otherwise it goes last.
    let has_reasoning_content = message.get("reasoning_content").is_some_and(|v| !v.is_null());
    if let (Some(reasoning), false) = (reasoning, has_reasoning_content) {
        entries.push((Value::from("reasoning_content"), to_value(reasoning)));
    }
    map_value(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(value: &Value) -> Vec<String> {
        value.try_iter().unwrap().map(|k| k.to_string()).collect()
    }

    #[test]
    fn message_normalization_matches_python_key_order() {
        // Python: {"thinking": r, **m, "reasoning_content": r} with None keys dropped first.
        let m = serde_json::json!({"role": "assistant", "content": null, "reasoning": "r1"});
        let v = message_value(m.as_object().unwrap(), false);
        assert_eq!(keys(&v), ["thinking", "role", "reasoning", "reasoning_content"]);
        assert_eq!(v.get_attr("thinking").unwrap().as_str(), Some("r1"));

        let m = serde_json::json!({"role": "assistant", "reasoning_content": "r2", "thinking": "own", "content": "c"});
        let v = message_value(m.as_object().unwrap(), false);
        assert_eq!(keys(&v), ["thinking", "role", "reasoning_content", "content"]);
        assert_eq!(v.get_attr("thinking").unwrap().as_str(), Some("own"));
        assert_eq!(v.get_attr("reasoning_content").unwrap().as_str(), Some("r2"));

        let m = serde_json::json!({"role": "user", "content": "hi", "name": null});
        assert_eq!(keys(&message_value(m.as_object().unwrap(), false)), ["role", "content"]);
    }
}
