//! Python `str` methods the chat-template sandbox allows, where minijinja-contrib's pycompat lacks them
//! or does them differently: `partition` / `rpartition` (tuples), `ljust` / `rjust` / `center` with
//! a fill character, `swapcase`, `casefold`, `istitle`, `expandtabs`, `translate`, `title` and `capitalize` with
//! Python's cased-character rules, and `find` / `rfind` / `index` / `rindex` / `startswith` /
//! `endswith` with Python's `start` / `end` slice arguments, `split` with its whitespace rule, `islower` /
//! `isupper` with titlecase letters, `count` with a slice, and `isdecimal` / `isdigit` / `isnumeric` / `isalpha` /
//! `isalnum` / `isprintable` / `isidentifier` from Python's own character tables (`char_classes`). Indices count code points, as Python's.
//! Checked against Python itself in `tests/data/jinja2_filters.json`.

use minijinja::value::{Tuple, Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// The widest padding a template may ask for (`ljust`, `center`, `zfill`, `indent`, `tojson`'s
/// indent, a format spec's width): past it a render is refused with a limit error, never given a
/// narrower text than Python's.
pub(crate) const MAX_PAD: i64 = 1 << 20;

/// A padding width, refused past [`MAX_PAD`].
pub(crate) fn pad_width(width: i64, what: &str) -> Result<i64, Error> {
    if width > MAX_PAD {
        return Err(value_error(format!("{what}: a width of {width} is past parlance's limit of {MAX_PAD}")));
    }
    Ok(width)
}

fn value_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Python's `str.casefold`: Unicode's full case folding (`ß` is `ss`, `ς` is `σ`, Cherokee folds
/// to capitals), where it differs from lowercasing from `super::casefold_table`.
fn casefold(s: &str) -> String {
    let table = super::casefold_table::CASEFOLD;
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match table.binary_search_by_key(&c, |&(k, _)| k) {
            Ok(i) => out.push_str(table[i].1),
            Err(_) => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// The string argument `i` of `method`, or `None` when absent or `None`.
fn str_arg(method: &str, args: &[Value], i: usize) -> Result<Option<String>, Error> {
    match args.get(i) {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v
            .as_str()
            .map(|s| Some(s.to_owned()))
            .ok_or_else(|| value_error(format!("str.{method}: a string is required, not {v}"))),
    }
}

/// An integer argument as Python takes one (`__index__`: booleans are 0 and 1, floats and strings
/// are refused); `what` names the argument in the error.
pub(crate) fn python_int(value: &Value, what: &str) -> Result<i64, Error> {
    match value.kind() {
        ValueKind::Bool => Ok(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => i64::try_from(value.clone()),
        _ => Err(value_error(format!("{what}: an integer is required, not {value}"))),
    }
}

fn int_arg(method: &str, value: &Value) -> Result<i64, Error> {
    python_int(value, &format!("str.{method}"))
}

/// Python's slice bounds `s[start:end]` over `len` code points: negative from the end, clamped.
fn slice_bounds(method: &str, args: &[Value], from: usize, len: usize) -> Result<(usize, usize), Error> {
    let bound = |i: usize, default: usize| -> Result<usize, Error> {
        match args.get(i) {
            None => Ok(default),
            Some(v) if v.is_none() => Ok(default),
            Some(v) => {
                let n = int_arg(method, v)?;
                let n = if n < 0 { n + len as i64 } else { n };
                Ok(n.clamp(0, len as i64) as usize)
            }
        }
    };
    Ok((bound(from, 0)?, bound(from + 1, len)?))
}

/// Byte offset of code point `i` in `s` (its length past the end).
fn byte_at(s: &str, i: usize) -> usize {
    s.char_indices().nth(i).map_or(s.len(), |(at, _)| at)
}

/// A fill character: exactly one code point (Python's `TypeError` otherwise).
fn fill_char(method: &str, args: &[Value]) -> Result<char, Error> {
    match str_arg(method, args, 1)? {
        None => Ok(' '),
        Some(fill) => {
            let mut chars = fill.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(c),
                _ => Err(value_error(format!("str.{method}: the fill character must be exactly one character long"))),
            }
        }
    }
}

/// Titlecase of a character: uppercase, except where Unicode's titlecase differs (the digraphs'
/// own titlecase letters; `SpecialCasing.txt`: `ß` is `Ss`, the Latin and Armenian ligatures keep
/// their second letters small, Greek letters with ypogegrammeni take prosgegrammeni).
fn titlecase(c: char, out: &mut String) {
    let special = match c {
        'Ǆ' | 'ǅ' | 'ǆ' => "ǅ",
        'Ǉ' | 'ǈ' | 'ǉ' => "ǈ",
        'Ǌ' | 'ǋ' | 'ǌ' => "ǋ",
        'Ǳ' | 'ǲ' | 'ǳ' => "ǲ",
        'ß' => "Ss",
        'ﬀ' => "Ff",
        'ﬁ' => "Fi",
        'ﬂ' => "Fl",
        'ﬃ' => "Ffi",
        'ﬄ' => "Ffl",
        'ﬅ' | 'ﬆ' => "St",
        'և' => "Եւ",
        'ﬓ' => "Մն",
        'ﬔ' => "Մե",
        'ﬕ' => "Մի",
        'ﬖ' => "Վն",
        'ﬗ' => "Մխ",
        '\u{1FB2}' => "\u{1FBA}\u{0345}",
        '\u{1FB4}' => "\u{0386}\u{0345}",
        '\u{1FC2}' => "\u{1FCA}\u{0345}",
        '\u{1FC4}' => "\u{0389}\u{0345}",
        '\u{1FF2}' => "\u{1FFA}\u{0345}",
        '\u{1FF4}' => "\u{038F}\u{0345}",
        '\u{1FB7}' => "\u{0391}\u{0342}\u{0345}",
        '\u{1FC7}' => "\u{0397}\u{0342}\u{0345}",
        '\u{1FF7}' => "\u{03A9}\u{0342}\u{0345}",
        _ => "",
    };
    if !special.is_empty() {
        out.push_str(special);
        return;
    }
    // ᾀ–ᾯ: the lowercase ones title to their prosgegrammeni capitals (8 on), those stay; ᾳ ῃ ῳ too.
    let n = c as u32;
    let title = match n {
        0x1F80..=0x1FAF => Some(n | 0x8),
        0x1FB3 | 0x1FC3 | 0x1FF3 => Some(n + 9),
        0x1FBC | 0x1FCC | 0x1FFC => Some(n),
        _ => None,
    };
    match title.and_then(char::from_u32) {
        Some(t) => out.push(t),
        None => out.extend(c.to_uppercase()),
    }
}

/// Python's "cased" characters (Lu, Ll, Lt).
fn is_cased(c: char) -> bool {
    c.is_uppercase() || c.is_lowercase() || is_titlecase(c)
}

/// Unicode's titlecase letters (Lt): cased, yet neither upper nor lower case.
fn is_titlecase(c: char) -> bool {
    matches!(c, 'ǅ' | 'ǈ' | 'ǋ' | 'ǲ' | '\u{1F88}'..='\u{1F8F}' | '\u{1F98}'..='\u{1F9F}' | '\u{1FA8}'..='\u{1FAF}')
        || matches!(c, '\u{1FBC}' | '\u{1FCC}' | '\u{1FFC}')
}

/// Python's `islower` (`upper == false`) and `isupper`: at least one cased character, and every
/// cased one in that case (a titlecase letter is in neither).
pub(crate) fn is_all_case(s: &str, upper: bool) -> bool {
    let mut cased = false;
    for c in s.chars() {
        let (this, other) =
            if upper { (c.is_uppercase(), c.is_lowercase()) } else { (c.is_lowercase(), c.is_uppercase()) };
        if other || is_titlecase(c) {
            return false;
        }
        cased |= this;
    }
    cased
}

/// Python's `str.split(sep=None, maxsplit=-1)`: without a separator, runs of whitespace split and
/// whitespace at either end makes no empty part (`' '.split(None, 1)` is `[]`).
fn split(s: &str, args: &[Value]) -> Result<Value, Error> {
    let sep = str_arg("split", args, 0)?;
    let maxsplit = match args.get(1) {
        Some(v) => int_arg("split", v)?,
        None => -1,
    };
    let mut limit = if maxsplit < 0 { usize::MAX } else { maxsplit as usize };
    let mut parts: Vec<Value> = Vec::new();
    match sep.as_deref() {
        Some("") => return Err(value_error("str.split: empty separator")),
        Some(sep) => {
            let mut rest = s;
            while limit > 0 {
                let Some(at) = rest.find(sep) else { break };
                parts.push(Value::from(&rest[..at]));
                rest = &rest[at + sep.len()..];
                limit -= 1;
            }
            parts.push(Value::from(rest));
        }
        None => {
            let mut rest = s;
            while limit > 0 {
                rest = rest.trim_start_matches(is_py_whitespace);
                if rest.is_empty() {
                    break;
                }
                let end = rest.find(is_py_whitespace).unwrap_or(rest.len());
                parts.push(Value::from(&rest[..end]));
                rest = &rest[end..];
                limit -= 1;
            }
            let rest = rest.trim_start_matches(is_py_whitespace);
            if !rest.is_empty() {
                parts.push(Value::from(rest));
            }
        }
    }
    Ok(Value::from(parts))
}

/// Whether `c` is in one of `super::char_classes`' sorted range tables.
fn in_class(table: &[(char, char)], c: char) -> bool {
    let i = table.partition_point(|&(_, hi)| hi < c);
    table.get(i).is_some_and(|&(lo, _)| lo <= c)
}

/// A predicate over every character (`empty`: its value for the empty string).
fn all_chars(s: &str, empty: bool, each: impl Fn(char) -> bool) -> Value {
    Value::from(if s.is_empty() { empty } else { s.chars().all(each) })
}

/// `args` with keywords (minijinja passes them last) put where Python's positional parameters
/// `names` are; `None` when a keyword is not one of them.
fn keyword_args(args: &[Value], names: &[&str]) -> Result<Vec<Value>, Error> {
    let Some((last, rest)) = args.split_last().filter(|(last, _)| last.is_kwargs()) else {
        return Ok(args.to_vec());
    };
    let mut out: Vec<Option<Value>> = rest.iter().cloned().map(Some).collect();
    for key in last.try_iter()? {
        let name = key.as_str().unwrap_or_default();
        let at = names.iter().position(|n| *n == name).ok_or_else(|| {
            Error::new(ErrorKind::TooManyArguments, format!("'{name}' is an invalid keyword argument"))
        })?;
        if out.len() <= at {
            out.resize(at + 1, None);
        }
        if out[at].is_some() {
            return Err(value_error(format!("argument for {name} given by name and position")));
        }
        out[at] = Some(last.get_item(&key)?);
    }
    // A keyword after a gap fills the gap with the parameter's default: `None` reads as absent.
    Ok(out.into_iter().map(|v| v.unwrap_or(Value::from(()))).collect())
}

/// The result of `s.method(*args)`, or `None` when this module does not handle `method`.
pub(crate) fn call(s: &str, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    use super::char_classes as class;
    Some(match method {
        "isdecimal" => Ok(all_chars(s, false, |c| in_class(class::DECIMAL, c))),
        "isdigit" => Ok(all_chars(s, false, |c| in_class(class::DIGIT, c))),
        "isnumeric" => Ok(all_chars(s, false, |c| in_class(class::NUMERIC, c))),
        "isalpha" => Ok(all_chars(s, false, |c| in_class(class::ALPHA, c))),
        "isalnum" => Ok(all_chars(s, false, |c| in_class(class::ALPHA, c) || in_class(class::NUMERIC, c))),
        "isprintable" => Ok(all_chars(s, true, |c| !in_class(class::NOT_PRINTABLE, c))),
        "isidentifier" => Ok(Value::from(
            s.chars().next().is_some_and(|c| in_class(class::ID_START, c))
                && s.chars().skip(1).all(|c| in_class(class::ID_CONTINUE, c)),
        )),
        "count" => count(s, args),
        "split" => keyword_args(args, &["sep", "maxsplit"]).and_then(|a| split(s, &a)),
        "splitlines" => keyword_args(args, &["keepends"]).map(|a| {
            let lines = super::environment::split_lines(s, a.first().is_some_and(Value::is_true));
            Value::from(lines.into_iter().map(Value::from).collect::<Vec<_>>())
        }),
        "partition" | "rpartition" => partition(s, method, args),
        "ljust" | "rjust" | "center" => justify(s, method, args),
        "swapcase" => Ok(Value::from(swapcase(s))),
        "casefold" => Ok(Value::from(casefold(s))),
        "istitle" => Ok(Value::from(istitle(s))),
        "islower" => Ok(Value::from(is_all_case(s, false))),
        "isupper" => Ok(Value::from(is_all_case(s, true))),
        "format" => super::pyformat::format(s, args),
        "format_map" => super::pyformat::format_map(s, args),
        "expandtabs" => expandtabs(s, args),
        "translate" => translate(s, args),
        "title" => Ok(Value::from(title(s))),
        "capitalize" => Ok(Value::from(capitalize(s))),
        "find" | "rfind" | "index" | "rindex" => find(s, method, args),
        "startswith" | "endswith" => affix(s, method, args),
        _ => return None,
    })
}

/// Python's `str.count(sub, start, end)`: non-overlapping, in the slice; an empty `sub` counts the
/// slice's gaps.
fn count(s: &str, args: &[Value]) -> Result<Value, Error> {
    let sub = str_arg("count", args, 0)?.ok_or_else(|| value_error("str.count: takes at least 1 argument"))?;
    let len = s.chars().count();
    let (start, end) = slice_bounds("count", args, 1, len)?;
    if start > end {
        return Ok(Value::from(0));
    }
    let window = &s[byte_at(s, start)..byte_at(s, end)];
    let n = if sub.is_empty() { window.chars().count() + 1 } else { window.matches(sub.as_str()).count() };
    Ok(Value::from(n))
}

fn partition(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let sep = str_arg(method, args, 0)?.ok_or_else(|| value_error(format!("str.{method}: a separator is required")))?;
    if sep.is_empty() {
        return Err(value_error("empty separator"));
    }
    let found = if method == "partition" { s.find(&sep) } else { s.rfind(&sep) };
    let parts: [&str; 3] = match (found, method) {
        (Some(at), _) => [&s[..at], &sep, &s[at + sep.len()..]],
        (None, "partition") => [s, "", ""],
        (None, _) => ["", "", s],
    };
    Ok(Value::from(Tuple::from(parts.map(Value::from))))
}

fn justify(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let width = int_arg(method, args.first().ok_or_else(|| value_error(format!("str.{method}: width is required")))?)?;
    let width = pad_width(width, &format!("str.{method}"))?;
    let fill = fill_char(method, args)?;
    let len = s.chars().count() as i64;
    if width <= len {
        return Ok(Value::from(s));
    }
    let margin = width - len;
    // CPython's `str.center` puts the odd character on the left when the width is odd.
    let left = match method {
        "ljust" => 0,
        "rjust" => margin,
        _ => margin / 2 + (margin & width & 1),
    };
    let pad = |n: i64| std::iter::repeat_n(fill, n as usize).collect::<String>();
    Ok(Value::from(format!("{}{s}{}", pad(left), pad(margin - left))))
}

fn swapcase(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_uppercase() {
            out.extend(c.to_lowercase());
        } else if c.is_lowercase() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Python's `istitle`: uppercase and titlecase characters follow only uncased ones, lowercase ones
/// only cased ones, and there is at least one cased character.
fn istitle(s: &str) -> bool {
    let (mut cased, mut previous_cased) = (false, false);
    for c in s.chars() {
        if c.is_uppercase() || is_titlecase(c) {
            if previous_cased {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else if c.is_lowercase() {
            if !previous_cased {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else {
            previous_cased = false;
        }
    }
    cased
}

fn expandtabs(s: &str, args: &[Value]) -> Result<Value, Error> {
    let size = args.first().map(|v| int_arg("expandtabs", v)).transpose()?.unwrap_or(8).max(0) as usize;
    let mut out = String::with_capacity(s.len());
    let mut column = 0usize;
    for c in s.chars() {
        match c {
            '\t' if size > 0 => {
                let spaces = size - column % size;
                out.extend(std::iter::repeat_n(' ', spaces));
                column += spaces;
            }
            '\t' => {}
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            _ => {
                out.push(c);
                column += 1;
            }
        }
    }
    Ok(Value::from(out))
}

/// `translate(table)`: a mapping from code points to a string, a code point or `None` (deleted).
fn translate(s: &str, args: &[Value]) -> Result<Value, Error> {
    let table = args
        .first()
        .filter(|t| t.kind() == ValueKind::Map)
        .ok_or_else(|| value_error("str.translate: a mapping is required"))?;
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let mapped = table.get_item(&Value::from(c as u32))?;
        match Some(mapped).filter(|v| !v.is_undefined()) {
            None => out.push(c),
            Some(v) if v.is_none() => {}
            Some(v) if v.kind() == ValueKind::String => out.push_str(v.as_str().unwrap_or_default()),
            Some(v) => {
                let code = int_arg("translate", &v)?;
                let mapped = u32::try_from(code).ok().and_then(char::from_u32);
                out.push(
                    mapped.ok_or_else(|| {
                        value_error(format!("character mapping must be in range(0x110000), not {code}"))
                    })?,
                );
            }
        }
    }
    Ok(Value::from(out))
}

/// Python's `title`: the first cased character after an uncased one in titlecase, the others lower.
fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut previous_cased = false;
    for c in s.chars() {
        if previous_cased {
            out.extend(c.to_lowercase());
        } else {
            titlecase(c, &mut out);
        }
        previous_cased = is_cased(c);
    }
    out
}

/// Python's `capitalize` (3.8+): the first character in titlecase, the rest lowercase.
pub(crate) fn capitalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    if let Some(first) = chars.next() {
        titlecase(first, &mut out);
    }
    for c in chars {
        out.extend(c.to_lowercase());
    }
    out
}

fn find(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let needle =
        str_arg(method, args, 0)?.ok_or_else(|| value_error(format!("str.{method}: a substring is required")))?;
    let len = s.chars().count();
    let (start, end) = slice_bounds(method, args, 1, len)?;
    let found = if start > end {
        None
    } else {
        let (from, to) = (byte_at(s, start), byte_at(s, end));
        let window = &s[from..to];
        let at = if method.starts_with('r') { window.rfind(&needle) } else { window.find(&needle) };
        at.map(|byte| start + window[..byte].chars().count())
    };
    match (found, method) {
        (Some(i), _) => Ok(Value::from(i)),
        (None, "find" | "rfind") => Ok(Value::from(-1)),
        (None, _) => Err(value_error("substring not found")),
    }
}

fn affix(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let candidates: Vec<String> = match args.first() {
        Some(v) if v.kind() == ValueKind::String => vec![v.as_str().unwrap_or_default().to_owned()],
        Some(v) if v.kind() == ValueKind::Seq => v
            .try_iter()?
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| value_error(format!("str.{method}: a tuple of strings is required")))
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(value_error(format!("str.{method}: a string or a tuple of strings is required"))),
    };
    let len = s.chars().count();
    let (start, end) = slice_bounds(method, args, 1, len)?;
    if start > end {
        return Ok(Value::from(false));
    }
    let window = &s[byte_at(s, start)..byte_at(s, end)];
    let hit = candidates
        .iter()
        .any(|c| if method == "startswith" { window.starts_with(c.as_str()) } else { window.ends_with(c.as_str()) });
    Ok(Value::from(hit))
}

/// Python's `str.isspace` for one character (what `str.split()` splits on): Unicode White_Space
/// and the ASCII separators U+001C-U+001F.
pub(crate) fn is_py_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_follow_python() {
        let args = [Value::from("a"), Value::from(-1)];
        assert_eq!(call("abca", "find", &args).unwrap().unwrap(), Value::from(3));
        assert!(call("abc", "index", &[Value::from("a"), Value::from(99)]).unwrap().is_err());
        assert_eq!(call("ǆa", "capitalize", &[]).unwrap().unwrap(), Value::from("ǅa"));
        assert_eq!(call("x", "unknown", &[]).map(|_| ()), None);
    }
}
