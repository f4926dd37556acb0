//! The text outside tool calls: the start of the output (does it open in reasoning?), reasoning,
//! reasoning left in content as written, and content with the markers it looks for (a call
//! section's trigger, the turn end, reasoning again).

use super::section::{Phase, Section};
use super::{Machine, Opener, State, Step, TurnEnded};
use crate::parse::scan::{Match, leading_ws, marker_hold};
use crate::parse::syntax::Syntax;
use crate::parse::{Delta, IssueKind, SpanKind};

/// Bytes at the end of `text` that are a turn end cut short after one of its whole bracketed
/// markers (`<|sep|><|close|>message<|sep|>` of `…<|sep|><|end_of_msg|>`); 0 if none.
fn cut_turn_end(text: &str, turn_end: &[String]) -> usize {
    turn_end
        .iter()
        .map(|m| marker_hold(text, m))
        .filter(|&hold| {
            let held = text[text.len() - hold..].trim_start();
            (held.ends_with('>') || held.ends_with(']')) && !crate::markers::bracketed_pieces(held).is_empty()
        })
        .max()
        .unwrap_or(0)
}

/// Bytes at the end of `text` that are a call opener cut short after one of its whole bracketed
/// markers (`<tool_call>` of `<tool_call>\n<function=`, then the end of the output); 0 if none.
fn cut_opener(text: &str, openers: &[&str]) -> usize {
    openers
        .iter()
        .filter(|m| !m.is_empty())
        .map(|m| marker_hold(text, m))
        .filter(|&hold| {
            let held = text[text.len() - hold..].trim_start();
            crate::markers::bracketed_pieces(held).first().is_some_and(|first| held.starts_with(first))
        })
        .max()
        .unwrap_or(0)
}

/// What a marker found in content is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ContentMarker {
    /// Opens a tool-call section.
    Trigger,
    /// A call's own opener, the markers before it left out (`call_trigger`).
    CallTrigger,
    /// A new message header before the calls (`header_trigger`).
    HeaderTrigger,
    TurnEnd,
    /// A section end written after content that follows the calls (`turn_ending_section_end`).
    SectionTurnEnd,
    ContentEnd,
    /// Reasoning again after content (interleaved thinking).
    ReasoningStart,
    /// A reasoning end outside reasoning.
    StrayReasoningEnd,
}

/// The markers content looks for, each with what it is.
pub(super) fn content_markers(
    syntax: &Syntax,
    calls_enabled: bool,
    separate_reasoning: bool,
    ended: TurnEnded,
    has_calls: bool,
) -> Vec<(String, ContentMarker)> {
    use ContentMarker::*;
    let mut markers: Vec<(&str, ContentMarker)> = Vec::new();
    if let Some(tools) =
        syntax.tools.as_ref().filter(|t| calls_enabled && (!t.trigger.is_empty() || !t.call_trigger.is_empty()))
    {
        if !tools.trigger.is_empty() {
            markers.push((tools.trigger.as_str(), Trigger));
        }
        if !tools.call_trigger.is_empty() {
            markers.push((tools.call_trigger.as_str(), CallTrigger));
        }
        if !tools.header_trigger.is_empty() {
            markers.push((tools.header_trigger.as_str(), HeaderTrigger));
        }
    }
    if ended != TurnEnded::Yes {
        markers.extend(syntax.turn_end.iter().map(|m| (m.as_str(), TurnEnd)));
    }
    // A section end written after the content that follows the calls ends the turn there
    // (Gemma 4 ends every call turn with `<|tool_response>`); a turn end may still follow it.
    if let Some(tools) = syntax.tools.as_ref().filter(|_| has_calls && ended == TurnEnded::No)
        && !tools.turn_ending_section_end.is_empty()
    {
        markers.push((tools.turn_ending_section_end.as_str(), SectionTurnEnd));
    }
    if !syntax.content_end.is_empty() {
        markers.push((syntax.content_end.as_str(), ContentEnd));
    }
    // Reasoning again after content (interleaved thinking), when reasoning is separated.
    if let Some(reasoning) = syntax.reasoning.as_ref().filter(|_| separate_reasoning) {
        for reopen in [&reasoning.start, &reasoning.start_token] {
            if !reopen.is_empty() {
                markers.push((reopen.as_str(), ReasoningStart));
            }
        }
        // A reasoning end (a bracketed token) outside reasoning is a stray marker, not content.
        let end = reasoning.end.as_str();
        let token = end.starts_with(['<', '[']) && !crate::markers::bracketed_pieces(end).is_empty();
        if token && markers.iter().all(|(m, _)| !m.starts_with(end) && !end.starts_with(m)) {
            markers.push((end, StrayReasoningEnd));
        }
    }
    markers.into_iter().map(|(m, what)| (m.to_owned(), what)).collect()
}

impl Machine {
    pub(super) fn start(&mut self) -> Step {
        let setup = self.setup.clone();
        if setup.channel.is_some() && !setup.in_reasoning {
            self.state = State::ChannelHeader;
            return Step::Again;
        }
        let Some(reasoning) = &setup.syntax.reasoning else {
            self.state = State::Content;
            return Step::Again;
        };
        // The prompt opened reasoning but the output opens the content (Kimi-K3's
        // `<|open|>response<|sep|>` right after the prompt's `<|open|>think<|sep|>`): the model wrote
        // no reasoning. A content opener that shares text with the reasoning markers says nothing.
        let content_start = setup.syntax.content_start.as_str();
        let distinct = |m: &str| !m.is_empty() && !m.starts_with(content_start) && !content_start.starts_with(m);
        if setup.in_reasoning && !content_start.is_empty() && distinct(&reasoning.start) && distinct(&reasoning.end) {
            match self.at_marker(content_start) {
                Match::Full(_) => {
                    self.state = State::Content;
                    return Step::Again;
                }
                Match::Partial => {
                    self.state = State::Start;
                    return Step::Wait;
                }
                Match::No => {}
            }
        }
        if !setup.separate_reasoning {
            let opened = setup.in_reasoning
                || match self.at_reasoning_start(reasoning) {
                    Match::Full(_) => true,
                    Match::Partial => {
                        self.state = State::Start;
                        return Step::Wait;
                    }
                    Match::No => false,
                };
            if opened {
                // The opener the prompt held goes back in front, unless the model wrote it again.
                let written = match self.at_reasoning_start(reasoning) {
                    Match::Full(_) => true,
                    Match::Partial => {
                        self.state = State::Start;
                        return Step::Wait;
                    }
                    Match::No => false,
                };
                if !setup.opener.is_empty() && !written {
                    self.content.push_str(&setup.opener);
                    self.deltas.push(Delta::Content { content: setup.opener.clone() });
                }
                self.seg_text = true;
                self.state = State::RawReasoning;
            } else {
                self.state = State::Content;
            }
            return Step::Again;
        }
        if setup.in_reasoning {
            // A model may write the opener the prompt already holds.
            match self.at_reasoning_start(reasoning) {
                Match::Full(end) => self.marker(end),
                Match::Partial => {
                    self.state = State::Start;
                    return Step::Wait;
                }
                Match::No if !setup.prompt_reasoning.is_empty() => {
                    // The model goes on from the prompt's own reasoning text, as written.
                    self.reasoning.push_str(&setup.prompt_reasoning);
                    self.deltas.push(Delta::Reasoning { reasoning_content: setup.prompt_reasoning.clone() });
                    self.seg_text = true;
                }
                Match::No => {}
            }
            self.state = State::Reasoning { resume_content: false };
            return Step::Again;
        }
        match self.at_reasoning_start(reasoning) {
            Match::Full(end) => {
                self.marker(end);
                self.state = State::Reasoning { resume_content: false };
            }
            Match::Partial => {
                self.state = State::Start;
                return Step::Wait;
            }
            Match::No => self.state = State::Content,
        }
        Step::Again
    }

    pub(super) fn in_reasoning(&mut self, resume_content: bool) -> Step {
        let setup = self.setup.clone();
        let end_marker = &setup.syntax.reasoning.as_ref().expect("reasoning state needs markers").end;
        let from = self.pos.max(self.scan_from);
        // A call inside reasoning is provisional: models draft calls while they think, then close
        // reasoning and call for real; others call without ever closing it. Where the reasoning's
        // end comes after the call, the call was reasoning text; where the output ends with
        // reasoning still open, the call ends it (llama.cpp reads it so). Until then the text
        // from the call on is held.
        let trigger = match &setup.syntax.tools {
            Some(tools) if !tools.trigger.is_empty() => tools.trigger.as_str(),
            _ => "",
        };
        let end_found = self.search.find(&self.buf, from, end_marker);
        let call_found = if trigger.is_empty() { None } else { self.search.find(&self.buf, from, trigger) };
        match (end_found, call_found.map(|(a, _)| a)) {
            (Some((at, end)), _) => {
                self.emit_text(true, at, true);
                self.marker(end);
                // Content interrupted by this reasoning continues as written.
                self.seg_text = resume_content;
                self.state =
                    if setup.header.is_empty() { State::Content } else { State::ContentAfterReasoning(Opener::Header) };
                return Step::Again;
            }
            (None, Some(call_at)) if self.eof => {
                self.emit_text(true, call_at, true);
                self.issue(IssueKind::UnclosedReasoning, call_at, "a tool call ends reasoning that was not closed");
                self.state = State::Content;
                return Step::Again;
            }
            (None, Some(call_at)) => {
                self.emit_text(true, call_at, false);
                self.state = State::Reasoning { resume_content };
                return Step::Wait;
            }
            _ => {}
        }
        if self.eof {
            let end = self.buf.len();
            self.emit_text(true, end, true);
            self.message.truncated_reasoning = true;
            self.issue(IssueKind::TruncatedReasoning, end, "the output ended inside reasoning");
            self.state = State::Reasoning { resume_content };
            return Step::Wait;
        }
        let hold = marker_hold(&self.buf[from..], end_marker).max(marker_hold(&self.buf[from..], trigger));
        self.emit_text(true, self.buf.len() - hold, false);
        self.state = State::Reasoning { resume_content };
        Step::Wait
    }

    pub(super) fn in_raw_reasoning(&mut self) -> Step {
        let setup = self.setup.clone();
        let end_marker = &setup.syntax.reasoning.as_ref().expect("reasoning state needs markers").end;
        let found = self.search.find(&self.buf, self.pos, end_marker).map(|(_, e)| e);
        let upto = match found {
            Some(end) => end,
            None if self.eof => self.buf.len(),
            None => self.buf.len() - marker_hold(&self.buf[self.pos..], end_marker),
        };
        if upto > self.pos {
            self.span(SpanKind::Content, self.pos, upto);
            self.text_piece(false, self.pos, upto);
            self.pos = upto;
        }
        self.state =
            if found.is_some() { State::ContentAfterReasoning(Opener::ContentStart) } else { State::RawReasoning };
        if found.is_some() { Step::Again } else { Step::Wait }
    }

    /// Where the earliest marker of content set `set` that the buffer's end may be cutting off
    /// starts, at or after `from`.
    fn content_undecided(&mut self, set: usize, from: usize) -> Option<usize> {
        let len = self.buf.len();
        let markers = &self.setup.content_markers[set];
        if !matches!(&self.content_holds, Some((s, l, _)) if (*s, *l) == (set, len)) {
            let holds = markers.iter().map(|(m, _)| marker_hold(&self.buf, m)).collect();
            self.content_holds = Some((set, len, holds));
        }
        let holds = self.content_holds.as_ref().map(|(_, _, h)| h.as_slice()).unwrap_or_default();
        // A hold that starts at or after `from` is the hold of the text from there too (the
        // longest, or leftmost, one there is); one reaching before it is asked again.
        markers
            .iter()
            .zip(holds)
            .map(|((m, _), &hold)| match hold {
                0 => 0,
                _ if len - hold >= from => hold,
                _ => marker_hold(&self.buf[from..], m),
            })
            .filter(|&hold| hold > 0)
            .map(|hold| len - hold)
            .min()
    }

    /// Content; `opener`: it follows reasoning and may open with that marker.
    pub(super) fn in_content(&mut self, opener: Option<Opener>) -> Step {
        let setup = self.setup.clone();
        let syntax = &setup.syntax;
        self.state = State::Content;
        if self.pos < self.prefix_len && self.scan_from >= self.prefix_len {
            // The prompt's output prefix was tried as a call and is none: content's own opening
            // markers are looked for after it (`>>>` then `>>>all\n`), as a stream does.
            self.skip_output_prefix(self.prefix_len);
        }
        let from = self.pos.max(self.scan_from);
        if let Some(opener) = opener {
            let marker = match opener {
                Opener::Header => &setup.header,
                Opener::ContentStart => &syntax.content_start,
            };
            match self.opening_marker(marker) {
                Some(Step::Wait) => {
                    self.state = State::ContentAfterReasoning(opener);
                    return Step::Wait;
                }
                Some(step) => return step,
                None => {}
            }
        }
        // The empty reasoning block of a turn without reasoning.
        if !self.seg_text
            && self.content.is_empty()
            && self.reasoning.is_empty()
            && let Some(step) = self.opening_marker(&syntax.empty_block)
        {
            return step;
        }
        // A content wrapper at the start of the segment.
        if !self.seg_text
            && let Some(step) = self.opening_marker(&syntax.content_start)
        {
            return step;
        }
        // The opener of the content of a turn with calls (Llama 4's `<|python_start|>`).
        if !self.seg_text
            && self.content.is_empty()
            && self.message.tool_calls.is_empty()
            && let Some(tools) = &syntax.tools
            && let Some(step) = self.opening_marker(&tools.content_start_with_calls)
        {
            return step;
        }
        // Bare JSON calls (no marker): only a whole output that starts with a JSON value.
        if setup.calls_enabled && setup.tools().bare_json && !self.seg_text && self.content.is_empty() {
            let rest = self.buf[self.pos..].trim_start();
            if rest.is_empty() && !self.eof {
                self.state = State::Content;
                return Step::Wait;
            }
            if rest.starts_with('{') || rest.starts_with('[') {
                let at = self.buf.len() - rest.len();
                if at >= self.scan_from {
                    let scan = super::json::call_object_scanner(setup.tools());
                    let section = Section::new(at, self.pos, false, Phase::JsonCall { from: at, scan });
                    self.state = State::Section(Box::new(section));
                    return Step::Again;
                }
            }
        }
        let set = match self.turn_ended {
            TurnEnded::No => usize::from(!self.message.tool_calls.is_empty()),
            TurnEnded::BySectionEnd => 2,
            TurnEnded::Yes => 3,
        };
        let markers = &setup.content_markers[set];
        // The earliest marker wins, the longest at one position; a marker that may still be
        // completing at or before it (a longer one sharing its start) must be decided first.
        let found = markers
            .iter()
            .filter_map(|(m, what)| self.search.find(&self.buf, from, m).map(|(a, e)| (a, e, *what)))
            .min_by_key(|(at, end, _)| (*at, usize::MAX - *end));
        // The prompt's output prefix followed by a marker after it: the prefix is no call, and
        // content's openers are tried right after it first, as a stream that met the marker's
        // start undecided does.
        if !self.seg_text && self.pos < self.prefix_len && found.is_some_and(|(at, _, _)| at >= self.prefix_len) {
            self.skip_output_prefix(self.prefix_len);
            return Step::Again;
        }
        // A marker cut off at the end of the buffer decides only when it starts at or before the
        // one found: far from the end, nothing is undecided.
        let reach = setup.content_reach[set];
        let far = |at: usize| at + reach < self.buf.len();
        let undecided =
            if self.eof || found.is_some_and(|(at, _, _)| far(at)) { None } else { self.content_undecided(set, from) };
        if let (Some((at, _, _)), Some(partial)) = (found, undecided)
            && partial <= at
        {
            self.emit_text(false, partial, false);
            self.state = State::Content;
            return Step::Wait;
        }
        match found {
            Some((at, _, what @ (ContentMarker::Trigger | ContentMarker::CallTrigger))) => {
                // Content up to the trigger; whitespace before it stays undecided until the call is.
                self.emit_text(false, at, false);
                let section = Section::new(at, self.pos, what == ContentMarker::CallTrigger, Phase::Open);
                self.state = State::Section(Box::new(section));
                Step::Again
            }
            Some((at, marker_end, ContentMarker::HeaderTrigger)) => {
                // A new message header before the calls: a marker; the section opens at its trigger.
                let trigger = setup.tools().trigger.as_str();
                let trigger_at = self.buf[at..marker_end].rfind(trigger).map_or(at, |i| at + i);
                self.emit_text(false, at, true);
                self.span(SpanKind::Marker, at, trigger_at);
                self.pos = trigger_at;
                let section = Section::new(trigger_at, self.pos, false, Phase::Open);
                self.state = State::Section(Box::new(section));
                Step::Again
            }
            Some((at, marker_end, ContentMarker::StrayReasoningEnd)) => {
                // Text around a stray marker is one piece of content, as written.
                let had_text = self.content_up_to_marker(at);
                self.span(SpanKind::Marker, at, marker_end);
                self.issue(
                    IssueKind::StrayReasoningEnd,
                    at,
                    "a reasoning end marker outside reasoning, left out of content",
                );
                self.pos = marker_end;
                self.seg_text = had_text;
                self.state = State::Content;
                Step::Again
            }
            Some((at, marker_end, ContentMarker::ReasoningStart)) => {
                // Content goes on after this reasoning: the whitespace around it is content's.
                let had_text = self.content_up_to_marker(at);
                self.span(SpanKind::Marker, at, marker_end);
                self.pos = marker_end;
                self.seg_text = false;
                self.state = State::Reasoning { resume_content: had_text || !self.content.is_empty() };
                Step::Again
            }
            Some((at, marker_end, what)) => {
                let ends_turn = matches!(what, ContentMarker::TurnEnd | ContentMarker::SectionTurnEnd);
                self.emit_text(false, at, ends_turn);
                if what == ContentMarker::ContentEnd {
                    // Content end: whitespace before it is trimmed, text after it is more content.
                    let text = &self.buf[self.pos..at];
                    if text.trim().is_empty() {
                        self.span(SpanKind::Whitespace, self.pos, at);
                        self.pos = at;
                    }
                }
                if self.pos < at {
                    // Undecided whitespace (not trimmed) before a content-end marker: keep it.
                    self.span(SpanKind::Whitespace, self.pos, at);
                    self.pos = at;
                }
                self.span(SpanKind::Marker, at, marker_end);
                self.pos = marker_end;
                // Text after the turn end is reported when the output ends (it may still come).
                match what {
                    ContentMarker::TurnEnd => self.turn_ended = TurnEnded::Yes,
                    ContentMarker::SectionTurnEnd => self.turn_ended = TurnEnded::BySectionEnd,
                    _ => {}
                }
                self.seg_text = false;
                self.state = State::Content;
                Step::Again
            }
            None => {
                if self.eof {
                    let mut end = self.buf.len();
                    // The output stopped inside the turn end (an engine cuts at a stop token the
                    // turn end ends with): its whole leading markers are the turn end, not content.
                    let cut = if self.turn_ended == TurnEnded::Yes {
                        0
                    } else {
                        cut_turn_end(&self.buf[from..], &syntax.turn_end)
                    };
                    end -= cut;
                    // Or inside a call opener: markup that would reach the user, not content.
                    let opener = match (&syntax.tools, cut) {
                        (Some(tools), 0) if setup.calls_enabled => {
                            cut_opener(&self.buf[from..], &[&tools.trigger, &tools.call_trigger])
                        }
                        _ => 0,
                    };
                    end -= opener;
                    self.emit_text(false, end, true);
                    if cut > 0 {
                        self.marker(self.buf.len());
                        self.turn_ended = TurnEnded::Yes;
                    }
                    if opener > 0 {
                        let at = self.pos + leading_ws(&self.buf[self.pos..]);
                        self.issue(IssueKind::UnparsedCall, at, "the output ends inside a call opener");
                        self.marker(self.buf.len());
                    }
                    self.state = State::Content;
                    return Step::Wait;
                }
                let hold = markers.iter().map(|(m, _)| marker_hold(&self.buf[from..], m)).max().unwrap_or(0);
                self.emit_text(false, self.buf.len() - hold, false);
                self.state = State::Content;
                Step::Wait
            }
        }
    }
}
