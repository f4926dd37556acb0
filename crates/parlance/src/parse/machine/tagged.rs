//! Tagged arguments (`<parameter=name>value</parameter>` and kin): each argument's name and value
//! read between the format's markers, converted by the tool's schema and emitted as JSON.

use serde_json::Value as Json;

use super::section::{CallFailure, Phase, Section, is_name_char};
use super::{MAX_NAME, Machine, State, Step};
use crate::parse::IssueKind;
use crate::parse::SpanKind;
use crate::parse::scan::{
    Match, find_marker, hold_window, leading_literal_ws, leading_ws, marker_hold, starts_with_marker,
};
use crate::parse::syntax::ToolSyntax;
use crate::values::{
    Converted, NestedTags, allowed_types, convert, leading_zero_integer, nested, python_string_body, read_literal,
    requote, written_json,
};

/// XML CDATA delimiters: tagged values may wrap text in them.
const CDATA_OPEN: &str = "<![CDATA[";
const CDATA_CLOSE: &str = "]]>";

/// Tagged arguments being read.
#[derive(Debug)]
pub(super) struct Tagged {
    count: usize,
    /// The separator after the last argument was read (a wait after it must not read another).
    separated: bool,
    step: TaggedStep,
}

/// Where reading a value stopped: for a literal, the byte offset in the value, bracket depth, open
/// quote; for raw text in a CDATA section, where the section ends once found.
#[derive(Debug, Clone, Copy, Default)]
struct LiteralScan {
    pos: usize,
    depth: usize,
    in_quote: Option<char>,
    escape: bool,
    cdata_end: Option<usize>,
}

#[derive(Debug)]
enum TaggedStep {
    BeforeArg,
    Name {
        from: usize,
    },
    /// `searched`: bytes of the value already searched for its end (kept so long values streamed
    /// in small chunks are scanned once).
    Value {
        name: String,
        from: usize,
        searched: usize,
        literal: LiteralScan,
    },
}

impl Tagged {
    pub(super) fn new() -> Tagged {
        Tagged { count: 0, separated: false, step: TaggedStep::BeforeArg }
    }
}

impl Machine {
    pub(super) fn args_tagged(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        mut tagged: Tagged,
    ) -> Result<Step, CallFailure> {
        match std::mem::replace(&mut tagged.step, TaggedStep::BeforeArg) {
            TaggedStep::BeforeArg => {
                if self.buf[self.pos..].trim_start().is_empty() && !self.eof {
                    section.phase = Phase::Tagged(tagged);
                    return Ok(Step::Wait);
                }
                if tagged.count > 0 && !tagged.separated {
                    match self.at_marker(&tools.arg_separator) {
                        Match::Full(end) => {
                            self.marker(end);
                            tagged.separated = true;
                        }
                        Match::Partial => {
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        Match::No => {}
                    }
                }
                // The call's end, or its leading tags (`</function>` of `</function>\n</tool_call>`
                // where the output ends or goes on otherwise).
                let end_markers = [tools.call_end.as_str(), tools.section_end.as_str()];
                for marker in end_markers {
                    match self.at_end_marker(marker) {
                        Match::Full(_) => return Ok(self.finish_tagged(section, tagged, None)),
                        Match::Partial => {
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        Match::No => {}
                    }
                }
                if self.eof && self.buf[self.pos..].trim().is_empty() {
                    let at = self.buf.len();
                    return Ok(self.finish_tagged(section, tagged, Some(at)));
                }
                if tools.arg_name_prefix.is_empty() {
                    let rest = self.buf[self.pos..].trim_start();
                    if rest.starts_with(is_name_char) {
                        let start = self.buf.len() - rest.len();
                        self.span(SpanKind::Whitespace, self.pos, start);
                        self.pos = start;
                        tagged.step = TaggedStep::Name { from: start };
                        section.phase = Phase::Tagged(tagged);
                        return Ok(Step::Again);
                    }
                } else {
                    match self.at_marker(&tools.arg_name_prefix) {
                        Match::Full(end) => {
                            self.marker(end);
                            tagged.step = TaggedStep::Name { from: end };
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Again);
                        }
                        Match::Partial => {
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        Match::No => {}
                    }
                }
                // Neither an argument nor the call's end: the call ends here, malformed.
                self.issue(IssueKind::MalformedArguments, self.pos, "unexpected text inside a tool call");
                let at = self.pos;
                Ok(self.finish_tagged(section, tagged, Some(at)))
            }
            TaggedStep::Name { from } => {
                let rest = &self.buf[from..];
                // A suffix is looked for only where it can end a name (at most `MAX_NAME` on):
                // one further on makes the name malformed as no suffix does, and searching the rest
                // of the output for a typed suffix that never comes, at every argument, was
                // quadratic in the output.
                let reach = |s: &str| {
                    let mut end = (MAX_NAME + hold_window(s)).min(rest.len());
                    while !rest.is_char_boundary(end) {
                        end += 1;
                    }
                    &rest[..end]
                };
                // The first suffix, earliest in the list at a tie. A name holds no `<`, `>` or line
                // break, so a suffix that ends one starts at the first of them at the latest: only
                // there is each suffix looked for first, and where the last one found starts
                // (Kimi-K3 has eight typed suffixes; each searched `MAX_NAME` bytes per argument).
                // Only when no suffix is there is the whole reach searched, to tell a malformed
                // name from one still coming.
                // (Looked for within a name's bound only: past it the name is malformed anyway.)
                let stop = rest.bytes().take(MAX_NAME + 1).position(|b| matches!(b, b'<' | b'>' | b'\n'));
                let stop = stop.unwrap_or(MAX_NAME + 1);
                // With `stop`, suffixes starting up to it; without, the whole reach.
                let first_suffix = |stop: Option<usize>| {
                    let mut found: Option<(usize, usize)> = None;
                    for s in &tools.arg_name_suffixes {
                        let text = reach(s);
                        let limit = stop.map_or(usize::MAX, |stop| stop + hold_window(s));
                        let mut end = limit.min(found.map_or(usize::MAX, |(i, _)| i + hold_window(s))).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        if let Some((i, e)) = find_marker(&text[..end], s)
                            && found.is_none_or(|(best, _)| i < best)
                        {
                            found = Some((i, e - i));
                        }
                    }
                    found
                };
                let found = first_suffix(Some(stop)).filter(|&(i, _)| i <= stop).or_else(|| first_suffix(None));
                match found {
                    Some((i, len)) if i <= MAX_NAME && !rest[..i].contains(['<', '>', '\n']) => {
                        let name = tools.name_escape.unescape(rest[..i].trim()).into_owned();
                        let suffix_end = from + i + len;
                        // The whitespace the template writes after the suffix (`>\n`).
                        let lead = leading_literal_ws(&self.buf[suffix_end..], &tools.arg_value_lead_ws);
                        let lead_complete = lead == tools.arg_value_lead_ws.len() || self.buf.len() > suffix_end + lead;
                        if !lead_complete && !self.eof {
                            tagged.step = TaggedStep::Name { from };
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        self.span(SpanKind::ToolArguments, from, from + i);
                        self.span(SpanKind::Marker, from + i, suffix_end);
                        self.pos = suffix_end;
                        self.span(SpanKind::Whitespace, self.pos, self.pos + lead);
                        self.pos += lead;
                        tagged.step =
                            TaggedStep::Value { name, from: self.pos, searched: 0, literal: LiteralScan::default() };
                        section.phase = Phase::Tagged(tagged);
                        Ok(Step::Again)
                    }
                    Some(_) => {
                        self.issue(
                            IssueKind::MalformedArguments,
                            from,
                            "an argument name that does not end where a name can",
                        );
                        Ok(self.finish_tagged(section, tagged, Some(from)))
                    }
                    None if rest.len() > MAX_NAME
                        && tools
                            .arg_name_suffixes
                            .iter()
                            .all(|s| marker_hold(rest, s) == 0 || rest.len() - marker_hold(rest, s) > MAX_NAME) =>
                    {
                        // Decided the same way however the text arrived: no name within the bound.
                        self.issue(
                            IssueKind::MalformedArguments,
                            from,
                            "an argument name that does not end where a name can",
                        );
                        Ok(self.finish_tagged(section, tagged, Some(from)))
                    }
                    None if self.eof => {
                        self.issue(IssueKind::TruncatedCall, from, "the output ends inside an argument name");
                        let end = self.buf.len();
                        self.span(SpanKind::ToolArguments, from, end);
                        self.pos = end;
                        Ok(self.finish_tagged(section, tagged, Some(end)))
                    }
                    None => {
                        tagged.step = TaggedStep::Name { from };
                        section.phase = Phase::Tagged(tagged);
                        Ok(Step::Wait)
                    }
                }
            }
            TaggedStep::Value { name, from, searched, mut literal } => {
                let value_suffix = tools.value_suffix_for(&tools.name_escape.escape(&name));
                match self.read_value(tools, &value_suffix, from, searched, &mut literal) {
                    None => {
                        // Every byte so far was searched (inside a CDATA section still open,
                        // for its close).
                        let searched = self.buf.len() - from;
                        tagged.step = TaggedStep::Value { name, from, searched, literal };
                        section.phase = Phase::Tagged(tagged);
                        Ok(Step::Wait)
                    }
                    Some((raw, quoted, value_end, end)) => {
                        self.span(SpanKind::ToolArguments, from, value_end);
                        self.span(SpanKind::Marker, value_end, end);
                        self.pos = end;
                        let truncated = end == self.buf.len() && self.eof && !value_suffix.is_empty();
                        self.emit_argument(tools, &name, &raw, quoted, tagged.count, from);
                        tagged.count += 1;
                        tagged.separated = false;
                        if truncated && !self.buf[from..end].contains(value_suffix.as_ref()) {
                            self.issue(IssueKind::TruncatedCall, end, "the output ends inside an argument value");
                            return Ok(self.finish_tagged(section, tagged, Some(end)));
                        }
                        tagged.step = TaggedStep::BeforeArg;
                        section.phase = Phase::Tagged(tagged);
                        Ok(Step::Again)
                    }
                }
            }
        }
    }

    /// Reads a tagged value at `from`: `(raw, quoted, value_end, end)` where `end` is past its
    /// suffix; `None` when undecided.
    fn read_value(
        &mut self,
        tools: &ToolSyntax,
        value_suffix: &str,
        from: usize,
        searched: usize,
        literal: &mut LiteralScan,
    ) -> Option<(String, bool, usize, usize)> {
        let rest = &self.buf[from..];
        if !value_suffix.is_empty() && tools.string_quote.is_empty() {
            return self.raw_value_end(tools, value_suffix, from, searched, literal);
        }
        // Literal values: a quoted string, or a bare literal up to the separator or the call end.
        // Multi-character quotes (Gemma 4's `<|"|>`) hold anything; one-character quotes are
        // literals with escapes, read below.
        let quote = tools.string_quote.as_str();
        if quote.chars().count() > 1 && rest.starts_with(quote) {
            let body = &rest[quote.len()..];
            let mut resume = searched.saturating_sub(2 * quote.len()).min(body.len());
            while !body.is_char_boundary(resume) {
                resume -= 1;
            }
            return match body[resume..].find(quote).map(|i| resume + i) {
                Some(i) => {
                    let end = from + quote.len() + i + quote.len();
                    Some((body[..i].to_owned(), true, end, end))
                }
                None if self.eof => Some((body.to_owned(), true, self.buf.len(), self.buf.len())),
                None => None,
            };
        }
        let stops: Vec<&str> = [tools.arg_separator.as_str(), tools.call_end.as_str(), value_suffix]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect();
        // Resumed where the last chunk left it, so a long value streamed in small pieces is read once.
        let LiteralScan { pos: resume, mut depth, mut in_quote, mut escape, .. } = *literal;
        for (i, c) in rest[resume..].char_indices().map(|(i, c)| (resume + i, c)) {
            let before = LiteralScan { pos: i, depth, in_quote, escape, cdata_end: None };
            if let Some(q) = in_quote {
                if escape {
                    escape = false;
                } else if c == '\\' {
                    escape = true;
                } else if c == q {
                    // A top-level string ends at a quote that the format's next marker follows;
                    // another is a quote the model left unescaped inside it (`'sed -n '1,2p' f'`).
                    if depth > 0 {
                        in_quote = None;
                        continue;
                    }
                    match self.quote_closes(tools, value_suffix, &rest[i + c.len_utf8()..]) {
                        Some(true) => in_quote = None,
                        Some(false) => {}
                        None => {
                            *literal = before;
                            return None;
                        }
                    }
                }
                continue;
            }
            match c {
                '"' | '\'' => in_quote = Some(c),
                '[' | '{' | '(' => depth += 1,
                ']' | '}' | ')' if depth > 0 => depth -= 1,
                _ => {}
            }
            if depth == 0 && in_quote.is_none() {
                if let Some(stop) = stops.iter().find(|s| rest[i..].starts_with(**s)) {
                    let value = rest[..i].trim_end();
                    let end = if *stop == value_suffix { from + i + stop.len() } else { from + i };
                    let (value_text, quoted) = unquote(value);
                    return Some((value_text, quoted, from + value.len(), end));
                }
                if stops.iter().any(|s| s.starts_with(&rest[i..])) && !self.eof {
                    *literal = before;
                    return None;
                }
            }
        }
        if self.eof {
            // A string cut before its closing quote is the string so far, without its opening quote.
            if let Some(q) = in_quote.filter(|&q| depth == 0 && rest.starts_with(q)) {
                return Some((python_string_body(&rest[q.len_utf8()..]), true, self.buf.len(), self.buf.len()));
            }
            let (value_text, quoted) = unquote(rest.trim_end());
            Some((value_text, quoted, from + rest.trim_end().len(), self.buf.len()))
        } else {
            *literal = LiteralScan { pos: rest.len(), depth, in_quote, escape, cdata_end: None };
            None
        }
    }

    /// Where a raw tagged value (text up to its suffix) ends: `(raw, quoted, value_end, end)` as
    /// [`Machine::read_value`] returns it, `None` when undecided.
    ///
    /// Models write the closing tag loosely and sometimes not at all, and values (code) may hold
    /// the closing tag's text. So the value ends at, first, its suffix in the form the template
    /// writes it, with the whitespace before (`\n</parameter>`: a `</parameter>` inside a line
    /// of code stays in the value); else, where a marker of the call comes first at a line's start
    /// (the next `<parameter=`, the call's or section's end, the turn's end), at the last bare
    /// suffix before that marker, or, when there is none (the closing tag never came), right
    /// before the marker, reported; at the end of the output, at the last bare suffix.
    fn raw_value_end(
        &mut self,
        tools: &ToolSyntax,
        suffix: &str,
        from: usize,
        searched: usize,
        scan: &mut LiteralScan,
    ) -> Option<(String, bool, usize, usize)> {
        let rest = &self.buf[from..];
        let trail = tools.arg_value_trail_ws.as_str();
        // Resume the search where a marker cut off by the end of the last search may start: the
        // longest span one match may have (its loose whitespace included) before where it stopped.
        let longest = [suffix, &tools.arg_name_prefix, &tools.call_end, &tools.section_end]
            .into_iter()
            .chain(self.setup.syntax.turn_end.iter().map(String::as_str))
            .map(hold_window)
            .max()
            .unwrap_or(0);
        let mut resume = searched.saturating_sub(trail.len() + longest).min(rest.len());
        while !rest.is_char_boundary(resume) {
            resume -= 1;
        }
        // An XML CDATA section holds text verbatim, the value suffix included (MiniCPM5's
        // `<![CDATA[…</param>…]]>`): the value is its text when the suffix follows it. (Its close
        // is found through the machine's marker search, which never reads a byte twice: values
        // whose sections never close would otherwise each search the rest of the output.)
        let cdata = match (rest.starts_with(CDATA_OPEN), scan.cdata_end) {
            (_, Some(end)) => Some(end),
            (true, None) => match self.search.find(&self.buf, from + CDATA_OPEN.len(), CDATA_CLOSE) {
                None if !self.eof => return None,
                Some((_, close_end)) => {
                    let end = close_end - from;
                    scan.cdata_end = Some(end);
                    Some(end)
                }
                None => None,
            },
            (false, None) => None,
        };
        if let Some(cdata_end) = cdata {
            let after = &rest[cdata_end..];
            let ws = leading_ws(after);
            match crate::parse::scan::match_at(&after[ws..], suffix) {
                // (Whitespace between the section and the suffix is bounded, so a stream does not
                // read a long run of it again on every chunk.)
                Match::Full(n) if ws <= 64 => {
                    let inner = &rest[CDATA_OPEN.len()..cdata_end - CDATA_CLOSE.len()];
                    return Some((inner.to_owned(), true, from + cdata_end + ws, from + cdata_end + ws + n));
                }
                Match::Partial if ws <= 64 && !self.eof => return None,
                _ => {}
            }
        }
        match cdata {
            Some(end) => resume = resume.max(end),
            // A section that never closed: the bytes searched so far were searched for its close
            // only, so the value's end is looked for from the start (once, at the end of input).
            None if rest.starts_with(CDATA_OPEN) => resume = 0,
            None => {}
        }
        // The suffix as the template writes it.
        let mut strict = None;
        let mut at = resume;
        while let Some((i, e)) = find_marker(&rest[at..], suffix).map(|(i, e)| (at + i, at + e)) {
            if rest[..i].ends_with(trail) {
                strict = Some((i - trail.len(), e));
                break;
            }
            at = e;
        }
        // A marker of the call before that: the call's or section's end, the turn's end, or, at
        // a line's start, the next argument's opener (`<parameter=` inside a line is code). Not
        // a marker that the closing tag holds (MiniMax-M3's closing tags begin with its argument
        // opener), nor, where values nest tags, the argument opener: those are the value's own.
        let bound = strict.map_or(rest.len(), |(i, _)| i);
        let closing = format!("{trail}{suffix}");
        let line_start = |j: usize| {
            let before = self.buf[..from + j].trim_end_matches([' ', '\t']);
            before.ends_with('\n') || before.trim_end().ends_with(suffix)
        };
        let nests = tools.nested_item_name.is_some();
        let markers: Vec<(&str, bool)> = [(&tools.call_end, false), (&tools.section_end, false)]
            .into_iter()
            .chain(self.setup.syntax.turn_end.iter().map(|m| (m, false)))
            .chain((!nests).then_some((&tools.arg_name_prefix, true)))
            .map(|(m, line)| (m.as_str(), line))
            .filter(|(m, _)| !m.trim().is_empty() && !closing.contains(m.trim()))
            .collect();
        let find_first = |markers: &[(&str, bool)], from: usize| {
            let mut next_marker: Option<usize> = None;
            for &(marker, at_line_start) in markers {
                let mut at = from;
                while let Some(j) = find_marker(&rest[at..bound], marker).map(|(i, _)| at + i) {
                    if next_marker.is_some_and(|n| n <= j) {
                        break;
                    }
                    if !at_line_start || line_start(j) {
                        next_marker = Some(j);
                        break;
                    }
                    at = j + 1;
                    while !rest.is_char_boundary(at) {
                        at += 1;
                    }
                }
            }
            next_marker
        };
        let mut next_marker = find_first(&markers, resume);
        if next_marker.is_none() && strict.is_none() && self.eof {
            // Nothing more comes and nothing ended the value: a marker's first tag, at a line's
            // start, is enough (`</function>` of `</function>\n</tool_call>`). (Only then: a
            // stream would have decided on whole markers before the end of the output.)
            let firsts: Vec<(&str, bool)> = markers
                .iter()
                .filter_map(|(m, _)| crate::markers::bracketed_pieces(m).first().copied())
                .filter(|m| !closing.contains(m))
                .map(|m| (m, true))
                .collect();
            next_marker = find_first(&firsts, 0);
        }
        // The last bare suffix before `limit`, the value before it losing the template's trailing
        // whitespace.
        let bare_before = |limit: usize| {
            let mut last = None;
            let mut at = 0;
            while let Some((i, e)) = find_marker(&rest[at..limit], suffix).map(|(i, e)| (at + i, at + e)) {
                last = Some((i, e));
                at = e;
            }
            last.map(|(i, e)| {
                let value = &rest[..i];
                let cut = value.len() - value.trim_end().len();
                let take = value[value.len() - cut..]
                    .bytes()
                    .rev()
                    .zip(trail.bytes().rev())
                    .take_while(|(a, b)| a == b)
                    .count();
                (value[..value.len() - take].to_owned(), false, from + i - take, from + e)
            })
        };
        if let Some(j) = next_marker {
            if let Some(found) = bare_before(j) {
                return Some(found);
            }
            let value = rest[..j].trim_end().to_owned();
            let value_end = from + value.len();
            self.issue(
                IssueKind::MalformedArguments,
                from + j,
                "an argument value whose closing tag never came: it ends at the call's next marker",
            );
            return Some((value, false, value_end, value_end));
        }
        if let Some((i, e)) = strict {
            return Some((rest[..i].to_owned(), false, from + i, from + e));
        }
        if self.eof {
            return Some(
                bare_before(rest.len()).unwrap_or_else(|| (rest.to_owned(), false, self.buf.len(), self.buf.len())),
            );
        }
        None
    }

    /// Whether a quote closing a top-level literal string is followed by what may follow a value
    /// (`after` is the text after the quote): the value suffix, the call end then another call or
    /// the section end, the argument separator then `name=`, or the end of the output. `None`
    /// while the text so far cannot tell.
    fn quote_closes(&self, tools: &ToolSyntax, value_suffix: &str, after: &str) -> Option<bool> {
        let after = after.trim_start();
        if after.is_empty() {
            return if self.eof { Some(true) } else { None };
        }
        let turn_end = self.setup.syntax.turn_end.iter().map(String::as_str);
        let mut partial = false;
        let ends_value = [value_suffix, tools.arg_value_suffix.as_str(), tools.section_end.as_str()];
        if starts_with_any(after, turn_end.clone().chain(ends_value), &mut partial) {
            return Some(true);
        }
        if !tools.call_end.is_empty() {
            match starts_with_marker(after, &tools.call_end) {
                Match::Full(n) => {
                    let next = after[n..].trim_start();
                    if next.is_empty() {
                        return if self.eof { Some(true) } else { None };
                    }
                    // Another call, the section end, or the turn's end (an EOS) after the call.
                    let after_call = [&tools.separator, &tools.section_end, &tools.call_start, &tools.name_prefix];
                    if starts_with_any(next, after_call.map(String::as_str).into_iter().chain(turn_end), &mut partial) {
                        return Some(true);
                    }
                }
                Match::Partial => partial = true,
                Match::No => {}
            }
        }
        if !tools.arg_separator.is_empty() {
            match starts_with_marker(after, &tools.arg_separator) {
                Match::Full(n) => {
                    let next = after[n..].trim_start();
                    let name = next.find(|c: char| !is_name_char(c)).unwrap_or(next.len());
                    if name == next.len() {
                        partial = true;
                    } else if name > 0
                        && starts_with_any(
                            &next[name..],
                            tools.arg_name_suffixes.iter().map(String::as_str),
                            &mut partial,
                        )
                    {
                        return Some(true);
                    }
                }
                Match::Partial => partial = true,
                Match::No => {}
            }
        }
        match (partial, self.eof) {
            (true, false) => None,
            _ => Some(false),
        }
    }

    fn emit_argument(&mut self, tools: &ToolSyntax, name: &str, raw: &str, quoted: bool, count: usize, at: usize) {
        let call_name = self.call.map(|i| self.message.tool_calls[i].name.clone()).unwrap_or_default();
        let schema = self.setup.schemas.get(&call_name).cloned().flatten();
        let param_schema = schema.as_ref().and_then(|s| s.get(name));
        if schema.is_some() && param_schema.is_none() {
            self.issue(IssueKind::UnknownParameter, at, format!("{call_name:?} has no parameter {name:?}"));
        }
        let types = allowed_types(param_schema);
        let may_nest = types.is_empty() || types.iter().any(|t| t == "array" || t == "object");
        let nested = match (&tools.nested_item_name, &tools.arg_value_suffix_after_name) {
            (Some(item), Some(close_end)) if may_nest && !quoted => {
                let tags = NestedTags {
                    open: &tools.arg_name_prefix,
                    open_end: tools.arg_name_suffixes.first().map_or("", String::as_str),
                    close: &tools.arg_value_suffix,
                    close_end,
                    item,
                    python: tools.python,
                };
                nested(raw, &tags, param_schema, 0)
            }
            _ => None,
        };
        // Strings inside a literal in a multi-character quote (Gemma 4's `[<|"|>a<|"|>]`), and its
        // bare keys (`{k:1}`) whether or not a string is there.
        let quote = tools.string_quote.as_str();
        let requoted = (!quoted && may_nest && quote.chars().count() > 1)
            .then(|| requote(raw, quote))
            .flatten()
            .filter(|json| serde_json::from_str::<Json>(json).is_ok());
        // Where strings are quoted, a bare `07` is no string: the number it spells (LFM2's
        // `set_date(month=07)`, as vLLM reads it).
        let numeric = types.is_empty() || types.iter().any(|t| t == "integer" || t == "number");
        let zero_led =
            (!quoted && !tools.string_quote.is_empty() && numeric).then(|| leading_zero_integer(raw.trim())).flatten();
        let converted = match (nested, zero_led) {
            (Some(value), _) | (None, Some(value)) => Converted::Fits(value),
            // Where strings are quoted, a bare `None` / `True` is the template's Python repr of a
            // null or a boolean, never a string.
            (None, None) => convert(
                requoted.as_deref().unwrap_or(raw),
                quoted,
                param_schema,
                tools.python || !tools.string_quote.is_empty(),
            ),
        };
        let value = match converted {
            Converted::Fits(value) => value,
            Converted::Misfit(value) => {
                self.issue(
                    IssueKind::ValueMisfit,
                    at,
                    format!("{name:?} of {call_name:?} does not fit its schema; kept as text"),
                );
                value
            }
        };
        let key = Json::String(name.to_owned()).to_string();
        // A value the model wrote as JSON goes into the arguments as written (compacted), so no
        // digit of a number is lost to f64 (`123456789012345678901234567890`, `1.10`).
        let written = (!value.is_string()).then(|| written_json(requoted.as_deref().unwrap_or(raw), &value)).flatten();
        let fragment = match written {
            Some(text) => format!("{}{key}: {text}", if count == 0 { "{" } else { ", " }),
            None => format!("{}{key}: {value}", if count == 0 { "{" } else { ", " }),
        };
        self.push_arguments(&fragment);
    }

    /// Closes tagged arguments (`}`), then the call end; `truncated_at` when the call ends early.
    fn finish_tagged(&mut self, section: &mut Section, tagged: Tagged, truncated_at: Option<usize>) -> Step {
        self.push_arguments(if tagged.count == 0 { "{}" } else { "}" });
        section.calls += 1;
        if let Some(at) = truncated_at {
            if self.eof
                && at == self.buf.len()
                && !self.message.issues.iter().any(|i| i.kind == IssueKind::TruncatedCall)
            {
                self.issue(IssueKind::TruncatedCall, at, "the output ends inside a tool call");
            }
            self.close_call();
            self.state = State::Content;
            return Step::Again;
        }
        section.phase = Phase::CallEnd;
        Step::Again
    }
}

/// A literal that is a quoted string (`'a'`, `"a"`, with escapes) is that string, marked quoted;
/// so is one whose quote also occurs unescaped inside it (`'sed -n '1,2p' f'`, the scanner having
/// found where it ends), its escapes read as Python reads them.
fn unquote(value: &str) -> (String, bool) {
    if value.len() >= 2 && (value.starts_with('\'') || value.starts_with('"')) {
        if let Some(Json::String(text)) = read_literal(value, true) {
            return (text, true);
        }
        let quote = &value[..1];
        if value.ends_with(quote) {
            return (python_string_body(&value[1..value.len() - 1]), true);
        }
    }
    (value.to_owned(), false)
}

/// Whether `text` starts with one of `markers` (empty ones skipped); one that `text` may still
/// complete sets `partial`.
fn starts_with_any<'a>(text: &str, markers: impl IntoIterator<Item = &'a str>, partial: &mut bool) -> bool {
    for marker in markers.into_iter().filter(|m| !m.is_empty()) {
        match starts_with_marker(text, marker) {
            Match::Full(_) => return true,
            Match::Partial => *partial = true,
            Match::No => {}
        }
    }
    false
}
