//! Jinja2 3.1 builtin filters and tests that minijinja (with `minijinja-contrib`'s pycompat) lacks
//! or does otherwise: `center`, `wordcount`, `truncate`, `wordwrap` (Python's `textwrap`), `urlencode`,
//! `striptags`, the test `callable`, `first` / `last` (Undefined where nothing is there), and
//! Jinja2's lenient `float` / `int` (Python's parsing, the default where Python raises), `items` of
//! an undefined value, `default(..., boolean=True)`, `escape` / `e` / `forceescape` with
//! markupsafe's entities (`&#34;`, `&#39;`; a safe string is left as it is, except by
//! `forceescape`); each as Jinja2 defines it (Python's
//! `str.center`, `re.findall(r"\w+")`, Jinja2's `do_truncate` with its leeway of 5,
//! `urllib.parse.quote`). `tests/data/jinja2_filters.json` holds Jinja2's own outputs for them
//! (`tests/data/jinja2_filters.py` regenerates it).

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

use super::environment::{py_repr, py_str};
use super::pystr::python_int;

/// Adds the filters and tests to `env`.
pub(crate) fn install(env: &mut Environment<'static>) {
    env.add_filter("wordcount", wordcount);
    env.add_filter("truncate", truncate);
    env.add_filter("wordwrap", wordwrap);
    env.add_filter("urlencode", urlencode);
    env.add_filter("striptags", striptags);
    env.add_test("callable", is_callable);
    env.add_filter("float", float);
    env.add_filter("int", int);
    env.add_filter("items", items);
    env.add_filter("default", default);
    env.add_filter("d", default);
    env.add_filter("escape", escape);
    env.add_filter("e", escape);
    env.add_filter("forceescape", forceescape);
    // Python's `str.capitalize` (titlecase first: `ß` is `Ss`), which Jinja2's filter is.
    env.add_filter("capitalize", |value: Value| keep_markup(&value, super::pystr::capitalize(&py_str(&value))));
    env.add_filter("first", |value: Value| end_item(value, false));
    env.add_filter("last", |value: Value| end_item(value, true));
    // Python's `str.upper` / `lower` / `strip` of the value's `str` (Jinja2's `soft_str`).
    env.add_filter("upper", |value: Value| keep_markup(&value, py_str(&value).to_uppercase()));
    env.add_filter("lower", |value: Value| keep_markup(&value, py_str(&value).to_lowercase()));
    env.add_filter("trim", |value: Value, chars: Option<Value>| -> Result<Value, Error> {
        let text = py_str(&value);
        let trimmed = match chars.filter(|c| !c.is_none()) {
            None => text.trim_matches(super::pystr::is_py_whitespace).to_owned(),
            Some(chars) => {
                let chars = chars
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::new(ErrorKind::InvalidOperation, "trim: strip arg must be None or str"))?;
                text.trim_matches(|c| chars.contains(c)).to_owned()
            }
        };
        Ok(keep_markup(&value, trimmed))
    });
    env.add_filter("reverse", |value: Value| -> Result<Value, Error> {
        if value.kind() == ValueKind::String {
            return Ok(keep_markup(&value, value.as_str().unwrap_or_default().chars().rev().collect()));
        }
        minijinja::filters::reverse(&value)
    });
    env.add_filter("center", |value: Value, width: Option<Value>| -> Result<Value, Error> {
        Ok(keep_markup(&value, center(value.clone(), width)?))
    });
    env.add_filter(
        "replace",
        |state: &minijinja::State<'_, '_>, value: Value, old: Value, new: Value, count: Option<Value>| {
            // Under `{% autoescape true %}` Markup's `replace` (the replacement escaped), Markup back.
            if autoescaping(state) && value.is_safe() {
                let new = if new.is_safe() { new } else { Value::from(markup_escape(&py_str(&new))) };
                return replace(value, old, new, count).map(Value::from_safe_string);
            }
            replace(value, old, new, count).map(Value::from)
        },
    );
    // Jinja2's `lower` / `upper` tests: `str(value).islower()` (a dict's repr too).
    env.add_test("lower", |value: Value| super::pystr::is_all_case(&py_str(&value), false));
    env.add_test("upper", |value: Value| super::pystr::is_all_case(&py_str(&value), true));
    env.add_filter("dictsort", dictsort);
    // Python's `abs`: a boolean is the integer it is.
    env.add_filter("abs", |value: Value| -> Result<Value, Error> {
        match value.kind() {
            ValueKind::Bool => Ok(Value::from(i64::from(value.is_true()))),
            ValueKind::Number if value.is_integer() => match super::python_ops::py_int(&value) {
                Some(n) => Ok(i64::try_from(n.abs()).map(Value::from).unwrap_or_else(|_| Value::from(n.abs()))),
                None => Err(Error::new(ErrorKind::InvalidOperation, "abs: integer out of range")),
            },
            ValueKind::Number => Ok(Value::from(f64::try_from(value)?.abs())),
            kind => Err(Error::new(ErrorKind::InvalidOperation, format!("bad operand type for abs(): '{kind}'"))),
        }
    });
    env.add_filter("sort", sort);
    env.add_filter("min", |value: Value, args: Rest<Value>, kwargs: Kwargs| extreme(value, &args, &kwargs, false));
    env.add_filter("max", |value: Value, args: Rest<Value>, kwargs: Kwargs| extreme(value, &args, &kwargs, true));
    env.add_filter("attr", attr);
    env.add_filter("filesizeformat", filesizeformat);
    env.add_filter("xmlattr", |state: &minijinja::State<'_, '_>, value: Value, autospace: Option<bool>| {
        let text = xmlattr(value, autospace)?;
        Ok::<_, Error>(if autoescaping(state) { Value::from_safe_string(text) } else { Value::from(text) })
    });
    env.add_function("cycler", cycler);
    // minijinja's own filters and tests that Jinja2 has not: a template using one fails in
    // transformers, so it fails here too (the sandbox's `str.split` method is another thing).
    for name in ["split", "lines", "bool", "chain", "zip"] {
        env.remove_filter(name);
    }
    for name in ["safe", "int", "startingwith", "endingwith", "containing"] {
        env.remove_test(name);
    }
    env.add_function("joiner", minijinja_contrib::globals::joiner);
}

/// Jinja2's `replace` without autoescape: `str(s).replace(str(old), str(new), count)` (an empty
/// `old` goes between every character).
fn replace(value: Value, old: Value, new: Value, count: Option<Value>) -> Result<String, Error> {
    let (text, old, new) = (py_str(&value), py_str(&old), py_str(&new));
    let count = match count.filter(|c| !c.is_none()) {
        Some(c) => python_int(&c, "replace() count")?,
        None => -1,
    };
    let limit = usize::try_from(count).unwrap_or(usize::MAX);
    if old.is_empty() {
        let mut out = String::with_capacity(text.len() + new.len() * (text.chars().count() + 1));
        let mut done = 0;
        for c in text.chars() {
            if done < limit {
                out.push_str(&new);
                done += 1;
            }
            out.push(c);
        }
        if done < limit {
            out.push_str(&new);
        }
        return Ok(out);
    }
    Ok(if limit == usize::MAX { text.replace(&old, &new) } else { text.replacen(&old, &new, limit) })
}

/// Python's `<` for sort keys: strings by code point, numbers by value; other pairs as Python
/// refuses them.
fn py_less(a: &Value, b: &Value) -> Result<std::cmp::Ordering, Error> {
    let number = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    match (a.kind(), b.kind()) {
        (ValueKind::String, ValueKind::String) => Ok(a.as_str().cmp(&b.as_str())),
        _ if number(a) && number(b) => Ok(a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal)),
        (ValueKind::Seq, ValueKind::Seq) => {
            let (x, y): (Vec<Value>, Vec<Value>) = (a.try_iter()?.collect(), b.try_iter()?.collect());
            for (p, q) in x.iter().zip(&y) {
                let o = py_less(p, q)?;
                if o != std::cmp::Ordering::Equal {
                    return Ok(o);
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        (x, y) => Err(Error::new(ErrorKind::InvalidOperation, format!("'<' not supported between {x} and {y}"))),
    }
}

/// The order Python's `sorted(keys, reverse=…)` puts `keys` in: stable both ways (equal keys keep
/// their order under `reverse` too); Python's error where two keys do not compare.
fn sorted_order(keys: &[Value], reverse: bool) -> Result<Vec<usize>, Error> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let mut failure = None;
    order.sort_by(|&i, &j| {
        let o = py_less(&keys[i], &keys[j]).unwrap_or_else(|e| {
            failure.get_or_insert(e);
            std::cmp::Ordering::Equal
        });
        if reverse { o.reverse() } else { o }
    });
    failure.map_or(Ok(order), Err)
}

/// Jinja2's key for `sort` / `min` / `max`: the item or the item at an attribute path (`a.b`,
/// digits an index; several paths, comma-separated, a list of keys), strings lowercased (`str.lower`,
/// not uppercased: `ß` sorts after `t`) unless case-sensitive.
fn item_key(item: &Value, attribute: Option<&str>, case_sensitive: bool) -> Value {
    let lower = |v: Value| match v.as_str() {
        Some(s) if !case_sensitive && v.kind() == ValueKind::String => Value::from(s.to_lowercase()),
        _ => v,
    };
    let at = |path: &str| {
        path.split('.').fold(item.clone(), |v, part| {
            let key = if part.bytes().all(|b| b.is_ascii_digit()) && !part.is_empty() {
                part.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::from(part))
            } else {
                Value::from(part)
            };
            v.get_item(&key).unwrap_or(Value::UNDEFINED)
        })
    };
    match attribute {
        None => lower(item.clone()),
        Some(paths) if paths.contains(',') => {
            Value::from(paths.split(',').map(|p| lower(at(p.trim()))).collect::<Vec<_>>())
        }
        Some(path) => lower(at(path)),
    }
}

/// Jinja2's `sort(value, reverse=False, case_sensitive=False, attribute=None)`: Python's stable sort.
fn sort(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let [reverse, case_sensitive, attribute] =
        python_arguments("sort", ["reverse", "case_sensitive", "attribute"], &args, &kwargs)?;
    let attribute = attribute.filter(|a| !a.is_none()).map(|a| py_str(&a));
    let items: Vec<Value> = value.try_iter()?.collect();
    let keys: Vec<Value> = items
        .iter()
        .map(|i| item_key(i, attribute.as_deref(), case_sensitive.as_ref().is_some_and(Value::is_true)))
        .collect();
    let order = sorted_order(&keys, reverse.is_some_and(|v| v.is_true()))?;
    Ok(Value::from(order.into_iter().map(|i| items[i].clone()).collect::<Vec<_>>()))
}

/// Jinja2's `min` / `max(value, case_sensitive=False, attribute=None)`: the first least (greatest)
/// item by the key; Undefined for an empty sequence.
fn extreme(value: Value, args: &[Value], kwargs: &Kwargs, max: bool) -> Result<Value, Error> {
    let [case_sensitive, attribute] =
        python_arguments(if max { "max" } else { "min" }, ["case_sensitive", "attribute"], args, kwargs)?;
    let attribute = attribute.filter(|a| !a.is_none()).map(|a| py_str(&a));
    let case_sensitive = case_sensitive.is_some_and(|v| v.is_true());
    let mut best: Option<(Value, Value)> = None;
    for item in value.try_iter()? {
        let key = item_key(&item, attribute.as_deref(), case_sensitive);
        let better = match &best {
            None => true,
            Some((_, best_key)) => {
                let o = py_less(&key, best_key)?;
                if max { o == std::cmp::Ordering::Greater } else { o == std::cmp::Ordering::Less }
            }
        };
        if better {
            best = Some((item, key));
        }
    }
    Ok(best.map_or(Value::UNDEFINED, |(item, _)| item))
}

/// Jinja2's `dictsort(value, case_sensitive=False, by='key', reverse=False)`: the items as pairs,
/// sorted stably by key or value (strings lowercased unless case-sensitive).
fn dictsort(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let [case_sensitive, by, reverse] =
        python_arguments("dictsort", ["case_sensitive", "by", "reverse"], &args, &kwargs)?;
    let case_sensitive = case_sensitive.is_some_and(|v| v.is_true());
    let reverse = reverse.is_some_and(|v| v.is_true());
    let position = match by.as_ref().and_then(Value::as_str).unwrap_or("key") {
        "key" => 0,
        "value" => 1,
        _ => {
            return Err(Error::new(ErrorKind::InvalidOperation, "You can only sort by either \"key\" or \"value\""));
        }
    };
    if value.kind() != ValueKind::Map {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("dictsort: '{}' object has no attribute 'items'", value.kind()),
        ));
    }
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        pairs.push((key, item));
    }
    let sort_key = |pair: &(Value, Value)| -> Value {
        let v = if position == 0 { pair.0.clone() } else { pair.1.clone() };
        match v.as_str() {
            Some(s) if !case_sensitive && v.kind() == ValueKind::String => Value::from(s.to_lowercase()),
            _ => v,
        }
    };
    let keys: Vec<Value> = pairs.iter().map(sort_key).collect();
    let order = sorted_order(&keys, reverse)?;
    Ok(Value::from(
        order
            .into_iter()
            .map(|i| Value::from(minijinja::value::Tuple::from(vec![pairs[i].0.clone(), pairs[i].1.clone()])))
            .collect::<Vec<_>>(),
    ))
}

/// Jinja2's `attr`: Python's `getattr` only, never an item (a dict's keys are not its
/// attributes); a namespace's attributes are.
fn attr(value: Value, name: String) -> Value {
    let namespace = value.as_object().is_some_and(|o| o.type_name().contains("Namespace"));
    if namespace {
        return value.get_attr(&name).unwrap_or(Value::UNDEFINED);
    }
    match value.kind() {
        ValueKind::String | ValueKind::Seq | ValueKind::Map => {
            let method = super::python_ops::method_value(value, name);
            if method.is_undefined() { Value::UNDEFINED } else { method }
        }
        _ => Value::UNDEFINED,
    }
}

/// Jinja2's `filesizeformat(value, binary=False)`.
fn filesizeformat(value: Value, binary: Option<bool>) -> Result<String, Error> {
    let bytes = match value.kind() {
        ValueKind::Number | ValueKind::Bool => {
            f64::try_from(value.clone()).unwrap_or(if value.is_true() { 1.0 } else { 0.0 })
        }
        ValueKind::String => value.as_str().unwrap_or_default().trim().parse::<f64>().map_err(|_| {
            Error::new(ErrorKind::InvalidOperation, format!("could not convert string to float: {}", py_repr(&value)))
        })?,
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("float() argument must be a string or a real number, not '{kind}'"),
            ));
        }
    };
    let binary = binary.unwrap_or(false);
    let base: f64 = if binary { 1024.0 } else { 1000.0 };
    let prefixes: [&str; 8] = if binary {
        ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"]
    } else {
        ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"]
    };
    if bytes == 1.0 {
        return Ok("1 Byte".to_owned());
    }
    if bytes < base {
        return Ok(format!("{} Bytes", bytes.trunc() as i64));
    }
    let mut unit = base;
    for prefix in prefixes {
        unit *= base;
        if bytes < unit {
            return Ok(format!("{:.1} {prefix}", base * bytes / unit));
        }
    }
    Ok(format!("{:.1} {}", base * bytes / unit, prefixes[7]))
}

/// Jinja2's `xmlattr(d, autospace=True)`: `key="value"` pairs (values escaped; None and undefined
/// left out), a key with whitespace, `/`, `>` or `=` refused.
fn xmlattr(value: Value, autospace: Option<bool>) -> Result<String, Error> {
    let mut items = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        if item.is_none() || item.is_undefined() {
            continue;
        }
        let key = py_str(&key);
        if key.chars().any(|c| c.is_whitespace() || matches!(c, '/' | '>' | '=')) {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("Invalid character in attribute name: {key:?}"),
            ));
        }
        let value = if item.is_safe() { py_str(&item) } else { markup_escape(&py_str(&item)) };
        items.push(format!("{}=\"{value}\"", markup_escape(&key)));
    }
    let joined = items.join(" ");
    Ok(if autospace.unwrap_or(true) && !joined.is_empty() { format!(" {joined}") } else { joined })
}

/// Jinja2's `cycler(*items)`: `next()` gives the current item and moves on, `current` reads it,
/// `reset()` goes back to the first.
fn cycler(items: Rest<Value>) -> Result<Value, Error> {
    #[derive(Debug)]
    struct Cycler {
        items: Vec<Value>,
        at: std::sync::atomic::AtomicUsize,
    }
    impl minijinja::value::Object for Cycler {
        fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
            minijinja::value::ObjectRepr::Plain
        }
        fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
            (key.as_str() == Some("current"))
                .then(|| self.items[self.at.load(std::sync::atomic::Ordering::Relaxed)].clone())
        }
        fn call_method(
            self: &std::sync::Arc<Self>,
            _state: &mut minijinja::State<'_, '_>,
            method: &str,
            args: &[Value],
        ) -> Result<Value, Error> {
            use std::sync::atomic::Ordering::Relaxed;
            if !args.is_empty() {
                return Err(Error::new(ErrorKind::TooManyArguments, format!("cycler.{method} takes no arguments")));
            }
            match method {
                "next" => {
                    let at = self.at.load(Relaxed);
                    self.at.store((at + 1) % self.items.len(), Relaxed);
                    Ok(self.items[at].clone())
                }
                "reset" => {
                    self.at.store(0, Relaxed);
                    Ok(Value::from(()))
                }
                _ => Err(Error::from(ErrorKind::UnknownMethod)),
            }
        }
    }
    if items.is_empty() {
        return Err(Error::new(ErrorKind::InvalidOperation, "at least one item has to be provided"));
    }
    Ok(Value::from_object(Cycler { items: items.0, at: std::sync::atomic::AtomicUsize::new(0) }))
}

/// Whether the render is inside `{% autoescape true %}`, where Jinja2's filters return Markup.
pub(crate) fn autoescaping(state: &minijinja::State<'_, '_>) -> bool {
    !matches!(state.auto_escape(), minijinja::AutoEscape::None)
}

/// `text` as Markup when the filter's input was Markup (a safe string): Jinja2's filters that
/// call a `str` method on `soft_str(value)` get markupsafe's Markup back.
fn keep_markup(input: &Value, text: String) -> Value {
    if input.is_safe() && input.kind() == ValueKind::String { Value::from_safe_string(text) } else { Value::from(text) }
}

/// Jinja2's `first` / `last`: the first (last) of what iterating gives (a string's characters, a
/// mapping's keys), and Undefined where there is none: an empty value, or an undefined one (whose
/// iteration is empty), not an error.
fn end_item(value: Value, last: bool) -> Result<Value, Error> {
    let item = match value.kind() {
        ValueKind::Undefined => None,
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default();
            // `last` indexes (`reversed` reads `Markup.__getitem__`: Markup), `first` iterates (`str`).
            let c = if last { s.chars().next_back() } else { s.chars().next() };
            c.map(|c| if last { keep_markup(&value, c.to_string()) } else { Value::from(c) })
        }
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable | ValueKind::Plain => {
            let mut items = value.try_iter()?;
            if last { items.last() } else { items.next() }
        }
        kind => {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("'{kind}' object is not iterable")));
        }
    };
    Ok(item.unwrap_or(Value::UNDEFINED))
}

/// markupsafe's `escape`: the value's Python `str`, with `& < > " '` as entities; the result is
/// safe (escaping it again changes nothing).
fn escape(value: Value) -> Value {
    if value.is_safe() {
        return value;
    }
    forceescape(value)
}

/// Jinja2's `forceescape`: as [`escape`], a safe string too.
fn forceescape(value: Value) -> Value {
    let text = match value.as_str() {
        Some(s) if value.kind() == ValueKind::String => s.to_owned(),
        _ => py_str(&value),
    };
    Value::from_safe_string(markup_escape(&text))
}

/// markupsafe's escape of a text: `& < > " '` as entities.
pub(crate) fn markup_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Python's `float(str)`: whitespace around, a sign, digits with single underscores between them,
/// a fraction and an exponent, or `inf` / `infinity` / `nan` in any case.
fn parse_py_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return t.parse::<f64>().ok().or_else(|| {
            let v = if lower == "nan" { f64::NAN } else { f64::INFINITY };
            Some(if t.starts_with('-') { -v } else { v })
        });
    }
    // Underscores only between digits.
    let bytes = t.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' && !(i > 0 && bytes[i - 1].is_ascii_digit() && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            return None;
        }
    }
    let cleaned: String = t.chars().filter(|&c| c != '_').collect();
    if cleaned.is_empty() || !cleaned.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) {
        return None;
    }
    cleaned.parse::<f64>().ok()
}

/// Python's `int(str, base)`: whitespace around, a sign, the base's prefix (`0x`, `0o`, `0b`; with
/// base 0 the prefix decides), digits with single underscores between them.
fn parse_py_int(text: &str, base: u32) -> Option<i128> {
    let t = text.trim();
    let (negative, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = body.to_ascii_lowercase();
    let prefixed = |p: &str| lower.strip_prefix(p).map(|rest| &body[body.len() - rest.len()..]);
    let (base, digits) = match base {
        0 => match (prefixed("0x"), prefixed("0o"), prefixed("0b")) {
            (Some(d), _, _) => (16, d),
            (_, Some(d), _) => (8, d),
            (_, _, Some(d)) => (2, d),
            // Base 0 refuses leading zeros on a nonzero decimal.
            _ if body.len() > 1 && body.starts_with('0') && body.trim_start_matches(['0', '_']).is_empty() => {
                (10, body)
            }
            _ if body.len() > 1 && body.starts_with('0') => return None,
            _ => (10, body),
        },
        16 => (16, prefixed("0x").unwrap_or(body)),
        8 => (8, prefixed("0o").unwrap_or(body)),
        2 => (2, prefixed("0b").unwrap_or(body)),
        b if (2..=36).contains(&b) => (b, body),
        _ => return None,
    };
    // A prefix may be followed by one underscore (`0x_1f`); elsewhere underscores sit between digits.
    let digits = if digits.len() < body.len() { digits.strip_prefix('_').unwrap_or(digits) } else { digits };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: i128 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        value = value.checked_mul(i128::from(base))?.checked_add(i128::from(c.to_digit(base)?))?;
    }
    Some(if negative { -value } else { value })
}

/// Jinja2's `float(value, default=0.0)`: Python's `float(value)`, or the default where it raises.
fn float(value: Value, default: Option<Value>) -> Value {
    let converted = match value.kind() {
        ValueKind::Number => f64::try_from(value.clone()).ok(),
        ValueKind::Bool => Some(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::String => parse_py_float(value.as_str().unwrap_or_default()),
        _ => None,
    };
    match converted {
        Some(f) => Value::from(f),
        None => default.unwrap_or(Value::from(0.0)),
    }
}

/// Jinja2's `int(value, default=0, base=10)`: Python's `int(value, base)` for strings (else
/// `int(value)`), then `int(float(value))`, else the default.
fn int(value: Value, default: Option<Value>, base: Option<Value>) -> Result<Value, Error> {
    let base = base.map(|b| python_int(&b, "int() base")).transpose()?.unwrap_or(10);
    let base = u32::try_from(base).ok().filter(|b| *b == 0 || (2..=36).contains(b));
    let whole = |f: f64| (f.is_finite() && f.abs() < 1.7e38).then(|| f.trunc() as i128);
    let converted = match value.kind() {
        ValueKind::Number if value.is_integer() => i128::try_from(value.clone()).ok(),
        ValueKind::Number => f64::try_from(value.clone()).ok().and_then(whole),
        ValueKind::Bool => Some(i128::from(value.is_true())),
        ValueKind::String => {
            let text = value.as_str().unwrap_or_default();
            base.and_then(|b| parse_py_int(text, b)).or_else(|| parse_py_float(text).and_then(whole))
        }
        _ => None,
    };
    Ok(match converted {
        Some(n) => i64::try_from(n).map(Value::from).unwrap_or_else(|_| Value::from(n)),
        None => default.unwrap_or(Value::from(0)),
    })
}

/// Jinja2's `striptags` (markupsafe's `Markup.striptags`): comments `<!--…-->` out, then tags
/// `<…>`, whitespace runs collapsed to one space, then HTML entities unescaped. Entities: the
/// numeric ones and `amp`, `lt`, `gt`, `quot`, `apos`, `nbsp` (Python's `html.unescape` knows all of
/// HTML5's; a rarer named one is left as written).
fn striptags(value: Value) -> String {
    let mut text = py_str(&value);
    for (open, close) in [("<!--", "-->"), ("<", ">")] {
        while let Some(start) = text.find(open) {
            let Some(end) = text[start..].find(close).map(|e| start + e + close.len()) else { break };
            text.replace_range(start..end, "");
        }
    }
    let collapsed = text.split(super::pystr::is_py_whitespace).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
    unescape_html(&collapsed)
}

/// `html.unescape` for numeric references and the common named ones (see [`striptags`]).
fn unescape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let (decoded, used) = html_reference(rest);
        match decoded {
            Some(c) => out.push_str(&c),
            None => out.push('&'),
        }
        rest = &rest[used.max(1)..];
    }
    out.push_str(rest);
    out
}

/// The character a reference at the start of `text` (which starts with `&`) stands for, and the
/// bytes it takes.
fn html_reference(text: &str) -> (Option<String>, usize) {
    let body = &text[1..];
    if let Some(num) = body.strip_prefix('#') {
        let (digits, radix, skip) = match num.strip_prefix(['x', 'X']) {
            Some(hex) => (hex.bytes().take_while(u8::is_ascii_hexdigit).count(), 16, 3),
            None => (num.bytes().take_while(u8::is_ascii_digit).count(), 10, 2),
        };
        if digits == 0 {
            return (None, 1);
        }
        let start = skip;
        let digits_text = &text[start..start + digits];
        let code = u32::from_str_radix(digits_text, radix).unwrap_or(u32::MAX);
        let c = char::from_u32(code).filter(|&c| c != '\0').unwrap_or('\u{fffd}');
        let used = start + digits + usize::from(text[start + digits..].starts_with(';'));
        return (Some(c.to_string()), used);
    }
    for (name, c) in [("amp", "&"), ("lt", "<"), ("gt", ">"), ("quot", "\""), ("apos", "'"), ("nbsp", "\u{a0}")] {
        if let Some(after) = body.strip_prefix(name) {
            let semicolon = after.starts_with(';');
            // HTML5 reads `&amp`, `&lt`, `&gt`, `&quot`, `&nbsp` without their semicolon too.
            if semicolon || name != "apos" {
                return (Some(c.to_owned()), 1 + name.len() + usize::from(semicolon));
            }
        }
    }
    (None, 1)
}

/// Jinja2's `items`: an undefined value has none; anything else as minijinja reads a mapping.
fn items(value: Value) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(Value::from(Vec::<Value>::new()));
    }
    minijinja::filters::items(&value)
}

/// Jinja2's `default(value, default_value='', boolean=False)`: the default for an undefined value,
/// and with `boolean` for any false one.
fn default(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    if args.len() > 2 {
        return Err(Error::new(ErrorKind::TooManyArguments, "default() takes at most 2 arguments"));
    }
    let mut fallback = args.first().cloned();
    let mut boolean = args.get(1).map(Value::is_true);
    if let Some(v) = kwargs.get::<Option<Value>>("default_value")? {
        fallback = Some(v);
    }
    if let Some(v) = kwargs.get::<Option<Value>>("boolean")? {
        boolean = Some(v.is_true());
    }
    kwargs.assert_all_used()?;
    let fallback = fallback.unwrap_or_else(|| Value::from(""));
    Ok(if value.is_undefined() || (boolean == Some(true) && !value.is_true()) { fallback } else { value })
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

/// `str.center(width)`: CPython puts the odd space on the left when the width is odd.
fn center(value: Value, width: Option<Value>) -> Result<String, Error> {
    let text = py_str(&value);
    let width = width.map(|w| python_int(&w, "center() width")).transpose()?.unwrap_or(80);
    let width = super::pystr::pad_width(width, "center")?;
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

/// The arguments after the filtered value of a Python function `name(value, NAMES...)`, passed by
/// position or by keyword (each at most once): `None` where not given.
pub(crate) fn python_arguments<const N: usize>(
    name: &str,
    names: [&str; N],
    args: &[Value],
    kwargs: &Kwargs,
) -> Result<[Option<Value>; N], Error> {
    if args.len() > N {
        return Err(Error::new(ErrorKind::TooManyArguments, format!("{name}() takes at most {} arguments", N + 1)));
    }
    let mut slots: [Option<Value>; N] = std::array::from_fn(|i| args.get(i).cloned());
    for (slot, key) in slots.iter_mut().zip(names) {
        if let Some(value) = kwargs.get::<Option<Value>>(key)? {
            if slot.is_some() {
                return Err(type_error(format!("{name}() got multiple values for argument '{key}'")));
            }
            *slot = Some(value);
        }
    }
    kwargs.assert_all_used()?;
    Ok(slots)
}

/// Jinja2's `truncate(s, length=255, killwords=False, end='...', leeway=None)` (leeway 5, the
/// default policy): text at most `length + leeway` characters long is kept whole; longer text is
/// cut to `length - len(end)` characters, at the last space unless `killwords`, then `end` added.
fn truncate(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let [length, killwords, end, leeway] =
        python_arguments("truncate", ["length", "killwords", "end", "leeway"], &args, &kwargs)?;
    let length = length.map(|v| python_int(&v, "truncate() length")).transpose()?.unwrap_or(255);
    let killwords = killwords.is_some_and(|v| v.is_true());
    let end = end.map(|v| py_str(&v)).unwrap_or_else(|| "...".to_owned());
    let leeway = leeway.filter(|v| !v.is_none()).map(|v| python_int(&v, "truncate() leeway")).transpose()?.unwrap_or(5);
    let end_len = end.chars().count() as i64;
    if length < end_len {
        return Err(type_error(format!("expected length >= {end_len}, got {length}")));
    }
    if leeway < 0 {
        return Err(type_error(format!("expected leeway >= 0, got {leeway}")));
    }
    if value.kind() != ValueKind::String {
        // Jinja2 measures what it is given: a short list or dict comes back as it is; a longer one,
        // or a value without a length, is Python's error.
        return match value.len() {
            Some(n) if n as i64 <= length.saturating_add(leeway) => Ok(value),
            Some(_) => Err(type_error("unhashable type: 'slice'".to_owned())),
            None => Err(type_error(format!("object of type '{}' has no len()", value.kind()))),
        };
    }
    let text = py_str(&value);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() as i64 <= length.saturating_add(leeway) {
        return Ok(value);
    }
    let kept: String = chars[..(length - end_len) as usize].iter().collect();
    if killwords {
        return Ok(Value::from(kept + &end));
    }
    // `rsplit(" ", 1)[0]`: up to the last space, or all of it when there is none.
    let cut = kept.rfind(' ').map_or(kept.as_str(), |at| &kept[..at]);
    Ok(Value::from(format!("{cut}{end}")))
}

/// Jinja2's `wordwrap(s, width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True)`:
/// each line of `s` (Python's `splitlines`) wrapped by `textwrap.wrap` (see [`super::textwrap`]),
/// the wrapped lines and the lines joined by `wrapstring` (the environment's newline, `\n`).
fn wordwrap(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<String, Error> {
    let names = ["width", "break_long_words", "wrapstring", "break_on_hyphens"];
    let [width, break_long_words, wrapstring, break_on_hyphens] = python_arguments("wordwrap", names, &args, &kwargs)?;
    let Some(text) = value.as_str() else {
        return Err(type_error(format!("'{}' object has no attribute 'splitlines'", value.kind())));
    };
    let width = width.map(|v| python_int(&v, "wordwrap() width")).transpose()?.unwrap_or(79);
    if width <= 0 {
        return Err(type_error(format!("invalid width {width} (must be > 0)")));
    }
    let break_long_words = break_long_words.is_none_or(|v| v.is_true());
    let break_on_hyphens = break_on_hyphens.is_none_or(|v| v.is_true());
    let wrapstring = wrapstring.filter(|v| !v.is_none()).map_or_else(|| "\n".to_owned(), |v| py_str(&v));
    let width = usize::try_from(width).unwrap_or(usize::MAX);
    let paragraphs: Vec<String> = super::environment::splitlines(text)
        .into_iter()
        .map(|line| super::textwrap::wrap(line, width, break_long_words, break_on_hyphens).join(&wrapstring))
        .collect();
    Ok(paragraphs.join(&wrapstring))
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
