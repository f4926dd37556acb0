//! Python's `str.format` / `str.format_map` as the chat-template sandbox runs them (minijinja-contrib's
//! pycompat knows only part of the mini-language and pads by bytes): literal `{{` / `}}`, fields
//! numbered automatically or explicitly or named, `.name` and `[key]` lookups (the sandbox's
//! formatter reads both through the environment: an item or an attribute), `!s` / `!r` / `!a`,
//! fields nested in a spec (`{:{width}}`), and the format spec of strings, integers, booleans, floats
//! and values without one (`None`, lists: only an empty spec), with widths in code points and
//! Python's errors where it raises.

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::environment::{py_repr, py_str};
use super::python_ops::{float_text, py_int};

fn value_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Where fields take their values from.
struct Args<'a> {
    positional: &'a [Value],
    named: Option<Value>,
    /// The next automatic field number; `None` once a field was numbered by hand.
    auto: Option<usize>,
    manual: bool,
}

/// `template.format(*args, **kwargs)`: `args` as the method received them (keywords, if any, last).
pub(crate) fn format(template: &str, args: &[Value]) -> Result<Value, Error> {
    let (positional, named) = match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => (rest, Some(last.clone())),
        _ => (args, None),
    };
    let mut state = Args { positional, named, auto: Some(0), manual: false };
    Ok(Value::from(render(template, &mut state, 0)?))
}

/// `template.format_map(mapping)`.
pub(crate) fn format_map(template: &str, args: &[Value]) -> Result<Value, Error> {
    let [mapping] = args else {
        return Err(value_error("str.format_map: takes exactly one argument"));
    };
    let mut state = Args { positional: &[], named: Some(mapping.clone()), auto: Some(0), manual: false };
    Ok(Value::from(render(template, &mut state, 0)?))
}

fn render(template: &str, args: &mut Args<'_>, depth: usize) -> Result<String, Error> {
    if depth > 1 {
        return Err(value_error("Max string recursion exceeded"));
    }
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|p| p.1) == Some('{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek().map(|p| p.1) == Some('}') => {
                chars.next();
                out.push('}');
            }
            '}' => return Err(value_error("Single '}' encountered in format string")),
            '{' => {
                // The field runs to the `}` that closes it (nested fields in the spec, brackets
                // in the name).
                let start = i + 1;
                let (mut depth_braces, mut in_bracket, mut end) = (1usize, false, None);
                for (j, d) in chars.by_ref() {
                    match d {
                        '[' if !in_bracket => in_bracket = true,
                        ']' if in_bracket => in_bracket = false,
                        '{' if !in_bracket => depth_braces += 1,
                        '}' if !in_bracket => {
                            depth_braces -= 1;
                            if depth_braces == 0 {
                                end = Some(j);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let end = end.ok_or_else(|| value_error("expected '}' before end of string"))?;
                out.push_str(&field(&template[start..end], args, depth)?);
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// One replacement field's text (between its braces).
fn field(text: &str, args: &mut Args<'_>, depth: usize) -> Result<String, Error> {
    // The name ends at `!` or `:` outside brackets.
    let mut in_bracket = false;
    let mut name_end = text.len();
    for (i, c) in text.char_indices() {
        match c {
            '[' => in_bracket = true,
            ']' => in_bracket = false,
            '!' | ':' if !in_bracket => {
                name_end = i;
                break;
            }
            _ => {}
        }
    }
    let (name, rest) = text.split_at(name_end);
    let (conversion, spec) = match rest.strip_prefix('!') {
        Some(r) => {
            let mut cs = r.chars();
            let conv = cs.next().ok_or_else(|| value_error("end of string while looking for conversion specifier"))?;
            let after = cs.as_str();
            let spec = match after.strip_prefix(':') {
                Some(s) => s,
                None if after.is_empty() => "",
                None => return Err(value_error("expected ':' after conversion specifier")),
            };
            (Some(conv), spec)
        }
        None => (None, rest.strip_prefix(':').unwrap_or("")),
    };
    let value = lookup(name, args)?;
    let value = match conversion {
        None => value,
        Some('s') => Value::from(py_str(&value)),
        Some('r') => Value::from(py_repr(&value)),
        Some('a') => Value::from(ascii(&py_repr(&value))),
        Some(c) => return Err(value_error(format!("Unknown conversion specifier {c}"))),
    };
    let spec = if spec.contains('{') { render(spec, args, depth + 1)? } else { spec.to_owned() };
    format_value(&value, &spec)
}

/// `ascii()`: a repr with every non-ASCII character escaped.
fn ascii(repr: &str) -> String {
    let mut out = String::with_capacity(repr.len());
    for c in repr.chars() {
        match c as u32 {
            0..=0x7f => out.push(c),
            n @ 0x80..=0xff => out.push_str(&format!("\\x{n:02x}")),
            n @ 0x100..=0xffff => out.push_str(&format!("\\u{n:04x}")),
            n => out.push_str(&format!("\\U{n:08x}")),
        }
    }
    out
}

/// The value a field name refers to: an argument, then `.name` / `[key]` lookups.
fn lookup(name: &str, args: &mut Args<'_>) -> Result<Value, Error> {
    let first_end = name.find(['.', '[']).unwrap_or(name.len());
    let (first, mut rest) = name.split_at(first_end);
    let mut value = if first.is_empty() {
        if args.manual {
            return Err(value_error("cannot switch from manual field specification to automatic field numbering"));
        }
        let index = args.auto.unwrap_or(0);
        args.auto = Some(index + 1);
        positional(args, index)?
    } else if first.bytes().all(|b| b.is_ascii_digit()) {
        if args.auto.is_some_and(|n| n > 0) {
            return Err(value_error("cannot switch from automatic field numbering to manual field specification"));
        }
        args.manual = true;
        positional(args, first.parse().map_err(|_| value_error("Too many decimal digits in format string"))?)?
    } else {
        let missing = || Error::new(ErrorKind::InvalidOperation, format!("KeyError: '{first}'"));
        let named = args.named.as_ref().ok_or_else(missing)?;
        let found = if named.is_kwargs() {
            Kwargs::try_from(named.clone()).ok().and_then(|k| k.get::<Value>(first).ok())
        } else {
            named.get_item(&Value::from(first)).ok().filter(|v| !v.is_undefined())
        };
        found.ok_or_else(missing)?
    };
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let attr = &r[..end];
            if attr.is_empty() {
                return Err(value_error("Empty attribute in format string"));
            }
            value = value.get_attr(attr).unwrap_or(Value::UNDEFINED);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(|| value_error("Missing ']' in format string"))?;
            let key = &r[..end];
            let key = match key.parse::<i64>() {
                Ok(n) if key.bytes().all(|b| b.is_ascii_digit()) => Value::from(n),
                _ => Value::from(key),
            };
            value = value.get_item(&key).unwrap_or(Value::UNDEFINED);
            rest = &r[end + 1..];
        } else {
            return Err(value_error("Only '.' or '[' may follow ']' in format field specifier"));
        }
    }
    Ok(value)
}

fn positional(args: &Args<'_>, index: usize) -> Result<Value, Error> {
    args.positional.get(index).cloned().ok_or_else(|| {
        value_error(format!("IndexError: Replacement index {index} out of range for positional args tuple"))
    })
}

/// A parsed format spec: `[[fill]align][sign][z][#][0][width][grouping][.precision][type]`.
#[derive(Default)]
struct Spec {
    fill: Option<char>,
    align: Option<char>,
    sign: Option<char>,
    alternate: bool,
    zero: bool,
    width: usize,
    grouping: Option<char>,
    precision: Option<usize>,
    kind: Option<char>,
}

fn parse_spec(spec: &str) -> Result<Spec, Error> {
    let chars: Vec<char> = spec.chars().collect();
    let mut s = Spec::default();
    let mut i = 0;
    let aligns = ['<', '>', '=', '^'];
    if chars.len() >= 2 && aligns.contains(&chars[1]) {
        s.fill = Some(chars[0]);
        s.align = Some(chars[1]);
        i = 2;
    } else if chars.first().is_some_and(|c| aligns.contains(c)) {
        s.align = Some(chars[0]);
        i = 1;
    }
    if let Some(&c @ ('+' | '-' | ' ')) = chars.get(i) {
        s.sign = Some(c);
        i += 1;
    }
    if chars.get(i) == Some(&'z') {
        i += 1;
    }
    if chars.get(i) == Some(&'#') {
        s.alternate = true;
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        s.zero = true;
        i += 1;
    }
    let digits = |i: &mut usize| -> Result<Option<usize>, Error> {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        if *i == start {
            return Ok(None);
        }
        let text: String = chars[start..*i].iter().collect();
        match text.parse::<i64>() {
            Ok(n) => super::pystr::pad_width(n, "format").map(|n| Some(n as usize)),
            Err(_) => Err(value_error("Too many decimal digits in format string")),
        }
    };
    s.width = digits(&mut i)?.unwrap_or(0);
    if let Some(&c @ (',' | '_')) = chars.get(i) {
        s.grouping = Some(c);
        i += 1;
    }
    if chars.get(i) == Some(&'.') {
        i += 1;
        s.precision = Some(digits(&mut i)?.ok_or_else(|| value_error("Format specifier missing precision"))?);
    }
    if i < chars.len() {
        s.kind = Some(chars[i]);
        i += 1;
    }
    if i < chars.len() {
        return Err(value_error("Invalid format specifier"));
    }
    Ok(s)
}

/// `format(value, spec)`.
fn format_value(value: &Value, spec: &str) -> Result<String, Error> {
    let type_name = match value.kind() {
        ValueKind::String => "str",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::None => "NoneType",
        ValueKind::Undefined => "Undefined",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        _ => "object",
    };
    if spec.is_empty() {
        return Ok(py_str(value));
    }
    let s = parse_spec(spec)?;
    let unknown = |kind: char| value_error(format!("Unknown format code '{kind}' for object of type '{type_name}'"));
    match value.kind() {
        ValueKind::String => {
            if let Some(k) = s.kind.filter(|k| *k != 's') {
                return Err(unknown(k));
            }
            if s.sign.is_some() {
                return Err(value_error("Sign not allowed in string format specifier"));
            }
            if s.align == Some('=') {
                return Err(value_error("'=' alignment not allowed in string format specifier"));
            }
            let text = value.as_str().unwrap_or_default();
            let text: String = match s.precision {
                Some(p) => text.chars().take(p).collect(),
                None => text.to_owned(),
            };
            Ok(pad(&s, "", &text, '<'))
        }
        ValueKind::Number | ValueKind::Bool => {
            let int = if value.kind() == ValueKind::Bool || value.is_integer() { py_int(value) } else { None };
            match (int, s.kind) {
                (Some(n), None | Some('d' | 'n' | 'b' | 'o' | 'x' | 'X' | 'c')) => format_int(n, &s),
                (Some(_), Some(k)) if !"eEfFgG%".contains(k) => Err(unknown(k)),
                (None, Some(k)) if !"eEfFgGn%".contains(k) => Err(unknown(k)),
                _ => {
                    let x = f64::try_from(value.clone()).unwrap_or(if value.is_true() { 1.0 } else { 0.0 });
                    format_float(x, &s)
                }
            }
        }
        _ => Err(value_error(format!("unsupported format string passed to {type_name}.__format__"))),
    }
}

fn format_int(n: i128, s: &Spec) -> Result<String, Error> {
    if s.precision.is_some() {
        return Err(value_error("Precision not allowed in integer format specifier"));
    }
    let kind = s.kind.unwrap_or('d');
    if kind == 'c' {
        if s.sign.is_some() {
            return Err(value_error("Sign not allowed with integer format specifier 'c'"));
        }
        let c = u32::try_from(n)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| value_error("%c arg not in range(0x110000)"))?;
        return Ok(pad(s, "", &c.to_string(), '>'));
    }
    let magnitude = n.unsigned_abs();
    let (digits, prefix, group_every) = match kind {
        'b' => (format!("{magnitude:b}"), "0b", 4),
        'o' => (format!("{magnitude:o}"), "0o", 4),
        'x' => (format!("{magnitude:x}"), "0x", 4),
        'X' => (format!("{magnitude:X}"), "0X", 4),
        _ => (magnitude.to_string(), "", 3),
    };
    if s.grouping == Some(',') && group_every == 4 {
        return Err(value_error(format!("Cannot specify ',' with '{kind}'.")));
    }
    let digits = match s.grouping {
        Some(sep) => group(&digits, sep, group_every),
        None => digits,
    };
    let sign = sign_text(n < 0, s.sign);
    let prefix = if s.alternate { prefix } else { "" };
    Ok(pad(s, &format!("{sign}{prefix}"), &digits, '>'))
}

fn format_float(x: f64, s: &Spec) -> Result<String, Error> {
    let negative = x.is_sign_negative() && !x.is_nan();
    let magnitude = x.abs();
    let body = match s.kind {
        None => match s.precision {
            None => super::pyjson::float_repr(magnitude),
            Some(p) => {
                let mut t = float_text(magnitude, 'g', p, s.alternate);
                if magnitude.is_finite() && !t.contains(['.', 'e', 'E']) {
                    t.push_str(".0");
                }
                t
            }
        },
        Some('%') => format!("{}%", float_text(magnitude * 100.0, 'f', s.precision.unwrap_or(6), s.alternate)),
        Some('n') => float_text(magnitude, 'g', s.precision.unwrap_or(6), s.alternate),
        Some(k) => float_text(magnitude, k, s.precision.unwrap_or(6), s.alternate),
    };
    let body = match s.grouping {
        Some(sep) => {
            let split = body.find(|c: char| !c.is_ascii_digit()).unwrap_or(body.len());
            format!("{}{}", group(&body[..split], sep, 3), &body[split..])
        }
        None => body,
    };
    Ok(pad(s, sign_text(negative, s.sign), &body, '>'))
}

fn sign_text(negative: bool, sign: Option<char>) -> &'static str {
    match (negative, sign) {
        (true, _) => "-",
        (false, Some('+')) => "+",
        (false, Some(' ')) => " ",
        _ => "",
    }
}

/// Digits with `sep` every `every` from the right.
fn group(digits: &str, sep: char, every: usize) -> String {
    let n = digits.len();
    let mut out = String::with_capacity(n + n / every);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(every) {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// `sign_prefix` + `body` padded to the spec's width (code points) by its alignment, `default` when
/// it names none; the `0` flag pads with zeros after the sign.
fn pad(s: &Spec, sign_prefix: &str, body: &str, default: char) -> String {
    let (fill, align) = match (s.fill, s.align) {
        (fill, Some(a)) => (fill.unwrap_or(if s.zero { '0' } else { ' ' }), a),
        (_, None) if s.zero && default == '>' => ('0', '='),
        (_, None) => (' ', default),
    };
    let len = sign_prefix.chars().count() + body.chars().count();
    if len >= s.width {
        return format!("{sign_prefix}{body}");
    }
    let gap = s.width - len;
    let fills = |n: usize| std::iter::repeat_n(fill, n).collect::<String>();
    match align {
        '<' => format!("{sign_prefix}{body}{}", fills(gap)),
        '^' => format!("{}{sign_prefix}{body}{}", fills(gap / 2), fills(gap - gap / 2)),
        '=' => format!("{sign_prefix}{}{body}", fills(gap)),
        _ => format!("{}{sign_prefix}{body}", fills(gap)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(template: &str, args: Vec<Value>) -> String {
        format(template, &args).map(|v| v.to_string()).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn the_mini_language_matches_python() {
        // Each expected text is Python 3.11's own.
        fn v(x: impl Into<Value>) -> Value {
            x.into()
        }
        assert_eq!(
            f(
                "{:>8}|{:<4}|{:^6}|{:08.3f}|{:,}|{:x}|{:b}|{:e}|{!r}",
                vec![v("a"), v("b"), v("c"), v(3.14158), v(1_234_567), v(255), v(5), v(12345.6789), v("q")]
            ),
            "       a|b   |  c   |0003.142|1,234,567|ff|101|1.234568e+04|'q'"
        );
        assert_eq!(f("{:>5}|{:*^7}|{:.2}", vec![v("é"), v("日本"), v("xyz")]), "    é|**日本***|xy");
        assert_eq!(
            f("{:.2%}|{:+d}|{: d}|{:#x}|{:_b}|{:05}", vec![v(0.256), v(3), v(3), v(255), v(10), v(-42)]),
            "25.60%|+3| 3|0xff|1010|-0042"
        );
        assert_eq!(
            f("{}|{:.3}|{:.3}|{}|{:g}", vec![v(1.0), v(1.0), v(1234.5), v(1e20), v(1e-5)]),
            "1.0|1.0|1.23e+03|1e+20|1e-05"
        );
        assert_eq!(f("{0}{1}{0}|{{x}}", vec![v("a"), v("b")]), "aba|{x}");
        assert_eq!(f("{:d}|{}|{:>5}", vec![v(true), v(true), v(true)]), "1|True|    1");
        assert_eq!(f("{:{}}|", vec![v("a"), v(3)]), "a  |");
        assert_eq!(
            f("{0[0]}{1[a]}{1.a}", vec![v(vec![1]), Value::from(std::collections::BTreeMap::from([("a", 2)]))]),
            "122"
        );
        assert!(f("{:d}", vec![v("a")]).starts_with("error"));
        assert!(f("{:>5}", vec![Value::from(())]).starts_with("error"));
        assert!(f("{}{0}", vec![v(1)]).starts_with("error"));
        assert!(f("{", vec![]).starts_with("error"));
        assert!(f("}", vec![]).starts_with("error"));
        assert!(f("{1}", vec![v(1)]).starts_with("error"));
    }
}
