//! Which markers a model stops on, and where in a rendered turn it stops: read off the template's
//! `Format` (turn end, content end), its EOS token, and the shape of special tokens.

use crate::format::Format;
use crate::markers::bracketed_pieces;
use crate::template::ChatTemplate;

/// Whether `marker` is one a model stops on: the turn end's or the content end's markers, the EOS
/// token, or a special-token-shaped marker (`<|…|>`, `<｜…｜>`).
pub(crate) fn is_stop_marker(template: &ChatTemplate, format: &Format, marker: &str) -> bool {
    let eos = template.special_tokens().get("eos_token").map(String::as_str);
    bracketed_pieces(&format.turn_end).contains(&marker)
        || bracketed_pieces(&format.content.end).contains(&marker)
        || eos == Some(marker)
        || marker.contains('|')
        || marker.contains('｜')
}

/// Where the model stops in `text`, as the marker's `(start, end)`: the first marker of the turn
/// end, the content end or EOS at or after byte `after` (the end of the turn's last part; a
/// template may print more after it, as firefunction prints the next header), else the stop-shaped
/// marker that ends the text.
pub(crate) fn stop_in(template: &ChatTemplate, format: &Format, text: &str, after: usize) -> Option<(usize, usize)> {
    let eos = template.special_tokens().get("eos_token").map(String::as_str);
    let mut ends: Vec<&str> = bracketed_pieces(&format.turn_end);
    ends.extend(bracketed_pieces(&format.content.end));
    ends.extend(eos.filter(|e| !e.is_empty()));
    let first = ends
        .iter()
        .filter_map(|m| text.get(after..).and_then(|rest| rest.find(m)).map(|at| (after + at, after + at + m.len())))
        .min();
    first.or_else(|| trailing_stop(template, format, text))
}

/// The stop marker that ends `text` (after trailing whitespace), as `(start, end)`.
fn trailing_stop(template: &ChatTemplate, format: &Format, text: &str) -> Option<(usize, usize)> {
    let end = text.trim_end().len();
    let body = &text[..end];
    if !body.ends_with('>') {
        return None;
    }
    let start = body.rfind('<')?;
    is_stop_marker(template, format, &body[start..]).then_some((start, end))
}
