//! Jinja2's `pprint` filter, which is Python's `pprint.pformat(value)` (width 80, indent 1, dicts
//! sorted by key): a value whose `repr` fits its line is written as that `repr`; a longer dict,
//! list or tuple puts one item per line, indented under its opening bracket; a longer string is cut
//! after whitespace into adjacent literals, one per line (parenthesized at the top level).
//!
//! Python recomputes each item's `repr` at every level, which is quadratic in nesting; below
//! [`MAX_LEVEL`] levels a value is written as its `repr`, so the cost stays bounded.

use minijinja::value::{Value, ValueKind};

use super::environment::{is_tuple, py_repr_sorted, sorted_keys};
use super::pystr::is_py_whitespace;

/// `pprint`'s line width.
const WIDTH: i64 = 80;

/// Nesting below which values are not laid out again (their `repr`, as one line).
const MAX_LEVEL: usize = 64;

/// `pprint.pformat(value)`.
pub(crate) fn pformat(value: &Value) -> String {
    let mut out = String::new();
    format(&mut out, value, 0, 0, 0);
    out
}

fn width_of(text: &str) -> i64 {
    text.chars().count() as i64
}

/// `PrettyPrinter._format`.
fn format(out: &mut String, value: &Value, indent: i64, allowance: i64, level: usize) {
    let rep = py_repr_sorted(value);
    if width_of(&rep) > WIDTH - indent - allowance && level < MAX_LEVEL {
        let level = level + 1;
        match value.kind() {
            ValueKind::Map if !rep.starts_with('<') => return dict(out, value, indent, allowance, level),
            ValueKind::Seq if is_tuple(value) => return items(out, value, indent, allowance, level, "(", true),
            ValueKind::Seq => return items(out, value, indent, allowance, level, "[", false),
            ValueKind::String => return string(out, value.as_str().unwrap_or_default(), indent, allowance, level),
            _ => {}
        }
    }
    out.push_str(&rep);
}

/// `_pprint_dict` and `_format_dict_items`.
fn dict(out: &mut String, value: &Value, indent: i64, allowance: i64, level: usize) {
    out.push('{');
    let keys = sorted_keys(value);
    let indent = indent + 1;
    let allowance = allowance + 1;
    for (i, key) in keys.iter().enumerate() {
        let last = i + 1 == keys.len();
        let rep = py_repr_sorted(key);
        out.push_str(&rep);
        out.push_str(": ");
        let item = value.get_item(key).unwrap_or_default();
        format(out, &item, indent + width_of(&rep) + 2, if last { allowance } else { 1 }, level);
        if !last {
            out.push_str(",\n");
            out.extend(std::iter::repeat_n(' ', indent as usize));
        }
    }
    out.push('}');
}

/// `_pprint_list` / `_pprint_tuple` and `_format_items` (not compact).
fn items(out: &mut String, value: &Value, indent: i64, allowance: i64, level: usize, open: &str, tuple: bool) {
    let all: Vec<Value> = value.try_iter().map(Iterator::collect).unwrap_or_default();
    let end = if tuple && all.len() == 1 {
        ",)"
    } else if tuple {
        ")"
    } else {
        "]"
    };
    out.push_str(open);
    let allowance = allowance + width_of(end);
    let indent = indent + 1;
    for (i, item) in all.iter().enumerate() {
        let last = i + 1 == all.len();
        if i > 0 {
            out.push_str(",\n");
            out.extend(std::iter::repeat_n(' ', indent as usize));
        }
        format(out, item, indent, if last { allowance } else { 1 }, level);
    }
    out.push_str(end);
}

/// `str.splitlines(keepends=True)`.
fn lines_with_ends(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|&(_, n)| n == '\n') => {
                chars.next();
                i + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                i + c.len_utf8()
            }
            _ => continue,
        };
        lines.push(&text[start..end]);
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// `re.findall(r'\S*\s*', line)` without its final empty match: runs of non-space then space.
fn word_parts(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in line.char_indices() {
        let space = is_py_whitespace(c);
        if in_space && !space {
            parts.push(&line[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < line.len() {
        parts.push(&line[start..]);
    }
    parts
}

/// `_pprint_str`: the string cut into literals that fit, after whitespace.
fn string(out: &mut String, text: &str, indent: i64, allowance: i64, level: usize) {
    let repr = |s: &str| py_repr_sorted(&Value::from(s));
    if text.is_empty() {
        out.push_str(&repr(text));
        return;
    }
    let (indent, allowance) = if level == 1 { (indent + 1, allowance + 1) } else { (indent, allowance) };
    let max_width = WIDTH - indent;
    let mut max_width1 = max_width;
    let lines = lines_with_ends(text);
    let mut chunks: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let rep = repr(line);
        let last_line = i + 1 == lines.len();
        if last_line {
            max_width1 -= allowance;
        }
        if width_of(&rep) <= max_width1 {
            chunks.push(rep);
            continue;
        }
        let parts = word_parts(line);
        let mut max_width2 = max_width;
        let mut current = String::new();
        for (j, part) in parts.iter().enumerate() {
            let candidate = format!("{current}{part}");
            if j + 1 == parts.len() && last_line {
                max_width2 -= allowance;
            }
            if width_of(&repr(&candidate)) > max_width2 {
                if !current.is_empty() {
                    chunks.push(repr(&current));
                }
                current = (*part).to_owned();
            } else {
                current = candidate;
            }
        }
        if !current.is_empty() {
            chunks.push(repr(&current));
        }
    }
    if chunks.len() == 1 {
        out.push_str(&chunks[0]);
        return;
    }
    if level == 1 {
        out.push('(');
    }
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', indent.max(0) as usize));
        }
        out.push_str(chunk);
    }
    if level == 1 {
        out.push(')');
    }
}
