//! What renders the memory guard refuses cost the process (issue 19, item 2): a refused render's
//! thread sleeps for good with what it held, but the process's total is bounded; past it, bounded
//! renders are refused at once with an error saying why. A process of its own, so the thread
//! count and the parked totals are this test's alone.

use parlance::{ChatTemplate, RenderOptions, TemplateError};

#[global_allocator]
static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;

/// `VmRSS` (KiB) and `Threads` from /proc/self/status (`None` off Linux).
fn rss_and_threads() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |key: &str| -> Option<u64> {
        status.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("Threads:")?))
}

#[test]
fn refused_renders_cost_the_process_a_bounded_amount() {
    use parlance::template::memory;
    // Doubles a string 60 times: the guard refuses it at its memory limit.
    let bomb =
        "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
    let limits = parlance::RenderLimits { max_memory_bytes: 64 << 20, ..parlance::RenderLimits::default() };
    let template =
        ChatTemplate::from_source(parlance::TemplateSource::from_text("bomb.jinja", bomb), limits.clone()).unwrap();
    let plain = ChatTemplate::from_source(
        parlance::TemplateSource::from_text("plain.jinja", "{{ messages[0].content }}"),
        limits,
    )
    .unwrap();
    let conversation = parlance::Conversation {
        messages: vec![serde_json::json!({"role": "user", "content": "hi"})],
        ..Default::default()
    };
    memory::set_parked_limit(256 << 20);
    let baseline = rss_and_threads();
    let mut refused = 0;
    let mut exhausted = None;
    for _ in 0..100 {
        match template.render(&conversation, &RenderOptions::default()) {
            Err(TemplateError::Limit { what: "memory bytes", .. }) => refused += 1,
            Err(err @ TemplateError::Exhausted { .. }) => {
                exhausted = Some(err);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    // 256 MiB, at most 64 MiB held by each refusal: four of them at most, then a render whose
    // budget would pass the limit is not started.
    let (threads, held) = memory::parked();
    assert!((3..=4).contains(&refused), "{refused} refusals, then {exhausted:?}");
    assert_eq!(threads, refused);
    assert!(held <= refused * (64 << 20) && held + (64 << 20) > 256 << 20, "{held}");
    let message = exhausted.expect("renders refused at once past the limit").to_string();
    assert!(message.contains("restart"), "{message}");
    // Every later render, of any template, is refused at once; nothing more is held.
    for _ in 0..50 {
        let err = plain.render(&conversation, &RenderOptions::default()).unwrap_err();
        assert!(matches!(err, TemplateError::Exhausted { .. }), "{err:?}");
    }
    assert_eq!(memory::parked(), (threads, held));
    if let (Some((rss_before, threads_before)), Some((rss_after, threads_after))) = (baseline, rss_and_threads()) {
        assert!(threads_after <= threads_before + refused as u64, "threads {threads_before} -> {threads_after}");
        assert!(rss_after < rss_before + 4 * 64 * 1024, "RSS {rss_before} KiB -> {rss_after} KiB");
    }
    // Raising the limit lets renders run again.
    memory::set_parked_limit(1 << 30);
    assert_eq!(plain.render(&conversation, &RenderOptions::default()).unwrap(), "hi");
}
