//! The parser core shared by whole-text and streaming parsing: a state machine over the text
//! received so far that moves forward only when the text decides, emitting deltas as it goes.
//!
//! Nothing emitted is ever taken back. Before a call's name is complete a failed call reverts to
//! content (nothing of it was emitted; for a later call of a section, from its separator on); after,
//! the call is kept and the trouble reported.
//!
//! This file holds the machine itself: its state, the run loop, and what every phase emits with
//! (spans, text, calls, marker checks). Each phase reads in its own file: `setup` (what is fixed for
//! one request), `content` (start, reasoning, content), `channels` (channel formats), `section`
//! (tool-call sections), `json` (JSON calls and arguments), `tagged` (tagged arguments).

mod channels;
mod content;
mod json;
mod section;
mod setup;
mod tagged;

use std::sync::Arc;

use super::channel::Body;
use super::scan::{MarkerSearch, Match, leading_ws, starts_with_marker};
use super::{Delta, Issue, IssueKind, ParsedMessage, ParsedToolCall, Span, SpanKind, ToolChoice};
use section::Section;
pub(crate) use setup::Setup;

/// Longest function or argument name accepted; longer "names" are not names.
const MAX_NAME: usize = 256;

/// The message as the caller sees it: offsets in the output itself (the prompt's output prefix
/// was never the model's), reasoning and content set when not empty.
fn assemble(mut message: ParsedMessage, reasoning: String, content: String, prefix_len: usize) -> ParsedMessage {
    if prefix_len > 0 {
        let shift = |at: usize| at.saturating_sub(prefix_len);
        message.spans.retain_mut(|span| {
            (span.start, span.end) = (shift(span.start), shift(span.end));
            span.start < span.end
        });
        for issue in &mut message.issues {
            issue.at = shift(issue.at);
        }
    }
    message.reasoning_content = (!reasoning.is_empty()).then_some(reasoning);
    message.content = (!content.is_empty()).then_some(content);
    message
}

/// Whether the turn has ended, and how: text after it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TurnEnded {
    No,
    /// By a section end that ends the turn; the turn end itself may still follow, as a marker.
    BySectionEnd,
    Yes,
}

#[derive(Debug)]
enum State {
    Start,
    Reasoning {
        /// This reasoning interrupted content, which continues with its whitespace when it ends.
        resume_content: bool,
    },
    /// Reasoning left in content as written (`separate_reasoning: false`).
    RawReasoning,
    Content,
    /// Content right after reasoning, which may open with a marker.
    ContentAfterReasoning(Opener),
    Section(Box<Section>),
    /// Channel formats: before a message header.
    ChannelHeader,
    /// Channel formats: inside a message body.
    ChannelBody(Body),
}

/// A marker that may open content right after reasoning.
#[derive(Debug, Clone, Copy)]
enum Opener {
    /// A repeated message header (gpt-oss: `<|end|><|start|>assistant<|channel|>final<|message|>`).
    Header,
    /// The content opener after unseparated reasoning (Command-R7B's
    /// `<|END_THINKING|><|START_RESPONSE|>`), though the reasoning stays in content.
    ContentStart,
}

/// The parser state for one output.
#[derive(Debug)]
pub(crate) struct Machine {
    setup: Arc<Setup>,
    /// The text so far, after the setup's `output_prefix`.
    buf: String,
    /// Length of the `output_prefix` at the start of `buf`: offsets shown to users are after it.
    prefix_len: usize,
    /// Bytes before `pos` are decided (covered by spans).
    pos: usize,
    /// Markers are searched from here (after a reverted trigger).
    scan_from: usize,
    /// Where the markers were last searched for, so none is searched twice over the same bytes.
    search: MarkerSearch,
    /// Deltas are made (a stream); a whole parse only needs the message.
    streaming: bool,
    /// Content after the turn end was reported.
    text_after_turn_end: bool,
    eof: bool,
    state: State,
    /// The current reasoning or content segment has had non-whitespace text.
    seg_text: bool,
    /// For a content marker set and a buffer length: how much of the buffer's end each marker of
    /// the set may be the start of (`marker_hold` on the whole buffer). A stream dense with
    /// markers asks again at each one, with the same buffer.
    content_holds: Option<(usize, usize, Vec<usize>)>,
    deltas: Vec<Delta>,
    message: ParsedMessage,
    reasoning: String,
    content: String,
    /// Whitespace between content and the calls after it (`start..end`): content's, as written,
    /// if content goes on after the calls (text around a call is joined verbatim).
    held_ws: Option<(usize, usize)>,
    /// A stream's deltas of the call being read, held until it is whole when truncated calls are
    /// dropped.
    held_call_deltas: Vec<Delta>,
    /// The call the output ends inside, if any (`TruncatedCalls::Drop` leaves it out).
    cut_call: Option<usize>,
    /// The call being read: index into `message.tool_calls`.
    call: Option<usize>,
    turn_ended: TurnEnded,
    /// Seed of the call ids generated for this output.
    id_seed: u64,
}

enum Step {
    /// Progress made; run again.
    Again,
    /// Wait for more text (or finish).
    Wait,
}

impl Machine {
    pub(crate) fn new(setup: Arc<Setup>) -> Machine {
        let buf = setup.output_prefix.clone();
        Machine {
            prefix_len: buf.len(),
            id_seed: setup.id_seed.unwrap_or_else(fresh_id_seed),
            setup,
            buf,
            pos: 0,
            scan_from: 0,
            search: MarkerSearch::default(),
            streaming: true,
            text_after_turn_end: false,
            eof: false,
            state: State::Start,
            seg_text: false,
            content_holds: None,
            deltas: Vec::new(),
            message: ParsedMessage::default(),
            reasoning: String::new(),
            content: String::new(),
            held_ws: None,
            held_call_deltas: Vec::new(),
            cut_call: None,
            call: None,
            turn_ended: TurnEnded::No,
        }
    }

    pub(crate) fn push(&mut self, chunk: &str) {
        if self.eof {
            return;
        }
        self.buf.push_str(chunk);
        self.run();
    }

    /// Parses a whole output: read knowing it is all there, without deltas.
    pub(crate) fn parse_whole(setup: Arc<Setup>, text: &str) -> ParsedMessage {
        let mut machine = Machine::new(setup);
        machine.streaming = false;
        machine.buf.push_str(text);
        machine.finish();
        machine.into_message()
    }

    pub(crate) fn finish(&mut self) {
        if self.eof {
            return;
        }
        self.eof = true;
        self.run();
        self.close();
    }

    pub(crate) fn take_deltas(&mut self) -> Vec<Delta> {
        std::mem::take(&mut self.deltas)
    }

    pub(crate) fn message(&self) -> ParsedMessage {
        assemble(self.message.clone(), self.reasoning.clone(), self.content.clone(), self.prefix_len)
    }

    pub(crate) fn into_message(self) -> ParsedMessage {
        assemble(self.message, self.reasoning, self.content, self.prefix_len)
    }

    fn run(&mut self) {
        // Every step consumes text or changes state; the bound is a guard, not a limit in practice.
        let mut guard = 4 * (self.buf.len() - self.pos) + 64;
        while guard > 0 {
            guard -= 1;
            let step = match std::mem::replace(&mut self.state, State::Start) {
                State::Start => self.start(),
                State::Reasoning { resume_content } => self.in_reasoning(resume_content),
                State::RawReasoning => self.in_raw_reasoning(),
                State::Content => self.in_content(None),
                State::ContentAfterReasoning(opener) => self.in_content(Some(opener)),
                State::Section(section) => self.in_section(section),
                State::ChannelHeader => self.channel_header(),
                State::ChannelBody(body) => self.channel_body(body),
            };
            if let Step::Wait = step {
                return;
            }
        }
    }

    // ----- spans, deltas -------------------------------------------------------------------

    // The helpers the phases call on every chunk are `#[inline]`: the phases sit in other files
    // (other codegen units), and without it streaming measured about 3% slower than when the
    // machine was one file.

    #[inline]
    fn span(&mut self, kind: SpanKind, start: usize, end: usize) {
        if start >= end {
            return;
        }
        if let Some(last) = self.message.spans.last_mut()
            && last.kind == kind
            && last.end == start
        {
            last.end = end;
            return;
        }
        self.message.spans.push(Span { kind, start, end });
    }

    fn issue(&mut self, kind: IssueKind, at: usize, message: impl Into<std::borrow::Cow<'static, str>>) {
        if kind == IssueKind::TruncatedCall {
            // The call being read is the one the output ends inside.
            self.cut_call = self.call;
        }
        self.message.issues.push(Issue { kind, at, message: message.into() });
    }

    /// Emits reasoning or content text `pos..upto`: leading whitespace of a segment and (when
    /// `last`) trailing whitespace are trimmed; otherwise trailing whitespace waits, undecided.
    #[inline]
    fn emit_text(&mut self, reasoning: bool, upto: usize, last: bool) {
        let kind = if reasoning { SpanKind::Reasoning } else { SpanKind::Content };
        self.skip_output_prefix(upto);
        let mut text_start = self.pos;
        if !self.seg_text {
            let text = &self.buf[self.pos..upto];
            text_start = self.pos + leading_ws(text);
            self.span(SpanKind::Whitespace, self.pos, text_start);
        }
        let text = &self.buf[text_start..upto];
        let text_end = text_start + text.trim_end().len();
        if text_end > text_start {
            self.span(kind, text_start, text_end);
            self.seg_text = true;
            self.text_piece(reasoning, text_start, text_end);
        }
        if last {
            self.span(SpanKind::Whitespace, text_end, upto);
            self.pos = upto;
            self.seg_text = false;
        } else {
            self.pos = text_end.max(text_start);
        }
    }

    /// Reasoning or content text `start..end` of the buffer, as written; a delta when streaming.
    #[inline]
    fn text_piece(&mut self, reasoning: bool, start: usize, end: usize) {
        let after_turn_end = !reasoning && self.turn_ended != TurnEnded::No && !self.text_after_turn_end;
        let text_at = start + leading_ws(&self.buf[start..end]);
        if after_turn_end && text_at < end {
            // Said once, where the first text after the turn end starts, however it streams in.
            self.text_after_turn_end = true;
            self.issue(IssueKind::TextAfterTurnEnd, text_at, "text after the turn-end marker kept as content");
        }
        if reasoning {
            self.held_ws = None;
        } else if let Some((ws_start, ws_end)) = self.held_ws.take() {
            // Content goes on after calls: the whitespace before them is content after all.
            self.content_again(ws_start, ws_end);
        }
        let piece = &self.buf[start..end];
        if reasoning {
            self.reasoning.push_str(piece)
        } else {
            self.content.push_str(piece)
        }
        if self.streaming {
            // Text right after text of its kind is one delta: an output dense with markers
            // (stray ends, say) would otherwise cost an allocation per piece.
            match (self.deltas.last_mut(), reasoning) {
                (Some(Delta::Reasoning { reasoning_content: last }), true) => last.push_str(piece),
                (Some(Delta::Content { content: last }), false) => last.push_str(piece),
                (_, true) => self.deltas.push(Delta::Reasoning { reasoning_content: piece.to_owned() }),
                (_, false) => self.deltas.push(Delta::Content { content: piece.to_owned() }),
            }
        }
    }

    /// Whitespace `start..end`, left as a whitespace span before calls, is content: its span
    /// becomes content (joined to the content before it), its text goes into content.
    fn content_again(&mut self, start: usize, end: usize) {
        let spans = &mut self.message.spans;
        if let Some(i) = spans.iter().rposition(|s| s.start == start && s.end == end && s.kind == SpanKind::Whitespace)
        {
            spans[i].kind = SpanKind::Content;
            if i > 0 && spans[i - 1].kind == SpanKind::Content && spans[i - 1].end == start {
                spans[i - 1].end = end;
                spans.remove(i);
            }
        }
        let piece = &self.buf[start..end];
        self.content.push_str(piece);
        if self.streaming {
            self.deltas.push(Delta::Content { content: piece.to_owned() });
        }
    }

    /// Moves past the setup's `output_prefix` (up to `upto`): text that reverts to content never
    /// carries bytes the model did not write.
    #[inline]
    fn skip_output_prefix(&mut self, upto: usize) {
        if self.pos < self.prefix_len {
            let end = self.prefix_len.min(upto);
            self.span(SpanKind::Marker, self.pos, end);
            self.pos = self.pos.max(end);
        }
    }

    /// Text up to `upto` into content exactly as written.
    fn emit_raw(&mut self, upto: usize) {
        self.skip_output_prefix(upto);
        if upto > self.pos {
            self.span(SpanKind::Content, self.pos, upto);
            self.text_piece(false, self.pos, upto);
            self.pos = upto;
            self.seg_text = true;
        }
    }

    /// Content up to a marker at `at` that content goes on after: text as written (its whitespace
    /// is content's when there was text). Returns whether the segment had text.
    fn content_up_to_marker(&mut self, at: usize) -> bool {
        let had_text = self.seg_text || !self.buf[self.pos..at].trim().is_empty();
        self.emit_text(false, at, !had_text);
        if self.pos < at {
            self.span(SpanKind::Content, self.pos, at);
            self.text_piece(false, self.pos, at);
        }
        had_text
    }

    #[inline]
    fn marker(&mut self, end: usize) {
        // Leading whitespace before a marker, then the marker.
        let text = &self.buf[self.pos..end];
        let ws = leading_ws(text);
        self.span(SpanKind::Whitespace, self.pos, self.pos + ws);
        self.span(SpanKind::Marker, self.pos + ws, end);
        self.pos = end;
    }

    /// `Full(end)` when the text at `pos` is (whitespace and) `marker`, `end` in the buffer;
    /// `Partial` undecided; `No` for an empty marker, and for one the output ended inside.
    #[inline]
    fn at_marker(&self, marker: &str) -> Match {
        if marker.is_empty() {
            return Match::No;
        }
        match starts_with_marker(&self.buf[self.pos..], marker) {
            Match::Full(n) => Match::Full(self.pos + n),
            Match::Partial if self.eof => Match::No,
            other => other,
        }
    }

    /// Like `at_marker`, for an end marker that joins several tokens: when the whole does not match,
    /// its leading tokens do (`<｜tool▁calls▁end｜>` of a section end the template follows with the
    /// end of sequence and the next header).
    fn at_end_marker(&self, marker: &str) -> Match {
        match self.at_marker(marker) {
            Match::No => {}
            found => return found,
        }
        let pieces = crate::markers::bracketed_pieces(marker);
        if pieces.len() < 2 {
            return Match::No;
        }
        // Prefixes ending after a piece, longest first.
        let ends: Vec<usize> =
            pieces.iter().map(|p| p.as_ptr() as usize - marker.as_ptr() as usize + p.len()).collect();
        // A prefix that also begins another call marker (Kimi K3's `<|sep|>`) says nothing.
        let tools = self.setup.syntax.tools.as_ref();
        let others: Vec<&str> = tools
            .map(|t| vec![t.separator.as_str(), t.call_start.as_str(), t.name_prefix.as_str(), t.call_end.as_str()])
            .unwrap_or_default();
        for &end in ends.iter().rev().skip(1) {
            let prefix = &marker[..end];
            if others.iter().any(|o| !o.is_empty() && *o != marker && o.starts_with(prefix.trim())) {
                continue;
            }
            if let Match::Full(n) = self.at_marker(prefix) {
                return Match::Full(n);
            }
        }
        Match::No
    }

    /// `at_marker` for the reasoning start, or (when the start's word does not follow) its token
    /// alone (`<|channel>` of `<|channel>thought`).
    fn at_reasoning_start(&self, reasoning: &super::syntax::ReasoningSyntax) -> Match {
        match self.at_marker(&reasoning.start) {
            Match::No => self.at_marker(&reasoning.start_token),
            found => found,
        }
    }

    /// A marker that may open what follows: consumed (`Again`), maybe still arriving (`Wait`), or
    /// not there (`None`, also for an empty marker).
    #[inline]
    fn opening_marker(&mut self, marker: &str) -> Option<Step> {
        match self.at_marker(marker) {
            Match::Full(end) => {
                self.marker(end);
                Some(Step::Again)
            }
            Match::Partial => Some(Step::Wait),
            Match::No => None,
        }
    }

    // ----- calls ------------------------------------------------------------------------------

    /// Emits a call's start (name complete, id known or generated); it becomes the current call.
    fn begin_call(&mut self, name: String, id: Option<String>) {
        let index = self.message.tool_calls.len();
        let id_generated = id.as_deref().is_none_or(str::is_empty);
        let id = id.filter(|i| !i.is_empty()).unwrap_or_else(|| generated_id(self.id_seed, index));
        self.check_tool(&name, self.pos);
        if self.streaming {
            self.call_delta(Delta::ToolCallStart { index, id: id.clone(), name: name.clone() });
        }
        self.message.tool_calls.push(ParsedToolCall {
            index,
            id,
            id_generated,
            name,
            arguments: String::new(),
            arguments_value: None,
        });
        self.call = Some(index);
    }

    #[inline]
    fn push_arguments(&mut self, fragment: &str) {
        if fragment.is_empty() {
            return;
        }
        if let Some(index) = self.call {
            self.message.tool_calls[index].arguments.push_str(fragment);
            if self.streaming {
                self.call_delta(Delta::ToolCallArguments { index, arguments: fragment.to_owned() });
            }
        }
    }

    /// A delta of the call being read: out at once, or held until the call is whole where
    /// truncated calls are dropped.
    #[inline]
    fn call_delta(&mut self, delta: Delta) {
        if self.setup.drop_truncated {
            self.held_call_deltas.push(delta);
        } else {
            self.deltas.push(delta);
        }
    }

    /// Ends the call being read: its arguments parsed, problems reported.
    fn close_call(&mut self) {
        let Some(index) = self.call.take() else { return };
        let call = &mut self.message.tool_calls[index];
        call.arguments_value = serde_json::from_str(&call.arguments).ok();
        if call.arguments_value.is_none() {
            let at = self.pos;
            let name = call.name.clone();
            self.issue(IssueKind::MalformedArguments, at, format!("the arguments of {name:?} are not valid JSON"));
        }
        self.message.tool_calls[index].index = index;
        // Before the end of the output no call is cut: what was held goes out.
        if !self.eof {
            self.deltas.append(&mut self.held_call_deltas);
        }
    }

    /// Reports a call to a tool the request does not hold, or one its `tool_choice` does not allow.
    fn check_tool(&mut self, name: &str, at: usize) {
        if self.setup.has_tools && !self.setup.schemas.contains_key(name) {
            self.issue(IssueKind::UnknownTool, at, format!("tool {name:?} is not among the request's tools"));
        } else if !self.setup.choice.allows(name) {
            self.issue(IssueKind::DisallowedTool, at, format!("tool_choice does not allow calling {name:?}"));
        }
    }

    // ----- end of input ---------------------------------------------------------------------

    /// End of input: whatever state we are in is closed.
    fn close(&mut self) {
        if self.call.is_some() {
            self.close_call();
        }
        if self.pos < self.buf.len() {
            // Undecided text left by a waiting state: content.
            self.emit_text(false, self.buf.len(), true);
        }
        if self.setup.drop_truncated {
            // The output ended inside a call (the last): left out, its deltas with it (its spans
            // and its issue stay); the calls closed in this last run go out.
            if let Some(cut) = self.cut_call.filter(|&i| i + 1 == self.message.tool_calls.len()) {
                self.message.tool_calls.pop();
                self.held_call_deltas.retain(|d| match d {
                    Delta::ToolCallStart { index, .. } | Delta::ToolCallArguments { index, .. } => *index != cut,
                    _ => true,
                });
            }
            self.deltas.append(&mut self.held_call_deltas);
        }
        match self.setup.choice {
            ToolChoice::Required | ToolChoice::AllowedTools { required: true, .. }
                if self.message.tool_calls.is_empty() =>
            {
                self.issue(IssueKind::MissingCall, self.buf.len(), "tool_choice is required but no call was made");
            }
            ToolChoice::Function(ref name) if !self.message.tool_calls.iter().any(|c| &c.name == name) => {
                let message = format!("tool_choice names {name:?} but it was not called");
                self.issue(IssueKind::MissingCall, self.buf.len(), message);
            }
            _ => {}
        }
    }
}

/// A seed no other output of this process gets (std's per-instance random hash keys, over a
/// counter), so unseeded responses do not share call ids.
fn fresh_id_seed() -> u64 {
    use std::hash::BuildHasher as _;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::collections::hash_map::RandomState::new().hash_one(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// A deterministic call id: a function of the seed and the call index.
fn generated_id(seed: u64, index: usize) -> String {
    let mut x = seed ^ 0x5851_F42D_4C95_7F2D ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    format!("call_{x:016x}")
}
