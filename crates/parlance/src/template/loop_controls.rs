//! Finds `{% continue %}` / `{% break %}` inside a `{% set %}` or `{% filter %}` block body within a
//! loop, which minijinja 3 compiles to a jump that leaves the block's output capture open: the rest
//! of the render then writes into that capture and the template's output is lost, with no error
//! (Jinja2 ends the block and goes on with the loop). Until the engine closes captures on such
//! jumps, these templates are refused at load with the line, never rendered wrong.

use minijinja::machinery::ast::Stmt;
use minijinja::machinery::parse;
use minijinja::syntax::SyntaxConfig;

/// A loop control minijinja would compile wrongly: its 1-based line, the keyword and the block
/// whose body holds it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CapturedLoopControl {
    pub line: usize,
    pub keyword: &'static str,
    pub block: &'static str,
}

/// The first `continue`/`break` inside a `set`/`filter` block body of a loop in `text`, if any.
/// A template that does not parse has none here (loading reports its syntax error).
pub(crate) fn find_captured_loop_control(text: &str) -> Option<CapturedLoopControl> {
    let ast = parse(text, "<template>", SyntaxConfig::default()).ok()?;
    walk(std::slice::from_ref(&ast), false, None)
}

/// `in_loop`: a loop encloses these statements in the current macro scope; `capture`: the block
/// body between them and that loop, if any.
fn walk(stmts: &[Stmt<'_>], in_loop: bool, capture: Option<&'static str>) -> Option<CapturedLoopControl> {
    let found = |line: u16, keyword| {
        capture.filter(|_| in_loop).map(|block| CapturedLoopControl { line: usize::from(line), keyword, block })
    };
    for stmt in stmts {
        let hit = match stmt {
            Stmt::Template(t) => walk(&t.children, in_loop, capture),
            Stmt::ForLoop(l) => walk(&l.body, true, None).or_else(|| walk(&l.else_body, in_loop, capture)),
            Stmt::IfCond(c) => walk(&c.true_body, in_loop, capture).or_else(|| walk(&c.false_body, in_loop, capture)),
            Stmt::WithBlock(w) => walk(&w.body, in_loop, capture),
            Stmt::AutoEscape(a) => walk(&a.body, in_loop, capture),
            Stmt::Block(b) => walk(&b.body, in_loop, capture),
            Stmt::SetBlock(s) => walk(&s.body, in_loop, Some("set")),
            Stmt::FilterBlock(f) => walk(&f.body, in_loop, Some("filter")),
            // A macro body is a scope of its own: a loop around its definition is not its loop.
            Stmt::Macro(m) => walk(&m.body, false, None),
            Stmt::CallBlock(c) => walk(&c.macro_decl.body, false, None),
            Stmt::Continue(c) => found(c.span().start_line, "continue"),
            Stmt::Break(b) => found(b.span().start_line, "break"),
            _ => None,
        };
        if hit.is_some() {
            return hit;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_controls_inside_capturing_blocks_are_found() {
        let set = "{% for m in xs %}\n{% set x %}{% if loop.first %}{% continue %}{% endif %}{% endset %}{% endfor %}";
        assert_eq!(
            find_captured_loop_control(set),
            Some(CapturedLoopControl { line: 2, keyword: "continue", block: "set" })
        );
        let filter = "{% for m in xs %}{% filter upper %}{% break %}{% endfilter %}{% endfor %}";
        assert_eq!(find_captured_loop_control(filter).map(|c| (c.keyword, c.block)), Some(("break", "filter")));
        // Fine: a loop inside the block body, a control outside any block, a macro's own loop.
        for ok in [
            "{% set x %}{% for m in xs %}{% continue %}{% endfor %}{% endset %}",
            "{% for m in xs %}{% set x %}a{% endset %}{% continue %}{% endfor %}",
            "{% for m in xs %}{% macro f() %}{% for y in ys %}{% break %}{% endfor %}{% endmacro %}{% endfor %}",
            "{% for m in xs %}{% if m %}{% continue %}{% endif %}{% endfor %}",
            "{% for %}",
        ] {
            assert_eq!(find_captured_loop_control(ok), None, "{ok}");
        }
    }
}
