//! Channel formats (gpt-oss Harmony): the output read message by message, each a header that says
//! what its body is (reasoning, content, a call to a function) and the body up to its end marker.

use super::{Machine, State, Step};
use crate::parse::IssueKind;
use crate::parse::SpanKind;
use crate::parse::channel::{Body, MAX_HEADER};
use crate::parse::scan::{Match, leading_ws, marker_hold};
use crate::values::arguments_as_json;

impl Machine {
    pub(super) fn channel_header(&mut self) -> Step {
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
            Match::Full(end) => {
                self.marker(end);
                return Step::Again;
            }
            Match::Partial => return Step::Wait,
            Match::No => {}
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
        let found = rest.find(channel.message.as_str());
        // Undecided until a marker starting within the bound would have arrived whole.
        if found.is_none() && !self.eof && rest.len() < MAX_HEADER + channel.message.len() {
            return Step::Wait;
        }
        let Some(at) = found.filter(|&at| at <= MAX_HEADER) else {
            self.issue(
                IssueKind::UnparsedCall,
                self.pos,
                "a channel header without its message marker within the bound",
            );
            self.state = State::Content;
            return Step::Again;
        };
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

    pub(super) fn channel_body(&mut self, body: Body) -> Step {
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
            // Python literals (where the template writes them) are read whole, at the body's end.
            let python = setup.syntax.tools.as_ref().is_some_and(|t| t.python);
            if python && !done {
                self.state = State::ChannelBody(body);
                return Step::Wait;
            }
            // Arguments exactly as written; whitespace at their end waits until decided.
            let text = &self.buf[self.pos..upto];
            let text = if done { text.trim_end() } else { text };
            let lead =
                if self.message.tool_calls[self.call.unwrap_or(0)].arguments.is_empty() { leading_ws(text) } else { 0 };
            // Whitespace both leading and trailing (all of `text`) is the leading kind.
            let held = if done { 0 } else { (text.len() - text.trim_end().len()).min(text.len() - lead) };
            let written = &text[lead..text.len() - held];
            let piece = if python { arguments_as_json(written) } else { written.to_owned() };
            let written = written.len();
            self.span(SpanKind::Whitespace, self.pos, self.pos + lead);
            self.span(SpanKind::ToolArguments, self.pos + lead, self.pos + lead + written);
            self.pos += lead + written;
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
}
