//! Loop controls (`{% continue %}`, `{% break %}`) and `for … else` as Jinja2 runs them, by writing
//! the template's source again before it is compiled. minijinja 3 compiles a loop control to a bare
//! jump, which Jinja2's generated Python `continue` / `break` is not:
//!
//! - out of a block `set` or `filter` body, the jump leaves the output capture open: the rest of
//!   the render went into it and was lost, with no error (Jinja2 drops the block's text, assigns
//!   nothing and goes on with the loop);
//! - out of a `with` (or `autoescape`) body, it leaves that scope pushed: the engine then panics on
//!   the loop's next step, or reads the wrong variables;
//! - `for … else`: minijinja runs the `else` when the loop ran no iteration, Jinja2 unless an
//!   iteration reached the end of the body (so also when every iteration `continue`d, or after a
//!   `break`); and Jinja2's `else` body is a scope of its own (a `set` there does not leak out).
//!
//! Two passes, each on minijinja's own parse of the text before it:
//!
//! 1. [`for_else`]: a `for … else` whose body has its own loop controls keeps a flag in a
//!    namespace, set at the body's end; the `else` becomes an `if` on it after the loop. An `else`
//!    body that assigns is wrapped in `{% with %}`.
//! 2. [`crossing`]: a loop control inside such a block (between it and its loop) sets a flag
//!    instead of jumping; the statements after it in each enclosing body run only while the flag
//!    is clear; a `set` block's value is assigned, a `filter` block's text written, only if it is
//!    clear; after the outermost block the control jumps, from where minijinja's jump is right.
//!
//! Every tag put in takes the whitespace-control sign of the tag it sits against (`{%-` before a
//! tag, `-%}` after one), and no text goes between put-in tags, so trimming is as written; no line
//! break is added, so errors name the template's own lines. A construct whose tags cannot be found
//! (no template in the corpus or from the differential generator) is refused at load with its line,
//! never rendered wrong.

use minijinja::machinery::ast::Stmt;
use minijinja::machinery::{Span, parse};
use minijinja::syntax::SyntaxConfig;

use super::python_ops::{end_of, start_of, tag_end};

/// A loop control the rewrite could not place: its 1-based line, the keyword and the block whose
/// body holds it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CapturedLoopControl {
    pub line: usize,
    pub keyword: &'static str,
    pub block: &'static str,
}

/// The template's text with loop controls and `for … else` made Jinja2's (`None`: nothing to
/// change), or the control it could not place. A template that does not parse is left to loading,
/// which reports its syntax error.
pub(crate) fn rewrite(text: &str) -> Result<Option<String>, CapturedLoopControl> {
    if !text.contains("else") && !text.contains("continue") && !text.contains("break") {
        return Ok(None);
    }
    let Ok(ast) = parse(text, "<template>", SyntaxConfig::default()) else { return Ok(None) };
    let Some(first) = for_else(text, &ast) else { return crossing(text, &ast) };
    // Pass 2 reads the blocks pass 1 put in: on a parse of its text.
    let Ok(again) = parse(&first, "<template>", SyntaxConfig::default()) else { return Ok(Some(first)) };
    Ok(Some(crossing(&first, &again)?.unwrap_or(first)))
}

/// Text put in or written again: `(start, end, text)`, `start == end` for an insertion. Edits at
/// one place apply in the order they were made.
#[derive(Default)]
struct Edits(Vec<(usize, usize, String)>);

impl Edits {
    fn insert(&mut self, at: usize, text: String) {
        self.0.push((at, at, text));
    }

    fn replace(&mut self, start: usize, end: usize, text: String) {
        self.0.push((start, end, text));
    }

    fn apply(mut self, text: &str) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        self.0.sort_by_key(|e| e.0);
        let mut out = String::with_capacity(text.len() + 64 * self.0.len());
        let mut at = 0;
        for (start, end, new) in &self.0 {
            if *start < at {
                // Overlapping edits are a bug here; leave the text as minijinja would run it.
                debug_assert!(false, "overlapping edits at {start}");
                return None;
            }
            out.push_str(&text[at..*start]);
            out.push_str(new);
            at = *end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }
}

/// A tag found in the text: where its `{%` starts, where its `%}` ends, and its whitespace-control
/// signs (`-`, `+` or nothing) on either side.
#[derive(Clone, Copy)]
struct Tag<'t> {
    open: usize,
    end: usize,
    left: &'t str,
    right: &'t str,
}

impl<'t> Tag<'t> {
    fn at(text: &'t str, open: usize) -> Option<Tag<'t>> {
        if !text[open..].starts_with("{%") {
            return None;
        }
        let end = tag_end(text, open + 2)?;
        let sign = |s: &'t str| if s == "-" || s == "+" { s } else { "" };
        Some(Tag {
            open,
            end,
            left: sign(text.get(open + 2..open + 3).unwrap_or("")),
            right: sign(text.get(end - 3..end - 2).unwrap_or("")),
        })
    }

    /// The tag whose keyword starts at `keyword` (a statement's span start).
    fn around(text: &'t str, keyword: usize) -> Option<Tag<'t>> {
        Tag::at(text, text[..keyword].rfind("{%")?)
    }

    /// The end tag of the block statement spanning `span` (which ends with its end keyword).
    fn closing(text: &'t str, span: Span) -> Option<Tag<'t>> {
        Tag::around(text, span.end_offset as usize)
    }

    /// `{%` with this tag's left sign: a tag put in right before this one.
    fn before(&self) -> String {
        format!("{{%{}", self.left)
    }

    /// `%}` with this tag's right sign: a tag put in right after this one.
    fn after(&self) -> String {
        format!("{}%}}", self.right)
    }
}

/// The first word of the tag from `open` to `end`.
fn keyword_of(text: &str, tag: &Tag<'_>) -> String {
    let inner = &text[tag.open + 2..tag.end - 2];
    let inner = inner.trim_start_matches(['-', '+']).trim_start();
    inner.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').next().unwrap_or("").to_owned()
}

/// The next tag from `from` whose keyword is one of `keywords`, skipping comments and other tags
/// (the `}}` of an expression, `{% endraw %}` and trimmed whitespace may lie between a body's last
/// statement and the tag that closes the body).
fn next_tag<'t>(text: &'t str, from: usize, keywords: &[&str]) -> Option<Tag<'t>> {
    let mut at = from;
    loop {
        let found = at + text[at..].find("{%").or_else(|| text[at..].find("{#"))?;
        let comment = text[at..].find("{#").map(|i| at + i);
        if let Some(c) = comment.filter(|&c| c < found) {
            at = c + 2 + text[c + 2..].find("#}")? + 2;
            continue;
        }
        if !text[found..].starts_with("{%") {
            at = found + 2;
            continue;
        }
        let tag = Tag::at(text, found)?;
        if keywords.contains(&keyword_of(text, &tag).as_str()) {
            return Some(tag);
        }
        at = tag.end;
    }
}

/// Where a statement's text ends: after its tag's `%}`, after an expression's `}}`'s start (the
/// scan for the next tag passes it), at a text's end.
fn stmt_end(text: &str, s: &Stmt<'_>) -> Option<usize> {
    let span = stmt_span(s)?;
    let end = span.end_offset as usize;
    match s {
        Stmt::EmitRaw(_) | Stmt::EmitExpr(_) => Some(end),
        _ => tag_end(text, end),
    }
}

/// Where the tag closing `list` (one of `keywords`) starts; `open_end` is where the list would
/// start (the end of the tag that opens it), for an empty list.
fn list_closer<'t>(text: &'t str, list: &[Stmt<'_>], open_end: usize, keywords: &[&str]) -> Option<Tag<'t>> {
    let from = match list.last() {
        Some(last) => stmt_end(text, last)?,
        None => open_end,
    };
    next_tag(text, from, keywords)
}

fn stmt_span(s: &Stmt<'_>) -> Option<Span> {
    Some(match s {
        Stmt::EmitRaw(x) => x.span(),
        Stmt::EmitExpr(x) => x.span(),
        Stmt::ForLoop(x) => x.span(),
        Stmt::IfCond(x) => x.span(),
        Stmt::WithBlock(x) => x.span(),
        Stmt::Set(x) => x.span(),
        Stmt::SetBlock(x) => x.span(),
        Stmt::AutoEscape(x) => x.span(),
        Stmt::FilterBlock(x) => x.span(),
        Stmt::Continue(x) => x.span(),
        Stmt::Break(x) => x.span(),
        Stmt::Macro(x) => x.span(),
        Stmt::CallBlock(x) => x.span(),
        Stmt::Do(x) => x.span(),
        Stmt::Block(x) => x.span(),
        Stmt::Import(x) => x.span(),
        Stmt::FromImport(x) => x.span(),
        Stmt::Extends(x) => x.span(),
        Stmt::Include(x) => x.span(),
        Stmt::Template(_) => return None,
    })
}

/// Whether `list` holds a loop control of the loop whose body (or part of it) it is: through
/// conditions and blocks, not into a nested loop's body (its own) or a macro (a scope of its own);
/// a nested loop's `else` body is outside that loop, so its controls are this loop's.
fn has_own_control(list: &[Stmt<'_>]) -> bool {
    list.iter().any(|s| match s {
        Stmt::Continue(_) | Stmt::Break(_) => true,
        Stmt::IfCond(c) => has_own_control(&c.true_body) || has_own_control(&c.false_body),
        Stmt::WithBlock(w) => has_own_control(&w.body),
        Stmt::SetBlock(b) => has_own_control(&b.body),
        Stmt::FilterBlock(f) => has_own_control(&f.body),
        Stmt::AutoEscape(a) => has_own_control(&a.body),
        Stmt::ForLoop(l) => has_own_control(&l.else_body),
        _ => false,
    })
}

/// Whether `list` assigns a variable in its own scope (a `set` through conditions; nested scopes'
/// assignments stay there anyway, but are counted: wrapping changes nothing else).
fn assigns(list: &[Stmt<'_>]) -> bool {
    list.iter().any(|s| match s {
        Stmt::Set(_) | Stmt::SetBlock(_) => true,
        Stmt::IfCond(c) => assigns(&c.true_body) || assigns(&c.false_body),
        Stmt::AutoEscape(a) => assigns(&a.body),
        Stmt::FilterBlock(f) => assigns(&f.body),
        _ => false,
    })
}

/// Calls `visit` on every `for` statement in `list`, outermost first.
fn each_loop<'a>(
    list: &'a [Stmt<'a>],
    visit: &mut dyn FnMut(&'a minijinja::machinery::ast::Spanned<minijinja::machinery::ast::ForLoop<'a>>),
) {
    for s in list {
        match s {
            Stmt::Template(t) => each_loop(&t.children, visit),
            Stmt::ForLoop(l) => {
                visit(l);
                each_loop(&l.body, visit);
                each_loop(&l.else_body, visit);
            }
            Stmt::IfCond(c) => {
                each_loop(&c.true_body, visit);
                each_loop(&c.false_body, visit);
            }
            Stmt::WithBlock(w) => each_loop(&w.body, visit),
            Stmt::SetBlock(b) => each_loop(&b.body, visit),
            Stmt::FilterBlock(f) => each_loop(&f.body, visit),
            Stmt::AutoEscape(a) => each_loop(&a.body, visit),
            Stmt::Block(b) => each_loop(&b.body, visit),
            Stmt::Macro(m) => each_loop(&m.body, visit),
            Stmt::CallBlock(c) => each_loop(&c.macro_decl.body, visit),
            _ => {}
        }
    }
}

/// Pass 1: `for … else` as Jinja2 runs it (see the module docs).
fn for_else(text: &str, ast: &Stmt<'_>) -> Option<String> {
    let mut edits = Edits::default();
    each_loop(std::slice::from_ref(ast), &mut |l| {
        if l.else_body.is_empty() || l.recursive {
            return;
        }
        let controls = has_own_control(&l.body);
        let scoped = assigns(&l.else_body);
        if !controls && !scoped {
            return;
        }
        let span = l.span();
        let (Some(open), Some(close)) = (Tag::around(text, span.start_offset as usize), Tag::closing(text, span))
        else {
            return;
        };
        let Some(else_tag) = list_closer(text, &l.body, open.end, &["else"]) else { return };
        let (with_open, with_close) = if scoped {
            (format!("{{% with {}", else_tag.after()), format!("{} endwith %}}", close.before()))
        } else {
            (String::new(), String::new())
        };
        if controls {
            let flag = format!("__plnc_for{}", open.open);
            edits.insert(open.open, format!("{} set {flag} = namespace(done=false) %}}", open.before()));
            let if_close = if scoped { "%}".to_owned() } else { else_tag.after() };
            edits.replace(
                else_tag.open,
                else_tag.end,
                format!(
                    "{} set {flag}.done = true %}}{{% endfor %}}{{% if not {flag}.done {if_close}{with_open}",
                    else_tag.before()
                ),
            );
            let endif = if scoped {
                format!("{{% endif {}", close.after())
            } else {
                format!("{} endif {}", close.before(), close.after())
            };
            edits.replace(close.open, close.end, format!("{with_close}{endif}"));
        } else {
            edits.insert(else_tag.end, with_open);
            edits.insert(close.open, with_close);
        }
    });
    edits.apply(text)
}

/// Pass 2: loop controls that leave a `with`, `autoescape`, block `set` or `filter` body (see the
/// module docs).
fn crossing(text: &str, ast: &Stmt<'_>) -> Result<Option<String>, CapturedLoopControl> {
    let mut pass = Crossing { text, edits: Edits::default() };
    pass.walk(std::slice::from_ref(ast), false)?;
    Ok(pass.edits.apply(text))
}

/// A block that pushes state a jump out of it would leave behind.
fn barrier<'a>(s: &'a Stmt<'a>) -> Option<(&'static str, &'a [Stmt<'a>], Span)> {
    match s {
        Stmt::WithBlock(w) => Some(("with", &w.body, w.span())),
        Stmt::SetBlock(b) => Some(("set", &b.body, b.span())),
        Stmt::FilterBlock(f) => Some(("filter", &f.body, f.span())),
        Stmt::AutoEscape(a) => Some(("autoescape", &a.body, a.span())),
        _ => None,
    }
}

struct Crossing<'t> {
    text: &'t str,
    edits: Edits,
}

impl<'t> Crossing<'t> {
    /// Finds blocks crossed by a loop control: `in_loop` says whether a loop encloses `list` in
    /// the current macro scope.
    fn walk(&mut self, list: &[Stmt<'_>], in_loop: bool) -> Result<(), CapturedLoopControl> {
        for s in list {
            match s {
                Stmt::Template(t) => self.walk(&t.children, in_loop)?,
                Stmt::ForLoop(l) => {
                    self.walk(&l.body, true)?;
                    self.walk(&l.else_body, in_loop)?;
                }
                Stmt::IfCond(c) => {
                    self.walk(&c.true_body, in_loop)?;
                    self.walk(&c.false_body, in_loop)?;
                }
                Stmt::Macro(m) => self.walk(&m.body, false)?,
                Stmt::CallBlock(c) => self.walk(&c.macro_decl.body, false)?,
                Stmt::Block(b) => self.walk(&b.body, false)?,
                _ => {
                    if let Some((kind, body, span)) = barrier(s) {
                        if in_loop && has_own_control(body) {
                            self.outermost(s, kind, span)?;
                        } else {
                            self.walk(body, in_loop)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The outermost block a loop control leaves: a flag namespace before it, the block and its
    /// body rewritten, the jump after it.
    fn outermost(&mut self, s: &Stmt<'_>, kind: &'static str, span: Span) -> Result<(), CapturedLoopControl> {
        let text = self.text;
        let (Some(open), Some(close)) = (Tag::around(text, span.start_offset as usize), Tag::closing(text, span))
        else {
            return Err(unplaced(span, kind));
        };
        let flag = format!("__plnc_lc{}", open.open);
        self.edits.insert(open.open, format!("{} set {flag} = namespace(c=0) %}}", open.before()));
        self.block(s, kind, span, &flag)?;
        let after = close.after();
        self.edits.insert(
            close.end,
            format!(
                "{{% if {flag}.c == 1 {after}{{% continue {after}{{% elif {flag}.c == 2 {after}{{% break {after}{{% endif {after}"
            ),
        );
        Ok(())
    }

    /// A block a loop control leaves, under `flag`: a `set` block captures into a variable of its
    /// own and assigns it only while the flag is clear, a `filter` block writes its text so; the
    /// body's statements after a control are skipped.
    fn block(&mut self, s: &Stmt<'_>, kind: &'static str, span: Span, flag: &str) -> Result<(), CapturedLoopControl> {
        let text = self.text;
        let refused = || unplaced(span, kind);
        let (open, close) = match (Tag::around(text, span.start_offset as usize), Tag::closing(text, span)) {
            (Some(o), Some(c)) => (o, c),
            _ => return Err(refused()),
        };
        let capture = format!("__plnc_cap{}", open.open);
        let after = close.after();
        let body: &[Stmt<'_>] = match s {
            Stmt::SetBlock(b) => {
                let (start, end) = (start_of(&b.target), end_of(&b.target));
                let target = text.get(start..end).ok_or_else(refused)?.to_owned();
                self.edits.replace(start, end, capture.clone());
                self.body(&b.body, open.end, &[kind_end(kind)], flag)?;
                self.edits.insert(
                    close.end,
                    format!("{{% if not {flag}.c {after}{{% set {target} = {capture} {after}{{% endif {after}"),
                );
                return Ok(());
            }
            Stmt::FilterBlock(f) => {
                let keyword = span.start_offset as usize;
                if !text[keyword..].starts_with("filter") || !text[..span.end_offset as usize].ends_with("endfilter") {
                    return Err(refused());
                }
                self.edits.replace(keyword, keyword + "filter".len(), format!("set {capture} |"));
                let end_keyword = span.end_offset as usize - "endfilter".len();
                self.edits.replace(end_keyword, span.end_offset as usize, "endset".to_owned());
                self.body(&f.body, open.end, &["endfilter"], flag)?;
                self.edits
                    .insert(close.end, format!("{{% if not {flag}.c {after}{{{{ {capture} }}}}{{% endif {after}"));
                return Ok(());
            }
            Stmt::WithBlock(w) => &w.body,
            Stmt::AutoEscape(a) => &a.body,
            _ => return Err(refused()),
        };
        self.body(body, open.end, &[kind_end(kind)], flag)?;
        Ok(())
    }

    /// The statements of a body between a loop control and its loop: controls set the flag,
    /// blocks holding one are rewritten, and what follows a statement that may set the flag runs
    /// only while it is clear. Says whether the body may set it.
    fn body(
        &mut self,
        list: &[Stmt<'_>],
        open_end: usize,
        closers: &[&str],
        flag: &str,
    ) -> Result<bool, CapturedLoopControl> {
        let text = self.text;
        let mut signals = false;
        for (i, s) in list.iter().enumerate() {
            let this = match s {
                Stmt::Continue(c) => self.control(c.span(), 1, flag),
                Stmt::Break(b) => self.control(b.span(), 2, flag),
                Stmt::IfCond(c) => {
                    let span = c.span();
                    let open = Tag::around(text, span.start_offset as usize).ok_or_else(|| unplaced(span, "if"))?;
                    let t = self.body(&c.true_body, open.end, &["elif", "else", "endif"], flag)?;
                    let false_open = if c.false_body.is_empty() {
                        open.end
                    } else {
                        list_closer(text, &c.true_body, open.end, &["elif", "else", "endif"])
                            .ok_or_else(|| unplaced(span, "if"))?
                            .end
                    };
                    let f = self.body(&c.false_body, false_open, &["endif"], flag)?;
                    t || f
                }
                Stmt::ForLoop(l) => {
                    // Its body's controls are its own (the walk handles blocks they leave); its
                    // `else` body is this body's.
                    self.walk(&l.body, true)?;
                    let span = l.span();
                    let open = Tag::around(text, span.start_offset as usize).ok_or_else(|| unplaced(span, "for"))?;
                    let else_open = list_closer(text, &l.body, open.end, &["else", "endfor"])
                        .ok_or_else(|| unplaced(span, "for"))?
                        .end;
                    self.body(&l.else_body, else_open, &["endfor"], flag)?
                }
                Stmt::Macro(m) => {
                    self.walk(&m.body, false)?;
                    false
                }
                Stmt::CallBlock(c) => {
                    self.walk(&c.macro_decl.body, false)?;
                    false
                }
                _ => match barrier(s) {
                    Some((kind, inner, span)) if has_own_control(inner) => {
                        self.block(s, kind, span, flag)?;
                        true
                    }
                    Some((_, inner, _)) => {
                        self.walk(inner, true)?;
                        false
                    }
                    None => false,
                },
            };
            if this && i + 1 < list.len() {
                let span = stmt_span(s).ok_or_else(|| unplaced(Span::default(), "body"))?;
                let end = tag_end(text, span.end_offset as usize).ok_or_else(|| unplaced(span, "body"))?;
                let tag = Tag::around(text, span.end_offset as usize).ok_or_else(|| unplaced(span, "body"))?;
                let closer = list_closer(text, list, open_end, closers).ok_or_else(|| unplaced(span, "body"))?;
                self.edits.insert(end, format!("{{% if not {flag}.c {}", tag.after()));
                self.edits.insert(closer.open, format!("{} endif %}}", closer.before()));
            }
            signals |= this;
        }
        Ok(signals)
    }

    /// `{% continue %}` (1) or `{% break %}` (2) becomes `{% set flag.c = … %}`, its signs kept.
    fn control(&mut self, span: Span, code: u8, flag: &str) -> bool {
        let (start, end) = (span.start_offset as usize, span.end_offset as usize);
        self.edits.replace(start, end, format!("set {flag}.c = {code}"));
        true
    }
}

/// A loop control in the block statement at `span` whose tags the rewrite could not find.
fn unplaced(span: Span, block: &'static str) -> CapturedLoopControl {
    CapturedLoopControl { line: usize::from(span.start_line), keyword: "continue` or `break", block }
}

/// The end keyword of a block.
fn kind_end(kind: &str) -> &'static str {
    match kind {
        "with" => "endwith",
        "set" => "endset",
        "filter" => "endfilter",
        _ => "endautoescape",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(text: &str) -> String {
        rewrite(text).unwrap().unwrap_or_else(|| text.to_owned())
    }

    #[test]
    fn loops_whose_controls_leave_no_block_are_left_alone() {
        for text in [
            "{% for m in xs %}{% if m %}{% continue %}{% endif %}{% endfor %}",
            "{% set x %}{% for m in xs %}{% continue %}{% endfor %}{% endset %}",
            "{% for m in xs %}{% set x %}a{% endset %}{% continue %}{% endfor %}",
            "{% for m in xs %}{{ m }}{% else %}none{% endfor %}",
            "{% for %}",
        ] {
            assert_eq!(rewrite(text), Ok(None), "{text}");
        }
    }

    #[test]
    fn controls_set_a_flag_and_the_loop_jumps_outside_the_blocks() {
        // Read and checked by hand; `tests/data/jinja2_filters.json` checks such renders against Jinja2.
        assert_eq!(
            rw("{% for x in xs %}{% if x %}{% continue %}{% endif %}{{ x }}{%- else +%}E{% endfor %}"),
            "{% set __plnc_for0 = namespace(done=false) %}{% for x in xs %}{% if x %}{% continue %}{% endif %}\
             {{ x }}{%- set __plnc_for0.done = true %}{% endfor %}{% if not __plnc_for0.done +%}E{% endif %}"
        );
        assert_eq!(
            rw("{% for x in xs %}{% with %}{% if x %}{% break %}{% endif %}{{ x }}{% endwith %}{% endfor %}"),
            "{% for x in xs %}{% set __plnc_lc17 = namespace(c=0) %}{% with %}{% if x %}{% set __plnc_lc17.c = 2 %}\
             {% endif %}{% if not __plnc_lc17.c %}{{ x }}{% endif %}{% endwith %}{% if __plnc_lc17.c == 1 %}\
             {% continue %}{% elif __plnc_lc17.c == 2 %}{% break %}{% endif %}{% endfor %}"
        );
        assert_eq!(
            rw("{% for x in xs %}{% set y %}{{ x }}{% continue -%}{% endset -%}\n{% endfor %}"),
            "{% for x in xs %}{% set __plnc_lc17 = namespace(c=0) %}{% set __plnc_cap17 %}{{ x }}\
             {% set __plnc_lc17.c = 1 -%}{% endset -%}{% if not __plnc_lc17.c -%}{% set y = __plnc_cap17 -%}\
             {% endif -%}{% if __plnc_lc17.c == 1 -%}{% continue -%}{% elif __plnc_lc17.c == 2 -%}{% break -%}\
             {% endif -%}\n{% endfor %}"
        );
    }
}
