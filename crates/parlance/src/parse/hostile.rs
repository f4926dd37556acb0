//! Generators of hostile model output for one `Format`: text built from the Format's own markers
//! that a parser may rescan (a marker repeated with nothing closing it, a marker's prefix that never
//! completes, calls that never close, value tags nested deep). The parse benchmark
//! (`parlance bench parse`) and the linearity tests run every generator at growing sizes: whole and
//! streamed parsing must cost time linear in the output.
//!
//! The generators are derived, not listed per family: every marker the Format names, and every
//! bracketed token inside one, is tried in each shape, so a new template gets its own adversaries.

use crate::format::{ArgumentEncoding, Format};

/// One generator: `prefix`, then `unit` repeated, then `closer` repeated as often as `unit` when
/// it is not empty (nesting), then nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostileOutput {
    /// What the generator does, with the marker it uses (`stray <|im_end|>`).
    pub name: String,
    /// Written once, first.
    pub prefix: String,
    /// Repeated to the size asked for.
    pub unit: String,
    /// Repeated as often as `unit`, after all of them (closing what they opened); may be empty.
    pub closer: String,
}

impl HostileOutput {
    /// The output at about `bytes` long (never shorter than one unit).
    pub fn text(&self, bytes: usize) -> String {
        let per = self.unit.len() + self.closer.len();
        let n = (bytes.saturating_sub(self.prefix.len()) / per.max(1)).max(1);
        let mut text = String::with_capacity(self.prefix.len() + n * per);
        text.push_str(&self.prefix);
        for _ in 0..n {
            text.push_str(&self.unit);
        }
        for _ in 0..n {
            text.push_str(&self.closer);
        }
        text
    }
}

/// Every generator for `format`, deduplicated by text shape.
pub fn hostile_outputs(format: &Format) -> Vec<HostileOutput> {
    let markers = markers(format);
    let mut out: Vec<HostileOutput> = Vec::new();
    let mut push = |name: String, prefix: String, unit: String, closer: String| {
        if !out.iter().any(|o| o.prefix == prefix && o.unit == unit && o.closer == closer) {
            out.push(HostileOutput { name, prefix, unit, closer });
        }
    };
    // Where the text starts: wherever the prompt leaves the model, and inside a reasoning block.
    let mut openings = vec![(String::new(), "")];
    if let Some(reasoning) = format.reasoning.as_ref().filter(|r| !r.start.trim().is_empty()) {
        openings.push((format!("{}x ", reasoning.start.trim()), " in reasoning"));
    }
    for (prefix, place) in &openings {
        for marker in &markers {
            push(format!("stray {marker}{place}"), prefix.clone(), format!("{marker} x "), String::new());
            // The marker cut one character short: a start that never completes.
            if let Some((cut, _)) = marker.char_indices().last().filter(|(at, _)| *at > 0) {
                push(
                    format!("partial {marker}{place}"),
                    prefix.clone(),
                    format!("{} x ", &marker[..cut]),
                    String::new(),
                );
            }
        }
    }
    // Every marker in turn: each kind of step, interleaved (spans of every kind pile up).
    if markers.len() > 1 {
        let all: String = markers.iter().map(|m| format!("{m} x ")).collect();
        push("every marker in turn".to_owned(), String::new(), all, String::new());
    }
    if let Some(tools) = &format.tools {
        let opener = format!("{}{}", tools.section_start.trim(), tools.call_start.trim());
        if !opener.is_empty() {
            let again =
                tools.name_repeat_suffix.as_ref().map(|after| format!("get_weather{after}")).unwrap_or_default();
            let name = format!("{}get_weather{}{again}", tools.name_prefix, tools.name_suffix);
            let head = if tools.json.is_some() { "{\"name\": \"get_weather\", " } else { name.as_str() };
            // A call that opens and never closes, again and again.
            push(format!("unclosed call {opener}"), String::new(), format!("{opener}{head}"), String::new());
            // Each marker, then a call opener that turns out not to open a call (its text taken
            // back as content).
            for marker in &markers {
                push(
                    format!("{marker} then a broken call"),
                    String::new(),
                    format!("{marker} {opener} "),
                    String::new(),
                );
            }
            if tools.json.is_some() || tools.arguments == ArgumentEncoding::Json {
                // Arguments whose JSON never ends.
                push(format!("open JSON {opener}"), format!("{opener}{head}"), "{\"a\": [".to_owned(), String::new());
            }
            if tools.arguments == ArgumentEncoding::Tagged && !tools.arg_name_prefix.trim().is_empty() {
                // An array argument (`a`) whose items nest in one another, then close as deep.
                let open = |n: &str| format!("{}{n}{}", tools.arg_name_prefix, tools.arg_name_suffix);
                let close = |n: &str| match &tools.arg_value_suffix_after_name {
                    Some(after) => format!("{}{n}{after}", tools.arg_value_suffix),
                    None => tools.arg_value_suffix.clone(),
                };
                let item = tools.nested_item_name.as_deref().unwrap_or("a");
                push(
                    format!("nested values {}", open(item).trim()),
                    format!("{opener}{name}{}", open("a")),
                    open(item),
                    close(item),
                );
                // Values whose XML CDATA section never closes, one after another (each value's
                // search for `]]>` must not read the rest of the output again).
                push(
                    "unclosed CDATA values".to_owned(),
                    format!("{opener}{name}"),
                    format!("{}<![CDATA[x{}\n", open("a"), close("a")),
                    String::new(),
                );
            }
        }
    }
    out
}

/// The Format's markers, trimmed, and every bracketed token inside them, each once.
fn markers(format: &Format) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut add = |m: &str| {
        let m = m.trim();
        if m.is_empty() {
            return;
        }
        let pieces = crate::markers::bracketed_pieces(m);
        for piece in std::iter::once(m).chain(pieces) {
            if !piece.is_empty() && !found.iter().any(|f| f == piece) {
                found.push(piece.to_owned());
            }
        }
    };
    if let Some(r) = &format.reasoning {
        add(&r.start);
        add(&r.end);
    }
    add(&format.content.start);
    add(&format.content.end);
    add(&format.turn_end);
    if let Some(t) = &format.tools {
        for m in [
            &t.section_start,
            &t.section_end,
            &t.call_start,
            &t.call_end,
            &t.separator,
            &t.before_calls,
            &t.content_start_with_calls,
            &t.name_prefix,
            &t.name_suffix,
            &t.arg_name_prefix,
            &t.arg_name_suffix,
            &t.arg_value_suffix,
            &t.arg_separator,
            &t.call_id_suffix,
        ] {
            add(m);
        }
        for m in &t.arg_name_suffixes_typed {
            add(m);
        }
        if let Some(m) = &t.name_repeat_suffix {
            add(m);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_repeats_the_unit_then_the_closer() {
        let g = HostileOutput { name: "n".into(), prefix: "P".into(), unit: "<a>".into(), closer: "</a>".into() };
        assert_eq!(g.text(15), "P<a><a></a></a>");
        assert_eq!(g.text(0), "P<a></a>");
    }
}
