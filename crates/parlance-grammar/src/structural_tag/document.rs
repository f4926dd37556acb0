//! A structural-tag document as the lowering reads it: strings borrowed from the request's text,
//! objects as their members in order, each `json_schema` value kept aside, never a tree.
//!
//! A server receives the document as text, and a request naming 128 tools is mostly their schemas.
//! Read into `serde_json::Value`, every object is an `IndexMap` with its own hash table and every
//! key and string an allocation, built and dropped per request: a third of what a request with one
//! new tool cost. Here a `json_schema` value is its text (found among the schemas lowered before by
//! that text) and the rest borrows from the document. A document given as a `Value` (the library's
//! other entry point) is read the same way, borrowing from the value.

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

/// One node of a document.
#[derive(Debug, Clone)]
pub(crate) enum Node<'t> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'t, str>),
    Array(Vec<Node<'t>>),
    Object(Object<'t>),
    /// The value of a `json_schema` member.
    Schema(Schema<'t>),
    /// A part of a document given as a value kept as it is: a legacy `schema` (read whole as a
    /// schema), and whatever lies deeper than [`MAX_NESTING`] (no format is read there: formats
    /// nest at most 64 deep).
    Value(&'t Value),
}

/// A `json_schema` member's value.
#[derive(Debug, Clone)]
pub(crate) enum Schema<'t> {
    /// Its index among the document's schema texts (equal texts, one index), and its text.
    Text(usize, &'t str),
    /// The value itself.
    Value(Cow<'t, Value>),
}

/// An object's members, in their order; a key given twice keeps the first place and the last value,
/// as `serde_json::Map` does.
#[derive(Debug, Clone, Default)]
pub(crate) struct Object<'t> {
    members: Vec<(Cow<'t, str>, Node<'t>)>,
}

/// Levels of a value-given document read into nodes; below, [`Node::Value`]. (Text documents are
/// bounded by serde_json's own limit of 128.)
const MAX_NESTING: usize = 512;

/// Objects up to this size find a repeated key by scanning; larger ones by a hash map.
const SCAN_MEMBERS: usize = 16;

impl<'t> Object<'t> {
    pub(crate) fn get(&self, key: &str) -> Option<&Node<'t>> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = (&str, &Node<'t>)> {
        self.members.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// Builds an object from members in order, keys given twice merged as [`Object`] says.
    pub(crate) fn from_members(mut members: Vec<(Cow<'t, str>, Node<'t>)>) -> Object<'t> {
        if members.len() <= SCAN_MEMBERS {
            let mut i = 0;
            while i < members.len() {
                match members[..i].iter().position(|(k, _)| *k == members[i].0) {
                    Some(first) => {
                        let (_, v) = members.remove(i);
                        members[first].1 = v;
                    }
                    None => i += 1,
                }
            }
            return Object { members };
        }
        let mut first: HashMap<Cow<'t, str>, usize> = HashMap::with_capacity(members.len());
        let mut kept: Vec<(Cow<'t, str>, Node<'t>)> = Vec::with_capacity(members.len());
        for (k, v) in members {
            match first.get(&k) {
                Some(&at) => kept[at].1 = v,
                None => {
                    first.insert(k.clone(), kept.len());
                    kept.push((k, v));
                }
            }
        }
        Object { members: kept }
    }
}

impl<'t> Node<'t> {
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&[Node<'t>]> {
        match self {
            Node::Array(a) => Some(a),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Node::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    /// The node as a JSON value (a schema given as text, as that text parsed: an error where
    /// serde_json cannot, a text nested deeper than its limit).
    pub(crate) fn to_value(&self) -> Result<Value, serde_json::Error> {
        Ok(match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::String(s) => Value::String(s.to_string()),
            Node::Array(a) => Value::Array(a.iter().map(Node::to_value).collect::<Result<_, _>>()?),
            Node::Object(o) => Value::Object(
                o.members.iter().map(|(k, v)| Ok((k.to_string(), v.to_value()?))).collect::<Result<_, _>>()?,
            ),
            Node::Schema(Schema::Value(v)) => v.as_ref().clone(),
            Node::Schema(Schema::Text(_, text)) => serde_json::from_str(text)?,
            Node::Value(v) => (*v).clone(),
        })
    }

    /// The node read from a value, borrowing its strings; `json_schema` members are the values
    /// themselves.
    pub(crate) fn from_value(v: &'t Value) -> Node<'t> {
        Node::from_value_at(v, 0)
    }

    fn from_value_at(v: &'t Value, depth: usize) -> Node<'t> {
        if depth >= MAX_NESTING {
            return Node::Value(v);
        }
        match v {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::String(Cow::Borrowed(s)),
            Value::Array(a) => Node::Array(a.iter().map(|x| Node::from_value_at(x, depth + 1)).collect()),
            Value::Object(o) => Node::Object(Object {
                members: o
                    .iter()
                    .map(|(k, x)| {
                        let node = match k.as_str() {
                            "json_schema" => Node::Schema(Schema::Value(Cow::Borrowed(x))),
                            "schema" => Node::Value(x),
                            _ => Node::from_value_at(x, depth + 1),
                        };
                        (Cow::Borrowed(k.as_str()), node)
                    })
                    .collect(),
            }),
        }
    }

    /// Hashes the node by its content (members in their order, as equality compares them).
    /// Recursive: a text document nests at most 128 deep, a value-given one [`MAX_NESTING`].
    pub(crate) fn hash_into(&self, h: &mut impl Hasher) {
        match self {
            Node::Null => 0u8.hash(h),
            Node::Bool(b) => (1u8, b).hash(h),
            Node::Number(n) => (2u8, n.as_f64().map(f64::to_bits), n.as_i64(), n.as_u64()).hash(h),
            Node::String(s) => (3u8, s.as_ref()).hash(h),
            Node::Array(a) => {
                (4u8, a.len()).hash(h);
                a.iter().for_each(|n| n.hash_into(h));
            }
            Node::Object(o) => {
                (5u8, o.members.len()).hash(h);
                for (k, v) in &o.members {
                    k.as_ref().hash(h);
                    v.hash_into(h);
                }
            }
            Node::Schema(Schema::Text(i, _)) => (6u8, i).hash(h),
            Node::Schema(Schema::Value(v)) => (7u8, crate::json_schema::value_hash(v, &())).hash(h),
            Node::Value(v) => (8u8, crate::json_schema::value_hash(v, &())).hash(h),
        }
    }

    /// Whether the node nests at most `max` levels, values kept as they are included (iterative).
    fn nesting_at_most(&self, max: usize) -> bool {
        let mut stack = vec![(self, 0usize)];
        while let Some((n, depth)) = stack.pop() {
            if depth > max {
                return false;
            }
            let kept = match n {
                Node::Array(a) => {
                    stack.extend(a.iter().map(|x| (x, depth + 1)));
                    None
                }
                Node::Object(o) => {
                    stack.extend(o.members.iter().map(|(_, x)| (x, depth + 1)));
                    None
                }
                Node::Value(v) => Some(*v),
                Node::Schema(Schema::Value(v)) => Some(v.as_ref()),
                _ => None,
            };
            if kept.is_some_and(|v| !nesting_at_most(v, max - depth)) {
                return false;
            }
        }
        true
    }

    /// Whether two nodes are equal (members compared in their order).
    pub(crate) fn same(&self, other: &Node<'_>) -> bool {
        match (self, other) {
            (Node::Null, Node::Null) => true,
            (Node::Bool(a), Node::Bool(b)) => a == b,
            (Node::Number(a), Node::Number(b)) => a == b,
            (Node::String(a), Node::String(b)) => a == b,
            (Node::Array(a), Node::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y)),
            (Node::Object(a), Node::Object(b)) => {
                a.members.len() == b.members.len()
                    && a.members.iter().zip(&b.members).all(|((ka, va), (kb, vb))| ka == kb && va.same(vb))
            }
            (Node::Schema(Schema::Text(a, _)), Node::Schema(Schema::Text(b, _))) => a == b,
            (Node::Schema(Schema::Value(a)), Node::Schema(Schema::Value(b))) => crate::json_schema::same_value(a, b),
            (Node::Value(a), Node::Value(b)) => crate::json_schema::same_value(a, b),
            _ => false,
        }
    }
}

impl fmt::Display for Node<'_> {
    /// As compact JSON, what an error says it got: the same text whether the document came as text
    /// or as a value. A value nested too deep to print or to parse is `…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.nesting_at_most(SHOWN_NESTING) {
            return f.write_str("…");
        }
        match self.to_value() {
            Ok(v) if nesting_at_most(&v, SHOWN_NESTING) => write!(f, "{v}"),
            _ => f.write_str("…"),
        }
    }
}

/// Levels an error shows of a value; deeper, it says `…`. Below serde_json's limit of 128, so that
/// a schema kept as text shows as its value does.
const SHOWN_NESTING: usize = 100;

/// Whether `v` nests at most `max` levels (iterative: the value may come from a stranger).
fn nesting_at_most(v: &Value, max: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        if depth > max {
            return false;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, depth + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, depth + 1))),
            _ => {}
        }
    }
    true
}

/// Reads a structural tag's JSON text, each `json_schema` value kept as its text.
pub(crate) fn parse_document(json: &str) -> Result<Node<'_>, serde_json::Error> {
    let mut raws = RawSchemas::default();
    let mut de = serde_json::Deserializer::from_str(json);
    let root = Seed(&mut raws).deserialize(&mut de)?;
    de.end()?;
    Ok(root)
}

#[derive(Default)]
struct RawSchemas<'t> {
    /// Each schema text's index, by the text.
    index: HashMap<&'t str, usize>,
}

/// Deserializes one node, `json_schema` members as their text.
struct Seed<'s, 't>(&'s mut RawSchemas<'t>);

impl<'de> DeserializeSeed<'de> for Seed<'_, 'de> {
    type Value = Node<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Node<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, 'de> {
    type Value = Node<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node<'de>, E> {
        Ok(Number::from_f64(v).map_or(Node::Null, Node::Number))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed(&mut *self.0))? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let value = if key == "json_schema" {
                let raw: &'de serde_json::value::RawValue = map.next_value()?;
                let next = self.0.index.len();
                let index = *self.0.index.entry(raw.get()).or_insert(next);
                Node::Schema(Schema::Text(index, raw.get()))
            } else {
                map.next_value_seed(Seed(&mut *self.0))?
            };
            members.push((key, value));
        }
        Ok(Node::Object(Object::from_members(members)))
    }
}

/// Deserializes an object key, borrowed from the text where it has no escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_keeps_its_first_place_and_its_last_value_as_serde_json_does() {
        for n in [3, SCAN_MEMBERS + 5] {
            let mut text = String::from("{");
            for i in 0..n {
                text += &format!("\"k{i}\": {i}, ");
            }
            text += "\"k1\": \"last\", \"k0\": [1]}";
            let doc = parse_document(&text).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(doc.to_value().unwrap(), value, "{n} members");
            let Node::Object(o) = &doc else { panic!("an object") };
            assert_eq!(
                o.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                (0..n).map(|i| format!("k{i}")).collect::<Vec<_>>()
            );
            assert_eq!(o.get("k1").and_then(Node::as_str), Some("last"));
        }
    }

    #[test]
    fn schemas_are_kept_as_their_text_once_and_strings_borrowed_unless_escaped() {
        let text = r#"{"a": {"json_schema": {"type": "string"}}, "b": [{"json_schema": {"type": "string"}}, {"json_schema": true}], "c": "x\ny", "d": "plain"}"#;
        let doc = parse_document(text).unwrap();
        let Node::Object(o) = &doc else { panic!("an object") };
        fn schema<'t>(node: Option<&Node<'t>>) -> Option<(usize, &'t str)> {
            match node {
                Some(Node::Object(o)) => match o.get("json_schema") {
                    Some(Node::Schema(Schema::Text(index, text))) => Some((*index, *text)),
                    _ => None,
                },
                _ => None,
            }
        }
        assert_eq!(schema(o.get("a")), Some((0, r#"{"type": "string"}"#)));
        let b = o.get("b").and_then(Node::as_array).unwrap();
        assert_eq!(schema(b.first()), Some((0, r#"{"type": "string"}"#)), "the same text, the same index");
        assert_eq!(schema(b.get(1)), Some((1, "true")));
        assert!(matches!(o.get("c"), Some(Node::String(Cow::Owned(s))) if s == "x\ny"));
        assert!(matches!(o.get("d"), Some(Node::String(Cow::Borrowed("plain")))));
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(doc.to_value().unwrap(), value);
    }

    #[test]
    fn equal_nodes_hash_alike_and_different_ones_compare_unequal() {
        let hash = |n: &Node<'_>| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            n.hash_into(&mut h);
            h.finish()
        };
        let texts = [r#"{"a": [1, "x", null]}"#, r#"{"a": [1, "x", false]}"#, r#"{"b": [1, "x", null]}"#, r#"[1.5]"#];
        let docs: Vec<Node<'_>> = texts.iter().map(|t| parse_document(t).unwrap()).collect();
        for (i, a) in docs.iter().enumerate() {
            let again = parse_document(texts[i]).unwrap();
            assert!(a.same(&again));
            assert_eq!(hash(a), hash(&again));
            for (j, b) in docs.iter().enumerate() {
                assert_eq!(a.same(b), i == j, "{} vs {}", texts[i], texts[j]);
            }
        }
        // Read from a value: the same members; a schema is the value.
        let value: Value = serde_json::from_str(texts[0]).unwrap();
        assert!(Node::from_value(&value).same(&docs[0]));
    }

    #[test]
    fn a_value_nested_without_bound_is_read_to_a_bounded_depth() {
        let mut value = Value::Null;
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let node = Node::from_value(&value);
        let mut depth = 0;
        let mut at = &node;
        while let Node::Array(a) = at {
            at = &a[0];
            depth += 1;
        }
        assert_eq!(depth, MAX_NESTING);
        assert!(matches!(at, Node::Value(v) if nesting_at_most(v, 100_000) && !nesting_at_most(v, 1_000)));
        // Shown in an error as `…`, not printed (printing recurses).
        assert_eq!(node.to_string(), "…");
        let shallow = serde_json::json!({"a": [1, {"b": "c"}]});
        assert_eq!(Node::from_value(&shallow).to_string(), shallow.to_string());
        // Dropping the value itself must not recurse 100,000 deep either.
        let mut v = value;
        while let Value::Array(mut a) = v {
            v = a.pop().unwrap_or(Value::Null);
        }
    }
}
