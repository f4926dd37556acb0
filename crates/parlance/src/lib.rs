//! parlance: the layer between an LLM inference engine and the agents that call it.
//!
//! This crate renders conversations through a model's own chat template, byte for byte as Hugging
//! Face `apply_chat_template` does ([`ChatTemplate`]), turns the rendered text into token ids
//! ([`Tokenizer`]), learns the template's output syntax ([`analyze()`] → [`Format`]), parses model
//! output with it ([`Parser`]), and checks and bridges the parse-render roundtrip ([`roundtrip`],
//! [`Renderer`]).

pub mod analyze;
pub mod constrain;
pub mod format;
pub mod message;
pub mod parse;
pub mod response_template;
pub mod roundtrip;
pub mod template;
mod tokenizer;

pub use analyze::{AnalyzeError, AnalyzeOptions, CaseResult, RenderedCase, analyze, rendered_cases, self_check};
pub use constrain::ConstrainError;
pub use format::{Confidence, Evidence, Finding, Format, ToolFamily};
pub use message::{Conversation, FunctionCall, FunctionDefinition, Message, Tool, ToolCall};
pub use parse::{Delta, ParseOptions, ParsedMessage, ParsedToolCall, Parser, StreamParser, parse};
pub use response_template::response_template;
pub use roundtrip::{RenderedTokens, Renderer, RoundtripOptions};
pub use template::{ChatTemplate, RenderLimits, RenderOptions, RenderRequest, TemplateError, TemplateSource};
pub use tokenizer::{ByteRange, Tokenizer, TokenizerError};
