//! The stack that loading a template needs: measured on minijinja's own tokens, and provided.
//!
//! minijinja bounds the nesting of statements and brackets while parsing (150 levels), but not
//! chains: `{{ 1~1~1~… }}` and every other binary operator build left-deep trees as long as the
//! chain, and `----x`, `not not … x`, `x.a.a…`, `x[0][0]…`, `f()()…`, `x|f|f…`, `x is t is t…` and
//! `a if b else c if …` nest as deep. Parsing, compiling and dropping those trees recurse once per
//! level, so a long enough chain overflows any stack and aborts the process (found by fuzzing; see
//! `fuzz/regressions/render/stack_overflow_*`).
//!
//! Two measures make that impossible by construction rather than by a text scan that must agree
//! with the lexer:
//! - [`find_deep_expression`] reads the template with minijinja's tokenizer (the very tokens its
//!   parser reads: raw blocks, comments, strings and braces inside tags are the lexer's business,
//!   not ours) and bounds, for every tag, how deep an expression tree it can build: each token
//!   other than a separator or a closing bracket adds at most one level, siblings separated by
//!   `,` or `:` do not nest, and brackets add theirs. A tag above [`MAX_EXPRESSION_DEPTH`] is
//!   refused before the parser sees it.
//! - [`on_load_stack`] runs loading (parse, compile, drop) and every later re-parse on a thread
//!   whose stack holds the deepest admitted expression inside the deepest statement nesting
//!   minijinja admits, with a wide margin: `tests/it/nesting.rs` loads every kind at the bound, and
//!   a 1 MiB stack is enough there.
//!
//! Real templates are far from the bound: the deepest tag of the corpus scores 57.

use minijinja::machinery::{Token, tokenize};
use minijinja::syntax::SyntaxConfig;

/// The deepest expression tree one tag may build, as [`find_deep_expression`] bounds it.
pub(crate) const MAX_EXPRESSION_DEPTH: usize = 1_000;

/// Stack of the thread that loads templates. Reserved address space only: pages are touched as
/// recursion reaches them, so a shallow template costs what it always did.
const LOAD_STACK_BYTES: usize = 64 << 20;

/// Characters one template line may hold: minijinja counts columns in 16 bits and its error path
/// overflows at column 65,535 (found by fuzzing). Real templates' longest line has 5,774.
pub(crate) const MAX_LINE_CHARS: usize = 65_000;

/// The 1-based number of the first line longer than [`MAX_LINE_CHARS`] characters, if any.
pub(crate) fn find_long_line(text: &str) -> Option<usize> {
    text.split('\n')
        .position(|line| line.len() > MAX_LINE_CHARS && line.chars().count() > MAX_LINE_CHARS)
        .map(|i| i + 1)
}

/// A tag whose expression may nest deeper than [`MAX_EXPRESSION_DEPTH`]: its 1-based line and the
/// bound reached when it was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DeepExpression {
    pub line: usize,
    pub depth: usize,
}

/// Finds the first tag whose expression could nest deeper than [`MAX_EXPRESSION_DEPTH`].
///
/// Reads `text` exactly as minijinja's parser will (default syntax, as the environment uses). A
/// lexer error ends the scan: the parser stops at the same token with its own message, and up to
/// there every tag was measured.
pub(crate) fn find_deep_expression(text: &str) -> Option<DeepExpression> {
    let deepest = deepest_expression(text, MAX_EXPRESSION_DEPTH);
    (deepest.depth > MAX_EXPRESSION_DEPTH).then_some(deepest)
}

/// The deepest tag's bound and line, or the first tag found above `limit`.
fn deepest_expression(text: &str, limit: usize) -> DeepExpression {
    let mut deepest = DeepExpression { line: 0, depth: 0 };
    let mut deepest_offset = 0;
    // Per open bracket of the current tag: levels added at that bracket since its last separator.
    let mut levels: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    for token in tokenize(text, false, SyntaxConfig::default()) {
        let Ok((token, span)) = token else { break };
        match token {
            Token::VariableStart | Token::BlockStart => {
                levels.clear();
                levels.push(0);
                depth = 1;
            }
            Token::VariableEnd | Token::BlockEnd | Token::TemplateData(_) => {
                levels.clear();
                depth = 0;
            }
            Token::Comma | Token::Colon => {
                if let Some(top) = levels.last_mut() {
                    depth -= *top;
                    *top = 0;
                }
            }
            Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                // An unbalanced closer is a syntax error the parser reports; keep the outer level.
                if levels.len() > 1 {
                    depth -= levels.pop().unwrap_or(0) + 1;
                }
            }
            Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => {
                if let Some(top) = levels.last_mut() {
                    *top += 1;
                    depth += 1;
                }
                levels.push(0);
                depth += 1;
            }
            _ => {
                if let Some(top) = levels.last_mut() {
                    *top += 1;
                    depth += 1;
                }
            }
        }
        if depth > deepest.depth {
            // The line is counted once, at the end: counting at every new maximum was quadratic.
            deepest_offset = (span.start_offset as usize).min(text.len());
            deepest.depth = depth;
            if depth > limit {
                break;
            }
        }
    }
    if deepest.depth > 0 {
        deepest.line = 1 + text.as_bytes()[..deepest_offset].iter().filter(|&&b| b == b'\n').count();
    }
    deepest
}

/// Why [`on_load_stack`] could not run its job.
#[derive(Debug)]
pub(crate) enum LoadStackError {
    /// The system refused a thread.
    NoThread,
    /// The job panicked (a bug in the engine, reported rather than propagated).
    Panicked,
}

/// Runs `job` on a thread with [`LOAD_STACK_BYTES`] of stack and waits for it.
pub(crate) fn on_load_stack<R: Send>(job: impl FnOnce() -> R + Send) -> Result<R, LoadStackError> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("parlance-load".into())
            .stack_size(LOAD_STACK_BYTES)
            .spawn_scoped(scope, job)
            .map_err(|_| LoadStackError::NoThread)?;
        handle.join().map_err(|_| LoadStackError::Panicked)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_of(text: &str) -> Option<usize> {
        find_deep_expression(text).map(|deep| deep.line)
    }

    #[test]
    fn chains_are_refused_and_siblings_are_not() {
        let chain = format!("a\n{{{{ {} }}}}", "1~".repeat(MAX_EXPRESSION_DEPTH) + "1");
        assert_eq!(depth_of(&chain), Some(2));
        let short = format!("{{{{ {} }}}}", "1~".repeat(MAX_EXPRESSION_DEPTH / 3) + "1");
        assert_eq!(depth_of(&short), None);
        // Ten thousand list items are siblings: wide, not deep.
        let wide = format!("{{{{ [{}] }}}}", "1, ".repeat(10_000));
        assert_eq!(depth_of(&wide), None);
        let map = format!("{{% set m = {{{}}} %}}", "'k': 1 ~ 2, ".repeat(10_000));
        assert_eq!(depth_of(&map), None);
    }

    #[test]
    fn real_templates_are_far_below_the_bound() {
        let dir = std::env::var_os("PARLANCE_CORPUS")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus").into())
            .join("templates");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipping: corpus not found at {}", dir.display());
            return;
        };
        let mut deepest = (0, String::new());
        for entry in entries {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let depth = deepest_expression(&text, usize::MAX).depth;
            if depth > deepest.0 {
                deepest = (depth, path.display().to_string());
            }
        }
        eprintln!("deepest corpus tag: {} in {}", deepest.0, deepest.1);
        assert!(deepest.0 > 10 && deepest.0 < MAX_EXPRESSION_DEPTH / 8, "{deepest:?}");
    }

    #[test]
    fn the_lexer_decides_what_is_code() {
        // Literals, comments and raw blocks hold no code however long they are.
        let literal = format!("{{{{ '{}' }}}}", "~".repeat(100_000));
        assert_eq!(depth_of(&literal), None);
        let comment = format!("{{# {} #}}", "1~".repeat(100_000));
        assert_eq!(depth_of(&comment), None);
        let raw = format!("{{% raw %}}{{{{ {} }}}}{{% endraw %}}", "1~".repeat(100_000));
        assert_eq!(depth_of(&raw), None);
        // A `}}` inside an open brace does not end the tag, and a quote inside a raw block opens
        // nothing: the chain after either is still measured.
        let braces = format!("{{{{ {{'a': {{'b': 1}}}}{} }}}}", "~1".repeat(5_000));
        assert_eq!(depth_of(&braces), Some(1));
        let quote_in_raw = format!("{{% raw %}}{{% \"{{% endraw %}}{{{{ 1{} }}}}", "~1".repeat(5_000));
        assert_eq!(depth_of(&quote_in_raw), Some(1));
    }
}
