//! JSON tool calls: call objects (streamed from their name on when their shape allows, else read
//! whole, or as far as they arrived when the output ends), and JSON arguments after a name, kept
//! as written when they break.

use serde_json::Value as Json;
use serde_json::value::RawValue;

use super::section::{CallFailure, Phase, Section};
use super::{MAX_NAME, Machine, State, Step, generated_id};
use crate::parse::scan::{leading_ws, marker_hold};
use crate::parse::syntax::ToolSyntax;
use crate::parse::{Delta, IssueKind, ParsedToolCall, SpanKind};
use crate::values::{JsonEnd, JsonScan, arguments_as_json, as_json_text};

impl Machine {
    /// A JSON call object, or an array of them, at `from`.
    pub(super) fn json_call(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        from: usize,
        mut scan: JsonEnd,
    ) -> Result<Step, CallFailure> {
        // Streamed when the object opens with its name, then its arguments object, unless
        // no marker opened it (bare JSON): then only a whole call object is a call.
        if let Some(fields) = tools.json.as_ref().filter(|f| streamable(f) && !tools.bare_json) {
            match json_head(&self.buf[from..], fields) {
                Head::Undecided if !self.eof => {
                    section.phase = Phase::JsonCall { from, scan };
                    return Ok(Step::Wait);
                }
                Head::Yes { start, name, args_at } => {
                    if section.trigger_at == from + start {
                        self.enter_section(section);
                    }
                    self.span(SpanKind::Whitespace, self.pos, from + start);
                    self.span(SpanKind::Marker, from + start, from + args_at);
                    self.pos = from + args_at;
                    section.committed = true;
                    self.begin_call(name, None);
                    section.phase = Phase::ArgsJson {
                        from: Some(from + args_at),
                        emitted: 0,
                        scan: arguments_scanner(tools),
                        object_from: Some(from + start),
                    };
                    return Ok(Step::Again);
                }
                _ => {}
            }
        }
        let status = scan.scan(&self.buf[from..], self.eof);
        match status {
            JsonScan::More => {
                if self.eof {
                    // Cut before the JSON closed: the calls whose name was read are kept,
                    // the last with what arrived of its arguments; with no name read,
                    // nothing was emitted, so it stays content.
                    let text = &self.buf[from..];
                    let start = from + leading_ws(text);
                    // Without a marker (bare JSON) only a whole call object is a call.
                    let cut = tools.json.as_ref().filter(|_| !tools.bare_json);
                    let Some((calls, last_cut)) = cut.and_then(|f| read_cut_json_calls(f, &self.buf[start..])) else {
                        return Err(CallFailure::CutJsonCall);
                    };
                    let end = self.buf.len();
                    self.commit_json_calls(section, start, end, calls);
                    self.issue(IssueKind::TruncatedCall, end, "the output ends inside a JSON tool call");
                    // The last call, unless the output was cut after it, before the next one's name.
                    self.cut_call = last_cut.then(|| self.message.tool_calls.len().saturating_sub(1));
                    return Ok(Step::Again);
                }
                section.phase = Phase::JsonCall { from, scan };
                Ok(Step::Wait)
            }
            JsonScan::Invalid(_) => Err(CallFailure::NotJson),
            JsonScan::End(end) => {
                let end = from + end;
                let start = from + leading_ws(&self.buf[from..end]);
                let calls = read_json_calls(tools, &self.buf[start..end]).ok_or(CallFailure::NotACall)?;
                self.commit_json_calls(section, start, end, calls);
                Ok(Step::Again)
            }
        }
    }

    /// The rest of a streamed JSON call object after its arguments (`broken`: where it stopped being
    /// JSON).
    pub(super) fn json_tail(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        from: usize,
        mut scan: JsonEnd,
        broken: Option<usize>,
    ) -> Result<Step, CallFailure> {
        match broken {
            None => match scan.scan(&self.buf[from..], self.eof) {
                JsonScan::End(n) => {
                    self.span(SpanKind::Marker, self.pos, from + n);
                    self.pos = from + n;
                    section.phase = Phase::CallEnd;
                    Ok(Step::Again)
                }
                JsonScan::More if !self.eof => {
                    section.phase = Phase::JsonTail { from, scan, broken: None };
                    Ok(Step::Wait)
                }
                JsonScan::More => {
                    // The object never closed. If a call end came after the arguments, the model
                    // went on past a broken object: the call ends there; else the output ended in it.
                    match self.first_call_end(tools, self.pos) {
                        Some(end) => Ok(self.end_broken_call_object(section, self.pos, end)),
                        None => {
                            let end = self.buf.len();
                            Ok(self.end_call_object_at_eof(
                                IssueKind::TruncatedCall,
                                end,
                                "the output ends inside a tool call object",
                            ))
                        }
                    }
                }
                JsonScan::Invalid(at) => {
                    section.phase = Phase::JsonTail { from, scan, broken: Some(from + at) };
                    Ok(Step::Again)
                }
            },
            // The first end marker after the arguments ends the call, even one the broken object
            // read as the inside of a string: past it the object was never closed.
            Some(at) => match self.first_call_end(tools, self.pos) {
                Some(end) => Ok(self.end_broken_call_object(section, at, end)),
                None if self.eof => Ok(self.end_call_object_at_eof(
                    IssueKind::MalformedCall,
                    at,
                    "the tool call object is not JSON from here",
                )),
                None => {
                    section.phase = Phase::JsonTail { from, scan, broken: Some(at) };
                    Ok(Step::Wait)
                }
            },
        }
    }

    /// JSON arguments after a call's name. Where the template writes Python literals
    /// (`ToolSyntax::python`), they are read at their end and given as JSON, so a stream holds
    /// them until then (deltas add up to the JSON, not to the text the model wrote).
    pub(super) fn args_json(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        (from, emitted, object_from): (Option<usize>, usize, Option<usize>),
        mut scan: JsonEnd,
    ) -> Result<Step, CallFailure> {
        let from = match from {
            Some(from) => from,
            None => {
                let rest = &self.buf[self.pos..];
                let trimmed = rest.trim_start();
                if trimmed.is_empty() {
                    if self.eof {
                        self.issue(IssueKind::TruncatedCall, self.pos, "the output ends before the call's arguments");
                        self.close_call();
                        self.state = State::Content;
                        return Ok(Step::Again);
                    }
                    section.phase = Phase::ArgsJson { from: None, emitted, scan, object_from };
                    return Ok(Step::Wait);
                }
                let start = self.pos + rest.len() - trimmed.len();
                self.span(SpanKind::Whitespace, self.pos, start);
                self.pos = start;
                start
            }
        };
        match scan.scan(&self.buf[from..], self.eof) {
            JsonScan::End(n) => {
                let end = from + n;
                let written = &self.buf[from + emitted..end];
                let fragment = if tools.python { arguments_as_json(written) } else { written.to_owned() };
                self.push_arguments(&fragment);
                self.span(SpanKind::ToolArguments, from, end);
                self.pos = end;
                section.calls += 1;
                section.phase = match object_from {
                    Some(object) => Phase::JsonTail { from: object, scan: call_object_scanner(tools), broken: None },
                    None => Phase::CallEnd,
                };
                Ok(Step::Again)
            }
            JsonScan::More => {
                let end = self.buf.len();
                // Trailing whitespace waits: should the arguments break at an end marker next, it
                // is not theirs (as it is not when the whole output is read at once).
                let upto = if self.eof {
                    end
                } else if tools.python {
                    from + emitted
                } else {
                    (from + self.buf[from..end].trim_end().len()).max(from + emitted)
                };
                let fragment = self.buf[from + emitted..upto].to_owned();
                self.push_arguments(&fragment);
                if self.eof {
                    self.span(SpanKind::ToolArguments, from, end);
                    self.pos = end;
                    self.issue(IssueKind::TruncatedCall, end, "the output ends inside the call's arguments");
                    self.close_call();
                    self.state = State::Content;
                    return Ok(Step::Again);
                }
                section.phase = Phase::ArgsJson { from: Some(from), emitted: upto - from, scan, object_from };
                Ok(Step::Wait)
            }
            JsonScan::Invalid(at) => {
                // Not JSON: the raw text up to the call end is the arguments, kept as written.
                section.phase = Phase::ArgsRaw { from, emitted, search: from + at };
                Ok(Step::Again)
            }
        }
    }

    /// Where the first call end or section end marker at or after `from` begins, if one has come.
    fn first_call_end(&mut self, tools: &ToolSyntax, from: usize) -> Option<usize> {
        call_ends(tools).filter_map(|m| self.search.find(&self.buf, from, m).map(|(at, _)| at)).min()
    }

    /// Ends a call whose object runs to the end of the output with no end marker: the rest is markup,
    /// reported as `kind` at `at`.
    fn end_call_object_at_eof(&mut self, kind: IssueKind, at: usize, message: &'static str) -> Step {
        let end = self.buf.len();
        self.span(SpanKind::Marker, self.pos, end);
        self.pos = end;
        self.issue(kind, at, message);
        self.close_call();
        self.state = State::Content;
        Step::Again
    }

    /// Ends a call whose object broke at `broken` (after its arguments were read) at the end marker
    /// found at `end`: the broken text is markup, the call is kept, and what follows is read as usual.
    fn end_broken_call_object(&mut self, section: &mut Section, broken: usize, end: usize) -> Step {
        let text_end = self.pos + self.buf[self.pos..end].trim_end().len();
        self.span(SpanKind::Marker, self.pos, text_end);
        self.span(SpanKind::Whitespace, text_end, end);
        self.pos = end;
        self.issue(
            IssueKind::MalformedCall,
            broken.min(end),
            "the tool call object is not JSON from here; it ends at its end marker",
        );
        section.phase = Phase::CallEnd;
        Step::Again
    }

    pub(super) fn args_raw(
        &mut self,
        tools: &ToolSyntax,
        section: &mut Section,
        (from, emitted, search): (usize, usize, usize),
    ) -> Result<Step, CallFailure> {
        let search_from = from + emitted;
        let look_from = search.max(search_from);
        let end = match self.first_call_end(tools, look_from) {
            Some(at) => at,
            None if self.eof => self.buf.len(),
            None => {
                let hold = call_ends(tools).map(|m| marker_hold(&self.buf[look_from..], m)).max().unwrap_or(0);
                // Trailing whitespace waits: at the end it is trimmed.
                let upto = search_from + self.buf[search_from..self.buf.len() - hold].trim_end().len();
                let fragment = self.buf[search_from..upto].to_owned();
                self.push_arguments(&fragment);
                section.phase = Phase::ArgsRaw { from, emitted: upto - from, search };
                return Ok(Step::Wait);
            }
        };
        let text = &self.buf[search_from..end];
        let fragment = text.trim_end().to_owned();
        self.push_arguments(&fragment);
        let args_end = search_from + fragment.len();
        self.span(SpanKind::ToolArguments, from, args_end);
        self.span(SpanKind::Whitespace, args_end, end);
        self.pos = end;
        section.calls += 1;
        section.phase = Phase::CallEnd;
        Ok(Step::Again)
    }

    /// Commits the JSON calls read from `start..end` (the whole value, or what arrived of it).
    fn commit_json_calls(&mut self, section: &mut Section, start: usize, end: usize, calls: Vec<JsonCall>) {
        if section.trigger_at == start {
            self.enter_section(section);
        }
        self.span(SpanKind::Whitespace, self.pos, start);
        self.span(SpanKind::ToolArguments, start, end);
        self.pos = end;
        section.committed = true;
        for call in calls {
            self.emit_json_call(call, start);
            section.calls += 1;
        }
        section.phase = Phase::CallEnd;
    }

    fn emit_json_call(&mut self, call: JsonCall, at: usize) {
        let index = self.message.tool_calls.len();
        let id_generated = call.id.is_none();
        let id = call.id.unwrap_or_else(|| generated_id(self.id_seed, index));
        self.check_tool(&call.name, at);
        if self.streaming {
            self.call_delta(Delta::ToolCallStart { index, id: id.clone(), name: call.name.clone() });
        }
        self.message.tool_calls.push(ParsedToolCall {
            index,
            id,
            id_generated,
            name: call.name,
            arguments: String::new(),
            arguments_value: None,
        });
        self.call = Some(index);
        self.push_arguments(&call.arguments);
        self.close_call();
    }
}

/// The markers that may end a call: its own end, then its section's end.
fn call_ends(tools: &ToolSyntax) -> impl Iterator<Item = &str> {
    [tools.call_end.as_str(), tools.section_end.as_str()].into_iter().filter(|m| !m.is_empty())
}

/// Whether JSON calls of these fields can stream: a flat object whose name comes first and whose
/// arguments are an object (ids, nesting and string arguments need the whole object).
fn streamable(fields: &crate::format::JsonCallFields) -> bool {
    fields.function.is_none()
        && fields.id.is_none()
        && !fields.array
        && !fields.arguments_as_string
        && !fields.name.is_empty()
}

/// The scanner of a call's JSON arguments. Arguments that a call end marker closes are checked as
/// JSON as they come, so broken JSON goes on as raw text up to that marker (and does not swallow
/// it); without one, only the brackets can say where the arguments end.
pub(super) fn arguments_scanner(tools: &ToolSyntax) -> JsonEnd {
    let scan = if tools.call_end.trim().is_empty() { JsonEnd::default() } else { JsonEnd::strict() };
    scan.python(tools.python)
}

/// The scanner of a whole JSON call object (or array of them), checked as it comes.
pub(super) fn call_object_scanner(tools: &ToolSyntax) -> JsonEnd {
    JsonEnd::strict().python(tools.python)
}

/// How the start of a JSON call object reads.
enum Head {
    /// `{"name": "f", "arguments": ` then `{` or `[`: the name, where the object starts and where its
    /// arguments start.
    Yes { start: usize, name: String, args_at: usize },
    /// Not that shape (other key order, string arguments, not an object).
    No,
    /// A prefix of that shape.
    Undecided,
}

fn json_head(text: &str, fields: &crate::format::JsonCallFields) -> Head {
    match read_head(text, fields) {
        Ok((start, name, args_at)) => Head::Yes { start, name, args_at },
        Err(head) => head,
    }
}

/// `{"<name key>": "<name>", "<arguments key>": ` then `{`: (object start, name, arguments start).
fn read_head(text: &str, fields: &crate::format::JsonCallFields) -> Result<(usize, String, usize), Head> {
    let b = text.as_bytes();
    let ws = |i: usize| i + b[i.min(b.len())..].iter().take_while(|c| c.is_ascii_whitespace()).count();
    // The byte `want` after optional whitespace: the index after it.
    let punct = |i: usize, want: u8| -> Result<usize, Head> {
        let i = ws(i);
        match b.get(i) {
            None => Err(Head::Undecided),
            Some(&c) if c == want => Ok(i + 1),
            Some(_) => Err(Head::No),
        }
    };
    // A JSON string after optional whitespace: its decoded text and the index after it.
    let string = |i: usize| -> Result<(String, usize), Head> {
        let i = ws(i);
        match b.get(i) {
            None => return Err(Head::Undecided),
            Some(b'"') => {}
            Some(_) => return Err(Head::No),
        }
        let mut escape = false;
        for j in i + 1..b.len().min(i + 1 + MAX_NAME) {
            match b[j] {
                _ if escape => escape = false,
                b'\\' => escape = true,
                b'"' => return serde_json::from_str(&text[i..=j]).map(|s| (s, j + 1)).map_err(|_| Head::No),
                _ => {}
            }
        }
        Err(if b.len() > i + MAX_NAME { Head::No } else { Head::Undecided })
    };
    let start = ws(0);
    let i = punct(start, b'{')?;
    let (key, i) = string(i)?;
    if key != fields.name {
        return Err(Head::No);
    }
    let i = punct(i, b':')?;
    let (name, i) = string(i)?;
    let i = punct(i, b',')?;
    let (key, i) = string(i)?;
    if !argument_keys(fields).any(|k| k == key) {
        return Err(Head::No);
    }
    let args_at = ws(punct(i, b':')?);
    match b.get(args_at) {
        None => Err(Head::Undecided),
        Some(b'{') if !name.is_empty() => Ok((start, name, args_at)),
        Some(_) => Err(Head::No),
    }
}

struct JsonCall {
    name: String,
    id: Option<String>,
    arguments: String,
}

/// Reads JSON call objects (one, or an array of them) with the arguments as the exact text written.
fn read_json_calls(tools: &ToolSyntax, text: &str) -> Option<Vec<JsonCall>> {
    let fields = tools.json.as_ref()?;
    // Python literals, where the template writes them, are read as the JSON they stand for.
    let converted = if tools.python { Some(as_json_text(text, true)?) } else { None };
    let text = converted.as_deref().unwrap_or(text);
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let items: Vec<&RawValue> = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok()?
    } else {
        vec![raw]
    };
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        calls.push(read_json_call(fields, item, 0)?);
    }
    (!calls.is_empty()).then_some(calls)
}

/// Reads JSON call objects (one, or an array of them) from text cut before the value closed: the
/// whole calls, then the cut one when its name was read, with its arguments as far as they arrived
/// (empty when they had not begun), and whether the last call is that cut one. `None` when no
/// call's name was read. The cut object is read flat (name, id and arguments keys at its top level).
fn read_cut_json_calls(fields: &crate::format::JsonCallFields, text: &str) -> Option<(Vec<JsonCall>, bool)> {
    let mut calls = Vec::new();
    let mut rest = text.trim_start();
    if let Some(items) = rest.strip_prefix('[') {
        rest = items;
        loop {
            rest = rest.trim_start();
            let mut scan = JsonEnd::default();
            match scan.scan(rest, false) {
                JsonScan::End(n) => {
                    let item: &RawValue = serde_json::from_str(&rest[..n]).ok()?;
                    calls.push(read_json_call(fields, item, 0)?);
                    rest = rest[n..].trim_start();
                    rest = rest.strip_prefix(',')?;
                }
                JsonScan::More => break,
                JsonScan::Invalid(_) => return None,
            }
        }
    }
    let cut = read_cut_object(rest);
    let string =
        |key: &str| cut.iter().find(|(k, _)| k == key).and_then(|(_, v)| serde_json::from_str::<String>(v).ok());
    let name = name_keys(fields).find_map(string);
    match name.filter(|n| !n.is_empty()) {
        Some(name) => {
            let arguments = argument_keys(fields)
                .find_map(|k| cut.iter().find(|(key, _)| key == k))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let id = id_keys(fields).find_map(string);
            calls.push(JsonCall { name, id, arguments });
            Some((calls, true))
        }
        None if calls.is_empty() => None,
        None => Some((calls, false)),
    }
}

/// The members of a JSON object cut short, in order: `(key, raw value)`, the last value possibly
/// cut (its text so far); members whose key is cut are left out.
fn read_cut_object(text: &str) -> Vec<(String, String)> {
    let mut members = Vec::new();
    let Some(mut rest) = text.trim_start().strip_prefix('{') else { return members };
    loop {
        rest = rest.trim_start();
        let mut scan = JsonEnd::default();
        let JsonScan::End(n) = scan.scan(rest, false) else { return members };
        let Ok(key) = serde_json::from_str::<String>(&rest[..n]) else { return members };
        let Some(after) = rest[n..].trim_start().strip_prefix(':') else { return members };
        let value = after.trim_start();
        let mut scan = JsonEnd::default();
        match scan.scan(value, false) {
            JsonScan::End(n) => {
                members.push((key, value[..n].to_owned()));
                match value[n..].trim_start().strip_prefix(',') {
                    Some(next) => rest = next,
                    None => return members,
                }
            }
            JsonScan::More => {
                members.push((key, value.to_owned()));
                return members;
            }
            JsonScan::Invalid(_) => return members,
        }
    }
}

fn read_json_call(fields: &crate::format::JsonCallFields, item: &RawValue, depth: usize) -> Option<JsonCall> {
    let object: indexmap::IndexMap<String, &RawValue> = serde_json::from_str(item.get()).ok()?;
    // Nested `{"type": "function", "function": {...}}`.
    if let Some(inner) = fields.function.as_deref().or(Some("function")).and_then(|k| object.get(k))
        && depth == 0
        && inner.get().trim_start().starts_with('{')
        && let Some(mut call) = read_json_call(fields, inner, depth + 1)
    {
        if call.id.is_none() {
            call.id = object.get("id").and_then(|v| serde_json::from_str::<String>(v.get()).ok());
        }
        return Some(call);
    }
    if fields.name.is_empty() && object.len() == 1 {
        // Name as the key: `{"get_weather": {"city": "Paris"}}`.
        let (name, args) = object.iter().next()?;
        let arguments = args.get().to_owned();
        return args.get().trim_start().starts_with('{').then(|| JsonCall { name: name.clone(), id: None, arguments });
    }
    let string = |k: &str| object.get(k).and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    let name = name_keys(fields).find_map(|k| object.get(k)).and_then(|v| serde_json::from_str::<String>(v.get()).ok());
    let name = name.filter(|n| !n.is_empty())?;
    let args = argument_keys(fields).find_map(|k| object.get(k));
    let arguments = match args {
        None => "{}".to_owned(),
        Some(raw) => {
            let text = raw.get();
            // Arguments as a JSON string holding the object: the string's text is the arguments.
            match serde_json::from_str::<String>(text) {
                Ok(inner) if serde_json::from_str::<Json>(&inner).is_ok() => inner,
                _ => text.to_owned(),
            }
        }
    };
    let id = id_keys(fields).find_map(string);
    Some(JsonCall { name, id, arguments })
}

/// Keys a call object's name may sit under: the Format's, then `name`.
fn name_keys(fields: &crate::format::JsonCallFields) -> impl Iterator<Item = &str> {
    [fields.name.as_str(), "name"].into_iter().filter(|k| !k.is_empty())
}

/// Keys a call object's arguments may sit under: the Format's, then the common spellings.
fn argument_keys(fields: &crate::format::JsonCallFields) -> impl Iterator<Item = &str> {
    [fields.arguments.as_str(), "arguments", "parameters"].into_iter().filter(|k| !k.is_empty())
}

/// Keys a call object's id may sit under: the Format's, then the common spellings.
fn id_keys(fields: &crate::format::JsonCallFields) -> impl Iterator<Item = &str> {
    [fields.id.as_deref().unwrap_or("id"), "id", "tool_call_id", "call_id"].into_iter()
}
