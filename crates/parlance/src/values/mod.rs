//! Values as templates write them and models echo them, shared by the analyzer and the parser:
//! where a JSON value ends in text (`json_end`), and tagged argument values read back to JSON by the
//! tool's schema (`tagged`: JSON or Python literals, nested element tags, requoted strings).

mod json_end;
mod tagged;

pub(crate) use json_end::{JsonEnd, JsonScan};
pub(crate) use tagged::*;
