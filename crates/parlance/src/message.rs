//! Chat data as templates see it: a [`Conversation`] keeps each message as the JSON object the
//! client sent (key order and unknown keys matter to templates), and the OpenAI wire shapes a
//! caller renders for a template that needs them (arguments as JSON strings, `content: null`
//! beside calls).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::format::Format;

/// What a template renders: messages, tools and documents as the JSON a client sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The messages, each a JSON object.
    pub messages: Vec<Json>,
    /// Tool definitions (`{"type": "function", "function": {...}}`), or `None` for no tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Json>>,
    /// Documents for retrieval-augmented templates, or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<Vec<Json>>,
}

/// `message` as a caller renders it for `format`: arguments as JSON strings where the template
/// needs them so (`ToolCallFormat::arguments_from_string`).
pub(crate) fn wire_message(format: &Format, message: &Json) -> Json {
    let mut message = message.clone();
    if format.tools.as_ref().is_some_and(|t| t.arguments_from_string) {
        for call in message.get_mut("tool_calls").and_then(Json::as_array_mut).into_iter().flatten() {
            if let Some(arguments) = call.pointer_mut("/function/arguments")
                && !arguments.is_string()
            {
                *arguments = Json::from(arguments.to_string());
            }
        }
    }
    message
}

/// Sets an absent or empty `content` to `null` in messages with tool calls, for templates that
/// render calls only then (workaround `calls-with-null-content`; render with
/// `RenderOptions::keep_null_keys`).
pub(crate) fn null_content_beside_calls(messages: &mut [Json]) {
    for message in messages {
        let empty = message.get("content").is_none_or(|c| c.as_str() == Some(""));
        if message.get("tool_calls").is_some() && empty {
            message["content"] = Json::Null;
        }
    }
}
