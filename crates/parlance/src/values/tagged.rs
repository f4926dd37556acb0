//! Tagged argument values (`<parameter=a>7</parameter>`, `a='x'`) to JSON, by the tool's schema.
//!
//! Conversion order, documented for users: a parameter whose schema allows only `string` keeps the
//! raw text. Otherwise the text is read as a literal (JSON, or Python where the template prints
//! values with Python's `str`: `True`, `None`, `'a'`), and the first schema type, in the order the
//! schema lists them (`type` array, then `anyOf`/`oneOf` branches), that the literal fits wins;
//! `number` accepts integers. When nothing fits and `string` is allowed the raw text is kept as a
//! string; when `string` is not allowed either, the raw text is kept as a string and reported.
//! Parameters without a schema (unknown tool or parameter) take the literal when the text is one,
//! else the string.

use std::collections::HashMap;

use memchr::memmem::Finder;
use serde_json::{Map, Value as Json};

/// How a value was converted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Converted {
    /// The value fits the schema (or there is none).
    Fits(Json),
    /// The value does not fit the schema; kept as the raw string.
    Misfit(Json),
}

/// JSON types a parameter schema allows, in the schema's order; empty when unconstrained.
pub(crate) fn allowed_types(schema: Option<&Json>) -> Vec<String> {
    let mut out = Vec::new();
    let Some(schema) = schema else { return out };
    collect_types(schema, &mut out, 0);
    out
}

fn collect_types(schema: &Json, out: &mut Vec<String>, depth: usize) {
    if depth > 16 {
        return;
    }
    match schema.get("type") {
        Some(Json::String(t)) => out.push(canonical_type(t)),
        Some(Json::Array(ts)) => out.extend(ts.iter().filter_map(Json::as_str).map(canonical_type)),
        _ => {}
    }
    if schema.get("nullable").and_then(Json::as_bool) == Some(true) {
        out.push("null".into());
    }
    for key in ["anyOf", "oneOf"] {
        for branch in schema.get(key).and_then(Json::as_array).into_iter().flatten() {
            collect_types(branch, out, depth + 1);
        }
    }
    if out.is_empty()
        && let Some(values) = schema.get("enum").and_then(Json::as_array)
    {
        for v in values {
            let t = type_name(v);
            if !out.iter().any(|o| o == t) {
                out.push(t.to_owned());
            }
        }
    }
}

/// JSON Schema type names, with the Python spellings tool definitions in the wild use (`float`,
/// `int`, `bool`, `dict`, `list`, `str`).
fn canonical_type(name: &str) -> String {
    match name {
        "float" | "double" => "number",
        "int" => "integer",
        "bool" => "boolean",
        "dict" => "object",
        "list" | "tuple" => "array",
        "str" => "string",
        other => other,
    }
    .to_owned()
}

fn type_name(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn fits(value: &Json, ty: &str) -> bool {
    match (ty, value) {
        ("number", Json::Number(_)) => true,
        ("integer", Json::Number(n)) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        (ty, value) => type_name(value) == ty,
    }
}

/// Converts the raw text of a tagged value. `quoted` is set when the format wrote the value as a
/// quoted string literal (already unquoted in `raw`): it is a string whatever the schema says.
pub(crate) fn convert(raw: &str, quoted: bool, schema: Option<&Json>, python: bool) -> Converted {
    if quoted {
        return Converted::Fits(Json::String(raw.to_owned()));
    }
    let types = allowed_types(schema);
    let literal = read_literal(raw.trim(), python);
    if types.is_empty() {
        return Converted::Fits(match literal {
            Some(value) if !value.is_string() => value,
            _ => Json::String(raw.to_owned()),
        });
    }
    if types.iter().all(|t| t == "string") {
        return Converted::Fits(Json::String(raw.to_owned()));
    }
    if let Some(value) = &literal
        && types.iter().any(|t| t != "string" && fits(value, t))
    {
        return Converted::Fits(value.clone());
    }
    if types.iter().any(|t| t == "string") {
        return Converted::Fits(Json::String(raw.to_owned()));
    }
    // An integer written with leading zeros (`month=07`: neither JSON nor Python 3), where the
    // schema wants a number and no string: the number it spells.
    if types.iter().any(|t| t == "integer" || t == "number")
        && let Some(value) = leading_zero_integer(raw.trim())
    {
        return Converted::Fits(value);
    }
    Converted::Misfit(Json::String(raw.to_owned()))
}

/// `07`, `-005` as the integer they spell; `None` for anything else (`0`, `7`, `0x7`, `07.5`).
pub(crate) fn leading_zero_integer(text: &str) -> Option<Json> {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.len() < 2 || !digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    let number = if significant.is_empty() { "0".to_owned() } else { format!("{sign}{significant}") };
    serde_json::from_str(&number).ok()
}

/// `raw` as compact JSON text with every token as written (numbers keep all their digits, strings
/// their escapes), when `raw` is the JSON text of `value`; `None` when it is not JSON (a Python
/// literal, nested tags), and the caller serializes `value` instead.
pub(crate) fn written_json(raw: &str, value: &Json) -> Option<String> {
    let text = raw.trim();
    if serde_json::from_str::<Json>(text).ok().as_ref() != Some(value) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
    Some(out)
}

/// Reads a JSON literal, or (when `python`) a Python literal as `str()`/`repr` prints it.
pub(crate) fn read_literal(text: &str, python: bool) -> Option<Json> {
    if let Ok(value) = serde_json::from_str::<Json>(text) {
        return Some(value);
    }
    if python { read_python_literal(text) } else { None }
}

/// Reads a Python literal as `str()`/`repr` prints it, the whole of `text`.
fn read_python_literal(text: &str) -> Option<Json> {
    let mut reader = PyReader { text: text.as_bytes(), pos: 0, depth: 0 };
    let value = reader.value()?;
    reader.ws();
    (reader.pos == text.len()).then_some(value)
}

/// `text` as JSON text: itself when it is JSON, else (when `python`) the JSON of the Python literal
/// it is (`{'a': True}` gives `{"a":true}`); `None` when it is neither.
pub(crate) fn as_json_text(text: &str, python: bool) -> Option<std::borrow::Cow<'_, str>> {
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
        return Some(text.into());
    }
    if !python {
        return None;
    }
    let value = read_python_literal(text.trim())?;
    serde_json::to_string(&value).ok().map(Into::into)
}

/// Arguments written as a Python literal or JSON, as JSON text; kept as written when neither.
pub(crate) fn arguments_as_json(written: &str) -> String {
    as_json_text(written, true).map_or_else(|| written.to_owned(), std::borrow::Cow::into_owned)
}

/// A reader of Python literals: strings in either quote, numbers, `True`/`False`/`None`, lists,
/// tuples and dicts.
struct PyReader<'a> {
    text: &'a [u8],
    pos: usize,
    depth: usize,
}

impl PyReader<'_> {
    fn ws(&mut self) {
        while self.pos < self.text.len() && self.text[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.text.get(self.pos) == Some(&b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Json> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        self.ws();
        let value = match *self.text.get(self.pos)? {
            b'\'' | b'"' => Json::String(self.string()?),
            b'[' | b'(' => {
                let close = if self.text[self.pos] == b'[' { b']' } else { b')' };
                self.pos += 1;
                let mut items = Vec::new();
                while !self.eat(close) {
                    items.push(self.value()?);
                    if !self.eat(b',') {
                        self.eat(close).then_some(())?;
                        break;
                    }
                }
                Json::Array(items)
            }
            b'{' => {
                self.pos += 1;
                let mut map = Map::new();
                let mut set = Vec::new();
                while !self.eat(b'}') {
                    let first = self.value()?;
                    if self.eat(b':') {
                        let (Json::String(key), true) = (first, set.is_empty()) else { return None };
                        map.insert(key, self.value()?);
                    } else if map.is_empty() {
                        // A set literal (`{'a', 'b'}`): a JSON array.
                        set.push(first);
                    } else {
                        return None;
                    }
                    if !self.eat(b',') {
                        self.eat(b'}').then_some(())?;
                        break;
                    }
                }
                if set.is_empty() { Json::Object(map) } else { Json::Array(set) }
            }
            _ => {
                let start = self.pos;
                while self.pos < self.text.len() && !b",:)]} \t\n".contains(&self.text[self.pos]) {
                    self.pos += 1;
                }
                let word = std::str::from_utf8(&self.text[start..self.pos]).ok()?;
                match word {
                    "True" => Json::Bool(true),
                    "False" => Json::Bool(false),
                    "None" => Json::Null,
                    _ => serde_json::from_str::<serde_json::Number>(word).ok().map(Json::Number)?,
                }
            }
        };
        self.depth -= 1;
        Some(value)
    }

    fn string(&mut self) -> Option<String> {
        let quote = self.text[self.pos];
        self.pos += 1;
        let mut out = Vec::new();
        while let Some(&b) = self.text.get(self.pos) {
            self.pos += 1;
            if b == quote {
                return String::from_utf8(out).ok();
            }
            if b == b'\\' {
                self.text.get(self.pos)?;
                self.pos += push_escape(&mut out, &self.text[self.pos..]);
            } else {
                out.push(b);
            }
        }
        None
    }
}

/// One Python string escape into `out` (`rest` is what follows the backslash; returns how many
/// of its bytes the escape took): `\n`, `\t`, `\r`, `\b`, `\f`, `\v`, `\a`, `\0`, a quote or a
/// backslash, `\xHH`, `\uHHHH`, `\UHHHHHHHH` (as Python's `repr` writes unprintable characters);
/// an escaped line break continues the line; any other escape is kept as written, backslash
/// included (`'\,'` is `\,`), as Python keeps it.
fn push_escape(out: &mut Vec<u8>, rest: &[u8]) -> usize {
    let Some(&escaped) = rest.first() else { return 0 };
    let hex = |digits: usize| -> Option<char> {
        let text = std::str::from_utf8(rest.get(1..=digits)?).ok()?;
        char::from_u32(u32::from_str_radix(text, 16).ok()?).filter(|_| text.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let simple = match escaped {
        b'n' => b'\n',
        b't' => b'\t',
        b'r' => b'\r',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'v' => 0x0b,
        b'a' => 0x07,
        b'0' if !rest.get(1).is_some_and(u8::is_ascii_digit) => 0,
        b'\n' => return 1,
        b'\\' | b'\'' | b'"' => escaped,
        b'x' | b'u' | b'U' => {
            let digits = match escaped {
                b'x' => 2,
                b'u' => 4,
                _ => 8,
            };
            if let Some(c) = hex(digits) {
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                return 1 + digits;
            }
            out.extend([b'\\', escaped]);
            return 1;
        }
        other => {
            out.extend([b'\\', other]);
            return 1;
        }
    };
    out.push(simple);
    1
}

/// The text of a Python string literal's body (between its quotes), escapes read as Python reads
/// them, quotes inside it kept as written.
pub(crate) fn python_string_body(body: &str) -> String {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            i += 1 + push_escape(&mut out, &bytes[i + 1..]);
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| body.to_owned())
}

/// The tags of arrays and objects written as nested elements with the argument markers
/// (MiniMax-M3): `<k>v</k>` is an object member, `<item>v</item>` an array item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NestedTags<'a> {
    /// Before an element's name (`]<]minimax[>[<`).
    pub open: &'a str,
    /// After an element's name in its opening tag (`>`).
    pub open_end: &'a str,
    /// Before the name in the closing tag (`]<]minimax[>[</`).
    pub close: &'a str,
    /// After the name in the closing tag (`>`).
    pub close_end: &'a str,
    /// The element name of array items.
    pub item: &'a str,
    /// Leaves are Python literals.
    pub python: bool,
}

/// Deepest nesting read; deeper values stay text.
const MAX_NESTING: usize = 32;

/// Reads `raw` as nested elements: an array when every element is an item (and the schema
/// allows arrays or says nothing), else an object; leaves are converted by their sub-schema as
/// top-level values are. `None` when `raw` is not a sequence of whole elements.
pub(crate) fn nested(raw: &str, tags: &NestedTags<'_>, schema: Option<&Json>, depth: usize) -> Option<Json> {
    nested_at(raw, 0, tags, schema, depth, &mut ClosingTags::default())
}

/// Where each opening tag met so far is closed, by the offsets (in the outermost value) of the
/// opening tag and of the inner text after it. Matching an element's closing tag walks every
/// same-name element nested in it; recording their closes on the way lets each nesting level
/// look its element's close up instead of walking the same tags again, level after level.
#[derive(Default)]
struct ClosingTags(HashMap<(usize, usize), usize>);

/// `nested` of `raw`, which starts `base` bytes into the outermost value.
fn nested_at(
    raw: &str,
    base: usize,
    tags: &NestedTags<'_>,
    schema: Option<&Json>,
    depth: usize,
    closing_tags: &mut ClosingTags,
) -> Option<Json> {
    if depth > MAX_NESTING || tags.open.is_empty() || tags.open_end.is_empty() {
        return None;
    }
    let mut elements: Vec<(&str, usize, usize)> = Vec::new();
    let mut pos = 0;
    loop {
        let rest = raw[pos..].trim_start();
        if rest.is_empty() {
            break;
        }
        let body = rest.strip_prefix(tags.open)?;
        // A name is at most 256 bytes: its end is looked for no further.
        let mut window = body.len().min(256 + tags.open_end.len());
        while !body.is_char_boundary(window) {
            window -= 1;
        }
        let name_len = body[..window].find(tags.open_end)?;
        let name = &body[..name_len];
        if name.is_empty() || name.contains(['<', '>', '\n', '/']) {
            return None;
        }
        let open_at = raw.len() - rest.len();
        let inner_at = raw.len() - body.len() + name_len + tags.open_end.len();
        let close_at = match closing_tags.0.get(&(base + open_at, base + inner_at)) {
            Some(&close) => close - base,
            None => {
                let opening = format!("{}{name}{}", tags.open, tags.open_end);
                let closing = format!("{}{name}{}", tags.close, tags.close_end);
                let (opening, closing) = (Finder::new(&opening), Finder::new(&closing));
                // Same-name elements may nest. Each tag is searched for once from where the last
                // one of its kind was found, so the scan is linear in `raw`; every element opened
                // on the way is closed on the way, and remembered.
                let find = |tag: &Finder<'_>, from: usize| tag.find(&raw.as_bytes()[from..]).map(|i| from + i);
                let mut open = vec![(open_at, inner_at)];
                let mut next_open = find(&opening, inner_at);
                let mut next_close = find(&closing, inner_at)?;
                loop {
                    match next_open {
                        Some(at) if at < next_close => {
                            let inner = at + opening.needle().len();
                            open.push((at, inner));
                            next_open = find(&opening, inner);
                        }
                        _ => {
                            let (tag_at, inner) = open.pop().unwrap_or((open_at, inner_at));
                            closing_tags.0.insert((base + tag_at, base + inner), base + next_close);
                            if open.is_empty() {
                                break next_close;
                            }
                            next_close = find(&closing, next_close + closing.needle().len())?;
                        }
                    }
                }
            }
        };
        let closing_len = tags.close.len() + name.len() + tags.close_end.len();
        elements.push((name, inner_at, close_at));
        pos = close_at + closing_len;
    }
    if elements.is_empty() {
        return None;
    }
    let types = allowed_types(schema);
    let as_array = elements.iter().all(|(name, _, _)| *name == tags.item)
        && (types.is_empty() || types.iter().any(|t| t == "array"));
    let mut value = |inner_at: usize, close_at: usize, sub: Option<&Json>| -> Json {
        let inner = &raw[inner_at..close_at];
        let sub_types = allowed_types(sub);
        let may_nest = sub_types.is_empty() || sub_types.iter().any(|t| t == "array" || t == "object");
        if may_nest
            && inner.trim_start().starts_with(tags.open)
            && let Some(value) = nested_at(inner, base + inner_at, tags, sub, depth + 1, closing_tags)
        {
            return value;
        }
        match convert(inner, false, sub, tags.python) {
            Converted::Fits(value) | Converted::Misfit(value) => value,
        }
    };
    if as_array {
        let items = sub_schema(schema, "items", None);
        return Some(Json::Array(elements.iter().map(|&(_, at, end)| value(at, end, items)).collect()));
    }
    let mut object = Map::new();
    for (name, at, end) in elements {
        let sub = sub_schema(schema, "properties", Some(name));
        object.insert(name.to_owned(), value(at, end, sub));
    }
    Some(Json::Object(object))
}

/// `schema[key]` (`items`), or `schema[key][name]` (`properties`), looked up in the schema and
/// its `anyOf` / `oneOf` branches, first found.
fn sub_schema<'s>(schema: Option<&'s Json>, key: &str, name: Option<&str>) -> Option<&'s Json> {
    fn walk<'s>(schema: &'s Json, key: &str, name: Option<&str>, depth: usize) -> Option<&'s Json> {
        if depth > 16 {
            return None;
        }
        let direct = schema.get(key).and_then(|v| match name {
            Some(name) => v.get(name),
            None => Some(v),
        });
        direct.or_else(|| {
            ["anyOf", "oneOf"]
                .into_iter()
                .find_map(|k| schema.get(k)?.as_array()?.iter().find_map(|branch| walk(branch, key, name, depth + 1)))
        })
    }
    walk(schema?, key, name, 0)
}

/// A literal whose strings are delimited by a multi-character quote (Gemma 4's
/// `[<|"|>a<|"|>,{k:<|"|>b<|"|>}]`, keys bare) rewritten as JSON text: quoted strings become JSON
/// strings, bare keys before `:` are quoted. `None` when a quote is unterminated.
pub(crate) fn requote(raw: &str, quote: &str) -> Option<String> {
    if quote.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    // After `{` or `,`: a bare key may follow.
    let mut key_may_follow = false;
    while !rest.is_empty() {
        if let Some(body) = rest.strip_prefix(quote) {
            let end = body.find(quote)?;
            out.push_str(&Json::String(body[..end].to_owned()).to_string());
            rest = &body[end + quote.len()..];
            key_may_follow = false;
            continue;
        }
        let c = rest.chars().next()?;
        // A bare key: any text up to the `:`, spaces inside included (`{open now:true}`), but
        // nothing a JSON value or the quote is made of.
        if key_may_follow && !c.is_whitespace() && !"{}[],:\"".contains(c) && !rest.starts_with(quote) {
            let len = rest.find(|c: char| "{}[],:\"".contains(c)).unwrap_or(rest.len());
            let key = &rest[..len];
            if rest[len..].starts_with(':') && !key.contains(quote) {
                out.push_str(&Json::String(key.trim_end().to_owned()).to_string());
                rest = &rest[len..];
                key_may_follow = false;
                continue;
            }
        }
        if !c.is_whitespace() {
            key_may_follow = c == '{' || c == ',';
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_escapes_are_read_as_python_reads_them() {
        assert_eq!(read_literal(r"'a\nb\'c\\d'", true), Some(json!("a\nb'c\\d")));
        // Unknown escapes keep their backslash (`'\,'` is two characters).
        assert_eq!(read_literal(r"'x\,y'", true), Some(json!("x\\,y")));
        assert_eq!(python_string_body(r"sed -n '1,2p' \, \'"), "sed -n '1,2p' \\, '");
    }

    #[test]
    fn schema_types_decide_the_conversion() {
        let int = json!({"type": "integer"});
        assert_eq!(convert("7", false, Some(&int), false), Converted::Fits(json!(7)));
        assert_eq!(convert("seven", false, Some(&int), false), Converted::Misfit(json!("seven")));
        let string = json!({"type": "string"});
        assert_eq!(convert("007", false, Some(&string), false), Converted::Fits(json!("007")));
        // Leading zeros: the number, where the schema wants one and no string.
        assert_eq!(convert("07", false, Some(&int), true), Converted::Fits(json!(7)));
        assert_eq!(convert("-005", false, Some(&json!({"type": "number"})), false), Converted::Fits(json!(-5)));
        assert_eq!(convert("000", false, Some(&int), false), Converted::Fits(json!(0)));
        assert_eq!(
            convert("07", false, Some(&json!({"type": ["integer", "string"]})), false),
            Converted::Fits(json!("07"))
        );
        for text in ["07.5", "0x7", "0-7", "+", "0"] {
            assert_eq!(leading_zero_integer(text), None, "{text}");
        }
        let union = json!({"type": ["string", "object"]});
        assert_eq!(convert("{\"a\": 1}", false, Some(&union), false), Converted::Fits(json!({"a": 1})));
        assert_eq!(convert("plain", false, Some(&union), false), Converted::Fits(json!("plain")));
        let any_of = json!({"anyOf": [{"type": "null"}, {"type": "number"}]});
        assert_eq!(convert("2.5", false, Some(&any_of), false), Converted::Fits(json!(2.5)));
        // No schema: literals are taken, other text stays a string.
        assert_eq!(convert("true", false, None, false), Converted::Fits(json!(true)));
        assert_eq!(convert("hello", false, None, false), Converted::Fits(json!("hello")));
        assert_eq!(convert("1", true, Some(&int), false), Converted::Fits(json!("1")));
    }

    #[test]
    fn values_written_as_json_keep_every_digit() {
        let big = "123456789012345678901234567890";
        let value: Json = serde_json::from_str(big).unwrap();
        assert_eq!(written_json(&format!("  {big}\n"), &value).as_deref(), Some(big));
        let text = "{ \"a\" : [1.10, 2e3],\n \"s\": \"x \\\" \\u00e9 y\" }";
        let value: Json = serde_json::from_str(text).unwrap();
        assert_eq!(written_json(text, &value).as_deref(), Some("{\"a\":[1.10,2e3],\"s\":\"x \\\" \\u00e9 y\"}"));
        // Not the JSON of the value (a Python literal read as JSON): serialized by the caller.
        assert_eq!(written_json("[1, 'a']", &json!([1, "a"])), None);
        assert_eq!(written_json("2", &json!(3)), None);
    }

    #[test]
    fn python_literals_read_as_json() {
        assert_eq!(read_literal("True", true), Some(json!(true)));
        assert_eq!(read_literal("None", true), Some(json!(null)));
        assert_eq!(read_literal("['a', 2, {'k': False}]", true), Some(json!(["a", 2, {"k": false}])));
        assert_eq!(read_literal("'it\\'s'", true), Some(json!("it's")));
        assert_eq!(read_literal("{'urgent', 'bug'}", true), Some(json!(["urgent", "bug"])));
        assert_eq!(read_literal("{'a': 1, 'b': [2]}", true), Some(json!({"a": 1, "b": [2]})));
        assert_eq!(read_literal("True", false), None);
        // Python's escapes of unprintable and non-ASCII characters; unknown ones kept.
        assert_eq!(read_literal(r"'\x41\u00e9\U0001F600\t\0\q'", true), Some(json!("Aé😀\t\u{0}\\q")));
        assert_eq!(read_literal(r"'\xZZ'", true), Some(json!("\\xZZ")));
        assert_eq!(as_json_text("{'a': None}", true).as_deref(), Some(r#"{"a":null}"#));
        assert_eq!(as_json_text(r#"{"a": 1}"#, true).as_deref(), Some(r#"{"a": 1}"#));
        assert_eq!(as_json_text("{'a': None}", false), None);
        assert_eq!(arguments_as_json("{'a': nope}"), "{'a': nope}");
        assert_eq!(read_literal("[1, 2", true), None);
    }

    #[test]
    fn nested_tags_read_as_arrays_and_objects_by_schema() {
        let tags = NestedTags { open: "<", open_end: ">", close: "</", close_end: ">", item: "item", python: false };
        let schema = json!({"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}});
        let raw = "<item><id>1</id><label>one</label></item><item><id>2</id></item>";
        assert_eq!(nested(raw, &tags, Some(&schema), 0), Some(json!([{"id": 1, "label": "one"}, {"id": 2}])));
        // Same-name elements nest; a string leaf stays text.
        let raw = "<a><a>7</a></a><b>007</b>";
        let schema = json!({"type": "object", "properties": {"b": {"type": "string"}}});
        assert_eq!(nested(raw, &tags, Some(&schema), 0), Some(json!({"a": {"a": 7}, "b": "007"})));
        // Items under a schema that allows no array make an object.
        let object = json!({"type": "object"});
        assert_eq!(nested("<item>x</item>", &tags, Some(&object), 0), Some(json!({"item": "x"})));
        // Not whole elements: not nested.
        assert_eq!(nested("<a>1</a> tail", &tags, None, 0), None);
        assert_eq!(nested("<a>1", &tags, None, 0), None);
        assert_eq!(nested("plain", &tags, None, 0), None);
    }

    #[test]
    fn nesting_deeper_than_read_keeps_the_rest_as_text() {
        let tags = NestedTags { open: "<", open_end: ">", close: "</", close_end: ">", item: "item", python: false };
        let n = 5_000;
        let raw = format!("{}7{}", "<item>".repeat(n), "</item>".repeat(n));
        let mut value = nested(&raw, &tags, None, 0).unwrap();
        let mut arrays = 0;
        while let Json::Array(mut items) = value {
            assert_eq!(items.len(), 1);
            arrays += 1;
            value = items.pop().unwrap();
        }
        // Levels 0 to MAX_NESTING are read; below them the value is the text as written.
        assert_eq!(arrays, MAX_NESTING + 1);
        let rest = n - arrays;
        assert_eq!(value, Json::String(format!("{}7{}", "<item>".repeat(rest), "</item>".repeat(rest))));
        // Closing tags are matched by nesting, also among siblings that nest.
        let raw = "<a><a>1</a><a>2</a></a><b><a>3</a></b>";
        assert_eq!(nested(raw, &tags, None, 0), Some(serde_json::json!({"a": {"a": 2}, "b": {"a": 3}})));
    }

    #[test]
    fn multi_character_quotes_and_bare_keys_read_as_json() {
        let q = "<|\"|>";
        let raw = format!("[{q}buy, milk{q},{{n:2,inner:{q}v \\ \"x\"{q}}}]");
        let json = requote(&raw, q).unwrap();
        assert_eq!(serde_json::from_str::<Json>(&json).unwrap(), json!(["buy, milk", {"n": 2, "inner": "v \\ \"x\""}]));
        assert_eq!(requote(&format!("[{q}open"), q), None);
        // Keys with spaces and other characters, objects with no string inside, nesting.
        let raw = "{open now:true,price range:{min:1,max:3},tags:[1,{z:null}],über-key.x:[]}";
        let json = requote(raw, q).unwrap();
        assert_eq!(
            serde_json::from_str::<Json>(&json).unwrap(),
            json!({"open now": true, "price range": {"min": 1, "max": 3}, "tags": [1, {"z": null}], "über-key.x": []})
        );
        // Array items are no keys.
        assert_eq!(serde_json::from_str::<Json>(&requote("[1, 2]", q).unwrap()).unwrap(), json!([1, 2]));
    }
}
