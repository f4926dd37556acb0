//! Python's `json.dumps` and float `repr`, exactly, over template values.
//!
//! Hugging Face overrides Jinja's `tojson` with `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`, and templates print floats through Python's `repr`. Both show
//! up byte for byte in prompts (`{"a": 1.0}`, `1e-05`), so they are reproduced here rather than
//! approximated with `serde_json`.

use std::fmt::Write as _;

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// Options of `json.dumps` that chat templates use.
#[derive(Debug, Clone, Default)]
pub(crate) struct DumpOptions {
    /// Escape every non-ASCII character as `\uXXXX` (default `false`, as Hugging Face sets it).
    pub ensure_ascii: bool,
    /// `None`: one line. `Some(s)`: newline + `s` repeated per level (an int `n` becomes `n` spaces).
    pub indent: Option<String>,
    /// Item and key separators; default `(", ", ": ")`, or `(",", ": ")` when indenting.
    pub separators: Option<(String, String)>,
    /// Sort object keys (default `false`: insertion order).
    pub sort_keys: bool,
}

/// Deepest nesting `dumps` follows; Python raises `RecursionError` near 1,000.
const MAX_DEPTH: usize = 512;

/// `json.dumps(value, **options)`.
pub(crate) fn dumps(value: &Value, options: &DumpOptions) -> Result<String, Error> {
    let (item_sep, key_sep) = match &options.separators {
        Some((item, key)) => (item.as_str(), key.as_str()),
        None if options.indent.is_some() => (",", ": "),
        None => (", ", ": "),
    };
    let mut writer = Dumper { out: String::new(), options, item_sep, key_sep };
    writer.value(value, 0)?;
    Ok(writer.out)
}

struct Dumper<'a> {
    out: String,
    options: &'a DumpOptions,
    item_sep: &'a str,
    key_sep: &'a str,
}

impl Dumper<'_> {
    fn newline(&mut self, depth: usize) {
        if let Some(indent) = &self.options.indent {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(indent);
            }
        }
    }

    fn value(&mut self, value: &Value, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(Error::new(ErrorKind::InvalidOperation, "tojson: value nested too deeply"));
        }
        match value.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self.out.push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => self.number(value)?,
            ValueKind::String => self.string(value.as_str().unwrap_or_default()),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = value.try_iter()?.collect();
                if items.is_empty() {
                    self.out.push_str("[]");
                    return Ok(());
                }
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(self.item_sep);
                    }
                    self.newline(depth + 1);
                    self.value(item, depth + 1)?;
                }
                self.newline(depth);
                self.out.push(']');
            }
            // A macro or a namespace is no JSON to Python's `json.dumps` (transformers' `tojson`).
            ValueKind::Map
                if value.as_object().is_some_and(|o| {
                    let name = o.type_name();
                    name.ends_with("Macro") || name.ends_with("CatchAll") || name.contains("Namespace")
                }) =>
            {
                let name = if value.as_object().is_some_and(|o| o.type_name().contains("Namespace")) {
                    "TemplateNamespace"
                } else {
                    "Macro"
                };
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: Object of type {name} is not JSON serializable"),
                ));
            }
            ValueKind::Map => {
                let mut entries: Vec<(Value, Value)> = match value.as_object().and_then(|o| o.try_iter_pairs()) {
                    Some(pairs) => pairs.collect(),
                    None => {
                        let keys: Vec<Value> = value.try_iter()?.collect();
                        let mut entries = Vec::with_capacity(keys.len());
                        for key in keys {
                            let item = value.get_item(&key)?;
                            entries.push((key, item));
                        }
                        entries
                    }
                };
                if self.options.sort_keys {
                    let mut keyed = Vec::with_capacity(entries.len());
                    for (key, item) in entries.drain(..) {
                        keyed.push((self.key(&key)?, item));
                    }
                    keyed.sort_by(|a, b| a.0.cmp(&b.0));
                    entries = keyed.into_iter().map(|(k, v)| (Value::from(k), v)).collect();
                }
                if entries.is_empty() {
                    self.out.push_str("{}");
                    return Ok(());
                }
                self.out.push('{');
                for (i, (key, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(self.item_sep);
                    }
                    self.newline(depth + 1);
                    match key.as_str() {
                        Some(key) => self.string(key),
                        None => {
                            let key = self.key(key)?;
                            self.string(&key);
                        }
                    }
                    self.out.push_str(self.key_sep);
                    self.value(item, depth + 1)?;
                }
                self.newline(depth);
                self.out.push('}');
            }
            ValueKind::Undefined => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: Object of type Undefined is not JSON serializable",
                ));
            }
            kind => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: Object of type {kind} is not JSON serializable"),
                ));
            }
        }
        Ok(())
    }

    /// Python converts `str`, `int`, `float`, `bool` and `None` keys to strings; others raise.
    fn key(&self, key: &Value) -> Result<String, Error> {
        Ok(match key.kind() {
            ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
            ValueKind::None => "null".to_owned(),
            ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).to_owned(),
            ValueKind::Number => {
                let mut scratch = Dumper { out: String::new(), ..*self };
                scratch.number(key)?;
                scratch.out
            }
            kind => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
                ));
            }
        })
    }

    fn number(&mut self, value: &Value) -> Result<(), Error> {
        if value.is_integer() {
            let n = i128::try_from(value.clone())?;
            write!(self.out, "{n}").expect("writing to a String cannot fail");
        } else {
            let f = f64::try_from(value.clone())?;
            if f.is_nan() {
                self.out.push_str("NaN");
            } else if f.is_infinite() {
                self.out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
            } else {
                self.out.push_str(&float_repr(f));
            }
        }
        Ok(())
    }

    fn string(&mut self, s: &str) {
        self.out.reserve(s.len() + 2);
        self.out.push('"');
        // Copy runs of characters that need no escape in one go.
        let mut run_start = 0;
        for (i, c) in s.char_indices() {
            let plain = match c {
                '"' | '\\' => false,
                c if (c as u32) < 0x20 => false,
                c if self.options.ensure_ascii => (' '..='~').contains(&c),
                _ => true,
            };
            if plain {
                continue;
            }
            self.out.push_str(&s[run_start..i]);
            run_start = i + c.len_utf8();
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                c if (c as u32) < 0x20 => push_u_escape(&mut self.out, c as u32),
                c => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        push_u_escape(&mut self.out, u32::from(*unit));
                    }
                }
            }
        }
        self.out.push_str(&s[run_start..]);
        self.out.push('"');
    }
}

fn push_u_escape(out: &mut String, unit: u32) {
    write!(out, "\\u{unit:04x}").expect("writing to a String cannot fail");
}

/// Python's `repr(float)`: the shortest digits that round-trip, positional for exponents in
/// `-4..16`, scientific otherwise (`1e-05`, `1.5e+16`), always with a `.0` or an exponent.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, like Python's repr: `d[.ddd]e<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always writes an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` writes a decimal exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        } else if exp + 1 >= n {
            format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Expected values are what CPython 3.11 prints for repr(x).
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (1234.5, "1234.5"),
            (47.3769, "47.3769"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.0, "123456789012345.0"),
            (1234567890123456.0, "1234567890123456.0"),
            (-2.5e-7, "-2.5e-07"),
            (1e100, "1e+100"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
            (0.30000000000000004, "0.30000000000000004"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "repr({f:?})");
        }
    }

    #[test]
    fn dumps_matches_python_layouts() {
        let value = Value::from(minijinja::value::Serde(serde_json::json!({"b": [1, 2.0, {}], "a": "é\n", "c": []})));
        let plain = dumps(&value, &DumpOptions::default()).unwrap();
        assert_eq!(plain, r#"{"b": [1, 2.0, {}], "a": "é\n", "c": []}"#);
        let ascii = DumpOptions { ensure_ascii: true, sort_keys: true, ..DumpOptions::default() };
        assert_eq!(dumps(&value, &ascii).unwrap(), r#"{"a": "\u00e9\n", "b": [1, 2.0, {}], "c": []}"#);
        let indented = DumpOptions { indent: Some("  ".into()), ..DumpOptions::default() };
        assert_eq!(
            dumps(&value, &indented).unwrap(),
            "{\n  \"b\": [\n    1,\n    2.0,\n    {}\n  ],\n  \"a\": \"é\\n\",\n  \"c\": []\n}"
        );
        let emoji = Value::from("😀\u{7f}");
        let ascii = DumpOptions { ensure_ascii: true, ..DumpOptions::default() };
        assert_eq!(dumps(&emoji, &ascii).unwrap(), r#""\ud83d\ude00\u007f""#);
    }
}
