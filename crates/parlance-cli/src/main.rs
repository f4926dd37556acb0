//! `parlance`: the command line over the parlance libraries.
//!
//! Each subcommand parses its arguments, makes one library call and prints the result; errors go
//! to stderr with their causes and exit status 1. The command-line contract is in `DESIGN.md`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

mod bench_grammar;
mod bench_parse;
mod bench_tools;
mod constrain;
use clap::{Parser, Subcommand};
use parlance::{ChatTemplate, RenderRequest, Tokenizer};

// Templates are untrusted code: the guard lets renders be bounded in memory (see
// `parlance::template::memory`).
#[global_allocator]
static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;

#[derive(Parser)]
#[command(name = "parlance", version, about = "Chat templates, model output and constrained decoding, in one engine")]
struct Cli {
    /// Largest input file (template, config, conversation, tools, workload) or stdin, in bytes;
    /// a larger one is refused before it is read.
    #[arg(long, global = true, default_value_t = 256 << 20)]
    max_input_bytes: u64,
    #[command(subcommand)]
    command: Command,
}

/// A text input file within `--max-input-bytes` (its size is checked before reading).
pub(crate) fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    Ok(parlance::template::read_input_file(path)?)
}

/// Standard input within `--max-input-bytes`.
pub(crate) fn read_stdin() -> anyhow::Result<Vec<u8>> {
    use std::io::Read as _;
    let max = parlance::template::max_input_file_bytes();
    let mut bytes = Vec::new();
    std::io::stdin().take(max.saturating_add(1)).read_to_end(&mut bytes).context("reading stdin")?;
    if bytes.len() as u64 > max {
        bail!("stdin: above the input limit of {max} bytes (raise it with --max-input-bytes)");
    }
    Ok(bytes)
}

#[derive(Subcommand)]
enum Command {
    /// Render a conversation through a chat template, exactly as transformers' apply_chat_template.
    Render(RenderArgs),
    /// Analyze a chat template: its reasoning, content and tool-call syntax (the `Format`).
    Analyze(AnalyzeArgs),
    /// Parse model output (stdin) into reasoning / content / tool calls (JSON on stdout).
    Parse(ParseArgs),
    /// Check the parse-render roundtrip of a template (prefix-cache breaks) and its token bridge.
    Roundtrip(RoundtripArgs),
    /// Evaluate parlance against test cases.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Print the grammar a template's Format gives a request (structural tag or EBNF), or check an
    /// output against it.
    Constrain(constrain::ConstrainArgs),
    /// Measure parlance on engine-neutral workloads (`shared/bench/workloads`).
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Constrained decoding on W1 (JSON Schemas), W2 or W3 (tool calls), measured as the peers' runner does.
    Grammar(BenchGrammarArgs),
    /// Whole and streamed parsing of hostile outputs made from a template's markers, at sizes
    /// growing tenfold: throughput and growth (1 = linear).
    Parse(BenchParseArgs),
}

#[derive(clap::Args)]
struct BenchParseArgs {
    /// A `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    #[arg(long)]
    template: PathBuf,
    /// Smallest output, in bytes.
    #[arg(long, default_value_t = 1_000)]
    min_bytes: usize,
    /// Largest output, in bytes.
    #[arg(long, default_value_t = 10_000_000)]
    max_bytes: usize,
    /// Streamed parsing pushes chunks of this many bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    chunk: u32,
    /// A generator stops growing once one parse takes longer than this many seconds.
    #[arg(long, default_value_t = 10.0)]
    budget_seconds: f64,
    /// Only generators whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// One JSON object per generator instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct BenchGrammarArgs {
    /// The workload (`w1_maskbench_subset.jsonl`, `w2_toolcall_llama.json`, `w3_toolcall_harmony.json`).
    #[arg(long)]
    workload: PathBuf,
    /// A `tokenizer.json` (or its folder); EOS from the `tokenizer_config.json` beside it.
    #[arg(long)]
    tokenizer: PathBuf,
    /// Result file (the runner's shape: `meta`, `summary`, `items`).
    #[arg(long)]
    out: PathBuf,
    /// The EOS token, instead of the tokenizer config's `eos_token` (W3: `<|endoftext|>`, since gpt-oss's
    /// config names `<|return|>`, a token the Harmony grammar itself writes).
    #[arg(long)]
    eos: Option<String>,
    /// Only the first N items (after `--stride`).
    #[arg(long)]
    limit: Option<usize>,
    /// Every K-th item.
    #[arg(long, default_value_t = 1)]
    stride: usize,
    /// Compact JSON (no whitespace) instead of flexible whitespace (llguidance's default).
    #[arg(long)]
    compact: bool,
    /// Report unsupported keywords instead of failing to compile.
    #[arg(long)]
    lenient: bool,
    /// W2/W3: derive each request's grammar from this chat template's Format (`parlance constrain`:
    /// tools, `tool_choice: auto`, the template's default reasoning state) instead of the
    /// workload's own structural tag; TTFM then includes deriving it.
    #[arg(long)]
    template: Option<PathBuf>,
    /// Threads one compile may use (`Limits::compile_threads`). Default 1: the peers' runner measures
    /// them single-threaded (XGrammar with `max_threads=1`), and so is parlance measured beside them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    compile_threads: u16,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Run parse cases (`corpus/parse` format): one JSON line per case, then a summary line.
    Parse(EvalParseArgs),
}

#[derive(clap::Args)]
struct ParseArgs {
    /// A `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    #[arg(long)]
    template: PathBuf,
    /// The request's tools: a JSON array of OpenAI tool definitions (or `{"tools": [...]}`).
    #[arg(long)]
    tools: Option<PathBuf>,
    /// The request's `tool_choice`: `auto`, `none`, `required`, a function name, or an OpenAI
    /// `tool_choice` object as JSON (`{"type": "allowed_tools", …}`).
    #[arg(long, default_value = "auto")]
    tool_choice: String,
    /// Whether the request switched thinking on or off (picks the generation prompt that decides
    /// whether output starts inside reasoning); default: the template's default prompt.
    #[arg(long, value_parser = ["on", "off"])]
    thinking: Option<String>,
    /// Stream the input in chunks of N bytes (at character boundaries) as it arrives on stdin,
    /// writing each delta out as the parser makes it (the message's `deltas`, first).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    chunk: Option<u32>,
    /// Seed of the ids of calls the model wrote without one (default: fresh ids on every run).
    #[arg(long, value_name = "SEED")]
    id_seed: Option<u64>,
    /// What becomes of a call the output ends inside: kept with what arrived, or dropped (its text
    /// stays in the spans, its issue in the issues).
    #[arg(long, value_parser = ["keep", "drop"], default_value = "keep")]
    truncated_calls: String,
    /// Template variable set on every probe render, `NAME=VALUE`.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
}

#[derive(clap::Args)]
struct RoundtripArgs {
    /// A `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    #[arg(long)]
    template: PathBuf,
    /// A `tokenizer.json` (or its folder): token-level checks and the bridge sessions.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Number of simulated multi-turn sessions for the bridge.
    #[arg(long, default_value_t = 64)]
    sessions: usize,
    /// Seed of the sessions and of generated ids.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Template variable set on every render, `NAME=VALUE` (VALUE as JSON when it parses).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct EvalParseArgs {
    /// Case files (`.jsonl`).
    #[arg(long, required = true, num_args = 1..)]
    cases: Vec<PathBuf>,
    /// Folder of `<id>.jinja` templates (default: `../templates` beside the first case file).
    #[arg(long)]
    templates: Option<PathBuf>,
    /// Template map (default: `template_map.json` beside the first case file, if present).
    #[arg(long = "template-map")]
    template_map: Option<PathBuf>,
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// A `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    #[arg(long)]
    template: PathBuf,
    /// Template variable set on every probe render, `NAME=VALUE` (VALUE as JSON when it parses).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// Print the Format as JSON instead of a summary.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct RenderArgs {
    /// A `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    #[arg(long)]
    template: PathBuf,
    /// The conversation: `{"messages", "tools", "documents", "kwargs", "add_generation_prompt",
    /// "continue_final_message"}`.
    #[arg(long)]
    conversation: PathBuf,
    /// Extra template variable, `NAME=VALUE`; VALUE is read as JSON when it parses (`true`, `3`,
    /// `"x"`, `[..]`), else as a string. Repeatable; overrides the conversation's kwargs.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// The time `strftime_now` reports, e.g. `2025-01-15T12:00:00` (default: the local time).
    #[arg(long)]
    now: Option<String>,
    /// Choose a named template of a `tokenizer_config.json` holding several (default: `tool_use`
    /// when tools are given and it exists, else `default`).
    #[arg(long = "template-name")]
    template_name: Option<String>,
    /// A `tokenizer.json` (or a folder holding one), for `--ids`.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Print the token ids of the rendered prompt (a JSON array) instead of the text.
    #[arg(long, requires = "tokenizer")]
    ids: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    parlance::template::set_max_input_file_bytes(cli.max_input_bytes);
    let result = match cli.command {
        Command::Render(args) => render(args),
        Command::Analyze(args) => analyze(args),
        Command::Parse(args) => parse(args),
        Command::Roundtrip(args) => roundtrip(args),
        Command::Eval(EvalCommand::Parse(args)) => eval_parse(args),
        Command::Bench(BenchCommand::Grammar(args)) => bench_grammar(args),
        Command::Bench(BenchCommand::Parse(args)) => bench_parse(args),
        Command::Constrain(args) => constrain::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("parlance: {}", error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-joined, leaving out a cause whose text is already said (library
/// errors that quote their source, such as `path: os error`, would otherwise print it twice).
fn error_chain(err: &anyhow::Error) -> String {
    let mut said = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if said.contains(&text) {
            continue;
        }
        if !said.is_empty() {
            said.push_str(": ");
        }
        said.push_str(&text);
    }
    said
}

/// `NAME=VALUE` pairs; VALUE is JSON when it parses, else a string.
pub(crate) fn parse_vars(vars: &[String]) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
    let mut parsed = Vec::new();
    for var in vars {
        let Some((name, value)) = var.split_once('=') else {
            bail!("--var {var:?}: expected NAME=VALUE");
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        parsed.push((name.to_owned(), value));
    }
    Ok(parsed)
}

/// The template at `path` and its Format, every probe rendered with `vars` (`NAME=VALUE`).
pub(crate) fn analyzed(path: &std::path::Path, vars: &[String]) -> anyhow::Result<(ChatTemplate, parlance::Format)> {
    let template = ChatTemplate::from_path(path).context("loading the template")?;
    let mut options = parlance::AnalyzeOptions::default();
    options.variables.extend(parse_vars(vars)?);
    let format = parlance::analyze(&template, &options)?;
    Ok((template, format))
}

fn analyze(args: AnalyzeArgs) -> anyhow::Result<()> {
    let (_, format) = analyzed(&args.template, &args.vars)?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&format)?)?;
    } else {
        write!(stdout, "{}", format.summary())?;
    }
    Ok(())
}

fn roundtrip(args: RoundtripArgs) -> anyhow::Result<()> {
    let template = ChatTemplate::from_path(&args.template).context("loading the template")?;
    let variables = parse_vars(&args.vars)?;
    let mut analyze_options = parlance::AnalyzeOptions::default();
    analyze_options.variables.extend(variables.iter().cloned());
    let format = parlance::analyze(&template, &analyze_options)?;
    let tokenizer = args.tokenizer.as_ref().map(Tokenizer::from_path).transpose()?.map(std::sync::Arc::new);
    let options = parlance::RoundtripOptions {
        variables: variables.into_iter().collect(),
        sessions: args.sessions,
        seed: args.seed,
        ..parlance::RoundtripOptions::default()
    };
    let report = parlance::roundtrip::run(&template, &format, tokenizer.as_ref(), &options);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "ok",
        Some(false) => "BREAK",
        None => "-",
    };
    writeln!(stdout, "template: {}", report.template)?;
    writeln!(stdout, "{:<28} {:<6} {:<6} {:<24} first divergence / note", "scenario", "string", "tokens", "cause")?;
    for result in &report.scenarios {
        let cause = result.cause.map(|c| serde_json::to_value(c).ok().and_then(|v| v.as_str().map(str::to_owned)));
        let detail = match &result.first_divergence {
            Some(d) => format!(
                "byte {}{}: {:?} then {:?} became {:?}",
                d.byte,
                d.token.map(|t| format!(" token {t}")).unwrap_or_default(),
                d.before,
                d.expected,
                d.actual
            ),
            None => result.note.clone(),
        };
        writeln!(
            stdout,
            "{:<28} {:<6} {:<6} {:<24} {detail}",
            result.scenario,
            verdict(result.string_prefix_ok),
            verdict(result.token_prefix_ok),
            cause.flatten().unwrap_or_default(),
        )?;
    }
    match (&report.bridge, &report.bridge_error) {
        (Some(b), _) => writeln!(
            stdout,
            "bridge: {} sessions ({} transitions): re-render breaks {} ({} transitions, {:?}), bridge breaks {}, bridge = re-render {}/{}{}",
            b.sessions,
            b.transitions,
            b.rerender_breaks,
            b.rerender_break_transitions,
            b.rerender_causes,
            b.bridge_breaks,
            b.bridge_equals_rerender,
            b.compared,
            b.first_problem.as_ref().map(|p| format!("; {p}")).unwrap_or_default()
        )?,
        (None, Some(why)) => writeln!(stdout, "bridge: none ({why})")?,
        (None, None) => {}
    }
    Ok(())
}

fn render(args: RenderArgs) -> anyhow::Result<()> {
    let template = ChatTemplate::from_path(&args.template).context("loading the template")?;
    let request = RenderRequest::from_path(&args.conversation).context("reading the conversation")?;
    let (conversation, mut options) = request.into_parts()?;
    options.variables.extend(parse_vars(&args.vars)?);
    if let Some(now) = &args.now {
        let parsed = chrono::NaiveDateTime::parse_from_str(now, "%Y-%m-%dT%H:%M:%S")
            .or_else(|_| chrono::NaiveDateTime::parse_from_str(now, "%Y-%m-%d %H:%M:%S"))
            .with_context(|| format!("--now {now:?}: expected YYYY-MM-DDTHH:MM:SS"))?;
        options.now = Some(parsed);
    }
    options.template_name = args.template_name;
    let prompt = template.render(&conversation, &options)?;
    let mut stdout = std::io::stdout().lock();
    if args.ids {
        let path = args.tokenizer.expect("clap requires --tokenizer with --ids");
        let tokenizer = Tokenizer::from_path(&path)?;
        let ids = tokenizer.encode_rendered(&prompt)?;
        writeln!(stdout, "{}", serde_json::to_string(&ids)?)?;
    } else {
        stdout.write_all(prompt.as_bytes())?;
    }
    stdout.flush()?;
    Ok(())
}

/// The request as `parse` and `constrain` read it: tools from a file (`[...]` or `{"tools": [...]}`),
/// the `tool_choice` (a keyword, a function name or an OpenAI object as JSON), and thinking on or
/// off, which picks the generation prompt that decides whether the output starts inside reasoning.
pub(crate) fn request_options(
    format: &parlance::Format,
    tools: Option<&std::path::Path>,
    tool_choice: &str,
    thinking: Option<&str>,
) -> anyhow::Result<parlance::ParseOptions> {
    let mut options = parlance::ParseOptions::default();
    let choice = tool_choice.trim();
    options.tool_choice = if choice.starts_with('{') {
        let value: serde_json::Value = serde_json::from_str(choice).context("--tool-choice: not JSON")?;
        parlance::parse::ToolChoice::from_openai(&value).map_err(anyhow::Error::msg)?
    } else {
        parlance::parse::ToolChoice::from_name(choice)
    };
    if let Some(path) = tools {
        let text = read_input(path)?;
        let json: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let tools = json.get("tools").cloned().unwrap_or(json);
        let Some(tools) = tools.as_array() else { bail!("{}: expected a JSON array of tools", path.display()) };
        options.tools = tools.clone();
    }
    Ok(options.with_thinking(format, thinking.map(|t| t == "on")))
}

fn parse(args: ParseArgs) -> anyhow::Result<()> {
    let (_, format) = analyzed(&args.template, &args.vars)?;
    let mut options = request_options(&format, args.tools.as_deref(), &args.tool_choice, args.thinking.as_deref())?;
    options.id_seed = args.id_seed;
    if args.truncated_calls == "drop" {
        options.truncated_calls = parlance::TruncatedCalls::Drop;
    }
    let parser = parlance::Parser::new(&format, &options);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let message = match args.chunk {
        Some(n) => {
            // Deltas go out as they come (a stream of 18 MB in 1-byte chunks makes millions):
            // the document opens with them and the message follows once the input has ended.
            write!(out, "{{\n  \"deltas\": [")?;
            let mut stream = parser.stream();
            let mut first = true;
            let mut write_deltas =
                |out: &mut std::io::BufWriter<_>, deltas: Vec<parlance::Delta>| -> anyhow::Result<()> {
                    for delta in deltas {
                        write!(
                            out,
                            "{}\n    {}",
                            if first { "" } else { "," },
                            serde_json::to_string(&delta.to_openai())?
                        )?;
                        first = false;
                    }
                    Ok(())
                };
            for_each_stdin_chunk(n as usize, |chunk| write_deltas(&mut out, stream.push(chunk)))?;
            write_deltas(&mut out, stream.finish())?;
            write!(out, "\n  ],")?;
            stream.message()
        }
        None => {
            let input = String::from_utf8(read_stdin()?).context("stdin is not UTF-8")?;
            write!(out, "{{")?;
            parser.parse(&input)
        }
    };
    // The message's fields, pretty, inside the object opened above, written as they serialize
    // (a Value tree of millions of spans would cost gigabytes).
    let body = ParseOutput {
        role: "assistant",
        content: &message.content,
        reasoning_content: &message.reasoning_content,
        tool_calls: message
            .tool_calls
            .iter()
            .map(|c| WireCall {
                index: c.index,
                id: &c.id,
                kind: "function",
                function: WireFunction { name: &c.name, arguments: &c.arguments },
            })
            .collect(),
        truncated_reasoning: message.truncated_reasoning,
        issues: &message.issues,
        spans: &message.spans,
    };
    serde_json::to_writer_pretty(SkipFirstByte { inner: &mut out, skipped: false }, &body)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// `parse`'s output: the message in the OpenAI shape, with the parser's issues and spans.
#[derive(serde::Serialize)]
struct ParseOutput<'a> {
    role: &'static str,
    content: &'a Option<String>,
    reasoning_content: &'a Option<String>,
    tool_calls: Vec<WireCall<'a>>,
    truncated_reasoning: bool,
    issues: &'a [parlance::parse::Issue],
    spans: &'a [parlance::parse::Span],
}

#[derive(serde::Serialize)]
struct WireCall<'a> {
    index: usize,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(serde::Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// A writer that drops the first byte written to it: an object's `{` when its fields continue an
/// object already opened.
struct SkipFirstByte<W> {
    inner: W,
    skipped: bool,
}

impl<W: std::io::Write> std::io::Write for SkipFirstByte<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.skipped && !buf.is_empty() {
            self.skipped = true;
            return self.inner.write(&buf[1..]).map(|n| n + 1);
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Reads stdin as it arrives (within `--max-input-bytes`) and hands it on in pieces of `n` bytes,
/// each cut at a character boundary.
fn for_each_stdin_chunk(n: usize, mut push: impl FnMut(&str) -> anyhow::Result<()>) -> anyhow::Result<()> {
    use std::io::Read as _;
    let max = parlance::template::max_input_file_bytes();
    let mut stdin = std::io::stdin().lock();
    let mut block = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    loop {
        let read = match stdin.read(&mut block) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err).context("reading stdin"),
        };
        total += read as u64;
        if total > max {
            bail!("stdin: above the input limit of {max} bytes (raise it with --max-input-bytes)");
        }
        pending.extend_from_slice(&block[..read]);
        // Whole characters go on; a character cut by the read waits for the rest of it.
        let valid = match std::str::from_utf8(&pending) {
            Ok(text) => text.len(),
            Err(err) if err.error_len().is_none() => err.valid_up_to(),
            Err(err) => bail!("stdin is not UTF-8 at byte {}", total as usize - pending.len() + err.valid_up_to()),
        };
        let text = std::str::from_utf8(&pending[..valid]).expect("checked above");
        let mut rest = text;
        while !rest.is_empty() {
            let mut cut = n.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            push(&rest[..cut])?;
            rest = &rest[cut..];
        }
        pending.drain(..valid);
    }
    if !pending.is_empty() {
        bail!("stdin is not UTF-8: it ends inside a character");
    }
    Ok(())
}

fn eval_parse(args: EvalParseArgs) -> anyhow::Result<()> {
    use parlance_eval::{EvalSetup, Evaluator, Status};
    let first_dir = args.cases[0].parent().map(PathBuf::from).unwrap_or_default();
    let templates = args.templates.unwrap_or_else(|| first_dir.join("../templates"));
    let map = args.template_map.or_else(|| Some(first_dir.join("template_map.json")).filter(|p| p.exists()));
    let setup = EvalSetup::with_template_map(templates, map.as_deref()).map_err(anyhow::Error::msg)?;
    let mut evaluator = Evaluator::new(setup);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let (mut quirk_passed, mut quirk_failed) = (0, 0);
    let mut stdout = std::io::stdout().lock();
    for path in &args.cases {
        let text = read_input(path)?;
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let case: serde_json::Value =
                serde_json::from_str(line).with_context(|| format!("{}:{}: not JSON", path.display(), n + 1))?;
            let quirk = case["quirk"] == true;
            let (result, status) = evaluator.run(&case);
            writeln!(stdout, "{result}")?;
            match (status, quirk) {
                (Status::Skip(_), _) => skipped += 1,
                (Status::Pass, false) => passed += 1,
                (Status::Fail(_), false) => failed += 1,
                (Status::Pass, true) => quirk_passed += 1,
                (Status::Fail(_), true) => quirk_failed += 1,
            }
        }
    }
    // The summary is the last line; cases marked `quirk` (a peer's deliberate deviation) are counted apart.
    writeln!(stdout, "quirk cases (apart): {quirk_passed} passed, {quirk_failed} failed")?;
    writeln!(stdout, "{passed} passed, {failed} failed, {skipped} skipped")?;
    Ok(())
}

fn bench_parse(args: BenchParseArgs) -> anyhow::Result<()> {
    let (_, format) = analyzed(&args.template, &[])?;
    let request = bench_parse::Request {
        format: &format,
        min_bytes: args.min_bytes,
        max_bytes: args.max_bytes,
        chunk: args.chunk as usize,
        budget: std::time::Duration::from_secs_f64(args.budget_seconds.max(0.0)),
        only: args.only.as_deref(),
    };
    let mut stdout = std::io::stdout().lock();
    if !args.json {
        writeln!(
            stdout,
            "{:<48} {:>10} {:>12} {:>12} {:>7}",
            "generator", "bytes", "whole MB/s", "stream MB/s", "growth"
        )?;
    }
    let mut failed = None;
    let rows = bench_parse::run(&request, |row| {
        let line = if args.json {
            row.to_json().to_string()
        } else {
            let last = row.points.last();
            format!(
                "{:<48} {:>10} {:>12.1} {:>12.1} {:>7.2}{}",
                row.generator.escape_debug().to_string(),
                last.map_or(0, |p| p.bytes),
                last.map_or(0.0, |p| p.whole_mb_s),
                last.map_or(0.0, |p| p.stream_mb_s),
                row.growth,
                if row.stopped_at.is_some() { "  (over budget: stopped)" } else { "" },
            )
        };
        if let Err(e) = writeln!(stdout, "{line}") {
            failed.get_or_insert(e);
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    if !args.json {
        let slowest = rows
            .iter()
            .filter_map(|r| r.points.last())
            .map(|p| p.whole_mb_s.min(p.stream_mb_s))
            .fold(f64::INFINITY, f64::min);
        let growth = rows.iter().map(|r| r.growth).fold(1.0, f64::max);
        writeln!(
            stdout,
            "{} generators; slowest at its largest size: {slowest:.1} MB/s; worst growth: {growth:.2}",
            rows.len()
        )?;
    }
    Ok(())
}

fn bench_grammar(args: BenchGrammarArgs) -> anyhow::Result<()> {
    let request = bench_grammar::Request {
        workload: &args.workload,
        tokenizer: &args.tokenizer,
        out: &args.out,
        eos: args.eos.as_deref(),
        limit: args.limit,
        stride: args.stride,
        compact: args.compact,
        lenient: args.lenient,
        template: args.template.as_deref(),
        compile_threads: usize::from(args.compile_threads),
    };
    let summary = bench_grammar::run(&request)?;
    writeln!(std::io::stdout().lock(), "{}", serde_json::to_string_pretty(&summary)?)?;
    Ok(())
}
