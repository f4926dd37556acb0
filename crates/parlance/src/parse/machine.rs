//! The parser core shared by whole-text and streaming parsing: a state machine over the text
//! received so far that moves forward only when the text decides, emitting deltas as it goes.
//!
//! Nothing emitted is ever taken back. Before a call's name is complete a failed call reverts to
//! content (nothing of it was emitted; for a later call of a section, from its separator on); after,
//! the call is kept and the trouble reported.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value as Json;
use serde_json::value::RawValue;

use super::channel::{Body, ChannelSyntax, MAX_HEADER};
use super::scan::{
    JsonEnd, JsonScan, MarkerSearch, find_marker, hold_window, leading_ws, marker_hold, starts_with_marker,
};
use super::syntax::{Syntax, ToolSyntax};
use super::values::{Converted, NestedTags, convert, nested, requote, written_json};
use super::{Delta, Issue, IssueKind, ParseOptions, ParsedMessage, ParsedToolCall, Span, SpanKind, ToolChoice};
use crate::format::{Format, ReasoningMode};

/// XML CDATA delimiters: tagged values may wrap text in them.
const CDATA_OPEN: &str = "<![CDATA[";
const CDATA_CLOSE: &str = "]]>";

/// Longest function or argument name accepted; longer "names" are not names.
const MAX_NAME: usize = 256;

/// Bytes at the end of `text` that are a turn end cut short after one of its whole bracketed
/// markers (`<|sep|><|close|>message<|sep|>` of `…<|sep|><|end_of_msg|>`); 0 if none.
fn cut_turn_end(text: &str, turn_end: &[String]) -> usize {
    turn_end
        .iter()
        .map(|m| marker_hold(text, m))
        .filter(|&hold| {
            let held = text[text.len() - hold..].trim_start();
            (held.ends_with('>') || held.ends_with(']')) && !crate::analyze::bracketed_pieces(held).is_empty()
        })
        .max()
        .unwrap_or(0)
}

/// Whether the separator between calls is also the section's end (`\n</tool_call> ` after every
/// call): read after the last call, it ended the section.
fn separator_ends_section(tools: &ToolSyntax) -> bool {
    !tools.separator.trim().is_empty() && tools.separator.trim() == tools.section_end.trim()
}

/// Everything fixed for one (format, request).
#[derive(Debug)]
pub(crate) struct Setup {
    syntax: Syntax,
    /// Tool name → parameter schemas (`properties`), when the request gave tools.
    schemas: HashMap<String, Option<Json>>,
    has_tools: bool,
    calls_enabled: bool,
    choice: ToolChoice,
    parallel: bool,
    in_reasoning: bool,
    separate_reasoning: bool,
    /// The generation prompt trimmed, when a turn may repeat it as a message header after reasoning.
    header: String,
    /// Channel formats (gpt-oss) are read message by message.
    channel: Option<ChannelSyntax>,
    /// The reasoning opener as the prompt wrote it (with its whitespace and any reasoning text the
    /// prompt wrote after it), when the prompt opened reasoning: put back in front of unseparated
    /// reasoning.
    opener: String,
    /// Reasoning text the prompt itself wrote after the opener (Apriel's `Here are my reasoning
    /// steps:\n`): the start of the reasoning, since the template renders the message's reasoning
    /// in its place. Empty when the opener ends the prompt.
    prompt_reasoning: String,
    /// `Format::output_prefix` when this request's prompt ends with it: read before the output as
    /// its first bytes, though they are not the output's (spans and offsets leave them out).
    output_prefix: String,
    /// The caller's seed of generated call ids; `None`: a fresh one for each output.
    id_seed: Option<u64>,
    /// The markers content looks for, with what each is, for each state content may be in:
    /// before the turn end without calls, the same with calls, after a section end that ended the
    /// turn, after the turn end.
    content_markers: [Vec<(String, ContentMarker)>; 4],
}

impl Setup {
    pub(crate) fn new(format: &Format, options: &ParseOptions) -> Setup {
        let mut syntax = Syntax::from_format(format);
        for marker in &options.stop_markers {
            let marker = marker.trim();
            if !marker.is_empty() && !syntax.turn_end.iter().any(|m| m == marker) {
                syntax.turn_end.push(marker.to_owned());
            }
        }
        let mut schemas = HashMap::new();
        for tool in &options.tools {
            let function = tool.get("function").unwrap_or(tool);
            if let Some(name) = function.get("name").and_then(Json::as_str) {
                let properties = function.get("parameters").and_then(|p| p.get("properties")).cloned();
                schemas.insert(name.to_owned(), properties);
            }
        }
        // Reasoning is open when the prompt's last start marker is not closed after it: the prompt
        // ends with the marker, or with plain text the template writes inside the block (Apriel's
        // `<|begin_assistant|>\nHere are my reasoning steps:\n`), which is then reasoning.
        let prompt = options.generation_prompt.as_deref().unwrap_or(&format.generation_prompt);
        // (opener as the prompt wrote it, the reasoning text after it)
        let open_block = syntax.reasoning.as_ref().filter(|r| !r.start.is_empty()).and_then(|r| {
            let at = prompt.rfind(r.start.as_str())?;
            let inside = &prompt[at + r.start.len()..];
            let plain = !inside.contains(['<', '[']) && (r.end.is_empty() || !inside.contains(r.end.as_str()));
            plain.then(|| (prompt[at..].to_owned(), inside.trim_start().to_owned()))
        });
        let (opener, prompt_reasoning) = match open_block {
            Some((opener, text)) => (Some(opener), text),
            None => (None, String::new()),
        };
        // Reasoning that may start without its opener (`implicit`): open unless the prompt closed
        // a block (a thinking-off prompt's `<think>\n\n</think>`).
        let implicit = format.reasoning_details.as_ref().is_some_and(|d| d.mode == ReasoningMode::Implicit)
            && !syntax.reasoning.as_ref().is_some_and(|r| super::prompt_closes_block(prompt, &r.start, &r.end));
        let in_reasoning = options.in_reasoning.unwrap_or(opener.is_some() || implicit);
        let opener = if implicit && opener.is_none() {
            // Nothing the prompt held goes back in front of unseparated reasoning.
            String::new()
        } else if in_reasoning {
            opener.or_else(|| syntax.reasoning.as_ref().map(|r| r.start.clone())).unwrap_or_default()
        } else {
            String::new()
        };
        let calls_enabled = options.tool_choice != ToolChoice::None && syntax.tools.is_some();
        let separate_reasoning = options.separate_reasoning.unwrap_or(true);
        let content_markers =
            [(TurnEnded::No, false), (TurnEnded::No, true), (TurnEnded::BySectionEnd, true), (TurnEnded::Yes, true)]
                .map(|(ended, has_calls)| {
                    content_markers(&syntax, calls_enabled, separate_reasoning, ended, has_calls)
                });
        Setup {
            has_tools: !options.tools.is_empty(),
            calls_enabled,
            choice: options.tool_choice.clone(),
            parallel: options.parallel_tool_calls.unwrap_or(true),
            syntax,
            schemas,
            in_reasoning,
            separate_reasoning,
            header: format.generation_prompt.trim().to_owned(),
            channel: ChannelSyntax::from_format(format),
            opener,
            prompt_reasoning: if in_reasoning { prompt_reasoning } else { String::new() },
            output_prefix: if !format.output_prefix.is_empty() && prompt.ends_with(&format.output_prefix) {
                format.output_prefix.clone()
            } else {
                String::new()
            },
            id_seed: options.id_seed,
            content_markers,
        }
    }

    /// Whether the output starts inside reasoning (the prompt left it open).
    pub(crate) fn starts_in_reasoning(&self) -> bool {
        self.in_reasoning
    }

    fn tools(&self) -> &ToolSyntax {
        self.syntax.tools.as_ref().expect("only reached with tool syntax")
    }
}

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

/// What a marker found in content is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ContentMarker {
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
fn content_markers(
    syntax: &Syntax,
    calls_enabled: bool,
    separate_reasoning: bool,
    ended: TurnEnded,
    has_calls: bool,
) -> Vec<(String, ContentMarker)> {
    use ContentMarker::*;
    let mut markers: Vec<(&str, ContentMarker)> = Vec::new();
    if let Some(tools) = syntax.tools.as_ref().filter(|t| calls_enabled && !t.trigger.is_empty()) {
        markers.push((tools.trigger.as_str(), Trigger));
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
        let token = end.starts_with(['<', '[']) && !crate::analyze::bracketed_pieces(end).is_empty();
        if token && markers.iter().all(|(m, _)| !m.starts_with(end) && !end.starts_with(m)) {
            markers.push((end, StrayReasoningEnd));
        }
    }
    markers.into_iter().map(|(m, what)| (m.to_owned(), what)).collect()
}

#[derive(Debug)]
enum State {
    Start,
    Reasoning,
    /// Reasoning left in content as written (`separate_reasoning: false`).
    RawReasoning,
    Content,
    Section(Box<Section>),
    /// Channel formats: before a message header.
    ChannelHeader,
    /// Channel formats: inside a message body.
    ChannelBody(Body),
}

#[derive(Debug)]
struct Section {
    /// Where the trigger marker starts (content resumes here on revert).
    trigger_at: usize,
    /// Whitespace before the trigger, not yet attributed.
    ws_from: usize,
    /// A call of this section has been emitted: the section is not reverted, only the call being
    /// read when its name was not yet complete.
    committed: bool,
    /// Where the text of the call being read starts (before its separator): a call that fails
    /// before its name is complete reverts to content from here.
    call_from: usize,
    /// The end of the first marker (separator, call start or name prefix) of the call being read:
    /// once one was read, the call failing is reported, and markers are searched after it.
    call_marker_end: Option<usize>,
    /// Calls completed in this section.
    calls: usize,
    /// Between calls: the separator was read (a wait after it must not read another).
    separated: bool,
    /// Between calls: the call start was read.
    started: bool,
    /// Opened by the call's own opener, the section start left out.
    implicit: bool,
    phase: Phase,
}

#[derive(Debug)]
enum Phase {
    Open,
    BeforeCall,
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

#[derive(Debug)]
struct Tagged {
    count: usize,
    /// The separator after the last argument was read (a wait after it must not read another).
    separated: bool,
    step: TaggedStep,
}

/// Where reading a literal value stopped: byte offset in the value, bracket depth, open quote.
#[derive(Debug, Clone, Copy, Default)]
struct LiteralScan {
    pos: usize,
    depth: usize,
    in_quote: Option<char>,
    escape: bool,
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
    deltas: Vec<Delta>,
    message: ParsedMessage,
    reasoning: String,
    content: String,
    /// The call being read: index into `message.tool_calls`.
    call: Option<usize>,
    turn_ended: TurnEnded,
    /// Reasoning just ended: content may open with a repeated message header (gpt-oss:
    /// `<|end|><|start|>assistant<|channel|>final<|message|>`), which is a marker.
    header_pending: bool,
    /// Reasoning interrupted content: when it ends, content continues with its whitespace.
    resume_content: bool,
    /// Unseparated reasoning just ended: a content opener right after it is a marker (Command-R7B's
    /// `<|END_THINKING|><|START_RESPONSE|>`), though the reasoning stays in content.
    opener_pending: bool,
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
            deltas: Vec::new(),
            message: ParsedMessage::default(),
            reasoning: String::new(),
            content: String::new(),
            call: None,
            turn_ended: TurnEnded::No,
            header_pending: false,
            opener_pending: false,
            resume_content: false,
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
                State::Reasoning => self.in_reasoning(),
                State::RawReasoning => self.in_raw_reasoning(),
                State::Content => self.in_content(),
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
        self.message.issues.push(Issue { kind, at, message: message.into() });
    }

    /// Emits reasoning or content text `pos..upto`: leading whitespace of a segment and (when
    /// `last`) trailing whitespace are trimmed; otherwise trailing whitespace waits, undecided.
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
    fn text_piece(&mut self, reasoning: bool, start: usize, end: usize) {
        let after_turn_end = !reasoning && self.turn_ended != TurnEnded::No && !self.text_after_turn_end;
        let text_at = start + leading_ws(&self.buf[start..end]);
        if after_turn_end && text_at < end {
            // Said once, where the first text after the turn end starts, however it streams in.
            self.text_after_turn_end = true;
            self.issue(IssueKind::TextAfterTurnEnd, text_at, "text after the turn-end marker kept as content");
        }
        let piece = &self.buf[start..end];
        if reasoning {
            self.reasoning.push_str(piece)
        } else {
            self.content.push_str(piece)
        }
        if self.streaming {
            let piece = piece.to_owned();
            self.deltas.push(if reasoning {
                Delta::Reasoning { reasoning_content: piece }
            } else {
                Delta::Content { content: piece }
            });
        }
    }

    /// Moves past the setup's `output_prefix` (up to `upto`): text that reverts to content never
    /// carries bytes the model did not write.
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

    fn marker(&mut self, end: usize) {
        // Leading whitespace before a marker, then the marker.
        let text = &self.buf[self.pos..end];
        let ws = leading_ws(text);
        self.span(SpanKind::Whitespace, self.pos, self.pos + ws);
        self.span(SpanKind::Marker, self.pos + ws, end);
        self.pos = end;
    }

    /// `Some(Ok(end))` when the text at `pos` is (whitespace and) `marker`; `Some(Err)` undecided.
    fn at_marker(&self, marker: &str) -> Option<Result<usize, ()>> {
        if marker.is_empty() {
            return None;
        }
        match starts_with_marker(&self.buf[self.pos..], marker) {
            Some(Ok(n)) => Some(Ok(self.pos + n)),
            Some(Err(())) if self.eof => None,
            other => other,
        }
    }

    /// Like `at_marker`, for an end marker that joins several tokens: when the whole does not match,
    /// its leading tokens do (`<｜tool▁calls▁end｜>` of a section end the template follows with the
    /// end of sequence and the next header).
    fn at_end_marker(&self, marker: &str) -> Option<Result<usize, ()>> {
        match self.at_marker(marker) {
            None => {}
            found => return found,
        }
        let pieces = crate::analyze::bracketed_pieces(marker);
        if pieces.len() < 2 {
            return None;
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
            if let Some(Ok(n)) = self.at_marker(prefix) {
                return Some(Ok(n));
            }
        }
        None
    }

    /// `at_marker` for the reasoning start, or (when the start's word does not follow) its token
    /// alone (`<|channel>` of `<|channel>thought`).
    fn at_reasoning_start(&self, reasoning: &super::syntax::ReasoningSyntax) -> Option<Result<usize, ()>> {
        match self.at_marker(&reasoning.start) {
            None => self.at_marker(&reasoning.start_token),
            found => found,
        }
    }

    /// A marker that may open what follows: consumed (`Again`), maybe still arriving (`Wait`), or
    /// not there (`None`, also for an empty marker).
    fn opening_marker(&mut self, marker: &str) -> Option<Step> {
        match self.at_marker(marker)? {
            Ok(end) => {
                self.marker(end);
                Some(Step::Again)
            }
            Err(()) => Some(Step::Wait),
        }
    }

    // ----- reasoning and content ---------------------------------------------------------------

    fn start(&mut self) -> Step {
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
                Some(Ok(_)) => {
                    self.state = State::Content;
                    return Step::Again;
                }
                Some(Err(())) => {
                    self.state = State::Start;
                    return Step::Wait;
                }
                None => {}
            }
        }
        if !setup.separate_reasoning {
            let opened = setup.in_reasoning
                || match self.at_reasoning_start(reasoning) {
                    Some(Ok(_)) => true,
                    Some(Err(())) => {
                        self.state = State::Start;
                        return Step::Wait;
                    }
                    None => false,
                };
            if opened {
                // The opener the prompt held goes back in front, unless the model wrote it again.
                let written = match self.at_reasoning_start(reasoning) {
                    Some(Ok(_)) => true,
                    Some(Err(())) => {
                        self.state = State::Start;
                        return Step::Wait;
                    }
                    None => false,
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
                Some(Ok(end)) => self.marker(end),
                Some(Err(())) => {
                    self.state = State::Start;
                    return Step::Wait;
                }
                None if !setup.prompt_reasoning.is_empty() => {
                    // The model goes on from the prompt's own reasoning text, as written.
                    self.reasoning.push_str(&setup.prompt_reasoning);
                    self.deltas.push(Delta::Reasoning { reasoning_content: setup.prompt_reasoning.clone() });
                    self.seg_text = true;
                }
                None => {}
            }
            self.state = State::Reasoning;
            return Step::Again;
        }
        match self.at_reasoning_start(reasoning) {
            Some(Ok(end)) => {
                self.marker(end);
                self.state = State::Reasoning;
            }
            Some(Err(())) => {
                self.state = State::Start;
                return Step::Wait;
            }
            None => self.state = State::Content,
        }
        Step::Again
    }

    fn in_reasoning(&mut self) -> Step {
        let setup = self.setup.clone();
        let end_marker = &setup.syntax.reasoning.as_ref().expect("reasoning state needs markers").end;
        let from = self.pos.max(self.scan_from);
        // A tool call also ends reasoning the model forgot to close (llama.cpp does the same).
        let trigger = match &setup.syntax.tools {
            Some(tools) if !tools.trigger.is_empty() => tools.trigger.as_str(),
            _ => "",
        };
        let end_found = self.search.find(&self.buf, from, end_marker);
        let call_found = if trigger.is_empty() { None } else { self.search.find(&self.buf, from, trigger) };
        match (end_found, call_found.map(|(a, _)| a)) {
            (Some((at, end)), call) if call.is_none_or(|c| at < c) => {
                self.emit_text(true, at, true);
                self.marker(end);
                self.header_pending = !setup.header.is_empty();
                // Content interrupted by this reasoning continues as written.
                self.seg_text = std::mem::take(&mut self.resume_content);
                self.state = State::Content;
                return Step::Again;
            }
            (_, Some(call_at)) => {
                self.emit_text(true, call_at, true);
                self.issue(IssueKind::UnclosedReasoning, call_at, "a tool call ends reasoning that was not closed");
                self.state = State::Content;
                return Step::Again;
            }
            _ => {}
        }
        if self.eof {
            let end = self.buf.len();
            self.emit_text(true, end, true);
            self.message.truncated_reasoning = true;
            self.issue(IssueKind::TruncatedReasoning, end, "the output ended inside reasoning");
            self.state = State::Reasoning;
            return Step::Wait;
        }
        let hold = marker_hold(&self.buf[from..], end_marker).max(marker_hold(&self.buf[from..], trigger));
        self.emit_text(true, self.buf.len() - hold, false);
        self.state = State::Reasoning;
        Step::Wait
    }

    fn in_raw_reasoning(&mut self) -> Step {
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
        self.opener_pending = found.is_some();
        self.state = if found.is_some() { State::Content } else { State::RawReasoning };
        if found.is_some() { Step::Again } else { Step::Wait }
    }

    fn in_content(&mut self) -> Step {
        let setup = self.setup.clone();
        let syntax = &setup.syntax;
        self.state = State::Content;
        if self.pos < self.prefix_len && self.scan_from >= self.prefix_len {
            // The prompt's output prefix was tried as a call and is none: content's own opening
            // markers are looked for after it (`>>>` then `>>>all\n`), as a stream does.
            self.skip_output_prefix(self.prefix_len);
        }
        let from = self.pos.max(self.scan_from);
        if self.header_pending {
            match self.opening_marker(&setup.header) {
                Some(Step::Wait) => return Step::Wait,
                Some(step) => {
                    self.header_pending = false;
                    return step;
                }
                None => self.header_pending = false,
            }
        }
        if self.opener_pending {
            match self.opening_marker(&setup.syntax.content_start) {
                Some(Step::Wait) => return Step::Wait,
                Some(step) => {
                    self.opener_pending = false;
                    return step;
                }
                None => self.opener_pending = false,
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
                    let section = Section {
                        trigger_at: at,
                        ws_from: self.pos,
                        committed: false,
                        call_from: at,
                        call_marker_end: None,
                        calls: 0,
                        separated: false,
                        started: false,
                        implicit: false,
                        phase: Phase::JsonCall { from: at, scan: JsonEnd::strict() },
                    };
                    self.state = State::Section(Box::new(section));
                    return Step::Again;
                }
            }
        }
        let markers = &setup.content_markers[match self.turn_ended {
            TurnEnded::No => usize::from(!self.message.tool_calls.is_empty()),
            TurnEnded::BySectionEnd => 2,
            TurnEnded::Yes => 3,
        }];
        // The earliest marker wins, the longest at one position; a marker that may still be
        // completing at or before it (a longer one sharing its start) must be decided first.
        let found = markers
            .iter()
            .filter_map(|(m, what)| self.search.find(&self.buf, from, m).map(|(a, e)| (a, e, *what)))
            .min_by_key(|(at, end, _)| (*at, usize::MAX - *end));
        // A marker cut off at the end of the buffer decides only when it starts at or before the
        // one found: far from the end, nothing is undecided.
        let reach = markers.iter().map(|(m, _)| hold_window(m)).max().unwrap_or(0);
        let far = |at: usize| at + reach < self.buf.len();
        let undecided = if self.eof || found.is_some_and(|(at, _, _)| far(at)) {
            None
        } else {
            markers
                .iter()
                .map(|(m, _)| marker_hold(&self.buf[from..], m))
                .filter(|&hold| hold > 0)
                .map(|hold| self.buf.len() - hold)
                .min()
        };
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
                let section = Section {
                    trigger_at: at,
                    ws_from: self.pos,
                    committed: false,
                    call_from: at,
                    call_marker_end: None,
                    calls: 0,
                    separated: false,
                    started: false,
                    implicit: what == ContentMarker::CallTrigger,
                    phase: Phase::Open,
                };
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
                let section = Section {
                    trigger_at,
                    ws_from: self.pos,
                    committed: false,
                    call_from: trigger_at,
                    call_marker_end: None,
                    calls: 0,
                    separated: false,
                    started: false,
                    implicit: false,
                    phase: Phase::Open,
                };
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
                self.resume_content = had_text || !self.content.is_empty();
                self.seg_text = false;
                self.state = State::Reasoning;
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
                    self.emit_text(false, end, true);
                    if cut > 0 {
                        self.marker(self.buf.len());
                        self.turn_ended = TurnEnded::Yes;
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

    // ----- channel formats ------------------------------------------------------------------

    fn channel_header(&mut self) -> Step {
        let setup = self.setup.clone();
        let channel = setup.channel.as_ref().expect("channel state needs channel syntax");
        self.state = State::ChannelHeader;
        if self.buf[self.pos..].trim().is_empty() {
            if self.eof {
                self.emit_text(false, self.buf.len(), true);
            }
            return Step::Wait;
        }
        match self.at_marker(&channel.turn_header) {
            Some(Ok(end)) => {
                self.marker(end);
                return Step::Again;
            }
            Some(Err(())) => return Step::Wait,
            None => {}
        }
        match channel.opens_header(&self.buf[self.pos..]) {
            None if !self.eof => return Step::Wait,
            Some(true) => {}
            _ => {
                self.state = State::Content;
                return Step::Again;
            }
        }
        let rest = &self.buf[self.pos..];
        let Some(at) = rest.find(channel.message.as_str()) else {
            // Undecided until a marker starting within the bound would have arrived whole.
            if self.eof || rest.len() >= MAX_HEADER + channel.message.len() {
                self.issue(
                    IssueKind::UnparsedCall,
                    self.pos,
                    "a channel header without its message marker within the bound",
                );
                self.state = State::Content;
                return Step::Again;
            }
            return Step::Wait;
        };
        if at > MAX_HEADER {
            self.issue(
                IssueKind::UnparsedCall,
                self.pos,
                "a channel header without its message marker within the bound",
            );
            self.state = State::Content;
            return Step::Again;
        }
        let header = rest[..at].to_owned();
        let body = channel.classify(&header);
        let header_end = self.pos + at + channel.message.len();
        if body == Body::Reasoning && !setup.separate_reasoning {
            // Unseparated reasoning stays in content as written, its header too.
            let lead = leading_ws(rest);
            self.span(SpanKind::Whitespace, self.pos, self.pos + lead);
            self.pos += lead;
            self.emit_raw(header_end);
            self.state = State::ChannelBody(Body::RawReasoning);
            return Step::Again;
        }
        self.marker(header_end);
        self.seg_text = false;
        match &body {
            Body::Call(name) => {
                if !setup.calls_enabled {
                    self.state = State::ChannelBody(Body::Content);
                    return Step::Again;
                }
                if !self.message.tool_calls.is_empty() && !setup.parallel {
                    self.issue(IssueKind::ParallelCalls, self.pos, "a second call although parallel_tool_calls is off");
                }
                self.begin_call(name.clone(), None);
            }
            Body::Other(target) => {
                let message = format!("a message to {target:?}, not a function: kept as content");
                self.issue(IssueKind::UnknownRecipient, self.pos, message);
            }
            _ => {}
        }
        self.state = State::ChannelBody(body);
        Step::Again
    }

    fn channel_body(&mut self, body: Body) -> Step {
        let setup = self.setup.clone();
        let channel = setup.channel.as_ref().expect("channel state needs channel syntax");
        let found = channel.ends.iter().filter_map(|m| self.search.find(&self.buf, self.pos, m)).min();
        let reasoning = body == Body::Reasoning;
        if body == Body::RawReasoning {
            let upto = match found {
                Some((_, end)) => end,
                None if self.eof => self.buf.len(),
                None => {
                    self.buf.len()
                        - channel.ends.iter().map(|m| marker_hold(&self.buf[self.pos..], m)).max().unwrap_or(0)
                }
            };
            self.emit_raw(upto);
            if found.is_none() && !self.eof {
                self.state = State::ChannelBody(body);
                return Step::Wait;
            }
            self.seg_text = false;
            self.state = State::ChannelHeader;
            return if found.is_some() { Step::Again } else { Step::Wait };
        }
        if let Body::Call(_) = body {
            let (upto, done) = match found {
                Some((at, _)) => (at, true),
                None if self.eof => (self.buf.len(), true),
                None => {
                    let hold = channel.ends.iter().map(|m| marker_hold(&self.buf[self.pos..], m)).max().unwrap_or(0);
                    (self.buf.len() - hold, false)
                }
            };
            // Arguments exactly as written; whitespace at their end waits until decided.
            let text = &self.buf[self.pos..upto];
            let text = if done { text.trim_end() } else { text };
            let lead =
                if self.message.tool_calls[self.call.unwrap_or(0)].arguments.is_empty() { leading_ws(text) } else { 0 };
            // Whitespace both leading and trailing (all of `text`) is the leading kind.
            let held = if done { 0 } else { (text.len() - text.trim_end().len()).min(text.len() - lead) };
            let piece = text[lead..text.len() - held].to_owned();
            self.span(SpanKind::Whitespace, self.pos, self.pos + lead);
            self.span(SpanKind::ToolArguments, self.pos + lead, self.pos + lead + piece.len());
            self.pos += lead + piece.len();
            self.push_arguments(&piece);
            if !done {
                self.state = State::ChannelBody(body);
                return Step::Wait;
            }
            self.span(SpanKind::Whitespace, self.pos, upto);
            self.pos = upto;
            if found.is_none() {
                self.issue(IssueKind::TruncatedCall, upto, "the output ends inside a tool call");
            }
            self.close_call();
        } else {
            match found {
                Some((at, _)) => self.emit_text(reasoning, at, true),
                None if self.eof => {
                    self.emit_text(reasoning, self.buf.len(), true);
                    if reasoning {
                        self.message.truncated_reasoning = true;
                        self.issue(IssueKind::TruncatedReasoning, self.buf.len(), "the output ended inside reasoning");
                    }
                }
                None => {
                    let hold = channel.ends.iter().map(|m| marker_hold(&self.buf[self.pos..], m)).max().unwrap_or(0);
                    self.emit_text(reasoning, self.buf.len() - hold, false);
                    self.state = State::ChannelBody(body);
                    return Step::Wait;
                }
            }
        }
        if let Some((_, end)) = found {
            self.span(SpanKind::Marker, self.pos, end);
            self.pos = end;
        }
        self.seg_text = false;
        self.state = State::ChannelHeader;
        if found.is_some() { Step::Again } else { Step::Wait }
    }

    // ----- tool-call sections ---------------------------------------------------------------

    fn in_section(&mut self, mut section: Box<Section>) -> Step {
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
    fn section_failed(&mut self, section: &Section, why: String) {
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
            self.issue(IssueKind::UnparsedCall, at, why);
            self.revert_to(section.call_from, marker_end);
            return;
        }
        self.issue(IssueKind::UnparsedCall, section.trigger_at, why);
        // The trigger is content; markers are searched after it.
        let tools = self.setup.tools();
        let trigger_len = match (tools.bare_json, section.implicit) {
            (true, _) => 1,
            (false, true) => tools.call_trigger.len(),
            (false, false) => tools.trigger.len(),
        };
        self.revert_to(section.ws_from, section.trigger_at + trigger_len);
    }

    /// Text from `from` on is content again (nothing of it was emitted: only marker and whitespace
    /// spans, which are taken back); markers are searched from `scan_from` on.
    fn revert_to(&mut self, from: usize, scan_from: usize) {
        self.pos = from;
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

    fn enter_section(&mut self, section: &Section) {
        // The whitespace before the trigger was held; it belongs to no segment.
        if self.pos < section.trigger_at && section.ws_from == self.pos {
            self.span(SpanKind::Whitespace, self.pos, section.trigger_at);
            self.pos = section.trigger_at;
        }
    }

    fn section_step(&mut self, tools: &ToolSyntax, section: &mut Section) -> Result<Step, String> {
        match std::mem::replace(&mut section.phase, Phase::CallEnd) {
            Phase::Open => {
                // Nothing decided yet: the pos still sits before the whitespace ahead of the trigger.
                let saved = self.pos;
                self.pos = section.trigger_at;
                if !tools.section_start.is_empty() && !section.implicit {
                    match self.at_marker(&tools.section_start) {
                        Some(Ok(end)) => {
                            self.pos = saved;
                            self.enter_section(section);
                            self.marker(end);
                        }
                        Some(Err(())) => {
                            self.pos = saved;
                            section.phase = Phase::Open;
                            return if self.eof { Err("output ends inside a marker".into()) } else { Ok(Step::Wait) };
                        }
                        None => {
                            self.pos = saved;
                            return Err("no section start".into());
                        }
                    }
                } else {
                    self.pos = saved;
                    self.enter_section(section);
                }
                section.phase = if tools.json.is_some() && tools.call_start.is_empty() {
                    Phase::JsonCall { from: self.pos, scan: JsonEnd::strict() }
                } else {
                    Phase::BeforeCall
                };
                Ok(Step::Again)
            }
            Phase::BeforeCall => self.before_call(tools, section),
            Phase::JsonCall { from, mut scan } => {
                // Streamed when the object opens with its name, then its arguments object, unless
                // no marker opened it (bare JSON): then only a whole call object is a call.
                if let Some(fields) = tools.json.as_ref().filter(|f| streamable(f) && !tools.bare_json) {
                    match json_head(&self.buf[from..], fields) {
                        Head::Undecided if !self.eof => {
                            section.phase = Phase::JsonCall { from, scan };
                            return Ok(Step::Wait);
                        }
                        Head::Yes { start, name, args_at } => {
                            if section.trigger_at == from + start {
                                self.enter_section(section);
                            }
                            self.span(SpanKind::Whitespace, self.pos, from + start);
                            self.span(SpanKind::Marker, from + start, from + args_at);
                            self.pos = from + args_at;
                            section.committed = true;
                            self.begin_call(name, None);
                            section.phase = Phase::ArgsJson {
                                from: Some(from + args_at),
                                emitted: 0,
                                scan: arguments_scanner(tools),
                                object_from: Some(from + start),
                            };
                            return Ok(Step::Again);
                        }
                        _ => {}
                    }
                }
                let status = scan.scan(&self.buf[from..], self.eof);
                match status {
                    JsonScan::More => {
                        if self.eof {
                            // Cut before the JSON closed: the calls whose name was read are kept,
                            // the last with what arrived of its arguments; with no name read,
                            // nothing was emitted, so it stays content.
                            let text = &self.buf[from..];
                            let start = from + leading_ws(text);
                            // Without a marker (bare JSON) only a whole call object is a call.
                            let cut = tools.json.as_ref().filter(|_| !tools.bare_json);
                            let Some(calls) = cut.and_then(|f| read_cut_json_calls(f, &self.buf[start..])) else {
                                return Err("output ends inside a JSON tool call".into());
                            };
                            let end = self.buf.len();
                            self.commit_json_calls(section, start, end, calls);
                            self.issue(IssueKind::TruncatedCall, end, "the output ends inside a JSON tool call");
                            return Ok(Step::Again);
                        }
                        section.phase = Phase::JsonCall { from, scan };
                        Ok(Step::Wait)
                    }
                    JsonScan::Invalid(_) => Err("not a JSON value".into()),
                    JsonScan::End(end) => {
                        let end = from + end;
                        let start = from + leading_ws(&self.buf[from..end]);
                        let calls = read_json_calls(tools, &self.buf[start..end])
                            .ok_or_else(|| "JSON that is not a tool call".to_owned())?;
                        self.commit_json_calls(section, start, end, calls);
                        Ok(Step::Again)
                    }
                }
            }
            Phase::Name => self.read_name(tools, section),
            Phase::Id { name, from } => {
                let rest = &self.buf[from..];
                match find_marker(rest, &tools.call_id_suffix) {
                    Some((n, _)) if n > MAX_NAME => Err("call id too long".into()),
                    Some((n, suffix_end)) => {
                        let id = rest[..n].trim().to_owned();
                        self.span(SpanKind::ToolId, from, from + n);
                        self.span(SpanKind::Marker, from + n, from + suffix_end);
                        self.pos = from + suffix_end;
                        self.start_call(section, name, Some(id));
                        Ok(Step::Again)
                    }
                    None if self.eof => Err("no call id end".into()),
                    None if rest.len() > MAX_NAME
                        && (marker_hold(rest, &tools.call_id_suffix) == 0
                            || rest.len() - marker_hold(rest, &tools.call_id_suffix) > MAX_NAME) =>
                    {
                        Err("no call id end".into())
                    }
                    None => {
                        section.phase = Phase::Id { name, from };
                        Ok(Step::Wait)
                    }
                }
            }
            Phase::ArgsJson { from, emitted, scan, object_from } => {
                self.args_json(section, (from, emitted, object_from), scan)
            }
            Phase::JsonTail { from, mut scan, broken: None } => match scan.scan(&self.buf[from..], self.eof) {
                JsonScan::End(n) => {
                    self.span(SpanKind::Marker, self.pos, from + n);
                    self.pos = from + n;
                    section.phase = Phase::CallEnd;
                    Ok(Step::Again)
                }
                JsonScan::More if !self.eof => {
                    section.phase = Phase::JsonTail { from, scan, broken: None };
                    Ok(Step::Wait)
                }
                JsonScan::More => {
                    // The object never closed. If a call end came after the arguments, the model
                    // went on past a broken object: the call ends there; else the output ended in it.
                    match self.first_call_end(tools, self.pos) {
                        Some(end) => Ok(self.end_broken_call_object(section, self.pos, end)),
                        None => {
                            let end = self.buf.len();
                            Ok(self.end_call_object_at_eof(
                                IssueKind::TruncatedCall,
                                end,
                                "the output ends inside a tool call object",
                            ))
                        }
                    }
                }
                JsonScan::Invalid(at) => {
                    section.phase = Phase::JsonTail { from, scan, broken: Some(from + at) };
                    Ok(Step::Again)
                }
            },
            // The first end marker after the arguments ends the call, even one the broken object
            // read as the inside of a string: past it the object was never closed.
            Phase::JsonTail { from, scan, broken: Some(at) } => match self.first_call_end(tools, self.pos) {
                Some(end) => Ok(self.end_broken_call_object(section, at, end)),
                None if self.eof => Ok(self.end_call_object_at_eof(
                    IssueKind::MalformedCall,
                    at,
                    "the tool call object is not JSON from here",
                )),
                None => {
                    section.phase = Phase::JsonTail { from, scan, broken: Some(at) };
                    Ok(Step::Wait)
                }
            },
            Phase::ArgsRaw { from, emitted, search } => self.args_raw(tools, section, (from, emitted, search)),
            Phase::Tagged(tagged) => self.args_tagged(tools, section, tagged),
            Phase::CallEnd => {
                // A call end that joins a turn end (`</function><|eom_id|>`) may come without it:
                // engines stop at the stop token.
                match self.at_end_marker(&tools.call_end) {
                    Some(Ok(end)) => self.marker(end),
                    Some(Err(())) => {
                        section.phase = Phase::CallEnd;
                        return Ok(Step::Wait);
                    }
                    None => {}
                }
                self.close_call();
                (section.call_from, section.call_marker_end) = (self.pos, None);
                section.phase = Phase::BeforeCall;
                Ok(Step::Again)
            }
        }
    }

    /// After a marker check between calls: a whole match ends the section (the marker consumed when
    /// `consume`) and content follows; a partial one waits; `None` when nothing matched.
    fn leave_section_at(
        &mut self,
        found: Option<Result<usize, ()>>,
        consume: bool,
        section: &mut Section,
    ) -> Option<Step> {
        match found? {
            Ok(end) => {
                if consume {
                    self.marker(end);
                }
                self.state = State::Content;
                Some(Step::Again)
            }
            Err(()) => {
                section.phase = Phase::BeforeCall;
                Some(Step::Wait)
            }
        }
    }

    fn before_call(&mut self, tools: &ToolSyntax, section: &mut Section) -> Result<Step, String> {
        let first = section.calls == 0 && !section.committed;
        if self.buf[self.pos..].trim_start().is_empty() && !self.eof {
            section.phase = Phase::BeforeCall;
            return Ok(Step::Wait);
        }
        if !first && !section.separated {
            if let Some(found) = self.at_marker(&tools.separator) {
                match found {
                    Ok(end) => {
                        self.marker(end);
                        section.separated = true;
                        section.call_marker_end.get_or_insert(end);
                    }
                    Err(()) => {
                        section.phase = Phase::BeforeCall;
                        return Ok(Step::Wait);
                    }
                }
            }
            let found = self.at_end_marker(&tools.section_end);
            if let Some(step) = self.leave_section_at(found, true, section) {
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
            if let Some(step) = self.leave_section_at(found, false, section) {
                return Ok(step);
            }
        }
        // Call start (optional between calls when the section start opened the first).
        let mut matched_any = section.started;
        // A section opened by the call trigger: for the first call, the trigger stands for the
        // name prefix it ends (or is).
        let shortened = section.implicit && first && tools.call_start.is_empty();
        let name_prefix = if shortened { &tools.call_trigger } else { &tools.name_prefix };
        for (i, marker) in [&tools.call_start, name_prefix].into_iter().enumerate() {
            if i == 0 && section.started {
                continue;
            }
            match self.at_marker(marker) {
                Some(Ok(end)) => {
                    if first {
                        self.enter_section(section);
                    }
                    self.marker(end);
                    matched_any = true;
                    section.started |= i == 0;
                    section.call_marker_end.get_or_insert(end);
                }
                Some(Err(())) => {
                    section.phase = Phase::BeforeCall;
                    return Ok(Step::Wait);
                }
                None if marker.is_empty() => {}
                None if first || !matched_any => {
                    if first {
                        return Err(format!("expected {marker:?}"));
                    }
                    // Not another call: the section is over (a separator read is content, unless
                    // it is also the section's end: Hermes-2-Pro closes every call alike).
                    if section.separated && !separator_ends_section(tools) {
                        self.revert_to(section.call_from, section.call_from);
                    } else {
                        self.state = State::Content;
                    }
                    return Ok(Step::Again);
                }
                None => return Err(format!("expected {marker:?}")),
            }
        }
        // No marker opens calls (bare JSON in a section): only a JSON object is another call.
        if !first && !matched_any && tools.json.is_some() && !self.buf[self.pos..].trim_start().starts_with('{') {
            if section.separated && !separator_ends_section(tools) {
                self.revert_to(section.call_from, section.call_from);
            } else {
                self.state = State::Content;
            }
            return Ok(Step::Again);
        }
        if section.calls >= 1 && !self.setup.parallel {
            self.issue(IssueKind::ParallelCalls, self.pos, "a second call although parallel_tool_calls is off");
        }
        (section.separated, section.started) = (false, false);
        section.phase = if tools.json.is_some() {
            Phase::JsonCall { from: self.pos, scan: JsonEnd::strict() }
        } else {
            Phase::Name
        };
        Ok(Step::Again)
    }

    fn read_name(&mut self, tools: &ToolSyntax, section: &mut Section) -> Result<Step, String> {
        let rest = &self.buf[self.pos..];
        let lead = leading_ws(rest);
        let name_start = self.pos + lead;
        let rest = &self.buf[name_start..];
        let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if len > MAX_NAME {
            return Err("tool name too long".into());
        }
        if len == rest.len() && !self.eof {
            section.phase = Phase::Name;
            return Ok(Step::Wait);
        }
        if len == 0 {
            return Err("no tool name".into());
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
                Some(Ok(e)) => {
                    end = Some((e, !tools.name_suffix.is_empty()));
                    break;
                }
                Some(Err(())) => {
                    self.pos = saved;
                    section.phase = Phase::Name;
                    return Ok(Step::Wait);
                }
                None => {}
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
            None if whitespace_ends || at_eof_end => name_end,
            None => return Err(format!("tool name {name:?} not followed by {:?}", tools.name_suffix)),
        };
        let mut suffix_end = consumed_suffix;
        let mut own_id = None;
        if !tools.name_suffix_after_index.is_empty() {
            // `:0<|tool_call_argument_begin|>`: digits, then the rest of the suffix.
            let Some(digits) = self.buf[consumed_suffix..].find(|c: char| !c.is_ascii_digit()) else {
                if self.eof {
                    return Err("output ends inside a call index".into());
                }
                section.phase = Phase::Name;
                return Ok(Step::Wait);
            };
            let after = consumed_suffix + digits;
            match starts_with_marker(&self.buf[after..], &tools.name_suffix_after_index) {
                Some(Ok(n)) => {
                    suffix_end = after + n;
                    // The model's own id: `functions.get_weather:0`, the plain text of the name
                    // prefix (after its last token), the name and the index.
                    let prefix = &tools.name_prefix;
                    let tail = &prefix[prefix.rfind(['>', ']']).map_or(0, |i| i + 1)..];
                    let id_start =
                        if self.buf[..name_start].ends_with(tail) { name_start - tail.len() } else { name_start };
                    own_id = Some(self.buf[id_start..after].to_owned());
                }
                Some(Err(())) if !self.eof => {
                    section.phase = Phase::Name;
                    return Ok(Step::Wait);
                }
                _ => return Err("call index suffix missing".into()),
            }
        }
        self.span(SpanKind::Whitespace, self.pos, name_start);
        self.span(SpanKind::ToolName, name_start, name_end);
        self.span(SpanKind::Marker, name_end, suffix_end);
        self.pos = suffix_end;
        if !tools.call_id_suffix.is_empty() {
            section.phase = Phase::Id { name, from: self.pos };
            return Ok(Step::Again);
        }
        self.start_call(section, name, own_id);
        Ok(Step::Again)
    }

    fn start_call(&mut self, section: &mut Section, name: String, id: Option<String>) {
        self.begin_call(name, id);
        section.committed = true;
        let tools = self.setup.tools();
        section.phase = if tools.tagged {
            Phase::Tagged(Tagged { count: 0, separated: false, step: TaggedStep::BeforeArg })
        } else {
            Phase::ArgsJson { from: None, emitted: 0, scan: arguments_scanner(tools), object_from: None }
        };
    }

    /// Emits a call's start (name complete, id known or generated); it becomes the current call.
    fn begin_call(&mut self, name: String, id: Option<String>) {
        let index = self.message.tool_calls.len();
        let id_generated = id.as_deref().is_none_or(str::is_empty);
        let id = id.filter(|i| !i.is_empty()).unwrap_or_else(|| generated_id(self.id_seed, index));
        self.check_tool(&name, self.pos);
        if self.streaming {
            self.deltas.push(Delta::ToolCallStart { index, id: id.clone(), name: name.clone() });
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

    fn push_arguments(&mut self, fragment: &str) {
        if fragment.is_empty() {
            return;
        }
        if let Some(index) = self.call {
            self.message.tool_calls[index].arguments.push_str(fragment);
            if self.streaming {
                self.deltas.push(Delta::ToolCallArguments { index, arguments: fragment.to_owned() });
            }
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
    }

    fn args_json(
        &mut self,
        section: &mut Section,
        (from, emitted, object_from): (Option<usize>, usize, Option<usize>),
        mut scan: JsonEnd,
    ) -> Result<Step, String> {
        let from = match from {
            Some(from) => from,
            None => {
                let rest = &self.buf[self.pos..];
                let trimmed = rest.trim_start();
                if trimmed.is_empty() {
                    if self.eof {
                        self.issue(IssueKind::TruncatedCall, self.pos, "the output ends before the call's arguments");
                        self.close_call();
                        self.state = State::Content;
                        return Ok(Step::Again);
                    }
                    section.phase = Phase::ArgsJson { from: None, emitted, scan, object_from };
                    return Ok(Step::Wait);
                }
                let start = self.pos + rest.len() - trimmed.len();
                self.span(SpanKind::Whitespace, self.pos, start);
                self.pos = start;
                start
            }
        };
        match scan.scan(&self.buf[from..], self.eof) {
            JsonScan::End(n) => {
                let end = from + n;
                let fragment = self.buf[from + emitted..end].to_owned();
                self.push_arguments(&fragment);
                self.span(SpanKind::ToolArguments, from, end);
                self.pos = end;
                section.calls += 1;
                section.phase = match object_from {
                    Some(object) => Phase::JsonTail { from: object, scan: JsonEnd::strict(), broken: None },
                    None => Phase::CallEnd,
                };
                Ok(Step::Again)
            }
            JsonScan::More => {
                let end = self.buf.len();
                let fragment = self.buf[from + emitted..end].to_owned();
                self.push_arguments(&fragment);
                if self.eof {
                    self.span(SpanKind::ToolArguments, from, end);
                    self.pos = end;
                    self.issue(IssueKind::TruncatedCall, end, "the output ends inside the call's arguments");
                    self.close_call();
                    self.state = State::Content;
                    return Ok(Step::Again);
                }
                section.phase = Phase::ArgsJson { from: Some(from), emitted: end - from, scan, object_from };
                Ok(Step::Wait)
            }
            JsonScan::Invalid(at) => {
                // Not JSON: the raw text up to the call end is the arguments, kept as written.
                section.phase = Phase::ArgsRaw { from, emitted, search: from + at };
                Ok(Step::Again)
            }
        }
    }

    /// Where the first call end or section end marker at or after `from` begins, if one has come.
    fn first_call_end(&mut self, tools: &ToolSyntax, from: usize) -> Option<usize> {
        call_ends(tools).filter_map(|m| self.search.find(&self.buf, from, m).map(|(at, _)| at)).min()
    }

    /// Ends a call whose object runs to the end of the output with no end marker: the rest is markup,
    /// reported as `kind` at `at`.
    fn end_call_object_at_eof(&mut self, kind: IssueKind, at: usize, message: &'static str) -> Step {
        let end = self.buf.len();
        self.span(SpanKind::Marker, self.pos, end);
        self.pos = end;
        self.issue(kind, at, message);
        self.close_call();
        self.state = State::Content;
        Step::Again
    }

    /// Ends a call whose object broke at `broken` (after its arguments were read) at the end marker
    /// found at `end`: the broken text is markup, the call is kept, and what follows is read as usual.
    fn end_broken_call_object(&mut self, section: &mut Section, broken: usize, end: usize) -> Step {
        let text_end = self.pos + self.buf[self.pos..end].trim_end().len();
        self.span(SpanKind::Marker, self.pos, text_end);
        self.span(SpanKind::Whitespace, text_end, end);
        self.pos = end;
        self.issue(
            IssueKind::MalformedCall,
            broken.min(end),
            "the tool call object is not JSON from here; it ends at its end marker",
        );
        section.phase = Phase::CallEnd;
        Step::Again
    }

    fn args_raw(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        (from, emitted, search): (usize, usize, usize),
    ) -> Result<Step, String> {
        let search_from = from + emitted;
        let look_from = search.max(search_from);
        let end = match self.first_call_end(tools, look_from) {
            Some(at) => at,
            None if self.eof => self.buf.len(),
            None => {
                let hold = call_ends(tools).map(|m| marker_hold(&self.buf[look_from..], m)).max().unwrap_or(0);
                // Trailing whitespace waits: at the end it is trimmed.
                let upto = search_from + self.buf[search_from..self.buf.len() - hold].trim_end().len();
                let fragment = self.buf[search_from..upto].to_owned();
                self.push_arguments(&fragment);
                section.phase = Phase::ArgsRaw { from, emitted: upto - from, search };
                return Ok(Step::Wait);
            }
        };
        let text = &self.buf[search_from..end];
        let fragment = text.trim_end().to_owned();
        self.push_arguments(&fragment);
        let args_end = search_from + fragment.len();
        self.span(SpanKind::ToolArguments, from, args_end);
        self.span(SpanKind::Whitespace, args_end, end);
        self.pos = end;
        section.calls += 1;
        section.phase = Phase::CallEnd;
        Ok(Step::Again)
    }

    fn args_tagged(&mut self, tools: &ToolSyntax, section: &mut Section, mut tagged: Tagged) -> Result<Step, String> {
        match std::mem::replace(&mut tagged.step, TaggedStep::BeforeArg) {
            TaggedStep::BeforeArg => {
                if self.buf[self.pos..].trim_start().is_empty() && !self.eof {
                    section.phase = Phase::Tagged(tagged);
                    return Ok(Step::Wait);
                }
                if tagged.count > 0 && !tagged.separated {
                    match self.at_marker(&tools.arg_separator) {
                        Some(Ok(end)) => {
                            self.marker(end);
                            tagged.separated = true;
                        }
                        Some(Err(())) => {
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        None => {}
                    }
                }
                let end_markers = [tools.call_end.as_str(), tools.section_end.as_str()];
                for marker in end_markers {
                    match self.at_marker(marker) {
                        Some(Ok(_)) => return Ok(self.finish_tagged(section, tagged, None)),
                        Some(Err(())) => {
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        None => {}
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
                        Some(Ok(end)) => {
                            self.marker(end);
                            tagged.step = TaggedStep::Name { from: end };
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Again);
                        }
                        Some(Err(())) => {
                            section.phase = Phase::Tagged(tagged);
                            return Ok(Step::Wait);
                        }
                        None => {}
                    }
                }
                // Neither an argument nor the call's end: the call ends here, malformed.
                self.issue(IssueKind::MalformedArguments, self.pos, "unexpected text inside a tool call");
                let at = self.pos;
                Ok(self.finish_tagged(section, tagged, Some(at)))
            }
            TaggedStep::Name { from } => {
                let rest = &self.buf[from..];
                let found = tools
                    .arg_name_suffixes
                    .iter()
                    .filter_map(|s| find_marker(rest, s).map(|(i, e)| (i, e - i)))
                    .min_by_key(|(i, _)| *i);
                match found {
                    Some((i, len)) if i <= MAX_NAME && !rest[..i].contains(['<', '>', '\n']) => {
                        let name = rest[..i].trim().to_owned();
                        let suffix_end = from + i + len;
                        // The whitespace the template writes after the suffix (`>\n`).
                        let lead = super::scan::leading_literal_ws(&self.buf[suffix_end..], &tools.arg_value_lead_ws);
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
                let value_suffix = tools.value_suffix_for(&name);
                match self.read_value(tools, &value_suffix, from, searched, &mut literal) {
                    None => {
                        // Waiting for a CDATA section to close, nothing was searched for the
                        // value's end yet: an unclosed one is no CDATA at the end of the output.
                        let body = self.buf[from..].strip_prefix(CDATA_OPEN);
                        let searched = if body.is_some_and(|b| !b.contains(CDATA_CLOSE)) {
                            searched
                        } else {
                            self.buf.len() - from
                        };
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
        &self,
        tools: &ToolSyntax,
        value_suffix: &str,
        from: usize,
        searched: usize,
        literal: &mut LiteralScan,
    ) -> Option<(String, bool, usize, usize)> {
        let rest = &self.buf[from..];
        if !value_suffix.is_empty() && tools.string_quote.is_empty() {
            // Resume the search a marker's length (plus loose whitespace) before where it stopped.
            let mut resume = searched.saturating_sub(value_suffix.len() + 32 * value_suffix.len());
            while !rest.is_char_boundary(resume) {
                resume -= 1;
            }
            // An XML CDATA section holds text verbatim, the value suffix included (MiniCPM5's
            // `<![CDATA[…</param>…]]>`): the suffix is looked for after it.
            let cdata = match rest.strip_prefix(CDATA_OPEN).map(|body| body.find(CDATA_CLOSE)) {
                Some(None) if !self.eof => return None,
                Some(Some(i)) => Some(CDATA_OPEN.len() + i + CDATA_CLOSE.len()),
                _ => None,
            };
            resume = resume.max(cdata.unwrap_or(0));
            let found = find_marker(&rest[resume..], value_suffix).map(|(i, e)| (resume + i, resume + e));
            if let (Some(cdata_end), Some((i, suffix_end))) = (cdata, found)
                && rest[cdata_end..i].trim().is_empty()
            {
                let inner = &rest[CDATA_OPEN.len()..cdata_end - CDATA_CLOSE.len()];
                return Some((inner.to_owned(), true, from + i, from + suffix_end));
            }
            return match found {
                Some((i, suffix_end)) => {
                    let mut value = &rest[..i];
                    // The whitespace the template writes before the suffix (`\n</parameter>`).
                    let trail = tools.arg_value_trail_ws.as_str();
                    let cut = value.len() - value.trim_end().len();
                    let take = value[value.len() - cut..]
                        .bytes()
                        .rev()
                        .zip(trail.bytes().rev())
                        .take_while(|(a, b)| a == b)
                        .count();
                    value = &value[..value.len() - take];
                    Some((value.to_owned(), false, from + value.len(), from + suffix_end))
                }
                None if self.eof => Some((rest.to_owned(), false, self.buf.len(), self.buf.len())),
                None => None,
            };
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
        let LiteralScan { pos: resume, mut depth, mut in_quote, mut escape } = *literal;
        for (i, c) in rest[resume..].char_indices().map(|(i, c)| (resume + i, c)) {
            let before = LiteralScan { pos: i, depth, in_quote, escape };
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
            let (value_text, quoted) = unquote(rest.trim_end());
            Some((value_text, quoted, from + rest.trim_end().len(), self.buf.len()))
        } else {
            *literal = LiteralScan { pos: rest.len(), depth, in_quote, escape };
            None
        }
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
                Some(Ok(n)) => {
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
                Some(Err(())) => partial = true,
                None => {}
            }
        }
        if !tools.arg_separator.is_empty() {
            match starts_with_marker(after, &tools.arg_separator) {
                Some(Ok(n)) => {
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
                Some(Err(())) => partial = true,
                None => {}
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
        let types = super::values::allowed_types(param_schema);
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
        let converted = match nested {
            Some(value) => Converted::Fits(value),
            // Where strings are quoted, a bare `None` / `True` is the template's Python repr of a
            // null or a boolean, never a string.
            None => convert(
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

    /// Commits the JSON calls read from `start..end` (the whole value, or what arrived of it).
    fn commit_json_calls(&mut self, section: &mut Section, start: usize, end: usize, calls: Vec<JsonCall>) {
        if section.trigger_at == start {
            self.enter_section(section);
        }
        self.span(SpanKind::Whitespace, self.pos, start);
        self.span(SpanKind::ToolArguments, start, end);
        self.pos = end;
        section.committed = true;
        for call in calls {
            self.emit_json_call(call, start);
            section.calls += 1;
        }
        section.phase = Phase::CallEnd;
    }

    fn emit_json_call(&mut self, call: JsonCall, at: usize) {
        let index = self.message.tool_calls.len();
        let id_generated = call.id.is_none();
        let id = call.id.unwrap_or_else(|| generated_id(self.id_seed, index));
        self.check_tool(&call.name, at);
        if self.streaming {
            self.deltas.push(Delta::ToolCallStart { index, id: id.clone(), name: call.name.clone() });
        }
        self.message.tool_calls.push(ParsedToolCall {
            index,
            id,
            id_generated,
            name: call.name,
            arguments: String::new(),
            arguments_value: None,
        });
        self.call = Some(index);
        self.push_arguments(&call.arguments);
        self.close_call();
    }

    /// Reports a call to a tool the request does not hold, or one its `tool_choice` does not allow.
    fn check_tool(&mut self, name: &str, at: usize) {
        if self.setup.has_tools && !self.setup.schemas.contains_key(name) {
            self.issue(IssueKind::UnknownTool, at, format!("tool {name:?} is not among the request's tools"));
        } else if !self.setup.choice.allows(name) {
            self.issue(IssueKind::DisallowedTool, at, format!("tool_choice does not allow calling {name:?}"));
        }
    }

    /// End of input: whatever state we are in is closed.
    fn close(&mut self) {
        if self.call.is_some() {
            self.close_call();
        }
        if self.pos < self.buf.len() {
            // Undecided text left by a waiting state: content.
            self.emit_text(false, self.buf.len(), true);
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

/// A literal that is a quoted string (`'a'`, `"a"`, with escapes) is that string, marked quoted;
/// so is one whose quote also occurs unescaped inside it (`'sed -n '1,2p' f'`, the scanner having
/// found where it ends), its escapes read as Python reads them.
fn unquote(value: &str) -> (String, bool) {
    if value.len() >= 2 && (value.starts_with('\'') || value.starts_with('"')) {
        if let Some(Json::String(text)) = super::values::read_literal(value, true) {
            return (text, true);
        }
        let quote = &value[..1];
        if value.ends_with(quote) {
            return (super::values::python_string_body(&value[1..value.len() - 1]), true);
        }
    }
    (value.to_owned(), false)
}

/// Whether `text` starts with one of `markers` (empty ones skipped); one that `text` may still
/// complete sets `partial`.
fn starts_with_any<'a>(text: &str, markers: impl IntoIterator<Item = &'a str>, partial: &mut bool) -> bool {
    for marker in markers.into_iter().filter(|m| !m.is_empty()) {
        match starts_with_marker(text, marker) {
            Some(Ok(_)) => return true,
            Some(Err(())) => *partial = true,
            None => {}
        }
    }
    false
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '@' | '$')
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

/// The markers that may end a call: its own end, then its section's end.
fn call_ends(tools: &ToolSyntax) -> impl Iterator<Item = &str> {
    [tools.call_end.as_str(), tools.section_end.as_str()].into_iter().filter(|m| !m.is_empty())
}

/// Whether JSON calls of these fields can stream: a flat object whose name comes first and whose
/// arguments are an object (ids, nesting and string arguments need the whole object).
fn streamable(fields: &crate::format::JsonCallFields) -> bool {
    fields.function.is_none()
        && fields.id.is_none()
        && !fields.array
        && !fields.arguments_as_string
        && !fields.name.is_empty()
}

/// The scanner of a call's JSON arguments. Arguments that a call end marker closes are checked as
/// JSON as they come, so broken JSON goes on as raw text up to that marker (and does not swallow
/// it); without one, only the brackets can say where the arguments end.
fn arguments_scanner(tools: &ToolSyntax) -> JsonEnd {
    if tools.call_end.trim().is_empty() { JsonEnd::default() } else { JsonEnd::strict() }
}

/// How the start of a JSON call object reads.
enum Head {
    /// `{"name": "f", "arguments": ` then `{` or `[`: the name, where the object starts and where its
    /// arguments start.
    Yes { start: usize, name: String, args_at: usize },
    /// Not that shape (other key order, string arguments, not an object).
    No,
    /// A prefix of that shape.
    Undecided,
}

fn json_head(text: &str, fields: &crate::format::JsonCallFields) -> Head {
    match read_head(text, fields) {
        Ok((start, name, args_at)) => Head::Yes { start, name, args_at },
        Err(head) => head,
    }
}

/// `{"<name key>": "<name>", "<arguments key>": ` then `{`: (object start, name, arguments start).
fn read_head(text: &str, fields: &crate::format::JsonCallFields) -> Result<(usize, String, usize), Head> {
    let b = text.as_bytes();
    let ws = |i: usize| i + b[i.min(b.len())..].iter().take_while(|c| c.is_ascii_whitespace()).count();
    // The byte `want` after optional whitespace: the index after it.
    let punct = |i: usize, want: u8| -> Result<usize, Head> {
        let i = ws(i);
        match b.get(i) {
            None => Err(Head::Undecided),
            Some(&c) if c == want => Ok(i + 1),
            Some(_) => Err(Head::No),
        }
    };
    // A JSON string after optional whitespace: its decoded text and the index after it.
    let string = |i: usize| -> Result<(String, usize), Head> {
        let i = ws(i);
        match b.get(i) {
            None => return Err(Head::Undecided),
            Some(b'"') => {}
            Some(_) => return Err(Head::No),
        }
        let mut escape = false;
        for j in i + 1..b.len().min(i + 1 + MAX_NAME) {
            match b[j] {
                _ if escape => escape = false,
                b'\\' => escape = true,
                b'"' => return serde_json::from_str(&text[i..=j]).map(|s| (s, j + 1)).map_err(|_| Head::No),
                _ => {}
            }
        }
        Err(if b.len() > i + MAX_NAME { Head::No } else { Head::Undecided })
    };
    let start = ws(0);
    let i = punct(start, b'{')?;
    let (key, i) = string(i)?;
    if key != fields.name {
        return Err(Head::No);
    }
    let i = punct(i, b':')?;
    let (name, i) = string(i)?;
    let i = punct(i, b',')?;
    let (key, i) = string(i)?;
    if !argument_keys(fields).any(|k| k == key) {
        return Err(Head::No);
    }
    let args_at = ws(punct(i, b':')?);
    match b.get(args_at) {
        None => Err(Head::Undecided),
        Some(b'{') if !name.is_empty() => Ok((start, name, args_at)),
        Some(_) => Err(Head::No),
    }
}

struct JsonCall {
    name: String,
    id: Option<String>,
    arguments: String,
}

/// Reads JSON call objects (one, or an array of them) with the arguments as the exact text written.
fn read_json_calls(tools: &ToolSyntax, text: &str) -> Option<Vec<JsonCall>> {
    let fields = tools.json.as_ref()?;
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let items: Vec<&RawValue> = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok()?
    } else {
        vec![raw]
    };
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        calls.push(read_json_call(fields, item, 0)?);
    }
    (!calls.is_empty()).then_some(calls)
}

/// Reads JSON call objects (one, or an array of them) from text cut before the value closed: the
/// whole calls, then the cut one when its name was read, with its arguments as far as they arrived
/// (empty when they had not begun). `None` when no call's name was read. The cut object is read
/// flat (name, id and arguments keys at its top level).
fn read_cut_json_calls(fields: &crate::format::JsonCallFields, text: &str) -> Option<Vec<JsonCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim_start();
    if let Some(items) = rest.strip_prefix('[') {
        rest = items;
        loop {
            rest = rest.trim_start();
            let mut scan = JsonEnd::default();
            match scan.scan(rest, false) {
                JsonScan::End(n) => {
                    let item: &RawValue = serde_json::from_str(&rest[..n]).ok()?;
                    calls.push(read_json_call(fields, item, 0)?);
                    rest = rest[n..].trim_start();
                    rest = rest.strip_prefix(',')?;
                }
                JsonScan::More => break,
                JsonScan::Invalid(_) => return None,
            }
        }
    }
    let cut = read_cut_object(rest);
    let string =
        |key: &str| cut.iter().find(|(k, _)| k == key).and_then(|(_, v)| serde_json::from_str::<String>(v).ok());
    let name = name_keys(fields).find_map(string);
    match name.filter(|n| !n.is_empty()) {
        Some(name) => {
            let arguments = argument_keys(fields)
                .find_map(|k| cut.iter().find(|(key, _)| key == k))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let id = id_keys(fields).find_map(string);
            calls.push(JsonCall { name, id, arguments });
        }
        None if calls.is_empty() => return None,
        None => {}
    }
    Some(calls)
}

/// The members of a JSON object cut short, in order: `(key, raw value)`, the last value possibly
/// cut (its text so far); members whose key is cut are left out.
fn read_cut_object(text: &str) -> Vec<(String, String)> {
    let mut members = Vec::new();
    let Some(mut rest) = text.trim_start().strip_prefix('{') else { return members };
    loop {
        rest = rest.trim_start();
        let mut scan = JsonEnd::default();
        let JsonScan::End(n) = scan.scan(rest, false) else { return members };
        let Ok(key) = serde_json::from_str::<String>(&rest[..n]) else { return members };
        let Some(after) = rest[n..].trim_start().strip_prefix(':') else { return members };
        let value = after.trim_start();
        let mut scan = JsonEnd::default();
        match scan.scan(value, false) {
            JsonScan::End(n) => {
                members.push((key, value[..n].to_owned()));
                match value[n..].trim_start().strip_prefix(',') {
                    Some(next) => rest = next,
                    None => return members,
                }
            }
            JsonScan::More => {
                members.push((key, value.to_owned()));
                return members;
            }
            JsonScan::Invalid(_) => return members,
        }
    }
}

fn read_json_call(fields: &crate::format::JsonCallFields, item: &RawValue, depth: usize) -> Option<JsonCall> {
    let object: indexmap::IndexMap<String, &RawValue> = serde_json::from_str(item.get()).ok()?;
    // Nested `{"type": "function", "function": {...}}`.
    if let Some(inner) = fields.function.as_deref().or(Some("function")).and_then(|k| object.get(k))
        && depth == 0
        && inner.get().trim_start().starts_with('{')
        && let Some(mut call) = read_json_call(fields, inner, depth + 1)
    {
        if call.id.is_none() {
            call.id = object.get("id").and_then(|v| serde_json::from_str::<String>(v.get()).ok());
        }
        return Some(call);
    }
    if fields.name.is_empty() && object.len() == 1 {
        // Name as the key: `{"get_weather": {"city": "Paris"}}`.
        let (name, args) = object.iter().next()?;
        let arguments = args.get().to_owned();
        return args.get().trim_start().starts_with('{').then(|| JsonCall { name: name.clone(), id: None, arguments });
    }
    let string = |k: &str| object.get(k).and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    let name = name_keys(fields).find_map(|k| object.get(k)).and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    let name = name.filter(|n| !n.is_empty())?;
    let args = argument_keys(fields).find_map(|k| object.get(k));
    let arguments = match args {
        None => "{}".to_owned(),
        Some(raw) => {
            let text = raw.get();
            // Arguments as a JSON string holding the object: the string's text is the arguments.
            match serde_json::from_str::<String>(text) {
                Ok(inner) if serde_json::from_str::<Json>(&inner).is_ok() => inner,
                _ => text.to_owned(),
            }
        }
    };
    let id = id_keys(fields).find_map(string);
    Some(JsonCall { name, id, arguments })
}

/// Keys a call object's name may sit under: the Format's, then `name`.
fn name_keys(fields: &crate::format::JsonCallFields) -> impl Iterator<Item = &str> {
    [fields.name.as_str(), "name"].into_iter().filter(|k| !k.is_empty())
}

/// Keys a call object's arguments may sit under: the Format's, then the common spellings.
fn argument_keys(fields: &crate::format::JsonCallFields) -> impl Iterator<Item = &str> {
    [fields.arguments.as_str(), "arguments", "parameters"].into_iter().filter(|k| !k.is_empty())
}

/// Keys a call object's id may sit under: the Format's, then the common spellings.
fn id_keys(fields: &crate::format::JsonCallFields) -> impl Iterator<Item = &str> {
    [fields.id.as_deref().unwrap_or("id"), "id", "tool_call_id", "call_id"].into_iter()
}
