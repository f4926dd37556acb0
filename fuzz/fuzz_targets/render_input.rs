// Splitting and expanding a `render` fuzz input; `include!`d by the target and by its replay test
// (`crates/parlance/tests/it/fuzz_regressions.rs`), so both read an input the same way.
//
// An input is template bytes, `0x00`, request bytes (without `0x00`, the whole input is the
// template and the request is `DEFAULT_REQUEST`). A template that starts with `0x01` is in repeat
// mode, so that short inputs reach the depths where stack overflows live: `0x01`, two bytes of
// repeat count (little-endian, times 16: up to ~10⁶), then up to five parts separated by `0x01` —
// prefix, unit, middle, closer, suffix — and the template is
// `prefix + unit × count + middle + closer × count + suffix` (`{{ 1` `~1` `` `` `` ` }}` is a
// concatenation chain; `{{ ` `(` `1` `)` ` }}` nested brackets; `{% if 1 %}` … `{% endif %}` blocks).

/// The conversation used when an input has no 0x00 (the whole input is the template).
const DEFAULT_REQUEST: &str = r#"{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}"#;

/// Splits a `render` input into template bytes (repeat mode expanded) and request bytes.
fn split_render_input(data: &[u8]) -> (std::borrow::Cow<'_, [u8]>, &[u8]) {
    // The repeat header's count bytes may be 0x00: the template ends at the first 0x00 after it.
    let header = if data.len() >= 3 && data[0] == 1 { 3 } else { 0 };
    let (template, request) = match data[header..].iter().position(|&b| b == 0) {
        Some(at) => (&data[..header + at], &data[header + at + 1..]),
        None => (data, DEFAULT_REQUEST.as_bytes()),
    };
    let [1, low, high, rest @ ..] = template else {
        return (std::borrow::Cow::Borrowed(template), request);
    };
    // At most 4 MiB expanded: enough for 10⁶ levels of a short unit, and a run stays fast (a
    // 60 MB template takes 0.7 s to refuse in release, but over the fuzzer's timeout under ASan).
    let unit_bytes = rest.split(|&b| b == 1).skip(1).take(3).map(<[u8]>::len).sum::<usize>().max(1);
    let count = (usize::from(u16::from_le_bytes([*low, *high])) * 16).min((4 << 20) / unit_bytes);
    let mut parts = rest.splitn(5, |&b| b == 1);
    let mut next = || parts.next().unwrap_or_default();
    let (prefix, unit, middle, closer, suffix) = (next(), next(), next(), next(), next());
    let mut expanded =
        Vec::with_capacity(prefix.len() + middle.len() + suffix.len() + count * (unit.len() + closer.len()));
    expanded.extend_from_slice(prefix);
    (0..count).for_each(|_| expanded.extend_from_slice(unit));
    expanded.extend_from_slice(middle);
    (0..count).for_each(|_| expanded.extend_from_slice(closer));
    expanded.extend_from_slice(suffix);
    (std::borrow::Cow::Owned(expanded), request)
}

/// The lowered limits the target renders under (the replay test renders under the same).
fn fuzz_limits() -> parlance::RenderLimits {
    parlance::RenderLimits {
        fuel: 200_000,
        recursion: 64,
        max_output_bytes: 1 << 20,
        max_memory_bytes: 64 << 20,
        max_wall_time: std::time::Duration::from_secs(5),
    }
}
