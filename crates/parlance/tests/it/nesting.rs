//! Hostile nesting: every kind of Jinja nesting, 10 to 10⁶ deep, in every tag form, inside and
//! around raw blocks and string literals. Loading and rendering must return — the template, or a
//! clear error naming the limit and the line — and never overflow the stack (which aborts the
//! whole process, this test binary included). See: issue 24 ("no stack overflow, by construction").

use parlance::{ChatTemplate, Conversation, RenderLimits, RenderOptions, TemplateError, TemplateSource};

/// One way of nesting an expression `depth` levels deep.
struct Expression {
    name: &'static str,
    build: fn(usize) -> String,
}

fn chain(op: &'static str) -> impl Fn(usize) -> String {
    move |n| {
        let mut s = String::with_capacity(n * (op.len() + 1) + 1);
        s.push('1');
        for _ in 0..n {
            s.push_str(op);
            s.push('1');
        }
        s
    }
}

macro_rules! binary {
    ($($name:literal => $op:literal),* $(,)?) => {
        [$(Expression { name: $name, build: |n| chain($op)(n) }),*]
    };
}

fn expressions() -> Vec<Expression> {
    let mut all: Vec<Expression> = binary![
        "concat" => "~", "add" => "+", "sub" => "-", "mul" => "*", "div" => "/", "floordiv" => "//",
        "mod" => "%", "pow" => "**", "and" => " and ", "or" => " or ", "eq" => "==", "ne" => "!=",
        "lt" => "<", "le" => "<=", "gt" => ">", "ge" => ">=", "in" => " in ", "not-in" => " not in ",
    ]
    .into_iter()
    .collect();
    all.extend([
        Expression { name: "neg", build: |n| "-".repeat(n) + "1" },
        Expression { name: "not", build: |n| "not ".repeat(n) + "1" },
        Expression { name: "parens", build: |n| "(".repeat(n) + "1" + &")".repeat(n) },
        Expression { name: "lists", build: |n| "[".repeat(n) + &"]".repeat(n) },
        Expression { name: "dicts", build: |n| "{'a': ".repeat(n) + "1" + &"}".repeat(n) },
        Expression { name: "attributes", build: |n| "x".to_owned() + &".a".repeat(n) },
        Expression { name: "subscripts", build: |n| "x".to_owned() + &"[0]".repeat(n) },
        Expression { name: "calls", build: |n| "range".to_owned() + &"()".repeat(n) },
        Expression { name: "filters", build: |n| "1".to_owned() + &"|string".repeat(n) },
        Expression { name: "filter-args", build: |n| "1".to_owned() + &"|default(2)".repeat(n) },
        Expression { name: "tests", build: |n| "1".to_owned() + &" is defined".repeat(n) },
        Expression { name: "ternaries", build: |n| "1 if x else ".repeat(n) + "1" },
        Expression { name: "nested-args", build: |n| "range(".repeat(n) + "1" + &")".repeat(n) },
    ]);
    all
}

/// Block statements nested `depth` deep (minijinja bounds these itself; they must stay bounded).
fn blocks(depth: usize) -> Vec<(&'static str, String)> {
    let nest = |open: &str, close: &str| open.repeat(depth) + "x" + &close.repeat(depth);
    vec![
        ("if", nest("{% if 1 %}", "{% endif %}")),
        ("for", nest("{% for i in [1] %}", "{% endfor %}")),
        ("macro", nest("{% macro m() %}", "{% endmacro %}")),
        ("call", nest("{% call range(1) %}", "{% endcall %}")),
        ("filter", nest("{% filter upper %}", "{% endfilter %}")),
        ("with", nest("{% with a = 1 %}", "{% endwith %}")),
        ("set-block", nest("{% set v %}", "{% endset %}")),
    ]
}

/// The places an expression can stand: as a tag's code, or as text that only looks like code.
fn placements(expr: &str) -> Vec<(&'static str, String)> {
    vec![
        ("print", format!("{{{{ {expr} }}}}")),
        ("print-trimmed", format!("{{{{- {expr} -}}}}")),
        ("set", format!("{{% set v = {expr} %}}")),
        ("if", format!("{{% if {expr} %}}y{{% endif %}}")),
        // `}}` inside an open brace does not end the tag for the lexer.
        ("after-braces", format!("{{{{ {{'a': {{'b': 1}}}} ~ {expr} }}}}")),
        // A quote and a `{%` inside a raw block open nothing.
        ("after-raw", format!("{{% raw %}}{{% \"{{% endraw %}}{{{{ {expr} }}}}")),
        ("inside-raw", format!("{{% raw %}}{{{{ {expr} }}}}{{% endraw %}}")),
        ("inside-string", format!("{{{{ \"{}\" }}}}", expr.replace(['"', '\\'], ""))),
        ("inside-comment", format!("{{# {{{{ {expr} }}}} #}}")),
    ]
}

fn conversation() -> Conversation {
    serde_json::from_str(r#"{"messages": [{"role": "user", "content": "hi"}]}"#).unwrap()
}

/// Loads and renders; the outcome must be a render or an error that names its template.
#[track_caller]
fn load_and_render(name: &str, text: String, failures: &mut Vec<String>) {
    let limits = RenderLimits { fuel: 1_000_000, ..RenderLimits::default() };
    let template = match ChatTemplate::from_source(TemplateSource::from_text(name, text), limits) {
        Ok(template) => template,
        Err(err) => {
            let shown = err.to_string();
            if !shown.starts_with(name) {
                failures.push(format!("{name}: load error does not name the template: {shown}"));
            }
            return;
        }
    };
    match template.render(&conversation(), &RenderOptions::default()) {
        Ok(_) => {}
        Err(TemplateError::Render { message, .. }) if message.contains("Panic") => {
            failures.push(format!("{name}: the render thread panicked"));
        }
        Err(err) if !err.to_string().starts_with(name) => {
            failures.push(format!("{name}: render error does not name the template: {err}"));
        }
        Err(_) => {}
    }
    let _ = template.undeclared_variables();
}

#[test]
fn every_nesting_kind_at_every_depth_returns_without_overflowing() {
    let mut failures = Vec::new();
    for expression in expressions() {
        for depth in [10, 100, 1_000, 10_000, 100_000, 1_000_000] {
            let expr = (expression.build)(depth);
            for (form, text) in placements(&expr) {
                // The deepest inputs once per kind, not once per form: they cost seconds to build.
                if depth == 1_000_000 && !matches!(form, "print" | "after-braces") {
                    continue;
                }
                load_and_render(&format!("{}-{form}-{depth}.jinja", expression.name), text, &mut failures);
            }
        }
    }
    for depth in [10, 100, 149, 150, 1_000, 100_000] {
        for (kind, text) in blocks(depth) {
            load_and_render(&format!("block-{kind}-{depth}.jinja"), text, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn deep_chains_are_refused_with_the_line_and_shallow_ones_render() {
    for expression in expressions() {
        let deep = format!("line one\n{{{{ {} }}}}", (expression.build)(5_000));
        match ChatTemplate::from_source(TemplateSource::from_text("deep.jinja", deep), RenderLimits::default()) {
            // minijinja's own bracket limit may speak first, on the same line.
            Err(TemplateError::Limit { line: 2, what: "expression nesting depth", .. })
            | Err(TemplateError::Syntax { line: 2, .. }) => {}
            other => panic!("{}: {other:?}", expression.name),
        }
    }
    // A real template's longest chains are a few dozen operators; two hundred load and render on an
    // ordinary test thread.
    let text = format!("{{{{ {} }}}}", chain("~")(200));
    let template = ChatTemplate::from_text(&text).expect("a 200-operator chain loads");
    assert_eq!(template.render(&conversation(), &RenderOptions::default()).unwrap(), "1".repeat(201));
}

#[test]
fn literals_raw_blocks_and_comments_of_any_length_load() {
    // Two megabytes of code-like text in lines of a thousand characters.
    let long: String =
        chain("~")(1_000_000).as_bytes().chunks(1000).map(|c| String::from_utf8_lossy(c) + "\n").collect();
    for (form, text) in [
        ("string", format!("{{{{ '{long}' }}}}")),
        ("raw", format!("{{% raw %}}{{{{ {long} }}}}{{% endraw %}}")),
        ("comment", format!("{{# {long} #}}")),
    ] {
        let template = ChatTemplate::from_text(&text).unwrap_or_else(|err| panic!("{form}: {err}"));
        let rendered = template.render(&conversation(), &RenderOptions::default()).unwrap();
        assert!(rendered.is_empty() || rendered.contains(&long[..100]), "{form}");
    }
}

#[test]
fn lines_longer_than_the_parser_counts_are_refused_with_their_number() {
    // minijinja counts columns in 16 bits; an error past column 65,535 overflowed (found by
    // fuzzing: fuzz/regressions/render/long_line_lexer_column_overflow).
    let text = format!("line one\n{{{{ '{}", "x".repeat(70_000));
    let err =
        ChatTemplate::from_source(TemplateSource::from_text("long.jinja", text), RenderLimits::default()).unwrap_err();
    assert!(matches!(err, TemplateError::Limit { line: 2, what: "characters in one line", .. }), "{err:?}");
}
