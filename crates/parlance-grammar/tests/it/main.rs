//! Integration tests of parlance-grammar: grammars, masks against brute force, rollback, JSON Schema.

mod common;
mod dispatch;
mod grammar;
mod json_schema;
mod masks;
mod schema_limits;
mod structural_tag;

/// Grammar texts shared by several test modules.
mod grammar_texts {
    pub const JSON: &str = r#"root ::= value
value ::= "null" | object | array | string | number | "true" | "false"
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]{0,3}"#;
    pub const ARITH: &str = r#"expr ::= term | expr "+" term | expr "*" term
term ::= [0-9]+ | "(" expr ")" | "-" term"#;
    pub const AMBIGUOUS: &str = r#"s ::= "" | s s | "a" | "(" s ")" | "ab""#;
    pub const UTF8: &str = r#"root ::= ( [^a-z\x00-\x1f"] | "é" "x"? )* "\"""#;
    pub const STRINGS: &str = r#"root ::= "[" item ( "," item )* "]"
item ::= "\"" [a-c]{0,5} "\"" | /[0-9]{1,3}(\.[0-9]+)?/"#;
    /// A length-bounded JSON string (a counting chain: no state loops), then a key.
    pub const BOUNDED: &str = r#"root ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] ){0,6} "\":1""#;
    /// A string that must contain three of `a`-`c` in a row (an unanchored `pattern`: no state loops,
    /// yet every character keeps the search alive).
    pub const SEARCH: &str = r#"root ::= "\"" [^"\\\x00-\x1f]* [a-c]{3} [^"\\\x00-\x1f]* "\"""#;
    /// Free text with two triggers (one of them shared by two tags), an excluded string, and a tag
    /// whose content is free text again up to the tag's end (nested dispatch).
    pub const DISPATCH: &str = r#"root ::= TagDispatch(("{\"", call), ("ab", "c" [0-9]+ ";"), ("ab", "x"), ("[1,", note), excludes=("xyz"))
call ::= "a\":" ("true" | "12") "}"
note ::= TagDispatch(stop_eos=false, stop_str=("],"), excludes=("{\"")) "\n""#;
    /// One tag at most, then a fixed tail; free text ends only at a stop string.
    pub const DISPATCH_ONCE: &str =
        r#"root ::= TagDispatch(("aa", "b" [0-9]), stop_eos=false, stop_str=("\n"), loop_after_dispatch=false) "!""#;
}
