//! JSON Schema tests (filled in with the JSON Schema compiler).
