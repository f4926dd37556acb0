//! The EBNF/GBNF text parser: `name ::= expr` rules as llama.cpp and XGrammar accept them.
//!
//! Supported: alternation `|`, grouping `( )`, postfix `? * + {m} {m,} {m,n}`, literals `"..."`, character
//! classes `[a-z]` / `[^...]`, `.` (any character), escapes `\n \r \t \\ \" \] \xNN \uNNNN \UNNNNNNNN`,
//! regex terminals `/.../`, `#` comments, special tokens by id `<[123]>`, and XGrammar's builtin `TagDispatch(("trigger", rule), …, stop_eos=…,
//! stop_str=(…), loop_after_dispatch=…, excludes=(…))`. A rule ends where the next `name ::=` starts. Errors carry the
//! 1-based line and column.

use super::{Expr, Grammar, Rule, RuleId, TagDispatch, Trigger};
use std::collections::HashMap;

/// Why a grammar could not be parsed or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrammarError {
    /// The text is not valid grammar syntax.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What was expected or found.
        message: String,
    },
    /// A rule is referenced but never defined.
    #[error("line {line}, column {column}: undefined rule `{name}`")]
    UndefinedRule {
        /// The rule name.
        name: String,
        /// 1-based line of the first reference (0 when built programmatically).
        line: usize,
        /// 1-based column of the first reference.
        column: usize,
    },
    /// The same rule is defined twice.
    #[error("line {line}, column {column}: rule `{name}` defined twice")]
    DuplicateRule {
        /// The rule name.
        name: String,
        /// 1-based line of the second definition.
        line: usize,
        /// 1-based column of the second definition.
        column: usize,
    },
    /// The text holds no rule.
    #[error("the grammar has no rules")]
    Empty,
}

/// Repetition counts above this are rejected at parse time; they would only unroll into huge automata.
const MAX_REPEAT: u32 = 100_000;
/// The builtin `TagDispatch(("trigger", rule), …, stop_eos=true, stop_str=("…"), loop_after_dispatch=true,
/// excludes=("…"))`, written as XGrammar writes it.
const TAG_DISPATCH: [char; 12] = ['T', 'a', 'g', 'D', 'i', 's', 'p', 'a', 't', 'c', 'h', '('];
/// Nesting depth of parentheses; deeper input is rejected instead of overflowing the stack.
const MAX_NESTING: usize = 200;

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    names: HashMap<String, u32>,
    rules: Vec<Option<Rule>>,
    first_use: Vec<(usize, usize)>,
    depth: usize,
    _text: &'a str,
}

pub(super) fn parse(text: &str) -> Result<Grammar, GrammarError> {
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
        names: HashMap::new(),
        rules: Vec::new(),
        first_use: Vec::new(),
        depth: 0,
        _text: text,
    };
    p.grammar()
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

impl Parser<'_> {
    fn line_col(&self, pos: usize) -> (usize, usize) {
        let mut line = 1;
        let mut col = 1;
        for &c in &self.chars[..pos.min(self.chars.len())] {
            if c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        (line, col)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, GrammarError> {
        let (line, column) = self.line_col(self.pos);
        Err(GrammarError::Syntax { line, column, message: message.into() })
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += 1;
            } else if c == '#' {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn name_at(&self, mut pos: usize) -> Option<(String, usize)> {
        let start = pos;
        while pos < self.chars.len() && is_name_char(self.chars[pos]) {
            pos += 1;
        }
        (pos > start).then(|| (self.chars[start..pos].iter().collect(), pos))
    }

    /// Whether a `name ::=` definition starts at the current position.
    fn at_definition(&self) -> bool {
        let Some((_, mut pos)) = self.name_at(self.pos) else { return false };
        while pos < self.chars.len() && self.chars[pos].is_whitespace() {
            pos += 1;
        }
        self.chars[pos.min(self.chars.len())..].starts_with(&[':', ':', '='])
    }

    fn rule_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.rules.len() as u32;
        self.names.insert(name.to_string(), id);
        self.rules.push(None);
        let lc = self.line_col(self.pos);
        self.first_use.push(lc);
        id
    }

    fn grammar(&mut self) -> Result<Grammar, GrammarError> {
        let mut order = Vec::new();
        loop {
            self.skip_ws();
            if self.peek().is_none() {
                break;
            }
            let def_pos = self.pos;
            let Some((name, after)) = self.name_at(self.pos) else { return self.err("expected a rule name") };
            self.pos = after;
            self.skip_ws();
            if !self.chars[self.pos..].starts_with(&[':', ':', '=']) {
                return self.err("expected `::=`");
            }
            self.pos += 3;
            let id = self.rule_id(&name);
            if self.rules[id as usize].is_some() {
                let (line, column) = self.line_col(def_pos);
                return Err(GrammarError::DuplicateRule { name, line, column });
            }
            let expr = self.alternation()?;
            self.skip_ws();
            if let Some(c) = self.peek()
                && !self.at_definition()
            {
                return self.err(format!("unexpected `{c}`"));
            }
            self.rules[id as usize] = Some(Rule { name, expr });
            order.push(id);
        }
        if order.is_empty() {
            return Err(GrammarError::Empty);
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for (i, r) in self.rules.iter_mut().enumerate() {
            match r.take() {
                Some(r) => rules.push(r),
                None => {
                    let name = self.names.iter().find(|(_, v)| **v == i as u32).map(|(k, _)| k.clone());
                    let (line, column) = self.first_use[i];
                    return Err(GrammarError::UndefinedRule { name: name.unwrap_or_default(), line, column });
                }
            }
        }
        let start = rules.iter().position(|r| r.name == "root").map(|i| i as u32).unwrap_or(order[0]);
        Ok(Grammar {
            rules,
            start: RuleId(start),
            token_budgets: Vec::new(),
            kept: Vec::new(),
            units: Vec::new(),
            origins: Vec::new(),
            imports: Vec::new(),
            serial: super::Serial::next(),
        })
    }

    fn alternation(&mut self) -> Result<Expr, GrammarError> {
        let mut alts = vec![self.sequence()?];
        loop {
            self.skip_ws();
            if self.peek() == Some('|') {
                self.pos += 1;
                alts.push(self.sequence()?);
            } else {
                break;
            }
        }
        Ok(Expr::alt(alts))
    }

    fn sequence(&mut self) -> Result<Expr, GrammarError> {
        let mut parts = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None | Some('|') | Some(')') => break,
                _ if self.at_definition() => break,
                _ => {}
            }
            let atom = self.atom()?;
            let atom = self.postfix(atom)?;
            parts.push(atom);
        }
        Ok(match parts.len() {
            0 => Expr::Empty,
            1 => parts.pop().expect("one element"),
            _ => Expr::Seq(parts),
        })
    }

    fn number(&mut self) -> Result<u32, GrammarError> {
        self.skip_ws();
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_REPEAT => Ok(n),
            Ok(_) => self.err(format!("repetition count above {MAX_REPEAT}")),
            Err(_) if digits.is_empty() => self.err("expected a number"),
            Err(_) => self.err(format!("repetition count above {MAX_REPEAT}")),
        }
    }

    fn postfix(&mut self, mut atom: Expr) -> Result<Expr, GrammarError> {
        for _ in 0..MAX_NESTING {
            // Postfix operators bind to the atom directly before them, without whitespace in between.
            let (min, max) = match self.peek() {
                Some('?') => (0, Some(1)),
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('{') => {
                    self.pos += 1;
                    let min = self.number()?;
                    self.skip_ws();
                    let max = if self.peek() == Some(',') {
                        self.pos += 1;
                        self.skip_ws();
                        if self.peek() == Some('}') { None } else { Some(self.number()?) }
                    } else {
                        Some(min)
                    };
                    self.skip_ws();
                    if self.peek() != Some('}') {
                        return self.err("expected `}`");
                    }
                    if max.is_some_and(|m| m < min) {
                        return self.err("repetition maximum below minimum");
                    }
                    (min, max)
                }
                _ => return Ok(atom),
            };
            self.pos += 1;
            atom = Expr::Repeat { expr: Box::new(atom), min, max };
        }
        self.err("repetition operators nested too deeply")
    }

    fn atom(&mut self) -> Result<Expr, GrammarError> {
        match self.peek() {
            Some('"') => {
                self.pos += 1;
                let mut s = String::new();
                loop {
                    match self.peek() {
                        None => return self.err("unterminated literal"),
                        Some('"') => {
                            self.pos += 1;
                            break;
                        }
                        Some('\\') => s.push(self.escape()?),
                        Some(c) => {
                            self.pos += 1;
                            s.push(c);
                        }
                    }
                }
                Ok(Expr::literal(s))
            }
            Some('[') => {
                self.pos += 1;
                let negated = self.peek() == Some('^');
                if negated {
                    self.pos += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    let lo = match self.peek() {
                        None => return self.err("unterminated character class"),
                        Some(']') => {
                            self.pos += 1;
                            break;
                        }
                        Some('\\') => self.escape()?,
                        Some(c) => {
                            self.pos += 1;
                            c
                        }
                    };
                    let hi = if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&c| c != ']') {
                        self.pos += 1;
                        match self.peek() {
                            Some('\\') => self.escape()?,
                            Some(c) => {
                                self.pos += 1;
                                c
                            }
                            None => return self.err("unterminated character class"),
                        }
                    } else {
                        lo
                    };
                    if hi < lo {
                        return self.err("character range out of order");
                    }
                    ranges.push((lo, hi));
                }
                Ok(Expr::CharClass { negated, ranges })
            }
            Some('.') => {
                self.pos += 1;
                Ok(Expr::CharClass { negated: true, ranges: Vec::new() })
            }
            Some('<') if self.chars.get(self.pos + 1) == Some(&'[') => {
                // `<[123]>`: the special token with that id.
                self.pos += 2;
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits: String = self.chars[start..self.pos].iter().collect();
                let Ok(id) = digits.parse::<u32>() else { return self.err("expected a token id") };
                if self.chars[self.pos..].starts_with(&[']', '>']) {
                    self.pos += 2;
                } else {
                    return self.err("expected `]>` after a token id");
                }
                if id > crate::grammar::MAX_SPECIAL_TOKEN_ID {
                    return self.err(format!("token id {id} is too large"));
                }
                Ok(Expr::Token(id))
            }
            Some('/') => {
                self.pos += 1;
                let mut s = String::new();
                loop {
                    match self.peek() {
                        None => return self.err("unterminated regex"),
                        Some('/') => {
                            self.pos += 1;
                            break;
                        }
                        Some('\\') if self.chars.get(self.pos + 1) == Some(&'/') => {
                            self.pos += 2;
                            s.push('/');
                        }
                        Some('\\') if self.chars.get(self.pos + 1).is_some() => {
                            s.push('\\');
                            s.push(self.chars[self.pos + 1]);
                            self.pos += 2;
                        }
                        Some(c) => {
                            self.pos += 1;
                            s.push(c);
                        }
                    }
                }
                if let Err(e) = regex_syntax::Parser::new().parse(&s) {
                    return self.err(format!("invalid regex: {e}"));
                }
                Ok(Expr::Regex(s))
            }
            Some('(') => {
                if self.depth >= MAX_NESTING {
                    return self.err("parentheses nested too deeply");
                }
                self.pos += 1;
                self.depth += 1;
                let e = self.alternation()?;
                self.depth -= 1;
                self.skip_ws();
                if self.peek() != Some(')') {
                    return self.err("expected `)`");
                }
                self.pos += 1;
                // A group of a group is kept as written so that printing and parsing round-trip.
                Ok(e)
            }
            Some('T') if self.chars[self.pos..].starts_with(&TAG_DISPATCH) => {
                self.pos += TAG_DISPATCH.len();
                self.tag_dispatch()
            }
            Some(c) if is_name_char(c) => {
                let (name, after) = self.name_at(self.pos).expect("name char present");
                let id = self.rule_id(&name);
                self.pos = after;
                Ok(Expr::Rule(RuleId(id)))
            }
            Some(c) => self.err(format!("unexpected `{c}`")),
            None => self.err("unexpected end of input"),
        }
    }

    /// The arguments of `TagDispatch(`, up to and including its `)`.
    fn tag_dispatch(&mut self) -> Result<Expr, GrammarError> {
        if self.depth >= MAX_NESTING {
            return self.err("parentheses nested too deeply");
        }
        self.depth += 1;
        let mut d = TagDispatch {
            tags: Vec::new(),
            excludes: Vec::new(),
            stop_strings: Vec::new(),
            stop_eos: true,
            loop_after_dispatch: true,
        };
        loop {
            self.skip_ws();
            match self.peek() {
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                Some('(') => {
                    self.pos += 1;
                    self.skip_ws();
                    let trigger = if self.peek() == Some('<') {
                        match self.atom()? {
                            Expr::Token(id) => Trigger::Token(id),
                            _ => return self.err("expected a trigger string or token"),
                        }
                    } else {
                        let text = self.string()?;
                        if text.is_empty() {
                            return self.err("a TagDispatch trigger must not be empty");
                        }
                        Trigger::Text(text)
                    };
                    self.expect(',')?;
                    let rest = self.alternation()?;
                    self.expect(')')?;
                    d.tags.push((trigger, rest));
                }
                Some(c) if is_name_char(c) => {
                    let (key, after) = self.name_at(self.pos).expect("name char present");
                    self.pos = after;
                    self.expect('=')?;
                    self.skip_ws();
                    match key.as_str() {
                        "stop_eos" | "loop_after_dispatch" => {
                            let value = if self.chars[self.pos..].starts_with(&['t', 'r', 'u', 'e']) {
                                self.pos += 4;
                                true
                            } else if self.chars[self.pos..].starts_with(&['f', 'a', 'l', 's', 'e']) {
                                self.pos += 5;
                                false
                            } else {
                                return self.err(format!("`{key}` takes `true` or `false`"));
                            };
                            if key == "stop_eos" { d.stop_eos = value } else { d.loop_after_dispatch = value }
                        }
                        "stop_str" | "excludes" => {
                            self.expect('(')?;
                            let mut list = Vec::new();
                            loop {
                                self.skip_ws();
                                if self.peek() == Some(')') {
                                    self.pos += 1;
                                    break;
                                }
                                if !list.is_empty() {
                                    self.expect(',')?;
                                    self.skip_ws();
                                }
                                let s = self.string()?;
                                if s.is_empty() {
                                    return self.err(format!("`{key}` strings must not be empty"));
                                }
                                list.push(s);
                            }
                            if key == "stop_str" { d.stop_strings = list } else { d.excludes = list }
                        }
                        _ => return self.err(format!("unknown TagDispatch argument `{key}`")),
                    }
                }
                _ => return self.err("expected `(\"trigger\", rule)`, an argument or `)` in TagDispatch"),
            }
            self.skip_ws();
            if self.peek() == Some(',') {
                self.pos += 1;
            } else if self.peek() != Some(')') {
                return self.err("expected `,` or `)` in TagDispatch");
            }
        }
        self.depth -= 1;
        Ok(Expr::TagDispatch(Box::new(d)))
    }

    /// A `"..."` literal's text.
    fn string(&mut self) -> Result<String, GrammarError> {
        if self.peek() != Some('"') {
            return self.err("expected a string");
        }
        match self.atom()? {
            Expr::Literal(s) => Ok(s),
            _ => Ok(String::new()),
        }
    }

    /// Skips whitespace, then `c`.
    fn expect(&mut self, c: char) -> Result<(), GrammarError> {
        self.skip_ws();
        if self.peek() != Some(c) {
            return self.err(format!("expected `{c}`"));
        }
        self.pos += 1;
        Ok(())
    }

    fn hex(&mut self, n: usize) -> Result<char, GrammarError> {
        let start = self.pos;
        let end = start + n;
        if end > self.chars.len() {
            return self.err("truncated escape");
        }
        let s: String = self.chars[start..end].iter().collect();
        let Ok(v) = u32::from_str_radix(&s, 16) else { return self.err("invalid hex escape") };
        let Some(c) = char::from_u32(v) else { return self.err("escape is not a Unicode scalar value") };
        self.pos = end;
        Ok(c)
    }

    fn escape(&mut self) -> Result<char, GrammarError> {
        self.pos += 1; // the backslash
        let Some(c) = self.peek() else { return self.err("truncated escape") };
        self.pos += 1;
        Ok(match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            'x' => return self.hex(2),
            'u' => return self.hex(4),
            'U' => return self.hex(8),
            '\\' | '"' | ']' | '[' | '-' | '^' | '/' | '\'' => c,
            _ => {
                self.pos -= 1;
                return self.err(format!("unknown escape `\\{c}`"));
            }
        })
    }
}
