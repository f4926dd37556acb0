//! Chat data in the OpenAI chat-completions shapes: `Message`, `ToolCall`, `Tool`, `Conversation`.
//!
//! Templates see messages as plain JSON, so a `Conversation` keeps each message as the JSON object the
//! client sent (key order and unknown keys included). The typed `Message` is the structured view the
//! parser produces and callers build; it converts to the same JSON.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant`, `tool`, or a template's own role.
    pub role: String,
    /// Text, or a list of content parts; `None` when an assistant turn only calls tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Json>,
    /// The model's reasoning ("thinking") for an assistant turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Tool calls of an assistant turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool` messages: the id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `tool` messages: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Any other keys, passed to the template unchanged.
    #[serde(flatten)]
    pub extra: IndexMap<String, Json>,
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id (model-given or generated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Always `function` today.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments: a JSON object, or a JSON string holding one (both reach templates as given).
    pub arguments: Json,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `function` today.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function's description.
    pub function: FunctionDefinition,
}

/// Name, description and JSON Schema of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Json>,
}

fn function_type() -> String {
    "function".to_owned()
}

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

impl Conversation {
    /// A conversation from typed messages and tools.
    pub fn from_messages(messages: &[Message], tools: Option<&[Tool]>) -> Conversation {
        Conversation {
            messages: messages.iter().map(to_json).collect(),
            tools: tools.map(|tools| tools.iter().map(to_json).collect()),
            documents: None,
        }
    }
}

fn to_json<T: Serialize>(value: &T) -> Json {
    serde_json::to_value(value).expect("message types serialize to JSON without failure")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_json_keeps_shapes_and_unknown_keys() {
        let text = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"a1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}],"custom":7}"#;
        let message: Message = serde_json::from_str(text).unwrap();
        assert_eq!(message.tool_calls[0].function.arguments, Json::String("{\"x\": 1}".into()));
        assert_eq!(message.extra["custom"], Json::from(7));
        let conversation = Conversation::from_messages(&[message], None);
        assert_eq!(
            serde_json::to_string(&conversation.messages[0]).unwrap(),
            r#"{"role":"assistant","tool_calls":[{"id":"a1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}],"custom":7}"#
        );
    }
}
