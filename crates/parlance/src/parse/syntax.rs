//! What the parser looks for, derived once from a `Format`: markers trimmed of the whitespace the
//! template puts around them (matched loosely: a model may or may not write it), with that
//! whitespace kept where it must be taken off values (`>\n` before a Qwen3-Coder parameter value).

use crate::format::{ArgumentEncoding, Format, JsonCallFields, ValueEncoding};
use crate::markers::{leading_ws, trailing_ws};

/// The parser's view of a `Format`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Syntax {
    pub reasoning: Option<ReasoningSyntax>,
    /// The empty reasoning block the template writes in turns without reasoning (`</think>`,
    /// `<think></think>`): at the start of the output it is a marker, not content.
    pub empty_block: String,
    pub content_start: String,
    pub content_end: String,
    /// Turn-end markers (`<|im_end|>`, an EOS the caller names): text after one is not the turn.
    pub turn_end: Vec<String>,
    pub tools: Option<ToolSyntax>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ReasoningSyntax {
    /// Empty when the model never writes it (delimiter formats).
    pub start: String,
    /// For a start made of one bracketed token and a word (Gemma 4's `<|channel>thought`), the
    /// token alone: it opens reasoning too when the word does not follow. Empty otherwise.
    pub start_token: String,
    pub end: String,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ToolSyntax {
    /// The JSON object holds the name (JSON families); `None` for name-in-markers families.
    pub json: Option<JsonCallFields>,
    /// Arguments are tagged (`<parameter=a>v</parameter>`, `a=1`) rather than one JSON value.
    pub tagged: bool,
    /// Tagged values are literals (Python `str` or JSON) rather than raw text.
    pub python: bool,
    pub section_start: String,
    pub section_end: String,
    pub call_start: String,
    pub call_end: String,
    pub separator: String,
    pub name_prefix: String,
    /// Name suffix; for indexed suffixes (`:0<|…|>`), the part before the index digits.
    pub name_suffix: String,
    /// For indexed suffixes, the part after the index digits.
    pub name_suffix_after_index: String,
    /// After the call id when the id follows the name (`[CALL_ID]id[ARGS]`).
    pub call_id_suffix: String,
    /// For calls that write the name twice: what follows the second writing, after `name_suffix`
    /// and the name again.
    pub name_repeat: Option<String>,
    /// The call id comes before the name, ended by the name prefix.
    pub id_before_name: bool,
    pub arg_name_prefix: String,
    /// Every name suffix (plain first, then typed ones), trimmed.
    pub arg_name_suffixes: Vec<String>,
    /// Whitespace the template writes after an argument name's suffix (`>\n`): taken off values.
    pub arg_value_lead_ws: String,
    pub arg_value_suffix: String,
    /// After the argument's name in a closing tag that repeats it (`arg_value_suffix` + name + this).
    pub arg_value_suffix_after_name: Option<String>,
    /// Arrays and objects written as nested tags with the argument markers; the array item name.
    pub nested_item_name: Option<String>,
    /// Whitespace the template writes before the value suffix (`\n</parameter>`): taken off values.
    pub arg_value_trail_ws: String,
    pub arg_separator: String,
    pub string_quote: String,
    /// How argument names are written (read back unescaped).
    pub name_escape: crate::format::NameEscape,
    /// No marker at all: the call is a bare JSON value at the start of the output (Llama 3.x).
    pub bare_json: bool,
    /// The marker that opens a tool-call section.
    pub trigger: String,
    /// What opens a call when the model leaves out the markers before it: the call's own opener
    /// when a section start precedes it (Kimi-K2's `<|tool_call_begin|>` after
    /// `<|tool_calls_section_begin|>`), or, without a section start, the last tag of a name prefix
    /// that begins with whole tags (Qwen3-Coder's `<function=` of `<tool_call>\n<function=`).
    /// Empty when no such marker.
    pub call_trigger: String,
    /// `before_calls` and the trigger after it (`<|im_end|>\n<|im_start|>assistant\n<tool_call>`):
    /// content goes on to a call through a new message header. Empty when no such header.
    pub header_trigger: String,
    /// Opens the content of a turn with calls, the section start closing it (`content_start_with_calls`
    /// of the Format): at the start of the output it is a marker, not content. Empty when none.
    pub content_start_with_calls: String,
    /// The section end when it is one bracketed token (Gemma 4's `<|tool_response>`): written after
    /// content that follows the calls, it ends the turn. Empty otherwise.
    pub turn_ending_section_end: String,
}

impl ToolSyntax {
    /// The marker after the value of argument `name` (the closing tag, for formats that repeat
    /// the name in it).
    pub(crate) fn value_suffix_for(&self, name: &str) -> std::borrow::Cow<'_, str> {
        match &self.arg_value_suffix_after_name {
            Some(after) => format!("{}{name}{after}", self.arg_value_suffix).into(),
            None => self.arg_value_suffix.as_str().into(),
        }
    }
}

/// A marker as matched: whitespace may also come between two tags (`</arg_key>\n<arg_value>` for
/// `</arg_key><arg_value>`), so a newline (a loose whitespace run) goes between `>` and `<`.
fn loose(marker: &str) -> String {
    marker.trim().replace("><", ">\n<")
}

impl Syntax {
    pub(crate) fn from_format(format: &Format) -> Syntax {
        let reasoning = format.reasoning.as_ref().filter(|r| !r.end.trim().is_empty()).map(|r| ReasoningSyntax {
            start: loose(&r.start),
            start_token: start_token(&r.start),
            end: loose(&r.end),
        });
        let turn_end: Vec<String> = Some(loose(&format.turn_end)).into_iter().filter(|m| !m.is_empty()).collect();
        let tools = format.tools.as_ref().map(|t| {
            let (name_suffix, after_index) = if t.indexed_name_suffix {
                split_index(t.name_suffix.trim())
            } else {
                (loose(&t.name_suffix), String::new())
            };
            let mut arg_name_suffixes = vec![loose(&t.arg_name_suffix)];
            arg_name_suffixes.extend(t.arg_name_suffixes_typed.iter().map(|s| loose(s)));
            arg_name_suffixes.retain(|s| !s.is_empty());
            let tagged = t.arguments == ArgumentEncoding::Tagged;
            let mut syntax = ToolSyntax {
                json: t.json.clone(),
                tagged,
                python: t.value_encoding == ValueEncoding::Python,
                section_start: loose(&t.section_start),
                section_end: loose(&t.section_end),
                call_start: loose(&t.call_start),
                call_end: loose(&t.call_end),
                separator: loose(&t.separator),
                name_prefix: loose(&t.name_prefix),
                name_suffix,
                name_suffix_after_index: after_index,
                call_id_suffix: loose(&t.call_id_suffix),
                name_repeat: t.name_repeat_suffix.as_deref().map(loose),
                id_before_name: t.call_id_before_name,
                arg_name_prefix: loose(&t.arg_name_prefix),
                arg_name_suffixes,
                arg_value_lead_ws: trailing_ws(&t.arg_name_suffix).to_owned(),
                arg_value_suffix: loose(&t.arg_value_suffix),
                arg_value_suffix_after_name: t
                    .arg_value_suffix_after_name
                    .as_deref()
                    .map(str::trim_end)
                    .map(str::to_owned),
                nested_item_name: t.nested_item_name.clone(),
                arg_value_trail_ws: leading_ws(&t.arg_value_suffix).to_owned(),
                arg_separator: loose(&t.arg_separator),
                string_quote: t.string_quote.clone(),
                name_escape: t.name_escape,
                bare_json: false,
                trigger: String::new(),
                call_trigger: String::new(),
                header_trigger: String::new(),
                content_start_with_calls: loose(&t.content_start_with_calls),
                turn_ending_section_end: String::new(),
            };
            // A section start made of the call's own first marker is not a separate marker.
            syntax.trigger = [&syntax.section_start, &syntax.call_start, &syntax.name_prefix]
                .into_iter()
                .find(|m| !m.is_empty())
                .cloned()
                .unwrap_or_default();
            syntax.bare_json = syntax.trigger.is_empty() && syntax.json.is_some();
            if syntax.bare_json && !t.optional_call_opener.trim().is_empty() {
                // Before a bare JSON call, the special token of the template's other variant.
                syntax.call_trigger = t.optional_call_opener.trim().to_owned();
            }
            let end = syntax.section_end.as_str();
            if end.starts_with('<') && end.ends_with('>') && !crate::markers::bracketed_pieces(end).is_empty() {
                syntax.turn_ending_section_end = end.to_owned();
            }
            if !t.before_calls.trim().is_empty() && !syntax.trigger.is_empty() {
                syntax.header_trigger = format!("{}\n{}", loose(&t.before_calls), syntax.trigger);
            }
            let opener = if syntax.call_start.is_empty() { &syntax.name_prefix } else { &syntax.call_start };
            let section = syntax.section_start.as_str();
            if !section.is_empty()
                && opener.starts_with(['<', '['])
                && !crate::markers::bracketed_pieces(opener).is_empty()
                && !opener.starts_with(section)
                && !section.starts_with(opener.as_str())
            {
                syntax.call_trigger = opener.clone();
            }
            // No section start: the name prefix's last tag, after whole tags.
            let prefix = syntax.name_prefix.as_str();
            if section.is_empty()
                && syntax.call_start.is_empty()
                && let Some(at) = prefix.rfind('<').filter(|&at| at > 0)
            {
                let (head, tail) = prefix.split_at(at);
                let pieces = crate::markers::bracketed_pieces(head);
                let whole = pieces.iter().map(|p| p.len()).sum::<usize>()
                    == head.chars().filter(|c| !c.is_whitespace()).map(char::len_utf8).sum::<usize>();
                if !pieces.is_empty() && whole && tail.len() > 1 && !tail.contains('>') {
                    syntax.call_trigger = tail.to_owned();
                }
            }
            syntax
        });
        Syntax {
            reasoning,
            empty_block: format.reasoning_details.as_ref().map(|d| loose(&d.empty_block)).unwrap_or_default(),
            content_start: loose(&format.content.start),
            content_end: loose(&format.content.end),
            turn_end,
            tools: tools.filter(|t| !t.trigger.is_empty() || t.bare_json),
        }
    }
}

/// The bracketed token a reasoning start begins with, when only a word follows it
/// (`<|channel>thought` gives `<|channel>`); empty otherwise.
fn start_token(start: &str) -> String {
    let start = start.trim();
    let Some(&token) = crate::markers::bracketed_pieces(start).first() else { return String::new() };
    match start.strip_prefix(token) {
        Some(word) if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic()) => token.to_owned(),
        _ => String::new(),
    }
}

fn split_index(suffix: &str) -> (String, String) {
    match suffix.find(|c: char| c.is_ascii_digit()) {
        Some(at) => {
            let digits = suffix[at..].find(|c: char| !c.is_ascii_digit()).map_or(suffix.len(), |n| at + n);
            (suffix[..at].to_owned(), suffix[digits..].to_owned())
        }
        None => (suffix.to_owned(), String::new()),
    }
}
