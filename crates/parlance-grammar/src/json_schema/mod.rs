//! JSON Schema -> grammar IR.

use crate::grammar::Grammar;
use crate::limits::Limits;

/// Placeholder.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("x")]
pub struct SchemaError;
/// Placeholder.
#[derive(Debug, Clone, Default)]
pub struct JsonSchemaOptions {
    /// limits
    pub limits: Limits,
}
/// Placeholder.
#[derive(Debug, Clone, Default)]
pub struct SchemaReport;
/// Placeholder.
#[derive(Debug, Clone, Default)]
pub enum Whitespace {
    /// x
    #[default]
    Compact,
}
/// Placeholder.
pub fn json_schema_to_grammar(
    _s: &serde_json::Value,
    _o: &JsonSchemaOptions,
) -> Result<(Grammar, SchemaReport), SchemaError> {
    Err(SchemaError)
}
