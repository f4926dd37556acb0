//! The render request file: `{"messages", "tools", "documents", "kwargs", "add_generation_prompt",
//! "continue_final_message"}`, as in the corpus's conversation fixtures, or a bare array of messages.

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value as Json;

use super::{RenderOptions, TemplateError};
use crate::message::Conversation;

/// A conversation plus how to render it, as one JSON document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderRequest {
    /// The messages, each a JSON object.
    pub messages: Vec<Json>,
    /// Tool definitions, or `null`.
    #[serde(default)]
    pub tools: Option<Vec<Json>>,
    /// Documents, or `null`.
    #[serde(default)]
    pub documents: Option<Vec<Json>>,
    /// Extra template variables (`enable_thinking`, ...).
    #[serde(default)]
    pub kwargs: IndexMap<String, Json>,
    /// Append the assistant turn's opening.
    #[serde(default)]
    pub add_generation_prompt: bool,
    /// `true` (continue the content), a field name, or `false` / absent.
    #[serde(default)]
    pub continue_final_message: Option<Json>,
}

impl RenderRequest {
    /// Parses a request, or a bare JSON array of messages (what `apply_chat_template` takes as
    /// its first argument); errors name `label` with the line and column.
    pub fn from_json(label: &Path, text: &str) -> Result<RenderRequest, TemplateError> {
        match text.trim_start().as_bytes().first() {
            Some(b'[') => serde_json::from_str(text)
                .map(|messages| RenderRequest { messages, ..RenderRequest::default() })
                .map_err(|e| TemplateError::json(label, &e)),
            Some(b'{') => serde_json::from_str(text).map_err(|e| TemplateError::json(label, &e)),
            _ => Err(TemplateError::Request(format!(
                "{}: expected a request object ({{\"messages\": [...], \"tools\": ...}}) or an array of messages",
                label.display()
            ))),
        }
    }

    /// Reads and parses a request file.
    pub fn from_path(path: &Path) -> Result<RenderRequest, TemplateError> {
        let text = super::source::read_input_file(path)?;
        RenderRequest::from_json(path, &text)
    }

    /// Splits into what `ChatTemplate::render` takes.
    pub fn into_parts(self) -> Result<(Conversation, RenderOptions), TemplateError> {
        let continue_final_message = match self.continue_final_message {
            None | Some(Json::Null) | Some(Json::Bool(false)) => None,
            Some(Json::Bool(true)) => Some("content".to_owned()),
            Some(Json::String(field)) => Some(field),
            Some(other) => {
                return Err(TemplateError::Request(format!(
                    "continue_final_message must be a boolean or a field name, not {other}"
                )));
            }
        };
        let conversation = Conversation { messages: self.messages, tools: self.tools, documents: self.documents };
        let options = RenderOptions {
            add_generation_prompt: self.add_generation_prompt,
            continue_final_message,
            variables: self.kwargs,
            ..RenderOptions::default()
        };
        Ok((conversation, options))
    }
}
