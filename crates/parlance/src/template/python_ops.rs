//! Python operators that minijinja's VM does otherwise and gives no hook for, made Jinja2's by
//! rewriting the template's source before it is compiled:
//!
//! - `a % b` becomes `__plnc_mod(a, b)`: printf-style formatting when `a` is a string
//!   (`'%s-%d' % ('a', 3)`, `'%(k)s' % {'k': 1}`, flags, width, precision), Python's modulo for
//!   numbers (the sign of the divisor), Python's errors otherwise.
//! - `x[a:b:c]` with a step becomes `__plnc_slice(x, a, b, c)`: Python's slice (minijinja 3.0.5
//!   ignores an explicit stop of 0 with a negative step, and panics slicing an empty value so); in
//!   templates that make Markup, every slice (a slice of Markup is Markup, and `%` on Markup
//!   escapes its arguments).
//! - `for a, b in X` and `set a, b = X` unpack strings as Python does (`'xy'` is `x`, `y`; minijinja
//!   unpacks only sequences): `X` becomes `__plnc_unpackable(X)` / `__plnc_unpack(X)`.
//! - `for c in X` over a string knows its length (`loop.length`, `loop.last`; minijinja iterates a
//!   string's characters without one): `X` becomes `__plnc_iterable(X)`.
//! - String literals mean what Python's `unicode_escape` makes of them, as Jinja2's lexer reads
//!   them: `\U0001F600`, `\a`, `\v`, octal up to `\777`, a backslash-newline continuing the line,
//!   `\/` kept as written (minijinja reads JSON's escapes), `\N{BULLET}` by Unicode's character
//!   names. A literal whose value differs is written again in minijinja's escapes. One Python
//!   refuses (`\N{NOT A NAME}`, a cut `\x4`) is left as minijinja reads it.
//!
//! - A macro whose body reads `varargs` or `kwargs` takes what Jinja2 gives it there: the macro gets
//!   those as parameters, and its name is bound to `__plnc_catchall(macro, …)`, which puts extra
//!   positional arguments in `varargs` (a tuple) and unknown keywords in `kwargs` (minijinja's
//!   macros refuse both).
//!
//! Before any of it, [`normalize_newlines`] makes `\r\n` and `\r` the `\n` they are to Jinja2.
//!
//! The rewrite works on minijinja's own parse (spans of `BinOp` and `Slice` nodes), replaces only
//! those nodes' text and keeps every line break, so errors still name the template's own lines.

use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Macro, Spanned, Stmt};
use minijinja::machinery::parse;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

use super::environment::{is_tuple, py_repr, py_str};
use super::jinja2_filters::markup_escape;

/// A node to rewrite, by byte offsets into the source.
#[derive(Debug)]
enum Node {
    /// `a % b` (`__plnc_mod`), or `a + b` (`__plnc_add`, in templates that make Markup): the
    /// whole text and the operator.
    Op { start: usize, end: usize, at: usize, function: &'static str },
    /// `X.name` tested (`is callable`, `is defined`) where `name` is a Python method: the whole text,
    /// the dot and the name; becomes `__plnc_attr(X, 'name')`.
    Attr { start: usize, end: usize, dot: usize, name: String },
    /// A filter that makes Markup (`safe`, `escape`): found while walking, taken out after it.
    MakesMarkup { at: usize },
    /// `a ~ b ~ c`: the whole text and each operand's; becomes `function(a, b, c)` (the line breaks
    /// between operands kept).
    Chain { start: usize, end: usize, parts: Vec<(usize, usize)>, function: &'static str },
    /// `x[a:b:c]`: the whole text, the `[`, the colons and the `]`.
    /// `stepped: false` for `x[a:b]`, which only templates that make Markup need (a slice of
    /// Markup is Markup; minijinja's own slice gives a plain string); its second "colon" is the `]`.
    Slice { start: usize, end: usize, open: usize, colons: [usize; 2], stepped: bool },
    /// An expression passed through a function: the iterable of `for a, b in X`
    /// (`__plnc_unpackable`), of `for c in X` (`__plnc_iterable`), or the value of
    /// `set a, b = X` (`__plnc_unpack`).
    Wrap { start: usize, end: usize, function: &'static str, shape: Option<String> },
    /// String literals written again (their value as Python reads them).
    Literal { start: usize, end: usize, text: String },
    /// Text put in at one place (`start == end`).
    Insert { at: usize, text: String },
    /// A read of `varargs` (0) or `kwargs` (1), kept as written: found while a macro body is
    /// walked, taken out when the macro is done.
    Reads { at: usize, which: usize },
}

impl Node {
    fn range(&self) -> (usize, usize) {
        match self {
            Node::Op { start, end, .. }
            | Node::Chain { start, end, .. }
            | Node::Slice { start, end, .. }
            | Node::Wrap { start, end, .. }
            | Node::Literal { start, end, .. }
            | Node::Attr { start, end, .. } => (*start, *end),
            Node::Insert { at, .. } | Node::Reads { at, .. } | Node::MakesMarkup { at } => (*at, *at),
        }
    }
}

/// `text` with `\r\n` and lone `\r` as `\n`: Jinja2's lexer normalizes every newline in template
/// data and string literals (and inside tags a newline is whitespace either way).
pub(crate) fn normalize_newlines(text: String) -> String {
    if !text.contains('\r') {
        return text;
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// What [`rewrite`] made of a template text.
pub(crate) struct Rewritten {
    /// The text rewritten; `None` when nothing is to rewrite (or it does not parse: loading
    /// reports that).
    pub text: Option<String>,
    /// Whether the template adds strings to Markup (whether or not that `+` was rewritten).
    pub markup_add: bool,
}

/// `text` with the operators, slices, loops, literals and macros above rewritten; with
/// `escape_markup` false, `'…'|safe + str` is left to minijinja's `+` (no escaping).
pub(crate) fn rewrite(text: &str, escape_markup: bool) -> Rewritten {
    // Every template is parsed (at load only): a text pre-test would have to agree with the
    // lexer on every construct above.
    let Ok(ast) = parse(text, "<template>", SyntaxConfig::default()) else {
        return Rewritten { text: None, markup_add: false };
    };
    let mut nodes = Vec::new();
    stmt(&ast, text, &mut nodes);
    // `+` is Python's only where Markup may meet it (`'…'|safe + str` escapes the str); elsewhere
    // minijinja's own `+` is the same and costs no call.
    let markup = nodes.iter().any(|n| matches!(n, Node::MakesMarkup { .. }));
    let markup_add = markup && nodes.iter().any(|n| matches!(n, Node::Op { function: "__plnc_add", .. }));
    nodes.retain(|n| match n {
        Node::MakesMarkup { .. } | Node::Reads { .. } => false,
        Node::Op { function, .. } => (markup && escape_markup) || *function != "__plnc_add",
        Node::Slice { stepped, .. } => *stepped || markup,
        _ => true,
    });
    if nodes.is_empty() {
        return Rewritten { text: None, markup_add };
    }
    nodes.sort_by_key(|n| (n.range().0, std::cmp::Reverse(n.range().1)));
    Rewritten { text: Some(emit(text, 0, text.len(), &nodes)), markup_add }
}

/// The text of `start..end` with every node inside it rewritten (outermost first, their insides
/// recursively). `nodes` are sorted by start, the outer of two with one start first.
fn emit(text: &str, start: usize, end: usize, nodes: &[Node]) -> String {
    let mut out = String::with_capacity(end - start + 16);
    let mut at = start;
    // Only the nodes starting inside the range (sorted by start): linear in the template overall.
    let first = nodes.partition_point(|n| n.range().0 < start);
    for (index, node) in nodes.iter().enumerate().skip(first) {
        let (s, e) = node.range();
        if s > end {
            break;
        }
        // A node starting at the range's end belongs to it only if it is text put in there (a
        // tag after the template's last statement).
        if s < at || e > end || (s == end && e > s) {
            continue;
        }
        out.push_str(&text[at..s]);
        let inner = |a: usize, b: usize| emit(text, a, b, nodes);
        match node {
            Node::Literal { text, .. } | Node::Insert { text, .. } => out.push_str(text),
            Node::Reads { .. } | Node::MakesMarkup { .. } => {}
            Node::Attr { dot, name, .. } => {
                out.push_str("__plnc_attr(");
                out.push_str(&inner(s, *dot));
                out.push_str(", '");
                out.push_str(name);
                out.push_str("')");
            }
            Node::Wrap { function, shape, .. } => {
                // Twice parenthesized: a bare tuple (`set a, b = 1, 2`) is one argument.
                out.push_str(function);
                out.push_str("((");
                // The same range without this node: the nodes after it (sorted) are those inside.
                out.push_str(&emit(text, s, e, &nodes[index + 1..]));
                out.push(')');
                if let Some(shape) = shape {
                    out.push_str(", '");
                    out.push_str(shape);
                    out.push('\'');
                }
                out.push(')');
            }
            Node::Op { at: op, function, .. } => {
                out.push_str(function);
                out.push('(');
                out.push_str(&inner(s, *op));
                out.push(',');
                out.push_str(&inner(op + 1, e));
                out.push(')');
            }
            Node::Chain { parts, function, .. } => {
                let breaks = |a: usize, b: usize| "\n".repeat(text[a..b].matches('\n').count());
                out.push_str(function);
                out.push('(');
                let mut from = s;
                for (i, &(a, b)) in parts.iter().enumerate() {
                    out.push_str(&breaks(from, a));
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&inner(a, b));
                    from = b;
                }
                out.push_str(&breaks(from, e));
                out.push(')');
            }
            Node::Slice { open, colons, .. } => {
                let part = |a: usize, b: usize| {
                    if a >= b {
                        return "none".to_owned();
                    }
                    let t = inner(a, b);
                    if t.trim().is_empty() { "none".to_owned() } else { t }
                };
                out.push_str("__plnc_slice(");
                out.push_str(&inner(s, *open));
                out.push_str(", ");
                out.push_str(&part(open + 1, colons[0]));
                out.push_str(", ");
                out.push_str(&part(colons[0] + 1, colons[1]));
                out.push_str(", ");
                out.push_str(&part(colons[1] + 1, e - 1));
                out.push(')');
            }
        }
        at = e;
    }
    out.push_str(&text[at..end]);
    out
}

fn stmts(list: &[Stmt<'_>], text: &str, nodes: &mut Vec<Node>) {
    for s in list {
        stmt(s, text, nodes);
    }
}

fn stmt(s: &Stmt<'_>, text: &str, nodes: &mut Vec<Node>) {
    macro_rules! e {
        ($x:expr) => {
            expr($x, text, nodes)
        };
    }
    match s {
        Stmt::Template(t) => stmts(&t.children, text, nodes),
        Stmt::EmitExpr(x) => e!(&x.expr),
        Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
        Stmt::ForLoop(l) => {
            unpacked(&l.target, &l.iter, "__plnc_unpackable", text, nodes);
            // A loop over what may be a string (not a literal container or `range`).
            let container = matches!(&l.iter, Expr::List(_) | Expr::Tuple(_) | Expr::Map(_))
                || matches!(&l.iter, Expr::Call(c) if matches!(&c.expr, Expr::Var(v) if v.id == "range"));
            if !matches!(l.target, Expr::List(_)) && !container {
                nodes.push(Node::Wrap {
                    start: range_of(text, &l.iter).0,
                    end: range_of(text, &l.iter).1,
                    function: "__plnc_iterable",
                    shape: None,
                });
            }
            e!(&l.target);
            e!(&l.iter);
            if let Some(f) = &l.filter_expr {
                e!(f);
            }
            stmts(&l.body, text, nodes);
            stmts(&l.else_body, text, nodes);
        }
        Stmt::IfCond(c) => {
            e!(&c.expr);
            stmts(&c.true_body, text, nodes);
            stmts(&c.false_body, text, nodes);
        }
        Stmt::WithBlock(w) => {
            for (a, b) in &w.assignments {
                e!(a);
                e!(b);
            }
            stmts(&w.body, text, nodes);
        }
        Stmt::Set(x) => {
            unpacked(&x.target, &x.expr, "__plnc_unpack", text, nodes);
            e!(&x.target);
            e!(&x.expr);
        }
        Stmt::SetBlock(x) => {
            e!(&x.target);
            if let Some(f) = &x.filter {
                e!(f);
            }
            stmts(&x.body, text, nodes);
            scoped_body(x.span(), text, nodes);
        }
        Stmt::AutoEscape(x) => {
            e!(&x.enabled);
            stmts(&x.body, text, nodes);
            // Jinja2's autoescape block is a scope of its own too.
            scoped_body(x.span(), text, nodes);
        }
        Stmt::FilterBlock(x) => {
            e!(&x.filter);
            stmts(&x.body, text, nodes);
            scoped_body(x.span(), text, nodes);
        }
        Stmt::Block(x) => stmts(&x.body, text, nodes),
        Stmt::Import(x) => {
            e!(&x.expr);
            e!(&x.name);
        }
        Stmt::FromImport(x) => {
            e!(&x.expr);
            for (a, b) in &x.names {
                e!(a);
                if let Some(b) = b {
                    e!(b);
                }
            }
        }
        Stmt::Extends(x) => e!(&x.name),
        Stmt::Include(x) => e!(&x.name),
        Stmt::Macro(m) => {
            for a in m.args.iter().chain(&m.defaults) {
                e!(a);
            }
            let before = nodes.len();
            stmts(&m.body, text, nodes);
            // The body's reads of `varargs` / `kwargs` (only its own nodes: linear overall).
            let mut reads = [false; 2];
            let body: Vec<Node> = nodes.drain(before..).collect();
            for node in body {
                match node {
                    Node::Reads { which, .. } => reads[which] = true,
                    other => nodes.push(other),
                }
            }
            catchall(m, reads, text, nodes);
        }
        Stmt::CallBlock(c) => {
            e!(&c.call.expr);
            args(&c.call.args, text, nodes);
            for a in c.macro_decl.args.iter().chain(&c.macro_decl.defaults) {
                expr(a, text, nodes);
            }
            stmts(&c.macro_decl.body, text, nodes);
        }
        Stmt::Do(d) => {
            e!(&d.call.expr);
            args(&d.call.args, text, nodes);
        }
    }
}

/// The body of a block `set` or `filter` (the statement spanning `span`, from its keyword to its
/// end keyword) in a scope of its own, as Jinja2 renders it: a `set` inside does not leak out
/// (minijinja's does). The body is wrapped in `{% with %}…{% endwith %}`, each tag taking the
/// whitespace control of the tag it sits against, so the text around is trimmed as before. Only
/// bodies whose text has a `set` (an over-approximation: the wrap changes nothing else).
fn scoped_body(span: minijinja::machinery::Span, text: &str, nodes: &mut Vec<Node>) {
    let (start, end) = (span.start_offset as usize, span.end_offset as usize);
    let Some(open_end) = tag_end(text, start) else { return };
    let Some(close_start) = text.get(..end).and_then(|t| t.rfind("{%")) else { return };
    if close_start < open_end || !text[open_end..close_start].contains("set") {
        return;
    }
    let closing = closing_delimiter(text, open_end);
    let opening = match text.as_bytes().get(close_start + 2) {
        Some(b'-') => "{%-",
        Some(b'+') => "{%+",
        _ => "{%",
    };
    nodes.push(Node::Insert { at: open_end, text: format!("{{% with {closing}") });
    nodes.push(Node::Insert { at: close_start, text: format!("{opening} endwith %}}") });
}

/// The `%}` that ends at `tag_end`, with its whitespace-control sign (`-%}`, `+%}`) if it has one:
/// a tag put in right after it takes the same, so the text after is trimmed as before.
fn closing_delimiter(text: &str, tag_end: usize) -> &str {
    let signed = text[..tag_end - 2].ends_with(['-', '+']);
    &text[tag_end - if signed { 3 } else { 2 }..tag_end]
}

/// Where the tag whose code starts at `from` ends (after its `%}`), skipping string literals.
pub(super) fn tag_end(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i + 1 < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'%' if bytes[i + 1] == b'}' => return Some(i + 2),
            _ => {}
        }
        i += 1;
    }
    None
}

/// A macro whose body reads `varargs` or `kwargs` (not a nested macro's): those names become
/// its last parameters, and right after `{% endmacro %}` (with its closing delimiter, so whitespace
/// control is as written) its name is bound to `__plnc_catchall`.
fn catchall(m: &Spanned<Macro<'_>>, reads: [bool; 2], text: &str, nodes: &mut Vec<Node>) {
    let declared = |name: &str| m.args.iter().any(|a| matches!(a, Expr::Var(v) if v.id == name));
    if reads == [false; 2] || declared("varargs") || declared("kwargs") {
        return;
    }
    let span = m.span();
    let (start, end) = (span.start_offset as usize, span.end_offset as usize);
    // The signature's `)`: after the last parameter (or the `(` after the name).
    let after_params = m
        .args
        .iter()
        .chain(&m.defaults)
        .map(end_of)
        .max()
        .or_else(|| text.get(start..end)?.find('(').map(|i| start + i + 1));
    let Some(after_params) = after_params else { return };
    let Some(close) = text.get(after_params..end).and_then(|t| t.find(')')).map(|i| after_params + i) else { return };
    // The `%}` closing `{% endmacro %}`, with its whitespace-control sign.
    let Some(tag_end) = tag_end(text, end) else { return };
    let delimiter = closing_delimiter(text, tag_end);
    // With defaults: parameters after one with a default must have one too.
    let names: Vec<&str> =
        [("varargs=none", reads[0]), ("kwargs=none", reads[1])].iter().filter(|r| r.1).map(|r| r.0).collect();
    let comma = !m.args.is_empty() && !text[after_params..close].contains(',');
    nodes.push(Node::Insert { at: close, text: format!("{}{}", if comma { ", " } else { "" }, names.join(", ")) });
    nodes.push(Node::Insert {
        at: tag_end,
        text: format!(
            "{{% set {name} = __plnc_catchall({name}, {}, {}) {delimiter}",
            reads[0],
            reads[1],
            name = m.name
        ),
    });
}

/// Where `target` unpacks (`a, b`), `value` is passed through `function` (pushed before the nodes
/// inside `value`, so that the wrap comes first among nodes of the same range).
fn unpacked(target: &Expr<'_>, value: &Expr<'_>, function: &'static str, text: &str, nodes: &mut Vec<Node>) {
    if matches!(target, Expr::List(_)) {
        let (start, end) = range_of(text, value);
        nodes.push(Node::Wrap { start, end, function, shape: Some(shape(target)) });
    }
}

/// The shape of an unpacking target, for [`unpack`]: `.` a name, `(…)` a nested target.
fn shape(target: &Expr<'_>) -> String {
    match target {
        Expr::List(l) => format!("({})", l.items.iter().map(shape).collect::<String>()),
        _ => ".".to_owned(),
    }
}

fn args(list: &[CallArg<'_>], text: &str, nodes: &mut Vec<Node>) {
    for a in list {
        match a {
            CallArg::Pos(x) | CallArg::Kwarg(_, x) | CallArg::PosSplat(x) | CallArg::KwargSplat(x) => {
                expr(x, text, nodes);
            }
        }
    }
}

fn expr(x: &Expr<'_>, text: &str, nodes: &mut Vec<Node>) {
    match x {
        Expr::Var(v) => {
            if let Some(which) = ["varargs", "kwargs"].iter().position(|n| *n == v.id) {
                nodes.push(Node::Reads { at: v.span().start_offset as usize, which });
            }
        }
        Expr::Const(c) => {
            if let Some(read) = c.value.as_str().filter(|_| c.value.kind() == ValueKind::String) {
                let span = c.span();
                let (start, end) = (span.start_offset as usize, span.end_offset as usize);
                if let Some(text) = text.get(start..end).and_then(|source| literal_again(source, read)) {
                    nodes.push(Node::Literal { start, end, text });
                }
            }
        }
        Expr::Slice(s) => {
            expr(&s.expr, text, nodes);
            for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                expr(part, text, nodes);
            }
            let span = s.span();
            let (start, end) =
                balanced(text, (span.start_offset as usize).min(start_of(&s.expr)), span.end_offset as usize);
            if let Some((open, colons)) = slice_delimiters(text, start, end) {
                nodes.push(Node::Slice { start, end, open, colons, stepped: s.step.is_some() });
            }
        }
        Expr::UnaryOp(u) => expr(&u.expr, text, nodes),
        Expr::BinOp(b) if matches!(b.op, BinOpKind::Concat) => concat_chain(b, text, nodes),
        Expr::BinOp(b) => {
            expr(&b.left, text, nodes);
            expr(&b.right, text, nodes);
            let (op, function) = match b.op {
                BinOpKind::Rem => ('%', "__plnc_mod"),
                BinOpKind::Add => ('+', "__plnc_add"),
                // Python's `*` where a count may be negative (`' ' * (n - 2)` is '' when n < 2;
                // minijinja refuses it); not with a literal count of zero or more.
                BinOpKind::Mul if !(counted(&b.left) || counted(&b.right)) => ('*', "__plnc_mul"),
                _ => return,
            };
            let span = b.span();
            let (start, end) =
                balanced(text, (span.start_offset as usize).min(start_of(&b.left)), span.end_offset as usize);
            let (left_end, right_start) = (end_of(&b.left), start_of(&b.right));
            // Between the operands there is only whitespace, parentheses and the operator.
            let at = text.get(left_end..right_start).and_then(|between| between.find(op));
            if let Some(p) = at.filter(|_| start <= left_end && right_start <= end) {
                nodes.push(Node::Op { start, end, at: left_end + p, function });
            }
        }
        Expr::Compare(c) => {
            expr(&c.expr, text, nodes);
            for op in &c.ops {
                expr(&op.expr, text, nodes);
            }
        }
        Expr::IfExpr(i) => {
            expr(&i.test_expr, text, nodes);
            expr(&i.true_expr, text, nodes);
            if let Some(f) = &i.false_expr {
                expr(f, text, nodes);
            }
        }
        Expr::Filter(f) => {
            if matches!(f.name, "safe" | "e" | "escape" | "forceescape") {
                nodes.push(Node::MakesMarkup { at: f.span().start_offset as usize });
            }
            if let Some(x) = &f.expr {
                expr(x, text, nodes);
            }
            args(&f.args, text, nodes);
        }
        Expr::Test(t) => {
            // A method read as a value (`'x'.upper is callable`): minijinja has no such attribute.
            if matches!(t.name, "callable" | "defined" | "undefined")
                && let Expr::GetAttr(g) = &t.expr
                && python_method(g.name)
            {
                let (start, end) = range_of(text, &t.expr);
                let dot = text.get(end_of(&g.expr)..end).and_then(|between| between.rfind('.'));
                if let Some(dot) = dot {
                    nodes.push(Node::Attr { start, end, dot: end_of(&g.expr) + dot, name: g.name.to_owned() });
                }
            }
            expr(&t.expr, text, nodes);
            args(&t.args, text, nodes);
        }
        Expr::GetAttr(g) => expr(&g.expr, text, nodes),
        Expr::GetItem(g) => {
            expr(&g.expr, text, nodes);
            expr(&g.subscript_expr, text, nodes);
        }
        Expr::Call(c) => {
            expr(&c.expr, text, nodes);
            args(&c.args, text, nodes);
        }
        Expr::List(l) => l.items.iter().for_each(|i| expr(i, text, nodes)),
        Expr::Tuple(t) => t.items.iter().for_each(|i| expr(i, text, nodes)),
        Expr::Map(m) => m.keys.iter().chain(&m.values).for_each(|i| expr(i, text, nodes)),
    }
}

fn span_of(x: &Expr<'_>) -> minijinja::machinery::Span {
    match x {
        Expr::Var(s) => s.span(),
        Expr::Const(s) => s.span(),
        Expr::Slice(s) => s.span(),
        Expr::UnaryOp(s) => s.span(),
        Expr::BinOp(s) => s.span(),
        Expr::Compare(s) => s.span(),
        Expr::IfExpr(s) => s.span(),
        Expr::Filter(s) => s.span(),
        Expr::Test(s) => s.span(),
        Expr::GetAttr(s) => s.span(),
        Expr::GetItem(s) => s.span(),
        Expr::Call(s) => s.span(),
        Expr::List(s) => s.span(),
        Expr::Tuple(s) => s.span(),
        Expr::Map(s) => s.span(),
    }
}

/// Where an operand's text ends (its own span's end: every node's span ends where its text does).
pub(super) fn end_of(x: &Expr<'_>) -> usize {
    let own = span_of(x).end_offset as usize;
    match x {
        Expr::Tuple(t) => t.items.last().map_or(own, |last| end_of(last).max(own)),
        _ => own,
    }
}

/// Where an operand's text starts: the leftmost start among it and its leading operands (a filter
/// or attribute node's span starts at its name, after the value it applies to).
pub(super) fn start_of(x: &Expr<'_>) -> usize {
    let own = span_of(x).start_offset as usize;
    let inner = match x {
        Expr::Filter(f) => f.expr.as_ref().map(start_of),
        Expr::Test(t) => Some(start_of(&t.expr)),
        Expr::GetAttr(g) => Some(start_of(&g.expr)),
        Expr::GetItem(g) => Some(start_of(&g.expr)),
        Expr::Call(c) => Some(start_of(&c.expr)),
        Expr::Slice(s) => Some(start_of(&s.expr)),
        Expr::BinOp(b) => Some(start_of(&b.left)),
        Expr::Compare(c) => Some(start_of(&c.expr)),
        // A tuple without parentheses spans from its first item.
        Expr::Tuple(t) => t.items.first().map(start_of),
        _ => None,
    };
    inner.map_or(own, |i| i.min(own))
}

/// A chain `a ~ b ~ c` (left-nested `~`): one `__plnc_cat(a, b, c)`, which prints each operand with
/// Python's `str` (a list or dict's repr escapes what minijinja's writes as it is), unless every
/// operand is surely text already. One call for the chain, not one per operator: nesting stays as
/// written.
fn concat_chain(top: &Spanned<minijinja::machinery::ast::BinOp<'_>>, text: &str, nodes: &mut Vec<Node>) {
    let mut operands: Vec<&Expr<'_>> = vec![&top.right];
    let mut left = &top.left;
    while let Expr::BinOp(inner) = left {
        if !matches!(inner.op, BinOpKind::Concat) {
            break;
        }
        operands.push(&inner.right);
        left = &inner.left;
    }
    operands.push(left);
    operands.reverse();
    for operand in &operands {
        expr(operand, text, nodes);
    }
    if operands.iter().all(|o| surely_text(o)) {
        return;
    }
    let span = top.span();
    let (start, end) =
        balanced(text, (span.start_offset as usize).min(start_of(operands[0])), span.end_offset as usize);
    // Each operand's own text (parentheses that grouped a `~` inside the chain fall away with it).
    let mut parts = Vec::with_capacity(operands.len());
    let mut at = start;
    for operand in &operands {
        let (a, b) = range_of(text, operand);
        if a < at || b > end {
            return;
        }
        parts.push((a, b));
        at = b;
    }
    nodes.push(Node::Chain { start, end, parts, function: "__plnc_cat" });
}

/// Whether `x` is a literal number of zero or more (a repetition count minijinja takes as Python does).
fn counted(x: &Expr<'_>) -> bool {
    matches!(x, Expr::Const(c) if c.value.kind() == ValueKind::Number && c.value.as_i64().is_none_or(|n| n >= 0))
}

/// Whether `x` is text whatever the data: a string literal, a `~`, or a filter that returns text.
fn surely_text(x: &Expr<'_>) -> bool {
    match x {
        Expr::Const(c) => c.value.kind() == ValueKind::String,
        Expr::BinOp(b) => matches!(b.op, BinOpKind::Concat),
        Expr::Filter(f) => matches!(
            f.name,
            "string"
                | "trim"
                | "upper"
                | "lower"
                | "title"
                | "capitalize"
                | "replace"
                | "join"
                | "tojson"
                | "indent"
                | "format"
                | "center"
                | "striptags"
                | "urlencode"
                | "wordwrap"
        ),
        _ => false,
    }
}

/// The text of `x` with the parentheses around its parts that its nodes' spans leave out:
/// `((a or b)|f)|g` has a filter span from `a` (its innermost operand) to `g`, which would cut
/// the text inside a parenthesis.
fn range_of(text: &str, x: &Expr<'_>) -> (usize, usize) {
    balanced(text, start_of(x), end_of(x))
}

/// `start..end` widened over the `(` before it and the `)` after it (whitespace between allowed)
/// until its parentheses match; as it was if the text around has no such parentheses.
fn balanced(text: &str, start: usize, end: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let (mut open, mut unopened) = (0usize, 0usize);
    let mut i = start;
    while i < end.min(bytes.len()) {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < end && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' => open += 1,
            b')' if open > 0 => open -= 1,
            b')' => unopened += 1,
            _ => {}
        }
        i += 1;
    }
    let (mut s, mut e) = (start, end);
    for _ in 0..unopened {
        let Some(p) = text[..s].trim_end().strip_suffix('(').map(str::len) else { return (start, end) };
        s = p;
    }
    for _ in 0..open {
        let rest = &text[e..];
        let trimmed = rest.trim_start();
        if !trimmed.starts_with(')') {
            return (start, end);
        }
        e += rest.len() - trimmed.len() + 1;
    }
    (s, e)
}

/// The `[` and the two colons of the slice spanning `start..end` (which ends with its `]`; a slice
/// without a step: its colon and the `]`): the bracket that the final one closes, found by a
/// forward scan that skips string literals.
fn slice_delimiters(text: &str, start: usize, end: usize) -> Option<(usize, [usize; 2])> {
    let bytes = text.as_bytes();
    if bytes.get(end.checked_sub(1)?) != Some(&b']') {
        return None;
    }
    let mut stack: Vec<usize> = Vec::new();
    let mut open_of_last = None;
    let mut i = start;
    while i < end {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < end && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'[' | b'(' | b'{' => stack.push(i),
            b']' | b')' | b'}' => {
                let open = stack.pop()?;
                if i == end - 1 {
                    open_of_last = Some(open);
                }
            }
            _ => {}
        }
        i += 1;
    }
    let open = open_of_last?;
    // The colons at the bracket's own depth.
    let mut colons = Vec::new();
    let mut depth = 0usize;
    let mut i = open + 1;
    while i < end - 1 {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < end && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'[' | b'(' | b'{' => depth += 1,
            b']' | b')' | b'}' => depth = depth.saturating_sub(1),
            b':' if depth == 0 => colons.push(i),
            _ => {}
        }
        i += 1;
    }
    match colons[..] {
        [first, second] => Some((open, [first, second])),
        [only] => Some((open, [only, end - 1])),
        _ => None,
    }
}

/// The source of string literals (one, or several side by side, which Jinja2 joins), written
/// again when Python reads them otherwise than minijinja did (`read`): the value in minijinja's
/// escapes, then the source's line breaks, so later lines keep their numbers. `None` when both
/// read the same, or the source is not plain literals, or Python's reading is not one minijinja
/// can hold (lone surrogates, `\N{…}`, a malformed escape: minijinja's reading stands).
fn literal_again(source: &str, read: &str) -> Option<String> {
    if !source.contains('\\') {
        return None;
    }
    let mut value = String::new();
    let mut rest = source.trim();
    while !rest.is_empty() {
        let quote = rest.chars().next().filter(|q| *q == '\'' || *q == '"')?;
        // The literal ends at the first quote not escaped by an odd run of backslashes.
        let bytes = rest.as_bytes();
        let mut i = 1;
        while i < bytes.len() && bytes[i] != quote as u8 {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let body = rest.get(1..i)?;
        value.push_str(&python_unescape(body)?);
        rest = rest.get(i + 1..)?.trim_start();
    }
    if value == read {
        return None;
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out.extend(std::iter::repeat_n('\n', source.matches('\n').count()));
    Some(out)
}

/// What Jinja2 makes of a string literal's inside: `backslashreplace` to ASCII, then Python's
/// `unicode_escape` codec. `None` for what minijinja cannot hold or Python refuses.
fn python_unescape(body: &str) -> Option<String> {
    use std::fmt::Write as _;
    let mut ascii = String::with_capacity(body.len());
    for c in body.chars() {
        match c as u32 {
            0..0x80 => ascii.push(c),
            n @ 0x80..0x100 => write!(ascii, "\\x{n:02x}").ok()?,
            n @ 0x100..0x10000 => write!(ascii, "\\u{n:04x}").ok()?,
            n => write!(ascii, "\\U{n:08x}").ok()?,
        }
    }
    let bytes = ascii.as_bytes();
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    let hex = |from: usize, n: usize| -> Option<u32> {
        let digits = ascii.get(from..from + n)?;
        digits.bytes().all(|b| b.is_ascii_hexdigit()).then(|| u32::from_str_radix(digits, 16).ok())?
    };
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i] as char);
            i += 1;
            continue;
        }
        let &next = bytes.get(i + 1)?;
        let (c, used) = match next {
            b'\n' => {
                i += 2;
                continue;
            }
            b'\\' | b'\'' | b'"' => (next as char, 2),
            b'a' => ('\x07', 2),
            b'b' => ('\x08', 2),
            b'f' => ('\x0c', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'v' => ('\x0b', 2),
            b'0'..=b'7' => {
                let digits = bytes[i + 1..].iter().take(3).take_while(|b| (b'0'..=b'7').contains(b)).count();
                let n = u32::from_str_radix(&ascii[i + 1..i + 1 + digits], 8).ok()?;
                (char::from_u32(n)?, 1 + digits)
            }
            b'x' => (char::from_u32(hex(i + 2, 2)?)?, 4),
            b'u' => (char::from_u32(hex(i + 2, 4)?)?, 6),
            b'U' => (char::from_u32(hex(i + 2, 8)?)?, 10),
            b'N' => {
                // `\N{NAME}`: a character by its Unicode name (any case, as Python's codec reads it).
                let rest = ascii.get(i + 2..)?.strip_prefix('{')?;
                let name = &rest[..rest.find('}')?];
                (unicode_names2::character(&name.to_ascii_uppercase())?, 4 + name.len())
            }
            _ => {
                out.push('\\');
                i += 1;
                continue;
            }
        };
        out.push(c);
        i += used;
    }
    Some(out)
}

/// Registers the functions the rewrite calls.
pub(crate) fn install(env: &mut Environment<'static>) {
    env.add_function("__plnc_mod", modulo);
    env.add_function("__plnc_add", add);
    env.add_function("__plnc_mul", multiply);
    // Jinja2's `format` filter: `soft_str(value) % args` (or `% kwargs`), Python's `%` in full.
    env.add_filter("format", |value: Value, args: minijinja::value::Rest<Value>, kwargs: minijinja::value::Kwargs| {
        let keys: Vec<String> = kwargs.args().map(str::to_owned).collect();
        if !args.is_empty() && !keys.is_empty() {
            return Err(invalid("format: can't handle positional and keyword arguments at the same time"));
        }
        let format = if value.kind() == ValueKind::String { value } else { Value::from(py_str(&value)) };
        let operand = if keys.is_empty() {
            Value::from(minijinja::value::Tuple::from(args.0))
        } else {
            let mut pairs = Vec::with_capacity(keys.len());
            for key in keys {
                let item: Value = kwargs.get(&key)?;
                pairs.push((Value::from(key), item));
            }
            Value::from_pairs(pairs)
        };
        modulo(format, operand)
    });
    env.add_function("__plnc_cat", |parts: minijinja::value::Rest<Value>| {
        let mut out = String::new();
        for v in parts.iter() {
            match v.as_str() {
                Some(s) if v.kind() == ValueKind::String => out.push_str(s),
                _ => out.push_str(&py_str(v)),
            }
        }
        Value::from(out)
    });
    env.add_function("__plnc_attr", attr);
    env.add_function("__plnc_slice", slice);
    env.add_function("__plnc_unpack", |value: Value, shape: String| unpack(value, &shape));
    env.add_function("__plnc_unpackable", unpackable);
    env.add_function("__plnc_iterable", iterable);
    env.add_function("__plnc_catchall", |inner: Value, varargs: bool, kwargs: bool| {
        let declared: Vec<String> = inner
            .get_attr("arguments")
            .ok()
            .and_then(|a| a.try_iter().ok())
            .map(|names| names.filter_map(|n| n.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        // The parameters the template wrote, without the two the rewrite added.
        let own = declared.len().saturating_sub(usize::from(varargs) + usize::from(kwargs));
        let takes_caller = inner.get_attr("caller").is_ok_and(|c| c.is_true());
        Value::from_object(CatchAll { inner, declared, own, varargs, kwargs, takes_caller })
    });
}

/// A macro that takes extra arguments as Jinja2's do when their body reads `varargs` / `kwargs`.
#[derive(Debug)]
struct CatchAll {
    inner: Value,
    /// The macro's parameters, the rewrite's last.
    declared: Vec<String>,
    /// How many of them the template wrote.
    own: usize,
    varargs: bool,
    kwargs: bool,
    /// Whether the body reads `caller` (else a `caller` passed goes to `kwargs`, as in Jinja2).
    takes_caller: bool,
}

impl minijinja::value::Object for CatchAll {
    fn call(self: &std::sync::Arc<Self>, state: &mut minijinja::State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        let (positional, named): (&[Value], minijinja::value::Kwargs) = minijinja::value::from_args(args)?;
        let mut call: Vec<Value> = positional.iter().take(self.own).cloned().collect();
        let extra: Vec<Value> = positional.iter().skip(self.own).cloned().collect();
        if !extra.is_empty() && !self.varargs {
            return Err(Error::new(
                ErrorKind::TooManyArguments,
                format!("macro takes not more than {} argument(s)", self.own),
            ));
        }
        let mut pass: Vec<(String, Value)> = Vec::new();
        let mut rest = indexmap::IndexMap::<Value, Value>::new();
        for key in named.args() {
            let value: Value = named.peek(key)?;
            let own = self.declared[..self.own].iter().any(|d| d == key) || (key == "caller" && self.takes_caller);
            if own || !self.kwargs {
                pass.push((key.to_owned(), value));
            } else {
                rest.insert(Value::from(key), value);
            }
        }
        if self.varargs {
            pass.push(("varargs".to_owned(), Value::from_object(minijinja::value::Tuple::new(extra))));
        }
        if self.kwargs {
            pass.push(("kwargs".to_owned(), Value::from_object(rest)));
        }
        call.push(Value::from(pass.into_iter().collect::<minijinja::value::Kwargs>()));
        self.inner.call(state, &call)
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "arguments" => Some(Value::from_object(minijinja::value::Tuple::new(
                self.declared[..self.own].iter().map(|d| Value::from(d.as_str())).collect(),
            ))),
            _ => self.inner.get_attr(key.as_str()?).ok().filter(|v| !v.is_undefined()),
        }
    }
}

/// A loop's iterable: a string as the list of its characters, so that the loop knows its length
/// as Python's does; anything else as it is.
fn iterable(value: Value) -> Value {
    if value.kind() == ValueKind::String { unpack(value, "") } else { value }
}

/// A value as Python unpacks it into a target of `shape` (see [`shape`]): a string as its
/// characters (minijinja unpacks only sequences), each item as its part of the target does
/// (`a, (b, c) = 'x', 'yz'`).
fn unpack(value: Value, shape: &str) -> Value {
    let items: Vec<Value> = match value.as_str() {
        Some(s) if value.kind() == ValueKind::String => s.chars().map(Value::from).collect(),
        _ if matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) => match value.try_iter() {
            Ok(items) => items.collect(),
            Err(_) => return value,
        },
        _ => return value,
    };
    let parts = shape_parts(shape);
    Value::from(
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match parts.get(i) {
                Some(part) if part.starts_with('(') => unpack(item, part),
                _ => item,
            })
            .collect::<Vec<_>>(),
    )
}

/// The parts of a target's shape `(…)`, each `.` or a nested `(…)`.
fn shape_parts(shape: &str) -> Vec<&str> {
    let inner = shape.strip_prefix('(').and_then(|s| s.strip_suffix(')')).unwrap_or_default();
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0usize, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 {
            parts.push(&inner[from..=i]);
            from = i + 1;
        }
    }
    parts
}

/// The items of a loop whose target unpacks them, each as [`unpack`] makes it; other values as
/// they are (the loop reports what it cannot iterate).
fn unpackable(value: Value, shape: String) -> Value {
    if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
        return value;
    }
    match value.try_iter() {
        Ok(items) => Value::from(items.map(|item| unpack(item, &shape)).collect::<Vec<_>>()),
        Err(_) => value,
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// The methods of `str`, and those of `list` and `dict` that transformers' immutable sandbox lets a
/// template read (not the ones that change the value: the sandbox makes those undefined).
const STR_METHODS: &[&str] = &[
    "capitalize",
    "casefold",
    "center",
    "count",
    "encode",
    "endswith",
    "expandtabs",
    "find",
    "format",
    "format_map",
    "index",
    "isalnum",
    "isalpha",
    "isascii",
    "isdecimal",
    "isdigit",
    "isidentifier",
    "islower",
    "isnumeric",
    "isprintable",
    "isspace",
    "istitle",
    "isupper",
    "join",
    "ljust",
    "lower",
    "lstrip",
    "maketrans",
    "partition",
    "removeprefix",
    "removesuffix",
    "replace",
    "rfind",
    "rindex",
    "rjust",
    "rpartition",
    "rsplit",
    "rstrip",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "swapcase",
    "title",
    "translate",
    "upper",
    "zfill",
];
const LIST_METHODS: &[&str] = &["copy", "count", "index"];
const DICT_METHODS: &[&str] = &["copy", "fromkeys", "get", "items", "keys", "values"];
/// The methods the sandbox refuses (reading them gives undefined, as for a missing attribute).
const MUTATING_METHODS: &[&str] =
    &["append", "clear", "extend", "insert", "pop", "popitem", "remove", "reverse", "setdefault", "sort", "update"];

fn python_method(name: &str) -> bool {
    [STR_METHODS, LIST_METHODS, DICT_METHODS, MUTATING_METHODS].iter().any(|list| list.contains(&name))
}

/// `value.name` as Jinja2 reads it where the name is a Python method: the bound method (a callable
/// value) when the value's type has it, which Jinja2 prefers to a key of that name; else the
/// attribute or key as minijinja reads it.
fn attr(value: Value, name: String) -> Value {
    let method = method_value(value.clone(), name.clone());
    if !method.is_undefined() {
        return method;
    }
    value.get_attr(&name).unwrap_or_default()
}

/// A Python method read as a value (`'x'.upper`, `attr('upper')`): a function that says it is
/// called only as `.name(…)` here; Undefined when the value has no such method.
pub(super) fn method_value(value: Value, name: String) -> Value {
    let methods = match value.kind() {
        ValueKind::String => STR_METHODS,
        ValueKind::Seq => LIST_METHODS,
        ValueKind::Map => DICT_METHODS,
        _ => &[],
    };
    if methods.contains(&name.as_str()) {
        return Value::from_function(move |_args: minijinja::value::Rest<Value>| -> Result<Value, Error> {
            Err(invalid(format!("a method read as a value (`.{name}`) is called only as `.{name}(…)` here")))
        });
    }
    Value::UNDEFINED
}

/// Python's `a + b`, Markup's included: a safe string plus a string escapes the string
/// (markupsafe's `Markup.__add__` / `__radd__`); otherwise numbers add (`bool` as `int`), strings
/// and sequences concatenate, anything else is Python's `TypeError`.
fn add(a: Value, b: Value) -> Result<Value, Error> {
    let text = |v: &Value| v.kind() == ValueKind::String;
    if (a.is_safe() && text(&b)) || (b.is_safe() && text(&a)) {
        let side = |v: &Value| {
            let s = v.as_str().unwrap_or_default();
            if v.is_safe() { s.to_owned() } else { super::jinja2_filters::markup_escape(s) }
        };
        return Ok(Value::from_safe_string(side(&a) + &side(&b)));
    }
    let number = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    if number(&a) && number(&b) {
        if let (Some(x), Some(y)) = (py_int(&a), py_int(&b))
            && let Some(sum) = x.checked_add(y)
        {
            return Ok(i64::try_from(sum).map(Value::from).unwrap_or_else(|_| Value::from(sum)));
        }
        let float = |v: &Value| f64::try_from(v.clone()).unwrap_or(if v.is_true() { 1.0 } else { 0.0 });
        return Ok(Value::from(float(&a) + float(&b)));
    }
    if text(&a) && text(&b) {
        return Ok(Value::from(format!("{}{}", a.as_str().unwrap_or_default(), b.as_str().unwrap_or_default())));
    }
    if a.kind() == ValueKind::Seq && b.kind() == ValueKind::Seq {
        let items: Vec<Value> = a.try_iter()?.chain(b.try_iter()?).collect();
        return Ok(if is_tuple(&a) && is_tuple(&b) {
            Value::from_object(minijinja::value::Tuple::new(items))
        } else {
            Value::from(items)
        });
    }
    Err(invalid(format!("unsupported operand type(s) for +: '{}' and '{}'", a.kind(), b.kind())))
}

/// A Python `int` (a bool counts as one), `None` for other values.
pub(super) fn py_int(v: &Value) -> Option<i128> {
    if v.kind() == ValueKind::Bool {
        Some(i128::from(v.is_true()))
    } else if v.is_integer() {
        i128::try_from(v.clone()).ok()
    } else {
        None
    }
}

/// Python's `a * b`: a string or list repeated a count of times (none when the count is negative;
/// past 64 MiB of result a limit error), numbers multiplied (integers exactly while they fit in
/// 128 bits).
fn multiply(a: Value, b: Value) -> Result<Value, Error> {
    let repeatable = |v: &Value| matches!(v.kind(), ValueKind::String | ValueKind::Seq);
    if repeatable(&a) || repeatable(&b) {
        let (seq, count) = if repeatable(&a) { (a, b) } else { (b, a) };
        let Some(n) = py_int(&count).filter(|_| count.kind() != ValueKind::Number || count.is_integer()) else {
            return Err(invalid(format!("can't multiply sequence by non-int of type '{}'", count.kind())));
        };
        let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        let size = seq.len().unwrap_or(0).max(seq.as_str().map_or(0, str::len));
        if size.saturating_mul(n) > 64 << 20 {
            return Err(invalid(format!(
                "repeating a value of length {size} {n} times is past parlance's limit of 64 MiB"
            )));
        }
        return Ok(match seq.as_str() {
            Some(s) if seq.kind() == ValueKind::String => Value::from(s.repeat(n)),
            _ => {
                let items: Vec<Value> = seq.try_iter()?.collect();
                let mut out = Vec::with_capacity(items.len() * n);
                for _ in 0..n {
                    out.extend(items.iter().cloned());
                }
                if is_tuple(&seq) { Value::from(minijinja::value::Tuple::from(out)) } else { Value::from(out) }
            }
        });
    }
    let number = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    if !number(&a) || !number(&b) {
        return Err(invalid(format!("unsupported operand type(s) for *: '{}' and '{}'", a.kind(), b.kind())));
    }
    if let (Some(x), Some(y)) = (py_int(&a), py_int(&b)) {
        let product = x.checked_mul(y).ok_or_else(|| invalid("integer multiplication overflowed 128 bits"))?;
        return Ok(i64::try_from(product).map(Value::from).unwrap_or_else(|_| Value::from(product)));
    }
    let float = |v: &Value| f64::try_from(v.clone()).unwrap_or(if v.is_true() { 1.0 } else { 0.0 });
    Ok(Value::from(float(&a) * float(&b)))
}

/// Python's `a % b`.
fn modulo(a: Value, b: Value) -> Result<Value, Error> {
    if a.kind() == ValueKind::String {
        // markupsafe's `Markup % args`: the arguments escaped, the result Markup.
        let markup = a.is_safe();
        let text = printf(a.as_str().unwrap_or_default(), &b, markup)?;
        return Ok(if markup { Value::from_safe_string(text) } else { Value::from(text) });
    }
    let number = |v: &Value| matches!(v.kind(), ValueKind::Number | ValueKind::Bool);
    if !number(&a) || !number(&b) {
        return Err(invalid(format!("unsupported operand type(s) for %: '{}' and '{}'", a.kind(), b.kind())));
    }
    if let (Some(x), Some(y)) = (py_int(&a), py_int(&b)) {
        if y == 0 {
            return Err(invalid("integer modulo by zero"));
        }
        let r = x.rem_euclid(y.abs());
        let r = if y < 0 && r != 0 { r + y } else { r };
        return Ok(i64::try_from(r).map(Value::from).unwrap_or_else(|_| Value::from(r)));
    }
    let float = |v: &Value| f64::try_from(v.clone()).unwrap_or(if v.is_true() { 1.0 } else { 0.0 });
    let (x, y) = (float(&a), float(&b));
    if y == 0.0 {
        return Err(invalid("float modulo"));
    }
    let mut r = x % y;
    if r != 0.0 && (r < 0.0) != (y < 0.0) {
        r += y;
    }
    Ok(Value::from(r))
}

/// One conversion of a format string: `%(key)flags width.precision type`.
struct Spec {
    key: Option<String>,
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alternate: bool,
    width: usize,
    precision: Option<usize>,
    kind: char,
}

/// Python's `str % args`.
fn printf(format: &str, args: &Value, escape: bool) -> Result<String, Error> {
    let is_tuple = is_tuple(args);
    let positional: Vec<Value> = if is_tuple { args.try_iter()?.collect() } else { vec![args.clone()] };
    let mapping = args.kind() == ValueKind::Map;
    let mut next = 0;
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec {
            key: None,
            left: false,
            zero: false,
            plus: false,
            space: false,
            alternate: false,
            width: 0,
            precision: None,
            kind: ' ',
        };
        if chars.peek() == Some(&'(') {
            chars.next();
            let mut key = String::new();
            let mut depth = 1;
            for k in chars.by_ref() {
                match k {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                key.push(k);
            }
            spec.key = Some(key);
        }
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alternate = true,
                _ => break,
            }
            chars.next();
        }
        let digits = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Result<Option<usize>, Error> {
            if chars.peek() == Some(&'*') {
                return Err(invalid("a `*` width or precision in a format string is not supported"));
            }
            let mut n: Option<usize> = None;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize).min(1 << 20));
                chars.next();
            }
            Ok(n)
        };
        spec.width = digits(&mut chars)?.unwrap_or(0);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(digits(&mut chars)?.unwrap_or(0));
        }
        // Length modifiers are read and ignored, as Python does.
        while chars.peek().is_some_and(|c| matches!(c, 'h' | 'l' | 'L')) {
            chars.next();
        }
        spec.kind = chars.next().ok_or_else(|| invalid("incomplete format"))?;
        if spec.kind == '%' && spec.key.is_none() {
            out.push('%');
            continue;
        }
        let value = match &spec.key {
            Some(key) => {
                if !mapping {
                    return Err(invalid("format requires a mapping"));
                }
                args.get_item(&Value::from(key.as_str()))
                    .ok()
                    .filter(|v| !v.is_undefined())
                    .ok_or_else(|| invalid(format!("KeyError: {key:?}")))?
            }
            None => {
                let v =
                    positional.get(next).cloned().ok_or_else(|| invalid("not enough arguments for format string"))?;
                next += 1;
                v
            }
        };
        out.push_str(&convert(&spec, &value, escape)?);
    }
    if !mapping && next < positional.len() {
        return Err(invalid("not all arguments converted during string formatting"));
    }
    Ok(out)
}

fn convert(spec: &Spec, value: &Value, escape: bool) -> Result<String, Error> {
    let number = |what: &str| -> Result<f64, Error> {
        match value.kind() {
            ValueKind::Number => Ok(f64::try_from(value.clone()).unwrap_or(0.0)),
            ValueKind::Bool => Ok(if value.is_true() { 1.0 } else { 0.0 }),
            _ => Err(invalid(format!("%{what} format: a real number is required, not {}", value.kind()))),
        }
    };
    let integer = |what: &str| -> Result<i128, Error> {
        match value.kind() {
            ValueKind::Number if value.is_integer() => Ok(i128::try_from(value.clone()).unwrap_or(0)),
            ValueKind::Number if matches!(spec.kind, 'd' | 'i' | 'u') => Ok(number(what)?.trunc() as i128),
            ValueKind::Bool => Ok(i128::from(value.is_true())),
            // Python's words: `%d` takes any real number (truncated), `%x` only an integer.
            _ if matches!(spec.kind, 'd' | 'i' | 'u') => {
                Err(invalid(format!("%{what} format: a real number is required, not {}", value.kind())))
            }
            _ => Err(invalid(format!("%{what} format: an integer is required, not {}", value.kind()))),
        }
    };
    let sign = |negative: bool| {
        if negative {
            "-"
        } else if spec.plus {
            "+"
        } else if spec.space {
            " "
        } else {
            ""
        }
    };
    let (prefix, body, numeric) = match spec.kind {
        's' if escape && !value.is_safe() => {
            (String::new(), truncate(markup_escape(&py_str(value)), spec.precision), false)
        }
        's' => (String::new(), truncate(py_str(value), spec.precision), false),
        'r' | 'a' if escape => (String::new(), truncate(markup_escape(&py_repr(value)), spec.precision), false),
        'r' | 'a' => (String::new(), truncate(py_repr(value), spec.precision), false),
        'c' => {
            let c = match value.kind() {
                ValueKind::String if value.as_str().is_some_and(|s| s.chars().count() == 1) => {
                    value.as_str().unwrap_or_default().to_owned()
                }
                _ => {
                    let code = integer("c")?;
                    u32::try_from(code)
                        .ok()
                        .and_then(char::from_u32)
                        .map(String::from)
                        .ok_or_else(|| invalid("%c arg not in range(0x110000)"))?
                }
            };
            (String::new(), c, false)
        }
        'd' | 'i' | 'u' => {
            let n = integer(&spec.kind.to_string())?;
            let digits = n.unsigned_abs().to_string();
            let digits = match spec.precision {
                Some(p) if digits.len() < p => format!("{digits:0>p$}"),
                _ => digits,
            };
            (sign(n < 0).to_owned(), digits, true)
        }
        'x' | 'X' | 'o' => {
            let n = integer(&spec.kind.to_string())?;
            let abs = n.unsigned_abs();
            let digits = match spec.kind {
                'x' => format!("{abs:x}"),
                'X' => format!("{abs:X}"),
                _ => format!("{abs:o}"),
            };
            let alt = match (spec.alternate, spec.kind) {
                (true, 'x') => "0x",
                (true, 'X') => "0X",
                (true, _) => "0o",
                _ => "",
            };
            (format!("{}{alt}", sign(n < 0)), digits, true)
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
            let x = number(&spec.kind.to_string())?;
            let p = spec.precision.unwrap_or(6);
            let body = float_text(x.abs(), spec.kind, p, spec.alternate);
            (sign(x.is_sign_negative() && !x.is_nan()).to_owned(), body, true)
        }
        other => return Err(invalid(format!("unsupported format character '{other}'"))),
    };
    let len = prefix.chars().count() + body.chars().count();
    let pad = spec.width.saturating_sub(len);
    Ok(if spec.left {
        format!("{prefix}{body}{}", " ".repeat(pad))
    } else if spec.zero && numeric {
        format!("{prefix}{}{body}", "0".repeat(pad))
    } else {
        format!("{}{prefix}{body}", " ".repeat(pad))
    })
}

fn truncate(text: String, precision: Option<usize>) -> String {
    match precision {
        Some(p) => text.chars().take(p).collect(),
        None => text,
    }
}

/// A non-negative float as `%f`, `%e` or `%g` write it (Python's exponent: a sign and at least two
/// digits).
pub(super) fn float_text(x: f64, kind: char, precision: usize, alternate: bool) -> String {
    if x.is_nan() {
        return if kind.is_uppercase() { "NAN" } else { "nan" }.to_owned();
    }
    if x.is_infinite() {
        return if kind.is_uppercase() { "INF" } else { "inf" }.to_owned();
    }
    let exp_form = |p: usize| {
        let s = format!("{x:.p$e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let e = if kind.is_uppercase() { 'E' } else { 'e' };
        format!("{mantissa}{e}{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    };
    match kind {
        'f' | 'F' => format!("{x:.precision$}"),
        'e' | 'E' => exp_form(precision),
        _ => {
            let p = precision.max(1);
            // The exponent after rounding to `p` significant digits decides the form.
            let rounded = format!("{x:.prec$e}", prec = p - 1);
            let exp: i32 = rounded.split_once('e').and_then(|(_, e)| e.parse().ok()).unwrap_or(0);
            let mut s = if exp >= -4 && exp < p as i32 {
                let decimals = usize::try_from(p as i32 - 1 - exp).unwrap_or(0);
                format!("{x:.decimals$}")
            } else {
                exp_form(p - 1)
            };
            if !alternate {
                let (mantissa, rest) = match s.find(['e', 'E']) {
                    Some(i) => (s[..i].to_owned(), s[i..].to_owned()),
                    None => (s.clone(), String::new()),
                };
                let mantissa = if mantissa.contains('.') {
                    mantissa.trim_end_matches('0').trim_end_matches('.').to_owned()
                } else {
                    mantissa
                };
                s = format!("{mantissa}{rest}");
            }
            s
        }
    }
}

/// Python's `x[start:stop:step]` for strings and sequences.
fn slice(value: Value, start: Value, stop: Value, step: Value) -> Result<Value, Error> {
    let index = |v: &Value, what: &str| -> Result<Option<i64>, Error> {
        if v.is_none() || v.is_undefined() {
            return Ok(None);
        }
        i64::try_from(v.clone()).map(Some).map_err(|_| invalid(format!("slice {what} must be an integer or None")))
    };
    let step = index(&step, "step")?.unwrap_or(1);
    if step == 0 {
        return Err(invalid("slice step cannot be zero"));
    }
    let (start, stop) = (index(&start, "start")?, index(&stop, "stop")?);
    let positions = |len: usize| -> Vec<usize> {
        let len = len as i64;
        let clamp = |i: i64, lo: i64, hi: i64| if i < 0 { (i + len).max(lo) } else { i.min(hi) };
        let mut out = Vec::new();
        if step > 0 {
            let (mut i, stop) = (start.map_or(0, |s| clamp(s, 0, len)), stop.map_or(len, |s| clamp(s, 0, len)));
            while i < stop {
                out.push(i as usize);
                i += step;
            }
        } else {
            let (mut i, stop) =
                (start.map_or(len - 1, |s| clamp(s, -1, len - 1)), stop.map_or(-1, |s| clamp(s, -1, len - 1)));
            while i > stop {
                out.push(i as usize);
                i += step;
            }
        }
        out
    };
    match value.kind() {
        ValueKind::String => {
            let chars: Vec<char> = value.as_str().unwrap_or_default().chars().collect();
            let sliced = positions(chars.len()).into_iter().map(|i| chars[i]).collect::<String>();
            // markupsafe's `Markup.__getitem__`: a slice of Markup is Markup.
            Ok(if value.is_safe() { Value::from_safe_string(sliced) } else { Value::from(sliced) })
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            Ok(Value::from(positions(items.len()).into_iter().map(|i| items[i].clone()).collect::<Vec<_>>()))
        }
        ValueKind::None | ValueKind::Undefined => Ok(Value::from(Vec::<Value>::new())),
        other => Err(invalid(format!("value of type {other} cannot be sliced"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(text: &str) -> Option<String> {
        rewrite(text, true).text
    }

    #[test]
    fn operators_and_slices_are_rewritten_in_place() {
        assert_eq!(rw("{{ a % b }}").as_deref(), Some("{{ __plnc_mod(a , b) }}"));
        assert_eq!(rw("{{ (x|f(1)) % (b, c) }}").as_deref(), Some("{{ __plnc_mod((x|f(1)) , (b, c)) }}"));
        assert_eq!(rw("{{ a % b % c }}").as_deref(), Some("{{ __plnc_mod(__plnc_mod(a , b) , c) }}"));
        assert_eq!(rw("{{ x[::-1] }}").as_deref(), Some("{{ __plnc_slice(x, none, none, -1) }}"));
        assert_eq!(
            rw("{{ m['a:b'][1:n % 2:-1] }}").as_deref(),
            Some("{{ __plnc_slice(m['a:b'], 1, __plnc_mod(n , 2), -1) }}")
        );
        assert_eq!(rw("{% if x %}{{ y[1:2] }}{% endif %}"), None);
        assert_eq!(rw("{{ '%' }}{% raw %}a % b{% endraw %}"), None);
        assert_eq!(
            rw("{% for a, b in x|items %}{% endfor %}{% set c, d = 'xy' %}").as_deref(),
            Some(
                "{% for a, b in __plnc_unpackable((x|items), '(..)') %}{% endfor %}{% set c, d = __plnc_unpack(('xy'), '(..)') %}"
            )
        );
        assert_eq!(rw("{% for a in x %}{{ a, 1 }}{% endfor %}"), None);
        assert_eq!(
            rw("{% for a, b in x[::-1] %}{% endfor %}").as_deref(),
            Some("{% for a, b in __plnc_unpackable((__plnc_slice(x, none, none, -1)), '(..)') %}{% endfor %}")
        );
        // A `~` chain is one call; text with text is left to minijinja.
        assert_eq!(rw("{{ a ~ 'b' ~ c }}").as_deref(), Some("{{ __plnc_cat(a, 'b', c) }}"));
        assert_eq!(rw("{{ x ~ ('y' ~ z) }}").as_deref(), Some("{{ __plnc_cat(x, __plnc_cat('y', z)) }}"));
        assert_eq!(rw("{{ ((a ~ b) ~ c) }}").as_deref(), Some("{{ (__plnc_cat(a, b, c)) }}"));
        assert_eq!(rw("{{ a ~\n b }}").as_deref(), Some("{{ __plnc_cat(a\n, b) }}"));
        assert_eq!(rw("{{ 'a' ~ 'b' ~ (x|string) }}"), None);
        // Line breaks stay where they were.
        let t = "{{ a\n%\nb }}";
        assert_eq!(rw(t).map(|r| r.matches('\n').count()), Some(2));
    }

    #[test]
    fn many_operators_rewrite_in_linear_time() {
        // A hostile template: 50,000 operators side by side, and 20 nested ones.
        let flat = "{{ a % 2 }}".repeat(50_000);
        let nested = format!("{{{{ {}1 }}}}", "a % (".repeat(20)).replace("1 }}", &format!("1{} }}}}", ")".repeat(20)));
        let started = std::time::Instant::now();
        assert_eq!(rw(&flat).map(|r| r.matches("__plnc_mod(").count()), Some(50_000));
        assert_eq!(rw(&nested).map(|r| r.matches("__plnc_mod(").count()), Some(20));
        // 20,000 macros beside 50,000 operators: each macro reads only its own body's nodes.
        let macros = format!("{flat}{}", "{% macro m() %}{{ varargs }}{% endmacro %}".repeat(20_000));
        assert_eq!(rw(&macros).map(|r| r.matches("__plnc_catchall(").count()), Some(20_000));
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[test]
    fn printf_matches_python() {
        let fmt = |f: &str, v: Value| printf(f, &v, false).map_err(|e| e.to_string());
        let tuple = |items: Vec<Value>| Value::from_object(minijinja::value::Tuple::from(items));
        assert_eq!(fmt("%s-%d", tuple(vec![Value::from("a"), Value::from(3)])).unwrap(), "a-3");
        assert_eq!(
            fmt(
                "%05.1f|%-4s|%+d|%x|%#o|%e|%g|%g|%%",
                tuple(vec![
                    Value::from(2.25),
                    Value::from("ab"),
                    Value::from(5),
                    Value::from(255),
                    Value::from(8),
                    Value::from(12345.678),
                    Value::from(0.0001),
                    Value::from(1e20),
                ])
            )
            .unwrap(),
            "002.2|ab  |+5|ff|0o10|1.234568e+04|0.0001|1e+20|%"
        );
        assert_eq!(fmt("%r %s", tuple(vec![Value::from("x"), Value::from(vec![1, 2])])).unwrap(), "'x' [1, 2]");
        assert_eq!(fmt("%s", Value::from(vec![1, 2])).unwrap(), "[1, 2]");
        assert!(fmt("%s %s", Value::from("a")).unwrap_err().contains("not enough arguments"));
        assert!(fmt("%s", tuple(vec![Value::from(1), Value::from(2)])).unwrap_err().contains("not all arguments"));
        assert!(fmt("%d", Value::from("x")).unwrap_err().contains("real number is required"));
        assert!(fmt("%x", Value::from(1.5)).unwrap_err().contains("an integer is required"));
        // A mapping argument with no `%(key)` conversion is one positional value, as in Python.
        assert_eq!(fmt("%s", Value::from(minijinja::value::Serde(serde_json::json!({"a": 1})))).unwrap(), "{'a': 1}");
    }

    #[test]
    fn modulo_and_slices_match_python() {
        assert_eq!(modulo(Value::from(-7), Value::from(3)).unwrap(), Value::from(2));
        assert_eq!(modulo(Value::from(7), Value::from(-3)).unwrap(), Value::from(-2));
        assert_eq!(modulo(Value::from(-7.5), Value::from(2)).unwrap(), Value::from(0.5));
        assert!(modulo(Value::from(1), Value::from(0)).is_err());
        let s = |v: &str, a: Option<i64>, b: Option<i64>, c: i64| {
            let o = |x: Option<i64>| x.map_or(Value::from(()), Value::from);
            slice(Value::from(v), o(a), o(b), Value::from(c)).unwrap().to_string()
        };
        assert_eq!(s("", None, None, -1), "");
        assert_eq!(s("abc", Some(2), Some(0), -1), "cb");
        assert_eq!(s("abc", None, Some(-4), -1), "cba");
        assert_eq!(s("abcdef", Some(5), Some(1), -2), "fd");
        assert_eq!(s("abc", Some(0), Some(2), -1), "");
        assert_eq!(s("abcdef", None, None, 2), "ace");
    }
}
