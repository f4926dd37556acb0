//! Bad and hostile templates: errors name the template and line; loops, recursion, output and
//! memory are bounded with clear errors, never a hang, a crash or an abort.

use parlance::{ChatTemplate, Conversation, RenderLimits, RenderOptions, TemplateError, TemplateSource};

fn conversation() -> Conversation {
    Conversation { messages: vec![serde_json::json!({"role": "user", "content": "hi"})], ..Conversation::default() }
}

#[track_caller]
fn render_err(template: &str, limits: RenderLimits) -> TemplateError {
    let template = ChatTemplate::from_source(TemplateSource::from_text("hostile.jinja", template), limits)
        .expect("template compiles");
    match template.render(&conversation(), &RenderOptions::default()) {
        Ok(out) => panic!("expected an error, rendered {} bytes", out.len()),
        Err(err) => err,
    }
}

#[test]
fn raise_exception_names_template_line_and_message() {
    let err =
        render_err("line one\n{% if true %}{{ raise_exception('no tools here') }}{% endif %}", RenderLimits::default());
    assert!(
        matches!(&err, TemplateError::Raised { name, line: 2, message } if name == "hostile.jinja" && message == "no tools here"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "hostile.jinja:2: template raised: no tools here");
}

#[test]
fn undefined_attribute_and_type_errors_name_the_line() {
    let err = render_err("\n\n{{ messages[0].nothing.deeper }}", RenderLimits::default());
    assert!(matches!(&err, TemplateError::Render { line: 3, .. }), "{err:?}");
    assert!(err.to_string().starts_with("hostile.jinja:3: undefined value"), "{err}");
    let err = render_err("{{ 1 + 'a' }}", RenderLimits::default());
    assert!(matches!(&err, TemplateError::Render { line: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("invalid operation"), "{err}");
}

#[test]
fn syntax_errors_are_reported_at_load() {
    let err = ChatTemplate::from_source(
        TemplateSource::from_text("broken.jinja", "ok\n{% for m in messages %}"),
        RenderLimits::default(),
    )
    .unwrap_err();
    assert!(matches!(&err, TemplateError::Syntax { name, .. } if name == "broken.jinja"), "{err:?}");
    assert!(err.to_string().contains("syntax error"), "{err}");
}

#[test]
fn endless_loops_run_out_of_fuel() {
    let err = render_err(
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        RenderLimits::default(),
    );
    assert!(matches!(err, TemplateError::Limit { what: "fuel", .. }), "{err:?}");
}

#[test]
fn unbounded_recursion_hits_the_recursion_limit() {
    let err = render_err("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", RenderLimits::default());
    assert!(matches!(err, TemplateError::Limit { what: "recursion", .. }), "{err:?}");
}

#[test]
fn exploding_output_hits_the_output_limit() {
    let limits = RenderLimits { max_output_bytes: 1 << 20, ..RenderLimits::default() };
    let err = render_err("{% for i in range(10000) %}{{ 'x' * 10000 }}{% endfor %}", limits);
    assert!(matches!(err, TemplateError::Limit { what: "output bytes", limit, .. } if limit == 1 << 20), "{err:?}");
}

#[test]
fn string_doubling_hits_the_memory_limit() {
    // 2^40 bytes if nothing stopped it; fuel alone cannot, each doubling is one instruction.
    let limits = RenderLimits { max_memory_bytes: 64 << 20, ..RenderLimits::default() };
    let looped = "{% set ns = namespace(s='x' * 1000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}";
    let err = render_err(looped, limits.clone());
    assert!(matches!(err, TemplateError::Limit { what: "memory bytes", .. }), "{err:?}");
    let mut straight = String::from("{% set s0 = 'x' * 100000000 %}");
    for i in 1..12 {
        straight.push_str(&format!("{{% set s{i} = s{} ~ s{} %}}", i - 1, i - 1));
    }
    straight.push_str("{{ s11 | length }}");
    let err = render_err(&straight, limits);
    assert!(matches!(err, TemplateError::Limit { what: "memory bytes", .. }), "{err:?}");
    // The process is still healthy: a normal render works afterwards.
    let ok = ChatTemplate::from_text("{{ messages[0].content }}").unwrap();
    assert_eq!(ok.render(&conversation(), &RenderOptions::default()).unwrap(), "hi");
}

// See: issue 19, item 1 (`shared/repro/cpu_bomb.jinja`: every instruction copies megabytes, so fuel
// alone lets a 112-byte template render for hours).
#[test]
fn renders_that_copy_megabytes_per_instruction_stop_at_the_wall_clock_budget() {
    let bomb = "{% set s = 'x' * 4000000 %}{% for i in range(10000) %}{% for j in range(10000) %}{% set t = s ~ s %}{% endfor %}{% endfor %}";
    let limits = RenderLimits { max_wall_time: std::time::Duration::from_millis(500), ..RenderLimits::default() };
    let started = std::time::Instant::now();
    let err = render_err(bomb, limits.clone());
    assert!(matches!(&err, TemplateError::Limit { what: "wall-clock milliseconds", limit: 500, .. }), "{err:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    // The analysis pays that budget once, not once per probe, and says why it stopped.
    let template = ChatTemplate::from_source(TemplateSource::from_text("bomb.jinja", bomb), limits).unwrap();
    let started = std::time::Instant::now();
    let err = parlance::Format::from_template(&template, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("wall-clock milliseconds limit"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
}

// See: issue 19, item 1 (a whole-run budget for `analyze` and `roundtrip`): a template that costs a
// fraction of the per-render limit on every render would otherwise cost ~60 of them.
#[test]
fn analysis_and_roundtrip_end_within_their_whole_run_budget() {
    let body = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% for c in m.tool_calls or [] %}\
                <call>{{ c.function.name }}{{ c.function.arguments | tojson }}</call>{% endfor %}<|end|>{% endfor %}\
                {% if add_generation_prompt %}<|assistant|>{% endif %}";
    let slow =
        format!("{{% set s = 'x' * 4000000 %}}{{% for i in range(150) %}}{{% set t = s ~ s %}}{{% endfor %}}{body}");
    let template = ChatTemplate::from_text(&slow).unwrap();
    let started = std::time::Instant::now();
    let one = template.render(&conversation(), &RenderOptions::default());
    assert!(one.is_ok(), "{one:?}");
    let per_render = started.elapsed();
    let budget = std::time::Duration::from_secs(1);
    let options = parlance::AnalyzeOptions { max_wall_time: budget, ..parlance::AnalyzeOptions::default() };
    let started = std::time::Instant::now();
    let result = parlance::analyze(&template, &options);
    let took = started.elapsed();
    // Sixty renders would take far longer than the budget; the analysis stops at it, saying so.
    assert!(per_render * 60 > budget * 3, "the template renders too fast to test: {per_render:?}");
    let err = result.expect_err("the analysis cannot finish in its budget").to_string();
    assert!(err.contains("analysis wall-clock milliseconds limit reached (1000)"), "{err}");
    assert!(took < budget + per_render * 3 + std::time::Duration::from_secs(1), "took {took:?}");
    // The roundtrip's renders share one budget the same way (the Format from the fast template).
    let format = parlance::Format::from_template(&ChatTemplate::from_text(body).unwrap(), &Default::default()).unwrap();
    assert!(format.tools.is_some(), "{}", format.summary());
    let options =
        parlance::RoundtripOptions { max_wall_time: budget, sessions: 0, ..parlance::RoundtripOptions::default() };
    let started = std::time::Instant::now();
    let report = parlance::roundtrip::run(&template, &format, None, &options);
    let took = started.elapsed();
    assert!(took < budget + per_render * 3 + std::time::Duration::from_secs(1), "took {took:?}");
    let text = serde_json::to_string(&report).unwrap();
    assert!(text.contains("roundtrip wall-clock milliseconds limit reached (1000)"), "{text:.3000}");
}

// See: issue 22 (`continue` inside a `{% set %}` body ended the render silently, output lost; out
// of a `{% with %}` body it panicked the engine). Rendered as Jinja2 does now; more shapes, with
// whitespace control, in `tests/data/jinja2_filters.json`.
#[test]
fn loop_controls_leaving_blocks_render_as_jinja2_does() {
    let template = ChatTemplate::from_text(
        "{%- for m in messages %}{% set x %}{% if loop.first %}{% continue %}{% endif %}\
         {{ m.content }}{% endset %}[{{ x }}]{% with y = m.content %}{% if y == 'b' %}{% break %}{% endif %}\
         {{ y }}{% endwith %}{% endfor %}END",
    )
    .unwrap();
    let conversation = Conversation {
        messages: ["a", "b", "c"].map(|c| serde_json::json!({"role": "user", "content": c})).to_vec(),
        ..Conversation::default()
    };
    // Jinja2 3.1.6: the first message continues out of the set block, the second breaks out of the with.
    assert_eq!(template.render(&conversation, &RenderOptions::default()).unwrap(), "[b]END");
}

// See: issue 22 (Jinja2 builtin filters minijinja lacks). Expected outputs are Jinja2 3.1's own
// (`tests/data/jinja2_filters.py` regenerates them).
#[test]
fn jinja2_filters_render_as_jinja2_does() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jinja2_filters.json");
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() > 40);
    // Known gaps, each an error where Jinja2 renders or a text that differs (issue 22), not written yet.
    const KNOWN: [(&str, &str); 3] = [
        (
            "{{ ('ab'|safe)[0] + '<' }}|{{ ('ab'|safe)[1:] + '<' }}|{{ ('ab'|safe)[::-1] + '<' }}",
            "an index into Markup gives a plain string (minijinja's subscript; slices are rewritten)",
        ),
        ("{% for a, b in 'ab', 'cd' %}{{ b }}{{ a }}{% endfor %}", "minijinja's parser takes no bare tuple after `in`"),
        (
            "{% for c in 'ab', 'cd' %}{{ c }}{{ loop.length }}{% endfor %}",
            "minijinja's parser takes no bare tuple after `in`",
        ),
    ];
    let mut wrong = Vec::new();
    let mut fixed = Vec::new();
    for case in cases {
        let text = case["template"].as_str().unwrap();
        let got =
            ChatTemplate::from_text(text).and_then(|t| t.render(&Conversation::default(), &RenderOptions::default()));
        let ok = match (&got, case.get("output").and_then(|o| o.as_str())) {
            (Ok(out), Some(expected)) => out == expected,
            (Err(_), None) => true,
            _ => false,
        };
        let known = KNOWN.iter().any(|(t, _)| *t == text);
        if !ok && !known {
            wrong.push(format!("{text}: parlance {got:?}, Jinja2 {}", case.get("output").unwrap_or(&case["error"])));
        }
        if ok && known {
            fixed.push(text.to_owned());
        }
    }
    assert!(wrong.is_empty(), "{} of {} differ:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
    assert!(fixed.is_empty(), "listed as known gaps but now right (take them off the list): {fixed:?}");
}

#[test]
fn slices_that_panicked_the_engine_render_as_python_does() {
    // minijinja 3.0.5 indexes out of bounds slicing an empty value with a negative step; the
    // template is rewritten to Python's slice before it is compiled.
    let template = ChatTemplate::from_source(
        TemplateSource::from_text("slice.jinja", "{{ ''[::-1] }}|{{ [][::-1] }}|{{ 'ab'[::-1] }}"),
        RenderLimits::default(),
    )
    .unwrap();
    assert_eq!(template.render(&conversation(), &RenderOptions::default()).unwrap(), "|[]|ba");
}
