//! The minijinja environment configured as Hugging Face's chat-template sandbox.
//!
//! transformers renders with Jinja2's `ImmutableSandboxedEnvironment(trim_blocks=True,
//! lstrip_blocks=True)` plus loop controls, the `{% generation %}` extension, a `json.dumps`
//! `tojson`, and the globals `raise_exception`, `strftime_now`, `namespace` and `dict`. Templates
//! also lean on Python: `str` / `dict` / `list` methods, Python `repr` when a value is printed, and
//! Jinja2's own filters and tests. This module adds what minijinja (with `minijinja-contrib`'s
//! pycompat) does not already do the same way. Each addition names the Python behaviour it copies.

use std::sync::Arc;

use chrono::NaiveDateTime;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};

use super::RenderLimits;
use super::pyjson::{self, DumpOptions};

/// Clock behind `strftime_now`: a fixed instant, or the local time at each call.
pub(crate) type Clock = Arc<dyn Fn() -> NaiveDateTime + Send + Sync>;

/// Marker error attached (as `source`) to errors raised by the template's `raise_exception`.
#[derive(Debug)]
pub(crate) struct RaisedByTemplate(pub String);

impl std::fmt::Display for RaisedByTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RaisedByTemplate {}

/// Builds an environment that renders like transformers' chat-template sandbox.
pub(crate) fn hf_environment(limits: &RenderLimits) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(false)
            .build()
            .expect("the default delimiters are valid"),
    );
    // Jinja2's default `Undefined`: prints as "", is falsy, raises on attribute access.
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_fuel(Some(limits.fuel));
    env.set_recursion_limit(limits.recursion);
    env.set_formatter(|out, state, value| {
        // Inside `{% autoescape true %}` (the sandbox's default is off), markupsafe's escape of
        // what would print, unless it is safe already.
        let escape = matches!(state.auto_escape(), minijinja::AutoEscape::Html) && !value.is_safe();
        let text = match value.as_str() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None if value.is_undefined() => return Ok(()),
            None => std::borrow::Cow::Owned(py_repr(value)),
        };
        if escape {
            out.write_str(&super::jinja2_filters::markup_escape(&text))?;
        } else {
            out.write_str(&text)?;
        }
        Ok(())
    });
    env.set_unknown_method_callback(python_method);

    // `strftime_now` is added by `set_clock`, which decides where the time comes from.
    env.add_function("raise_exception", raise_exception);
    env.add_function("dict", dict);
    env.add_filter("tojson", tojson);
    // Markup in, Markup out (Jinja2's `do_indent` keeps it).
    env.add_filter("indent", |value: Value, args: Rest<Value>, kwargs: Kwargs| -> Result<Value, Error> {
        let markup = value.is_safe() && value.kind() == ValueKind::String;
        let text = indent(value, args, kwargs)?;
        Ok(if markup { Value::from_safe_string(text) } else { Value::from(text) })
    });
    env.add_filter("length", length);
    env.add_filter("count", length);
    // `soft_str`: Markup stays Markup.
    env.add_filter("string", |value: Value| {
        if value.is_safe() && value.kind() == ValueKind::String { value } else { Value::from(py_str(&value)) }
    });
    // Python's pprint is repr for the short values templates print; minijinja's own pretty-printer
    // is quadratic in nesting depth (fuzz/regressions/render/timeout_pprint_nested).
    env.add_filter("pprint", |value: Value| Value::from(super::pprint::pformat(&value)));
    env.add_test("iterable", is_iterable);
    env.add_test("sequence", is_sequence);
    env.add_test("number", is_number);
    env.add_test("mapping", |value: Value| value.kind() == ValueKind::Map);
    env.add_test("string", |value: Value| value.kind() == ValueKind::String);
    env.add_test("boolean", |value: Value| value.kind() == ValueKind::Bool);
    super::jinja2_filters::install(&mut env);
    env
}

/// Installs `strftime_now(format)` reading `clock`.
pub(crate) fn set_clock(env: &mut Environment<'static>, clock: Clock) {
    env.add_function("strftime_now", move |format: &str| -> Result<String, Error> { strftime(&clock(), format) });
}

/// Python's `datetime.strftime` through chrono, which shares the C directives templates use.
fn strftime(now: &NaiveDateTime, format: &str) -> Result<String, Error> {
    use std::fmt::Write as _;
    let items: Vec<_> = chrono::format::StrftimeItems::new(format).collect();
    if items.iter().any(|item| matches!(item, chrono::format::Item::Error)) {
        return Err(Error::new(ErrorKind::InvalidOperation, format!("strftime_now: unsupported format {format:?}")));
    }
    let mut out = String::new();
    write!(out, "{}", now.format_with_items(items.into_iter()))
        .map_err(|_| Error::new(ErrorKind::InvalidOperation, format!("strftime_now: cannot format {format:?}")))?;
    Ok(out)
}

fn raise_exception(message: Option<Value>) -> Result<Value, Error> {
    let message = message.map(|m| py_str(&m)).unwrap_or_default();
    Err(Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(RaisedByTemplate(message)))
}

/// `dict(**kwargs)` / `dict(mapping, **kwargs)` / `dict(pairs)`.
fn dict(args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut map = indexmap::IndexMap::<Value, Value>::new();
    if let Some(first) = args.first() {
        if args.len() > 1 {
            return Err(Error::new(ErrorKind::TooManyArguments, "dict expected at most 1 argument"));
        }
        if first.kind() == ValueKind::Map {
            for key in first.try_iter()? {
                let item = first.get_item(&key)?;
                map.insert(key, item);
            }
        } else {
            for pair in first.try_iter()? {
                let items: Vec<Value> = pair.try_iter()?.collect();
                let [key, item] = <[Value; 2]>::try_from(items).map_err(|_| {
                    Error::new(ErrorKind::InvalidOperation, "dict: sequence elements must have length 2")
                })?;
                map.insert(key, item);
            }
        }
    }
    let keys: Vec<String> = kwargs.args().map(str::to_owned).collect();
    for key in keys {
        let item = kwargs.get::<Value>(&key)?;
        map.insert(Value::from(key), item);
    }
    Ok(Value::from_pairs(map))
}

/// `json.dumps(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    // transformers' own filter: `tojson(x, ensure_ascii=False, indent=None, separators=None,
    // sort_keys=False)`, positionally too.
    let [ensure_ascii, indent, separators, sort_keys] = super::jinja2_filters::python_arguments(
        "tojson",
        ["ensure_ascii", "indent", "separators", "sort_keys"],
        &args,
        &kwargs,
    )?;
    let mut options = DumpOptions::default();
    if let Some(ensure_ascii) = ensure_ascii {
        options.ensure_ascii = ensure_ascii.is_true();
    }
    if let Some(indent) = indent {
        options.indent = match indent.kind() {
            ValueKind::None => None,
            ValueKind::String => Some(indent.as_str().unwrap_or_default().to_owned()),
            ValueKind::Number | ValueKind::Bool => {
                let width = super::pystr::python_int(&indent, "tojson indent")?;
                Some(" ".repeat(super::pystr::pad_width(width, "tojson indent")?.max(0) as usize))
            }
            kind => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: indent must be an int or a string, not {kind}"),
                ));
            }
        };
    }
    if let Some(separators) = separators.filter(|s| !s.is_none()) {
        let parts: Vec<Value> = separators.try_iter()?.collect();
        match parts.as_slice() {
            [item, key] => options.separators = Some((py_str(item), py_str(key))),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be an (item_separator, key_separator) pair",
                ));
            }
        }
    }
    if let Some(sort_keys) = sort_keys {
        options.sort_keys = sort_keys.is_true();
    }
    pyjson::dumps(&value, &options).map(Value::from)
}

/// Jinja2's `indent(s, width=4, first=False, blank=False)`, including its appended newline quirk.
fn indent(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<String, Error> {
    let mut width = args.first().cloned();
    let mut first = args.get(1).is_some_and(Value::is_true);
    let mut blank = args.get(2).is_some_and(Value::is_true);
    if let Some(w) = kwargs.get::<Option<Value>>("width")? {
        width = Some(w);
    }
    if let Some(f) = kwargs.get::<Option<bool>>("first")? {
        first = f;
    }
    if let Some(b) = kwargs.get::<Option<bool>>("blank")? {
        blank = b;
    }
    kwargs.assert_all_used()?;
    let indention = match width {
        None => "    ".to_owned(),
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_owned(),
        Some(w) => " ".repeat(super::pystr::pad_width(i64::try_from(w)?, "indent")?.max(0) as usize),
    };
    let mut s = py_str(&value);
    s.push('\n');
    let lines = splitlines(&s);
    let mut rv = String::with_capacity(s.len());
    if blank {
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                rv.push('\n');
                rv.push_str(&indention);
            }
            rv.push_str(line);
        }
    } else {
        let mut lines = lines.into_iter();
        rv.push_str(lines.next().unwrap_or_default());
        for line in lines {
            rv.push('\n');
            if !line.is_empty() {
                rv.push_str(&indention);
            }
            rv.push_str(line);
        }
    }
    if first {
        rv.insert_str(0, &indention);
    }
    Ok(rv)
}

/// Python's `str.splitlines()` (without `keepends`).
pub(crate) fn splitlines(s: &str) -> Vec<&str> {
    split_lines(s, false)
}

/// Python's `str.splitlines(keepends)`: every line boundary Python knows (`\r\n`, `\v`, `\f`,
/// `\x1c`-`\x1e`, `\x85`, U+2028, U+2029, not only `\n` and `\r`).
pub(crate) fn split_lines(s: &str, keepends: bool) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(
            c,
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        );
        if is_break {
            let mut end = i + c.len_utf8();
            if c == '\r'
                && let Some((_, '\n')) = chars.peek()
            {
                chars.next();
                end += 1;
            }
            lines.push(&s[start..if keepends { end } else { i }]);
            start = end;
        }
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// `length` / `count`: Jinja2's `Undefined` has length 0; strings count characters.
fn length(value: Value) -> Result<usize, Error> {
    if value.is_undefined() {
        return Ok(0);
    }
    if let Some(s) = value.as_str() {
        return Ok(s.chars().count());
    }
    value.len().ok_or_else(|| {
        Error::new(ErrorKind::InvalidOperation, format!("object of type '{}' has no len()", value.kind()))
    })
}

/// Jinja2's `iterable`: anything `iter()` accepts (strings, lists, dicts, and `Undefined`).
fn is_iterable(value: Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Iterable | ValueKind::Undefined
    )
}

/// Jinja2's `sequence`: has `len()` and `__getitem__` (strings, lists, dicts, and `Undefined`).
fn is_sequence(value: Value) -> bool {
    matches!(value.kind(), ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Undefined)
}

/// Jinja2's `number`: `int`, `float` (and `bool`, a Python `int`).
fn is_number(value: Value) -> bool {
    matches!(value.kind(), ValueKind::Number | ValueKind::Bool)
}

/// Makes `list.append(x)` a no-op returning `None` (Python's return value) instead of an error.
/// Lists stay immutable: the analyzer's workaround `list-append-ignored`, never a real render.
pub(crate) fn ignore_list_append(env: &mut Environment<'static>) {
    env.set_unknown_method_callback(|state, value, method, args| {
        if method == "append" && value.kind() == ValueKind::Seq && args.len() == 1 {
            return Ok(Value::from(()));
        }
        python_method(state, value, method, args)
    });
}

/// Python methods minijinja-contrib's pycompat lacks; everything else is delegated to it.
fn python_method(state: &mut State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    if value.is_safe() && value.kind() == ValueKind::String {
        return markup_method(state, value, method, args);
    }
    str_method(state, value, method, args)
}

/// A method of markupsafe's `Markup` (a safe string): the `str` method on its text, and a text
/// result (or a list or tuple of texts) as Markup again; other results (`find`, `startswith`,
/// `isupper`, …) as `str` gives them. markupsafe 3 escapes only the text a method puts in:
/// `replace`'s replacement, the fill character of `ljust` / `rjust` / `center`, what `format`
/// formats and the items `join` joins.
fn markup_method(state: &mut State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    const WRAPPED: [&str; 24] = [
        "capitalize",
        "title",
        "lower",
        "upper",
        "replace",
        "ljust",
        "rjust",
        "lstrip",
        "rstrip",
        "center",
        "strip",
        "translate",
        "expandtabs",
        "swapcase",
        "zfill",
        "casefold",
        "removeprefix",
        "removesuffix",
        "partition",
        "rpartition",
        "format",
        "split",
        "rsplit",
        "splitlines",
    ];
    let plain = Value::from(value.as_str().unwrap_or_default());
    let escape = |v: &Value| match v.as_str() {
        Some(s) if v.kind() == ValueKind::String && !v.is_safe() => {
            Value::from(super::jinja2_filters::markup_escape(s))
        }
        _ => v.clone(),
    };
    let escaped = |i: usize| -> Vec<Value> {
        args.iter().enumerate().map(|(j, a)| if j == i || i == usize::MAX { escape(a) } else { a.clone() }).collect()
    };
    let result = match method {
        "replace" | "ljust" | "rjust" | "center" => str_method(state, &plain, method, &escaped(1))?,
        "format" => str_method(state, &plain, method, &escaped(usize::MAX))?,
        "join" => {
            let items: Vec<Value> = match args.first() {
                Some(seq) => seq.try_iter()?.map(|v| escape(&v)).collect(),
                None => Vec::new(),
            };
            str_method(state, &plain, method, &[Value::from(items)])?
        }
        _ if WRAPPED.contains(&method) => str_method(state, &plain, method, args)?,
        _ => return str_method(state, &plain, method, args),
    };
    Ok(as_markup(result))
}

/// A text as Markup; a list or tuple of texts as one of Markup.
fn as_markup(value: Value) -> Value {
    match value.kind() {
        ValueKind::String => Value::from_safe_string(value.as_str().unwrap_or_default().to_owned()),
        ValueKind::Seq => {
            let items: Vec<Value> = value.try_iter().map(|i| i.map(as_markup).collect()).unwrap_or_default();
            if is_tuple(&value) { Value::from(minijinja::value::Tuple::from(items)) } else { Value::from(items) }
        }
        _ => value,
    }
}

fn str_method(state: &mut State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    // A list's `index` / `count` (the sandbox allows both; they compare with `==`).
    if value.kind() == ValueKind::Seq && matches!(method, "index" | "count") {
        let [needle] = args else {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("list.{method}: takes exactly one argument")));
        };
        let mut hits = value.try_iter()?.enumerate().filter(|(_, item)| item == needle);
        return if method == "count" {
            Ok(Value::from(hits.count()))
        } else {
            hits.next()
                .map(|(i, _)| Value::from(i))
                .ok_or_else(|| Error::new(ErrorKind::InvalidOperation, format!("{} is not in list", py_repr(needle))))
        };
    }
    if let Some(result) = value.as_str().and_then(|s| super::pystr::call(s, method, args)) {
        return result;
    }
    if let Some(s) = value.as_str() {
        let arg_str = |i: usize| -> Result<Option<String>, Error> {
            match args.get(i) {
                None => Ok(None),
                Some(v) if v.is_none() => Ok(None),
                Some(v) => v.as_str().map(|s| Some(s.to_owned())).ok_or_else(|| {
                    Error::new(ErrorKind::InvalidOperation, format!("str.{method}: expected a string argument"))
                }),
            }
        };
        match method {
            "removeprefix" => {
                let prefix = arg_str(0)?.unwrap_or_default();
                return Ok(Value::from(s.strip_prefix(prefix.as_str()).unwrap_or(s)));
            }
            "removesuffix" => {
                let suffix = arg_str(0)?.unwrap_or_default();
                return Ok(Value::from(s.strip_suffix(suffix.as_str()).unwrap_or(s)));
            }
            "index" | "rindex" => {
                let needle = arg_str(0)?.unwrap_or_default();
                let found = if method == "index" { s.find(&needle) } else { s.rfind(&needle) };
                return match found {
                    Some(byte) => Ok(Value::from(s[..byte].chars().count())),
                    None => Err(Error::new(ErrorKind::InvalidOperation, "substring not found")),
                };
            }
            "rsplit" => {
                let sep = arg_str(0)?;
                if sep.as_deref() == Some("") {
                    return Err(Error::new(ErrorKind::InvalidOperation, "empty separator"));
                }
                let maxsplit = match args.get(1) {
                    Some(v) if !v.is_none() => i64::try_from(v.clone())?,
                    _ => -1,
                };
                return Ok(Value::from(rsplit(s, sep.as_deref(), maxsplit)));
            }
            "zfill" => {
                let width = args.first().map(|w| i64::try_from(w.clone())).transpose()?.unwrap_or(0);
                let len = s.chars().count() as i64;
                if width <= len {
                    return Ok(Value::from(s));
                }
                let pad = "0".repeat((super::pystr::pad_width(width, "str.zfill")? - len) as usize);
                let (sign, rest) = match s.chars().next() {
                    Some(c @ ('+' | '-')) => (c.to_string(), &s[1..]),
                    _ => (String::new(), s),
                };
                return Ok(Value::from(format!("{sign}{pad}{rest}")));
            }
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// Python's `str.rsplit(sep=None, maxsplit=-1)`.
fn rsplit(s: &str, sep: Option<&str>, maxsplit: i64) -> Vec<String> {
    let limit = if maxsplit < 0 { usize::MAX } else { maxsplit as usize };
    match sep {
        Some(sep) if !sep.is_empty() => {
            let mut parts: Vec<String> = Vec::new();
            let mut rest = s;
            while parts.len() < limit {
                match rest.rfind(sep) {
                    Some(at) => {
                        parts.push(rest[at + sep.len()..].to_owned());
                        rest = &rest[..at];
                    }
                    None => break,
                }
            }
            parts.push(rest.to_owned());
            parts.reverse();
            parts
        }
        _ => {
            let mut parts: Vec<String> = Vec::new();
            let mut rest = s.trim_end();
            while parts.len() < limit && !rest.is_empty() {
                match rest.rfind(char::is_whitespace) {
                    Some(at) => {
                        let ws_len = rest[at..].chars().next().map_or(1, char::len_utf8);
                        parts.push(rest[at + ws_len..].to_owned());
                        rest = rest[..at].trim_end();
                    }
                    None => break,
                }
            }
            if !rest.is_empty() {
                parts.push(rest.to_owned());
            }
            parts.reverse();
            parts
        }
    }
}

/// Python's `str(value)`, which is what Jinja2 prints for `{{ value }}`.
pub(crate) fn py_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default().to_owned(),
        ValueKind::Undefined => String::new(),
        _ => py_repr(value),
    }
}

/// Python's `repr(value)` for the JSON-like values templates see.
pub(crate) fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value, 0, false);
    out
}

/// Whether a sequence is a Python tuple (minijinja's `Tuple`), which reprs in parentheses.
pub(crate) fn is_tuple(value: &Value) -> bool {
    value.as_object().is_some_and(|o| o.type_name().contains("Tuple"))
}

/// `repr(value)` with every dict's items sorted by key, as `pprint` writes them.
pub(crate) fn py_repr_sorted(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value, 0, true);
    out
}

/// A dict's keys, sorted as Python's `sorted` orders them where they compare (strings by code
/// point, numbers by value), else by kind.
pub(crate) fn sorted_keys(value: &Value) -> Vec<Value> {
    let mut keys: Vec<Value> = value.try_iter().map(Iterator::collect).unwrap_or_default();
    keys.sort_by(|a, b| match (a.kind(), b.kind()) {
        (ValueKind::String, ValueKind::String) => a.as_str().cmp(&b.as_str()),
        (x, y) if x == y => a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal),
        (x, y) => x.to_string().cmp(&y.to_string()),
    });
    keys
}

fn write_repr(out: &mut String, value: &Value, depth: usize, sort_dicts: bool) {
    if depth > 256 {
        out.push_str("...");
        return;
    }
    match value.kind() {
        // Jinja2's `Undefined` reprs as its class name (printed alone it is empty: `py_str`).
        ValueKind::Undefined => out.push_str("Undefined"),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => {
            if value.is_integer() {
                out.push_str(&value.to_string());
            } else {
                match f64::try_from(value.clone()) {
                    Ok(f) => out.push_str(&pyjson::float_repr(f)),
                    Err(_) => out.push_str(&value.to_string()),
                }
            }
        }
        // Markup (a safe string: `|e`, `|safe`) reprs as markupsafe's class does.
        ValueKind::String if value.is_safe() => {
            out.push_str("Markup(");
            string_repr(out, value.as_str().unwrap_or_default());
            out.push(')');
        }
        ValueKind::String => string_repr(out, value.as_str().unwrap_or_default()),
        // A macro (minijinja's own, or one the `varargs` rewrite wraps) as Jinja2's `Macro` reprs.
        ValueKind::Map
            if value
                .as_object()
                .is_some_and(|o| o.type_name().ends_with("Macro") || o.type_name().ends_with("CatchAll")) =>
        {
            match value.get_attr("name").ok().and_then(|n| n.as_str().map(str::to_owned)) {
                Some(name) if name != "caller" => {
                    out.push_str("<Macro ");
                    string_repr(out, &name);
                    out.push('>');
                }
                _ => out.push_str("<Macro anonymous>"),
            }
        }
        // Jinja2's `Namespace` reprs as `<Namespace {…}>`.
        ValueKind::Map if value.as_object().is_some_and(|o| o.type_name().contains("Namespace")) => {
            out.push_str("<Namespace ");
            let plain: indexmap::IndexMap<Value, Value> = value
                .try_iter()
                .map(|keys| keys.filter_map(|k| value.get_item(&k).ok().map(|v| (k, v))).collect())
                .unwrap_or_default();
            write_repr(out, &Value::from_pairs(plain), depth + 1, sort_dicts);
            out.push('>');
        }
        ValueKind::Seq => {
            let is_tuple = is_tuple(value);
            out.push(if is_tuple { '(' } else { '[' });
            let mut n = 0;
            if let Ok(items) = value.try_iter() {
                for (i, item) in items.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item, depth + 1, sort_dicts);
                    n += 1;
                }
            }
            if is_tuple {
                if n == 1 {
                    out.push(',');
                }
                out.push(')');
            } else {
                out.push(']');
            }
        }
        ValueKind::Map => {
            out.push('{');
            let keys: Vec<Value> = if sort_dicts {
                sorted_keys(value)
            } else {
                value.try_iter().map(Iterator::collect).unwrap_or_default()
            };
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, key, depth + 1, sort_dicts);
                out.push_str(": ");
                let item = value.get_item(key).unwrap_or_default();
                write_repr(out, &item, depth + 1, sort_dicts);
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
fn string_repr(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32).expect("String write"),
            c if (c as u32) < 0x10000 => write!(out, "\\u{:04x}", c as u32).expect("String write"),
            c => write!(out, "\\U{:08x}", c as u32).expect("String write"),
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable` per character: not printable are the Unicode categories Other (`Cc`,
/// `Cf`, `Cs`, `Co`, `Cn`) and Separator (`Zl`, `Zp`, `Zs`), the ASCII space aside. `repr` escapes
/// those (`\xa0` for a no-break space, `\u2028`), as Jinja2 prints containers.
fn is_printable(c: char) -> bool {
    use std::sync::LazyLock;
    static NOT_PRINTABLE: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"^[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$").expect("a valid class"));
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    !NOT_PRINTABLE.is_match(c.encode_utf8(&mut [0; 4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsplit_matches_python() {
        assert_eq!(rsplit("a.b.c", Some("."), 1), vec!["a.b", "c"]);
        assert_eq!(rsplit("a.b.c", Some("."), -1), vec!["a", "b", "c"]);
        assert_eq!(rsplit("  a  b c ", None, 1), vec!["  a  b", "c"]);
        assert_eq!(rsplit("  a  b c ", None, -1), vec!["a", "b", "c"]);
        assert_eq!(rsplit("", None, -1), Vec::<String>::new());
        assert_eq!(rsplit("", Some(","), -1), vec![""]);
    }

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(splitlines("a\nb\r\nc\rd\n"), vec!["a", "b", "c", "d"]);
        assert_eq!(splitlines("a\n\n"), vec!["a", ""]);
        assert_eq!(splitlines(""), Vec::<&str>::new());
    }

    #[test]
    fn repr_matches_python() {
        let v =
            Value::from(minijinja::value::Serde(serde_json::json!({"a": [1, 2.5, null, true, "it's"], "b": "x\ny"})));
        assert_eq!(py_repr(&v), r#"{'a': [1, 2.5, None, True, "it's"], 'b': 'x\ny'}"#);
        // Python 3.11's `repr` of separators, format characters, unassigned and private-use code
        // points (escaped), and of emoji, CJK and a combining mark (kept).
        let s = "a\u{a0}\u{2028}\u{200b}\u{1F600}\u{65e5}e\u{301}\u{378}\u{e000}\u{feff}\u{3000}\u{7f}\u{85}\u{e0001}";
        assert_eq!(
            py_repr(&Value::from(s)),
            "'a\\xa0\\u2028\\u200b\u{1F600}\u{65e5}e\u{301}\\u0378\\ue000\\ufeff\\u3000\\x7f\\x85\\U000e0001'"
        );
    }
}
