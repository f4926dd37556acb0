//! Fuzz target: load an arbitrary chat template and render an arbitrary conversation through it.
//!
//! Input: template text, a 0x00 byte, then a render request as JSON (the corpus's conversation
//! format: `{"messages", "tools", "documents", "kwargs", "add_generation_prompt",
//! "continue_final_message"}`). Both halves must be UTF-8; without a 0x00 the whole input is the
//! template and the conversation is one user message; a template starting with 0x01 is a repeat
//! (see `render_input.rs`), to reach nesting 10⁶ deep from a short input. Any `Err` is fine; a panic, abort, hang or
//! unbounded allocation is a bug. Limits are lowered so each run stays fast.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use parlance::{ChatTemplate, RenderRequest, TemplateError, TemplateSource};

// Render memory is bounded only under the guard; install it as the CLI does.
#[global_allocator]
static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;

include!("render_input.rs");

fuzz_target!(|data: &[u8]| {
    let (template, request) = split_render_input(data);
    let (Ok(template), Ok(request)) = (std::str::from_utf8(&template), std::str::from_utf8(request)) else {
        return;
    };
    let limits = fuzz_limits();
    let Ok(chat) = ChatTemplate::from_source(TemplateSource::from_text("<fuzz>", template), limits) else {
        return;
    };
    let Ok(request) = RenderRequest::from_json(Path::new("<fuzz>"), request) else {
        return;
    };
    let Ok((conversation, options)) = request.into_parts() else {
        return;
    };
    // Under the guard a panic on the render thread comes back as an error; never let it pass (the
    // panic hook libfuzzer-sys installs aborts first, this is the belt to its braces).
    if let Err(TemplateError::Render { message, .. }) = chat.render(&conversation, &options) {
        assert_ne!(message, "render stopped: Panic", "the render thread panicked");
    }
});
