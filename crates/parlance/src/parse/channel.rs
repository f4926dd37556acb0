//! The channel family (gpt-oss's harmony format): output is a sequence of messages, each a header
//! (`<|channel|>analysis`, `<|channel|>commentary to=functions.f <|constrain|>json`, or the
//! recipient first: ` to=functions.f<|channel|>commentary`) ended by `<|message|>`, then a body
//! ended by `<|end|>`, `<|call|>` or `<|return|>`; later messages repeat the turn header
//! (`<|start|>assistant`). Every marker comes from the `Format`: the channel and message tokens
//! from the reasoning start, the analysis and final channel names from the reasoning and content
//! start, the recipient prefix from the call's name prefix, the body ends from the reasoning, call
//! and content ends.

use crate::format::{Format, ToolFamily};

/// The markers of a channel format.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChannelSyntax {
    /// `<|channel|>`.
    pub channel: String,
    /// `<|message|>`: ends a header.
    pub message: String,
    /// The reasoning channel's name (`analysis`); any other channel is content.
    pub reasoning_channel: String,
    /// `to=functions.`: the recipient prefix of a tool call.
    pub recipient: String,
    /// `to=`: any recipient.
    pub recipient_any: String,
    /// Body ends (`<|end|>`, `<|call|>`, `<|return|>`).
    pub ends: Vec<String>,
    /// The turn header later messages repeat (`<|start|>assistant`).
    pub turn_header: String,
}

/// What a header says the body is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    Reasoning,
    /// Reasoning left in content as written, header and end included (`separate_reasoning: false`).
    RawReasoning,
    Content,
    /// A call of this function; the body is its JSON arguments.
    Call(String),
    /// Addressed to a recipient that is not a function (`to=python`): kept as content, reported.
    Other(String),
}

/// Longest header read before deciding the text is not one.
pub(crate) const MAX_HEADER: usize = 256;

impl ChannelSyntax {
    pub(crate) fn from_format(format: &Format) -> Option<ChannelSyntax> {
        if format.tool_format != ToolFamily::Channel {
            return None;
        }
        let reasoning = format.reasoning.as_ref()?;
        let pieces = crate::markers::bracketed_pieces(&reasoning.start);
        let (channel, message) = match pieces.as_slice() {
            [channel, .., message] => ((*channel).to_owned(), (*message).to_owned()),
            _ => return None,
        };
        let name_between = |marker: &str| -> String {
            let rest = marker.trim().strip_prefix(channel.as_str()).unwrap_or_default();
            rest.strip_suffix(message.as_str()).unwrap_or(rest).trim().to_owned()
        };
        let tools = format.tools.as_ref()?;
        let recipient = tools.name_prefix.trim().to_owned();
        let recipient_any = recipient.split('=').next().map(|p| format!("{p}=")).unwrap_or_default();
        let mut ends = vec![reasoning.end.trim().to_owned(), tools.call_end.trim().to_owned()];
        ends.push(format.content.end.trim().to_owned());
        ends.retain(|e| !e.is_empty());
        ends.dedup();
        Some(ChannelSyntax {
            reasoning_channel: name_between(&reasoning.start),
            channel,
            message,
            recipient,
            recipient_any,
            ends,
            turn_header: format.generation_prompt.trim().to_owned(),
        })
    }

    /// Whether `text` (trimmed at the start) may open a header.
    pub(crate) fn opens_header(&self, text: &str) -> Option<bool> {
        let text = text.trim_start();
        for start in [self.channel.as_str(), self.recipient_any.as_str()] {
            if start.is_empty() {
                continue;
            }
            if text.starts_with(start) {
                return Some(true);
            }
            if start.starts_with(text) {
                return None;
            }
        }
        Some(false)
    }

    /// What the body after `header` (the text before `<|message|>`) is.
    pub(crate) fn classify(&self, header: &str) -> Body {
        if let Some(at) = header.find(self.recipient.as_str()) {
            let name: String = header[at + self.recipient.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
                .collect();
            if !name.is_empty() {
                return Body::Call(name);
            }
        }
        // The last channel named wins (`commentary to=assistant<|channel|>final`).
        let channel = header.rsplit(self.channel.as_str()).next().unwrap_or_default();
        let word: String = channel.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if let Some(at) = header.find(self.recipient_any.as_str()) {
            let target: String = header[at + self.recipient_any.len()..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '<')
                .collect();
            if target != "assistant" && !header[at..].contains(self.channel.as_str()) {
                return Body::Other(target);
            }
        }
        if word == self.reasoning_channel { Body::Reasoning } else { Body::Content }
    }
}
