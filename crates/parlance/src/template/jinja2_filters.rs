//! Jinja2 3.1 builtin filters and tests that minijinja (with `minijinja-contrib`'s pycompat) lacks:
//! `center`, `wordcount`, `truncate`, `urlencode` and the test `callable`, each as Jinja2 defines it
//! (Python's `str.center`, `re.findall(r"\w+")`, Jinja2's `do_truncate` with its leeway of 5,
//! `urllib.parse.quote`). `tests/data/jinja2_filters.json` holds Jinja2's own outputs for them
//! (`tests/data/jinja2_filters.py` regenerates it).

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

use super::environment::py_str;

/// Adds the filters and tests to `env`.
pub(crate) fn install(env: &mut Environment<'static>) {
    env.add_filter("center", center);
    env.add_filter("wordcount", wordcount);
    env.add_filter("truncate", truncate);
    env.add_filter("urlencode", urlencode);
    env.add_test("callable", is_callable);
}

/// Functions are minijinja's plain objects; a macro is an object that lists `name`, `arguments` and
/// `caller` and renders as `<macro NAME>` (minijinja has no callability query).
fn is_callable(value: Value) -> bool {
    value.kind() == ValueKind::Plain
        || (value.as_object().is_some()
            && value.to_string().starts_with("<macro ")
            && value.get_attr("arguments").is_ok())
}

fn type_error(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// An integer argument as Python takes it (`True` is 1; floats and strings are refused).
fn int_arg(value: &Value, what: &str) -> Result<i64, Error> {
    match value.kind() {
        ValueKind::Bool => Ok(i64::from(value.is_true())),
        ValueKind::Number if value.as_i64().is_some() && !py_str(value).contains(['.', 'e', 'n']) => {
            Ok(value.as_i64().unwrap_or(0))
        }
        _ => Err(type_error(format!("{what}: an integer is required, not {}", py_str(value)))),
    }
}

/// `str.center(width)`: CPython puts the odd space on the left when the width is odd.
fn center(value: Value, width: Option<Value>) -> Result<String, Error> {
    let text = py_str(&value);
    let width = width.map(|w| int_arg(&w, "center() width")).transpose()?.unwrap_or(80);
    let len = text.chars().count() as i64;
    if width <= len {
        return Ok(text);
    }
    let margin = width - len;
    let left = margin / 2 + (margin & width & 1);
    let (left, right) = (left as usize, (margin - left) as usize);
    Ok(format!("{}{text}{}", " ".repeat(left), " ".repeat(right)))
}

/// Python's `\w` for `str` patterns: letters, digits and numbers of every script, and `_`.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `len(re.findall(r"\w+", str(value)))`.
fn wordcount(value: Value) -> usize {
    let text = py_str(&value);
    let mut count = 0;
    let mut in_word = false;
    for c in text.chars() {
        let word = is_word(c);
        if word && !in_word {
            count += 1;
        }
        in_word = word;
    }
    count
}

/// Jinja2's `truncate(s, length=255, killwords=False, end='...', leeway=None)` (leeway 5, the
/// default policy): text at most `length + leeway` characters long is kept whole; longer text is
/// cut to `length - len(end)` characters, at the last space unless `killwords`, then `end` added.
fn truncate(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<String, Error> {
    const NAMES: [&str; 4] = ["length", "killwords", "end", "leeway"];
    if args.len() > NAMES.len() {
        return Err(Error::new(ErrorKind::TooManyArguments, "truncate() takes at most 4 arguments"));
    }
    let mut slots: [Option<Value>; 4] = Default::default();
    for (slot, arg) in slots.iter_mut().zip(args.iter()) {
        *slot = Some(arg.clone());
    }
    for (i, name) in NAMES.iter().enumerate() {
        if let Some(value) = kwargs.get::<Option<Value>>(name)? {
            if slots[i].is_some() {
                return Err(type_error(format!("truncate() got multiple values for argument '{name}'")));
            }
            slots[i] = Some(value);
        }
    }
    kwargs.assert_all_used()?;
    let [length, killwords, end, leeway] = slots;
    let length = length.map(|v| int_arg(&v, "truncate() length")).transpose()?.unwrap_or(255);
    let killwords = killwords.is_some_and(|v| v.is_true());
    let end = end.map(|v| py_str(&v)).unwrap_or_else(|| "...".to_owned());
    let leeway = leeway.filter(|v| !v.is_none()).map(|v| int_arg(&v, "truncate() leeway")).transpose()?.unwrap_or(5);
    let end_len = end.chars().count() as i64;
    if length < end_len {
        return Err(type_error(format!("expected length >= {end_len}, got {length}")));
    }
    if leeway < 0 {
        return Err(type_error(format!("expected leeway >= 0, got {leeway}")));
    }
    let text = py_str(&value);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() as i64 <= length.saturating_add(leeway) {
        return Ok(text);
    }
    let kept: String = chars[..(length - end_len) as usize].iter().collect();
    if killwords {
        return Ok(kept + &end);
    }
    // `rsplit(" ", 1)[0]`: up to the last space, or all of it when there is none.
    let cut = kept.rfind(' ').map_or(kept.as_str(), |at| &kept[..at]);
    Ok(format!("{cut}{end}"))
}

/// `urllib.parse.quote_from_bytes` of the UTF-8 bytes: letters, digits, `_.-~` and `safe` kept.
fn url_quote(value: &Value, for_query: bool) -> String {
    let text = py_str(value);
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) || (!for_query && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if for_query { out.replace("%20", "+") } else { out }
}

/// Jinja2's `urlencode`: a string (or any non-iterable) quoted as a URL path; a mapping, or an
/// iterable of pairs, as a query string (`k=v&…`, spaces as `+`).
fn urlencode(value: Value) -> Result<String, Error> {
    let pair = |k: &Value, v: &Value| format!("{}={}", url_quote(k, true), url_quote(v, true));
    match value.kind() {
        ValueKind::String | ValueKind::Number | ValueKind::Bool | ValueKind::None | ValueKind::Bytes => {
            Ok(url_quote(&value, false))
        }
        ValueKind::Map => {
            let mut parts = Vec::new();
            for key in value.try_iter()? {
                parts.push(pair(&key, &value.get_item(&key)?));
            }
            Ok(parts.join("&"))
        }
        ValueKind::Undefined => Ok(String::new()),
        _ => {
            let mut parts = Vec::new();
            for item in value.try_iter()? {
                let mut fields = item.try_iter().map_err(|_| type_error("cannot unpack a non-iterable item".into()))?;
                let (Some(k), Some(v), None) = (fields.next(), fields.next(), fields.next()) else {
                    return Err(type_error("urlencode: every item must be a (key, value) pair".into()));
                };
                parts.push(pair(&k, &v));
            }
            Ok(parts.join("&"))
        }
    }
}
