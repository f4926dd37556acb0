//! parlance: the layer between an LLM inference engine and the agents that call it.
//!
//! This crate renders conversations through a model's own chat template, byte for byte as Hugging
//! Face `apply_chat_template` does ([`ChatTemplate`]), turns the rendered text into token ids
//! ([`Tokenizer`]), learns the template's output syntax ([`analyze()`] → [`Format`]), parses model
//! output with it ([`Parser`]), constrains generation with it ([`constrain`], the
//! `parlance-grammar` engine), and renders and bridges turns as a server holds them ([`Renderer`];
//! [`roundtrip`] checks where re-rendering would break an engine's prefix cache).
//!
//! The turn loop, with a template, its Format and a tokenizer held once:
//!
//! ```
//! use std::sync::Arc;
//! use parlance::{
//!     ArgumentsAs, ChatTemplate, Conversation, Format, ParseOptions, Parser, RenderOptions, Renderer, Tokenizer,
//! };
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
//! # let (template_path, tokenizer_path) =
//! #     (shared.join("corpus/templates/Qwen-Qwen3-0.6B.jinja"), shared.join("tokenizers/qwen3/tokenizer.json"));
//! let template = ChatTemplate::from_path(template_path)?; // a .jinja, tokenizer_config.json or model folder
//! let format = Arc::new(Format::from_template(&template, &Default::default())?);
//! let tokenizer = Arc::new(Tokenizer::from_path(tokenizer_path)?);
//! let options = RenderOptions { add_generation_prompt: true, ..Default::default() };
//! let renderer = Renderer::new(template, format.clone(), tokenizer.clone(), options)?;
//!
//! let tools = vec![json!({"type": "function", "function": {"name": "get_weather",
//!     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})];
//! let conversation = Conversation {
//!     messages: vec![json!({"role": "user", "content": "Weather in Paris?"})],
//!     tools: Some(tools.clone()),
//!     documents: None,
//! };
//! let prompt = renderer.render(&conversation)?; // prompt.ids go to the engine
//! // … the engine samples the completion …
//! # let completion_ids = tokenizer.encode_rendered(
//! #     "<think>\nIt asks for Paris.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>")?;
//! let stop = completion_ids.iter().position(|id| renderer.stop_token_ids().contains(id));
//! let text = tokenizer.decode(&completion_ids[..stop.unwrap_or(completion_ids.len())])?;
//! let request = ParseOptions { tools: tools.clone(), ..Default::default() };
//! let message = Parser::new(&format, &request).parse(&text);
//! // The message the client sends back (reasoning also under the template's own key, if any).
//! let assistant = renderer.to_assistant_message(&message, ArgumentsAs::Object);
//! assert_eq!(assistant["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
//! let result = json!({"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": "21°C"});
//! // The next prompt: the previous ids as they were, then the tool result and the generation prompt.
//! let next = renderer.bridge(&prompt, &completion_ids, &[result], Some(&tools))?;
//! assert!(next.ids.starts_with(&prompt.ids));
//! # Ok(())
//! # }
//! ```

pub mod analyze;
pub mod constrain;
pub mod format;
mod markers;
pub mod message;
pub mod parse;
pub mod response_template;
pub mod roundtrip;
pub mod template;
mod tokenizer;
pub mod turn;
mod values;

pub use analyze::{AnalyzeError, AnalyzeOptions, CaseResult, RenderedCase, analyze, rendered_cases, self_check};
pub use constrain::ConstrainError;
pub use format::{
    ArgumentEncoding, Confidence, Evidence, Finding, Format, NameEscape, ReasoningMode, ToolFamily, ValueEncoding,
    Workaround,
};
pub use message::Conversation;
pub use parse::{
    ArgumentsAs, Delta, Issue, IssueKind, ParseOptions, ParsedMessage, ParsedToolCall, Parser, StreamParser,
    TruncatedCalls, parse,
};
pub use response_template::response_template;
pub use roundtrip::RoundtripOptions;
pub use template::{
    ChatTemplate, RenderLimits, RenderOptions, RenderRequest, RunBudget, TemplateError, TemplateSource,
};
pub use tokenizer::{ByteRange, END_TOKENS, Tokenizer, TokenizerError};
pub use turn::{RenderedTokens, Renderer, TurnError};
