//! `parlance`: the command line over the parlance libraries.
//!
//! Each subcommand parses its arguments, makes one library call and prints the result; errors go
//! to stderr with their causes and exit status 1. The command-line contract is in `DESIGN.md`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use parlance::{ChatTemplate, RenderRequest, Tokenizer};

// Templates are untrusted code: the guard lets renders be bounded in memory (see
// `parlance::template::memory`).
#[global_allocator]
static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;

#[derive(Parser)]
#[command(name = "parlance", version, about = "Chat templates, model output and constrained decoding, in one engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Render a conversation through a chat template, exactly as transformers' apply_chat_template.
    Render(RenderArgs),
    /// Analyze a chat template: its reasoning, content and tool-call syntax (the `Format`).
    Analyze(AnalyzeArgs),
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
    let result = match cli.command {
        Command::Render(args) => render(args),
        Command::Analyze(args) => analyze(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("parlance: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `NAME=VALUE` pairs; VALUE is JSON when it parses, else a string.
fn parse_vars(vars: &[String]) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
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

fn analyze(args: AnalyzeArgs) -> anyhow::Result<()> {
    let template = ChatTemplate::from_path(&args.template).context("loading the template")?;
    let mut options = parlance::AnalyzeOptions::default();
    options.variables.extend(parse_vars(&args.vars)?);
    let format = parlance::analyze(&template, &options)?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&format)?)?;
    } else {
        write!(stdout, "{}", format.summary())?;
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
