//! Tool-call sections: the section's start, what comes between calls (separators, the section's
//! end, content after the calls), a call's name and id, its end, and reverting a call that failed
//! before its name was complete to content. Its arguments read in `json` or `tagged`.

use std::borrow::Cow;

use super::json::{arguments_scanner, call_object_scanner};
use super::tagged::Tagged;
use super::{MAX_NAME, Machine, State, Step};
use crate::parse::scan::{Match, find_marker, hold_window, leading_ws, marker_hold, starts_with_marker};
use crate::parse::syntax::ToolSyntax;
use crate::parse::{IssueKind, SpanKind};
use crate::values::JsonEnd;

/// Whether the separator between calls is also the section's end (`\n</tool_call> ` after every
/// call): read after the last call, it ended the section.
fn separator_ends_section(tools: &ToolSyntax) -> bool {
    !tools.separator.trim().is_empty() && tools.separator.trim() == tools.section_end.trim()
}

/// A tool-call section being read, from its trigger on.
#[derive(Debug)]
pub(super) struct Section {
    /// Where the trigger marker starts (content resumes here on revert).
    pub(super) trigger_at: usize,
    /// Whitespace before the trigger, not yet attributed.
    ws_from: usize,
    /// A call of this section has been emitted: the section is not reverted, only the call being
    /// read when its name was not yet complete.
    pub(super) committed: bool,
    /// Where the text of the call being read starts (before its separator): a call that fails
    /// before its name is complete reverts to content from here.
    call_from: usize,
    /// The end of the first marker (separator, call start or name prefix) of the call being read:
    /// once one was read, the call failing is reported, and markers are searched after it.
    call_marker_end: Option<usize>,
    /// Calls completed in this section.
    pub(super) calls: usize,
    /// Opened by the call's own opener, the section start left out.
    implicit: bool,
    /// The id of the call being read, where ids are written before the name.
    pending_id: Option<String>,
    pub(super) phase: Phase,
}

impl Section {
    /// A section whose trigger starts at `trigger_at`, the whitespace before it from `ws_from`.
    pub(super) fn new(trigger_at: usize, ws_from: usize, implicit: bool, phase: Phase) -> Section {
        Section {
            trigger_at,
            ws_from,
            committed: false,
            call_from: trigger_at,
            call_marker_end: None,
            calls: 0,
            pending_id: None,
            implicit,
            phase,
        }
    }
}

/// What was read between two calls, before the next call's name.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Between {
    /// The separator was read (a wait after it must not read another).
    separated: bool,
    /// The call start was read.
    started: bool,
}

/// Where a section is: its start, between calls, or inside a call.
#[derive(Debug)]
pub(super) enum Phase {
    Open,
    BeforeCall(Between),
    JsonCall {
        from: usize,
        scan: JsonEnd,
    },
    Name,
    Id {
        name: String,
        from: usize,
    },
    /// `object_from`: the arguments are the value of a JSON call object that starts there (streamed
    /// JSON calls); after them the rest of the object is read.
    ArgsJson {
        from: Option<usize>,
        emitted: usize,
        scan: JsonEnd,
        object_from: Option<usize>,
    },
    /// The rest of a streamed JSON call object after its arguments, scanned from the object's
    /// start. `broken`: where the object stopped being JSON; the call then ends at its end marker.
    JsonTail {
        from: usize,
        scan: JsonEnd,
        broken: Option<usize>,
    },
    ArgsRaw {
        from: usize,
        emitted: usize,
        /// Where the call's end marker may begin: the byte that broke the JSON (a marker before
        /// it was inside the value), the same however the text was chunked.
        search: usize,
    },
    Tagged(Tagged),
    CallEnd,
}

/// Why a section or a call in it could not be read: reported where it reverts to content.
#[derive(Debug)]
pub(super) enum CallFailure {
    /// The output ended inside the section start.
    CutSectionStart,
    NoSectionStart,
    /// The call start or name prefix that must come next did not.
    Expected(String),
    NameTooLong,
    NoName,
    /// The output ended before anything ended the name: it may be cut (`get` of `get_weather`).
    CutName,
    NameNotEnded {
        name: String,
        suffix: String,
    },
    /// A call that writes its name twice did not write `expected` (the name and what follows it).
    NameNotRepeated {
        name: String,
        expected: String,
    },
    CutIndex,
    NoIndexSuffix,
    IdTooLong,
    NoIdEnd,
    CutJsonCall,
    NotJson,
    NotACall,
}

impl CallFailure {
    fn message(self) -> Cow<'static, str> {
        match self {
            CallFailure::CutSectionStart => "output ends inside a marker".into(),
            CallFailure::NoSectionStart => "no section start".into(),
            CallFailure::Expected(marker) => format!("expected {marker:?}").into(),
            CallFailure::NameTooLong => "tool name too long".into(),
            CallFailure::NoName => "no tool name".into(),
            CallFailure::CutName => "output ends inside a tool name".into(),
            CallFailure::NameNotEnded { name, suffix } => {
                format!("tool name {name:?} not followed by {suffix:?}").into()
            }
            CallFailure::NameNotRepeated { name, expected } => {
                format!("tool {name:?} not named again as {expected:?}").into()
            }
            CallFailure::CutIndex => "output ends inside a call index".into(),
            CallFailure::NoIndexSuffix => "call index suffix missing".into(),
            CallFailure::IdTooLong => "call id too long".into(),
            CallFailure::NoIdEnd => "no call id end".into(),
            CallFailure::CutJsonCall => "output ends inside a JSON tool call".into(),
            CallFailure::NotJson => "not a JSON value".into(),
            CallFailure::NotACall => "JSON that is not a tool call".into(),
        }
    }
}

impl Machine {
    pub(super) fn in_section(&mut self, mut section: Box<Section>) -> Step {
        let setup = self.setup.clone();
        let tools = setup.tools();
        let outcome = self.section_step(tools, &mut section);
        match outcome {
            Ok(step) => {
                if !matches!(self.state, State::Content) {
                    self.state = State::Section(section);
                }
                step
            }
            Err(why) => {
                self.section_failed(&section, why);
                Step::Again
            }
        }
    }

    /// The section cannot go on: revert it to content if nothing was emitted, else close it.
    fn section_failed(&mut self, section: &Section, why: CallFailure) {
        if section.committed {
            if self.call.is_some() {
                // The call's name was emitted: it is kept, the rest is content.
                self.close_call();
                self.state = State::Content;
                return;
            }
            // A later call failed before its name was complete: the calls before it are kept,
            // its text (from its separator on) reverts to content. Without a marker of its own
            // (no separator or call start read) it was no call: content decides what it is.
            let Some(marker_end) = section.call_marker_end else {
                self.revert_to(section.call_from, section.call_from);
                return;
            };
            let text = &self.buf[section.call_from..];
            let at = section.call_from + leading_ws(text);
            self.issue(IssueKind::UnparsedCall, at, why.message());
            self.revert_to(section.call_from, marker_end);
            return;
        }
        let tools = self.setup.tools();
        // Where the opener written there ends (its inner whitespace is loose, so not its length
        // from the trigger's start); a bare JSON call's opener is its `{`.
        let opener = if section.implicit { &tools.call_trigger } else { &tools.trigger };
        let written_end = match (tools.bare_json && !section.implicit, section.trigger_at < self.buf.len()) {
            (true, true) => Some(section.trigger_at + 1),
            (true, false) => None,
            (false, _) => match crate::parse::scan::match_at(&self.buf[section.trigger_at..], opener) {
                Match::Full(n) => Some(section.trigger_at + n),
                _ => None,
            },
        };
        let opener_only = !tools.bare_json || section.implicit;
        if self.eof && opener_only && written_end.is_some_and(|end| self.buf[end..].trim().is_empty()) {
            let opener_end = written_end.unwrap_or(self.buf.len());
            // A call opener and nothing after it: markup, which content would show the user.
            self.issue(IssueKind::UnparsedCall, section.trigger_at, "the output ends right after a call opener");
            self.revert_to(section.ws_from, self.buf.len());
            self.span(SpanKind::Whitespace, self.pos, section.trigger_at);
            self.pos = section.trigger_at;
            self.marker(opener_end);
            self.span(SpanKind::Whitespace, self.pos, self.buf.len());
            self.pos = self.buf.len();
            return;
        }
        self.issue(IssueKind::UnparsedCall, section.trigger_at, why.message());
        // The trigger is content; markers are searched after it (after its first character
        // where it was not whole).
        let mut scan_from = written_end.unwrap_or(section.trigger_at + 1).min(self.buf.len());
        while !self.buf.is_char_boundary(scan_from) {
            scan_from += 1;
        }
        self.revert_to(section.ws_from, scan_from);
    }

    /// Text from `from` on is content again (nothing of it was emitted: only marker and whitespace
    /// spans, which are taken back); markers are searched from `scan_from` on.
    fn revert_to(&mut self, from: usize, scan_from: usize) {
        self.pos = from;
        // Whitespace held before a call that is taken back is read again as what it is.
        if self.held_ws.is_some_and(|(start, _)| start >= from) {
            self.held_ws = None;
        }
        self.scan_from = self.scan_from.max(scan_from);
        // Spans are in order: only the last few can reach `from`.
        while self.message.spans.last().is_some_and(|s| s.start >= from) {
            self.message.spans.pop();
        }
        if let Some(last) = self.message.spans.last_mut() {
            last.end = last.end.min(from);
        }
        self.state = State::Content;
    }

    pub(super) fn enter_section(&mut self, section: &Section) {
        // The whitespace before the trigger was held; it belongs to no segment.
        if self.pos < section.trigger_at && section.ws_from == self.pos {
            let after_content = self.message.spans.last().is_some_and(|s| s.kind == SpanKind::Content);
            if after_content {
                self.held_ws = Some((self.pos, section.trigger_at));
            }
            self.span(SpanKind::Whitespace, self.pos, section.trigger_at);
            self.pos = section.trigger_at;
        }
    }

    fn section_step(&mut self, tools: &ToolSyntax, section: &mut Section) -> Result<Step, CallFailure> {
        match std::mem::replace(&mut section.phase, Phase::CallEnd) {
            Phase::Open => {
                // Nothing decided yet: the pos still sits before the whitespace ahead of the trigger.
                let saved = self.pos;
                self.pos = section.trigger_at;
                if !tools.section_start.is_empty() && !section.implicit {
                    match self.at_marker(&tools.section_start) {
                        Match::Full(end) => {
                            self.pos = saved;
                            self.enter_section(section);
                            self.marker(end);
                        }
                        Match::Partial => {
                            self.pos = saved;
                            section.phase = Phase::Open;
                            return if self.eof { Err(CallFailure::CutSectionStart) } else { Ok(Step::Wait) };
                        }
                        Match::No => {
                            self.pos = saved;
                            return Err(CallFailure::NoSectionStart);
                        }
                    }
                } else {
                    self.pos = saved;
                    self.enter_section(section);
                    if section.implicit && tools.bare_json {
                        // The optional opener before a bare JSON call (`<|python_tag|>`).
                        match self.at_marker(&tools.call_trigger) {
                            Match::Full(end) => self.marker(end),
                            Match::Partial => {
                                section.phase = Phase::Open;
                                return if self.eof { Err(CallFailure::CutSectionStart) } else { Ok(Step::Wait) };
                            }
                            Match::No => return Err(CallFailure::Expected(tools.call_trigger.clone())),
                        }
                    }
                }
                section.phase = if tools.json.is_some() && tools.call_start.is_empty() {
                    Phase::JsonCall { from: self.pos, scan: call_object_scanner(tools) }
                } else {
                    Phase::BeforeCall(Between::default())
                };
                Ok(Step::Again)
            }
            Phase::BeforeCall(between) => self.before_call(tools, section, between),

            Phase::JsonCall { from, scan } => self.json_call(tools, section, from, scan),

            Phase::Name => self.read_name(tools, section),
            Phase::Id { name, from } => {
                let rest = &self.buf[from..];
                match find_marker(rest, &tools.call_id_suffix) {
                    Some((n, _)) if n > MAX_NAME => Err(CallFailure::IdTooLong),
                    Some((n, suffix_end)) => {
                        let id = rest[..n].trim().to_owned();
                        self.span(SpanKind::ToolId, from, from + n);
                        self.span(SpanKind::Marker, from + n, from + suffix_end);
                        self.pos = from + suffix_end;
                        self.start_call(section, name, Some(id));
                        Ok(Step::Again)
                    }
                    None if self.eof => Err(CallFailure::NoIdEnd),
                    None if rest.len() > MAX_NAME
                        && (marker_hold(rest, &tools.call_id_suffix) == 0
                            || rest.len() - marker_hold(rest, &tools.call_id_suffix) > MAX_NAME) =>
                    {
                        Err(CallFailure::NoIdEnd)
                    }
                    None => {
                        section.phase = Phase::Id { name, from };
                        Ok(Step::Wait)
                    }
                }
            }
            Phase::ArgsJson { from, emitted, scan, object_from } => {
                self.args_json(tools, section, (from, emitted, object_from), scan)
            }

            Phase::JsonTail { from, scan, broken } => self.json_tail(tools, section, from, scan, broken),

            Phase::ArgsRaw { from, emitted, search } => self.args_raw(tools, section, (from, emitted, search)),
            Phase::Tagged(tagged) => self.args_tagged(tools, section, tagged),
            Phase::CallEnd => {
                // A call end that joins a turn end (`</function><|eom_id|>`) may come without it:
                // engines stop at the stop token.
                match self.at_end_marker(&tools.call_end) {
                    Match::Full(end) => self.marker(end),
                    Match::Partial => {
                        section.phase = Phase::CallEnd;
                        return Ok(Step::Wait);
                    }
                    Match::No => {}
                }
                self.close_call();
                (section.call_from, section.call_marker_end) = (self.pos, None);
                section.phase = Phase::BeforeCall(Between::default());
                Ok(Step::Again)
            }
        }
    }

    /// After a marker check between calls: a whole match ends the section (the marker consumed when
    /// `consume`) and content follows; a partial one waits; `None` when nothing matched.
    fn leave_section_at(
        &mut self,
        found: Match,
        consume: bool,
        section: &mut Section,
        between: Between,
    ) -> Option<Step> {
        match found {
            Match::Full(end) => {
                if consume {
                    self.marker(end);
                }
                self.state = State::Content;
                Some(Step::Again)
            }
            Match::Partial => {
                section.phase = Phase::BeforeCall(between);
                Some(Step::Wait)
            }
            Match::No => None,
        }
    }

    fn before_call(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        mut between: Between,
    ) -> Result<Step, CallFailure> {
        let first = section.calls == 0 && !section.committed;
        if self.buf[self.pos..].trim_start().is_empty() && !self.eof {
            section.phase = Phase::BeforeCall(between);
            return Ok(Step::Wait);
        }
        if !first && !between.separated {
            match self.at_marker(&tools.separator) {
                Match::Full(end) => {
                    self.marker(end);
                    between.separated = true;
                    section.call_marker_end.get_or_insert(end);
                }
                Match::Partial => {
                    section.phase = Phase::BeforeCall(between);
                    return Ok(Step::Wait);
                }
                // Bare JSON calls (Llama 3.x) have no separator of their own; models separate
                // parallel calls with a line break, or with `;` (as vLLM's `llama3_json` reads
                // them).
                Match::No if tools.bare_json => {
                    if let Match::Full(end) = self.at_marker(";") {
                        self.marker(end);
                        between.separated = true;
                        section.call_marker_end.get_or_insert(end);
                    }
                }
                Match::No => {}
            }
        }
        // The section's end, also after a separator read in an earlier step (`,]` cut after the
        // comma reads as it does whole).
        if !first {
            let found = self.at_end_marker(&tools.section_end);
            if let Some(step) = self.leave_section_at(found, true, section, between) {
                return Ok(step);
            }
        }
        // A content opener that begins with the name prefix (functionary's `>>>all\n` and `>>>`):
        // the calls are over and content follows.
        let content_start = self.setup.syntax.content_start.trim_end();
        if !first
            && content_start.len() > tools.name_prefix.trim().len()
            && content_start.starts_with(tools.name_prefix.trim())
        {
            let found = self.at_marker(content_start);
            if let Some(step) = self.leave_section_at(found, false, section, between) {
                return Ok(step);
            }
        }
        // Call start (optional between calls when the section start opened the first).
        let mut matched_any = between.started;
        // A section opened by the call trigger: for the first call, the trigger stands for the
        // name prefix it ends (or is).
        let shortened = section.implicit && first && tools.call_start.is_empty();
        let name_prefix = if shortened { &tools.call_trigger } else { &tools.name_prefix };
        for (i, marker) in [&tools.call_start, name_prefix].into_iter().enumerate() {
            if i == 0 && between.started {
                continue;
            }
            // An id written before the name (`<|tool_call:begin|>ID<|tool_call:name|>`): up to
            // the name prefix.
            if i == 1 && tools.id_before_name && section.pending_id.is_none() && !marker.is_empty() {
                let rest = &self.buf[self.pos..];
                // Only as far as an id and the marker reach: a stray opener costs no scan of the rest.
                let mut reach = rest.len().min(MAX_NAME + hold_window(marker));
                while !rest.is_char_boundary(reach) {
                    reach -= 1;
                }
                match find_marker(&rest[..reach], marker) {
                    Some((n, _)) => {
                        let lead = leading_ws(rest);
                        let id = rest[..n].trim().to_owned();
                        if !id.is_empty() && n <= MAX_NAME && id.chars().all(|c| is_name_char(c) || c == ':') {
                            let id_start = self.pos + lead;
                            let id_end = id_start + id.len();
                            self.span(SpanKind::Whitespace, self.pos, id_start);
                            self.span(SpanKind::ToolId, id_start, id_end);
                            section.pending_id = Some(id);
                            self.pos = id_end;
                        }
                    }
                    // Everything there is fits in reach: the prefix may still come.
                    None if !self.eof && reach == rest.len() => {
                        section.phase = Phase::BeforeCall(between);
                        return Ok(Step::Wait);
                    }
                    None => {}
                }
            }
            match self.at_marker(marker) {
                Match::Full(end) => {
                    if first {
                        self.enter_section(section);
                    }
                    self.marker(end);
                    matched_any = true;
                    between.started |= i == 0;
                    section.call_marker_end.get_or_insert(end);
                }
                Match::Partial => {
                    section.phase = Phase::BeforeCall(between);
                    return Ok(Step::Wait);
                }
                Match::No if marker.is_empty() => {}
                Match::No if first || !matched_any => {
                    if first {
                        return Err(CallFailure::Expected(marker.clone()));
                    }
                    // Not another call: the section is over (a separator read is content, unless
                    // it is also the section's end: Hermes-2-Pro closes every call alike).
                    if between.separated && !separator_ends_section(tools) {
                        self.revert_to(section.call_from, section.call_from);
                    } else {
                        self.state = State::Content;
                    }
                    return Ok(Step::Again);
                }
                Match::No => return Err(CallFailure::Expected(marker.clone())),
            }
        }
        // No marker opens calls (bare JSON in a section): only a JSON object is another call.
        if !first && !matched_any && self.buf[self.pos..].trim_start().is_empty() && !self.eof {
            section.phase = Phase::BeforeCall(between);
            return Ok(Step::Wait);
        }
        if !first && !matched_any && tools.json.is_some() && !self.buf[self.pos..].trim_start().starts_with('{') {
            if between.separated && !separator_ends_section(tools) {
                self.revert_to(section.call_from, section.call_from);
            } else {
                self.state = State::Content;
            }
            return Ok(Step::Again);
        }
        if section.calls >= 1 && !self.setup.parallel {
            self.issue(IssueKind::ParallelCalls, self.pos, "a second call although parallel_tool_calls is off");
        }
        section.phase = if tools.json.is_some() {
            Phase::JsonCall { from: self.pos, scan: call_object_scanner(tools) }
        } else {
            Phase::Name
        };
        Ok(Step::Again)
    }

    fn read_name(&mut self, tools: &ToolSyntax, section: &mut Section) -> Result<Step, CallFailure> {
        let rest = &self.buf[self.pos..];
        let lead = leading_ws(rest);
        let name_start = self.pos + lead;
        let rest = &self.buf[name_start..];
        let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if len > MAX_NAME {
            return Err(CallFailure::NameTooLong);
        }
        if len == rest.len() && !self.eof {
            section.phase = Phase::Name;
            return Ok(Step::Wait);
        }
        if len == 0 {
            return Err(CallFailure::NoName);
        }
        let name = rest[..len].to_owned();
        let name_end = name_start + len;
        // What ends the name: its suffix, else the first argument or the call's end.
        let saved = self.pos;
        self.pos = name_end;
        let terminators: Vec<&str> = if tools.name_suffix.is_empty() {
            vec![tools.arg_name_prefix.as_str(), tools.call_end.as_str()]
        } else {
            vec![tools.name_suffix.as_str()]
        };
        let mut end = None;
        for t in &terminators {
            match self.at_marker(t) {
                Match::Full(e) => {
                    end = Some((e, !tools.name_suffix.is_empty()));
                    break;
                }
                Match::Partial => {
                    self.pos = saved;
                    section.phase = Phase::Name;
                    return Ok(Step::Wait);
                }
                Match::No => {}
            }
        }
        // A call-id marker the template always writes but models leave out (Mistral Small 3.2's
        // `[CALL_ID]`): the marker after the id ends the name, and the call has no id of its own.
        let mut without_id = false;
        if end.is_none() && !tools.call_id_suffix.is_empty() {
            match self.at_marker(&tools.call_id_suffix) {
                Match::Full(e) => {
                    end = Some((e, true));
                    without_id = true;
                }
                Match::Partial => {
                    self.pos = saved;
                    section.phase = Phase::Name;
                    return Ok(Step::Wait);
                }
                Match::No => {}
            }
        }
        // A suffix that was only whitespace (`\n`) is optional: the arguments' `{` ends the name too.
        let whitespace_ends = tools.name_suffix.is_empty()
            && (self.buf[name_end..].starts_with(char::is_whitespace)
                || (!tools.tagged && self.buf[name_end..].starts_with('{')));
        let at_eof_end = self.eof && name_end == self.buf.len();
        self.pos = saved;
        let consumed_suffix = match end {
            Some((e, true)) => e,
            Some((_, false)) => name_end,
            None if whitespace_ends => name_end,
            None if at_eof_end => return Err(CallFailure::CutName),
            None => return Err(CallFailure::NameNotEnded { name, suffix: tools.name_suffix.clone() }),
        };
        let mut suffix_end = consumed_suffix;
        let mut own_id = None;
        if !tools.name_suffix_after_index.is_empty() {
            // `:0<|tool_call_argument_begin|>`: digits, then the rest of the suffix.
            let Some(digits) = self.buf[consumed_suffix..].find(|c: char| !c.is_ascii_digit()) else {
                if self.eof {
                    return Err(CallFailure::CutIndex);
                }
                section.phase = Phase::Name;
                return Ok(Step::Wait);
            };
            let after = consumed_suffix + digits;
            match starts_with_marker(&self.buf[after..], &tools.name_suffix_after_index) {
                Match::Full(n) => {
                    suffix_end = after + n;
                    // The model's own id: `functions.get_weather:0`, the plain text of the name
                    // prefix (after its last token), the name and the index.
                    let prefix = &tools.name_prefix;
                    // Only where that text is an id (`functions.`), not a header's attributes
                    // (Kimi K3's `call tool="…" index="1"`): else the call gets an id of its own.
                    let tail = &prefix[prefix.rfind(['>', ']']).map_or(0, |i| i + 1)..];
                    let id_like = |t: &str| t.chars().all(|c| is_name_char(c) || c == ':');
                    let id_start =
                        if self.buf[..name_start].ends_with(tail) { name_start - tail.len() } else { name_start };
                    let id = &self.buf[id_start..after];
                    own_id = id_like(id).then(|| id.to_owned());
                }
                Match::Partial if !self.eof => {
                    section.phase = Phase::Name;
                    return Ok(Step::Wait);
                }
                _ => return Err(CallFailure::NoIndexSuffix),
            }
        }
        // A call that writes its name twice (a header, then the body): the second writing must
        // name the same function.
        if let Some(again) = &tools.name_repeat {
            let again = format!("{name}{again}");
            let saved = self.pos;
            self.pos = suffix_end;
            let found = self.at_marker(&again);
            self.pos = saved;
            match found {
                Match::Full(e) => suffix_end = e,
                Match::Partial => {
                    section.phase = Phase::Name;
                    return Ok(Step::Wait);
                }
                Match::No => return Err(CallFailure::NameNotRepeated { name, expected: again }),
            }
        }
        self.span(SpanKind::Whitespace, self.pos, name_start);
        self.span(SpanKind::ToolName, name_start, name_end);
        self.span(SpanKind::Marker, name_end, suffix_end);
        self.pos = suffix_end;
        if !tools.call_id_suffix.is_empty() && !without_id {
            section.phase = Phase::Id { name, from: self.pos };
            return Ok(Step::Again);
        }
        self.start_call(section, name, own_id);
        Ok(Step::Again)
    }

    pub(super) fn start_call(&mut self, section: &mut Section, name: String, id: Option<String>) {
        let id = id.or_else(|| section.pending_id.take());
        self.begin_call(name, id);
        section.committed = true;
        let tools = self.setup.tools();
        section.phase = if tools.tagged {
            Phase::Tagged(Tagged::new())
        } else {
            Phase::ArgsJson { from: None, emitted: 0, scan: arguments_scanner(tools), object_from: None }
        };
    }
}

/// Whether `c` may be part of a function or argument name.
pub(super) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@' | '$')
}
