//! `parlance constrain`: the grammar a template's Format gives a request, printed as an XGrammar
//! structural tag or EBNF, or an output checked against it (`--check`).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use parlance_grammar::{CompiledGrammar, Matcher, TokenVocab};

/// The artifact `parlance constrain` prints.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Emit {
    /// An XGrammar structural tag (vLLM's and SGLang's `response_format`).
    StructuralTag,
    /// The grammar as EBNF text.
    Ebnf,
    /// A Hugging Face `response_template` (transformers' `parse_response`; the request's tools and
    /// choices do not change it).
    ResponseTemplate,
}

#[derive(clap::Args)]
pub struct ConstrainArgs {
    /// A `.jinja` file, a `tokenizer_config.json` / `chat_template.json`, or a model folder.
    #[arg(long)]
    template: PathBuf,
    /// The request's tools: a JSON array of OpenAI tool definitions (or `{"tools": [...]}`).
    #[arg(long)]
    tools: Option<PathBuf>,
    /// `auto`, `none`, `required`, a function name, or an OpenAI `tool_choice` object as JSON
    /// (`{"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": […]}}`).
    #[arg(long, default_value = "auto")]
    tool_choice: String,
    /// Whether call arguments follow their tool's schema (`true`) or only the call syntax
    /// (`false`); default: each tool's own `strict`, a tool that does not say being held to its schema.
    #[arg(long, action = clap::ArgAction::Set)]
    strict: Option<bool>,
    /// The most tokens reasoning may take; once spent, the reasoning block must end.
    #[arg(long, value_name = "N")]
    reasoning_budget: Option<u32>,
    /// Whether several calls may come in one turn.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    parallel_tool_calls: bool,
    /// Whether the request switched thinking on or off; default: the template's default prompt.
    #[arg(long, value_parser = ["on", "off"])]
    thinking: Option<String>,
    /// The request's `response_format` (a JSON file: `{"type": "json_schema", "json_schema": {"schema": …}}`
    /// or `{"type": "json_object"}`): the content is then one JSON value.
    #[arg(long, value_name = "F")]
    response_format: Option<PathBuf>,
    /// A `tokenizer.json` (or its folder): markers that are its special tokens are written as token
    /// formats, and `--check` reads the output token by token (special tokens recognized).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Emit::StructuralTag)]
    emit: Emit,
    /// Read a model output on stdin; exit 0 when the grammar accepts it whole, else 1 with the byte
    /// where it was refused.
    #[arg(long)]
    check: bool,
    /// Print N outputs drawn uniformly among the allowed tokens at each step (bytes without
    /// `--tokenizer`), one JSON string a line: what the grammar admits.
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// Seed of `--sample`.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Most tokens (bytes) of one sample; a sample that reaches it is printed as is.
    #[arg(long, default_value_t = 512)]
    max_tokens: usize,
    /// Template variable set on every probe render, `NAME=VALUE`.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
}

pub fn run(args: ConstrainArgs) -> anyhow::Result<()> {
    let (_, format) = crate::analyzed(&args.template, &args.vars)?;
    let mut request =
        crate::request_options(&format, args.tools.as_deref(), &args.tool_choice, args.thinking.as_deref())?;
    request.parallel_tool_calls = Some(args.parallel_tool_calls);
    let tokenizer = args.tokenizer.as_deref().map(parlance::Tokenizer::from_path).transpose()?;
    let vocab = match &tokenizer {
        Some(t) => {
            let eos = t.eos_token_id().into_iter().collect::<Vec<_>>();
            // A tokenizer without a named EOS still needs one id to end on: the last one.
            let eos = if eos.is_empty() { vec![t.vocab_size().saturating_sub(1) as u32] } else { eos };
            Some(Arc::new(t.token_vocab(&eos)?))
        }
        None => None,
    };
    let mut options = parlance::constrain::ConstrainOptions {
        strict: args.strict,
        reasoning_budget: args.reasoning_budget,
        ..Default::default()
    };
    if let Some(path) = &args.response_format {
        let text = crate::read_input(path)?;
        options.response_format =
            Some(serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?);
    }
    let grammar = || -> anyhow::Result<parlance_grammar::Grammar> {
        Ok(match &vocab {
            Some(vocab) => parlance::constrain::grammar_with(&format, &request, vocab, &options)?,
            None => {
                let doc = parlance::constrain::structural_tag_with(&format, &request, &options)?;
                parlance_grammar::structural_tag_to_grammar(&doc, &Default::default())?
            }
        })
    };
    if let Some(n) = args.sample {
        let vocab = match &vocab {
            Some(vocab) => vocab.clone(),
            None => byte_vocab()?,
        };
        let compiled = Arc::new(CompiledGrammar::new(vocab.clone(), &grammar()?)?);
        let mut stdout = std::io::stdout().lock();
        let mut state = args.seed ^ 0x9E37_79B9_7F4A_7C15;
        for _ in 0..n {
            let text = sample(&compiled, &vocab, &mut state, args.max_tokens)?;
            writeln!(stdout, "{}", serde_json::to_string(&text)?)?;
        }
        return Ok(());
    }
    if args.check {
        let output = crate::read_stdin()?;
        return match (&tokenizer, &vocab) {
            (Some(tokenizer), Some(vocab)) => check_tokens(&grammar()?, tokenizer, vocab, &output),
            _ => check(&grammar()?, &output),
        };
    }
    let mut stdout = std::io::stdout().lock();
    match args.emit {
        Emit::Ebnf => write!(stdout, "{}", grammar()?)?,
        Emit::StructuralTag => {
            options.special_tokens = parlance::constrain::SpecialTokens::new(
                vocab.iter().flat_map(|v| v.special_tokens().map(|(t, _)| t.to_owned())),
            )?;
            let doc = parlance::constrain::structural_tag_with(&format, &request, &options)?;
            writeln!(stdout, "{}", serde_json::to_string_pretty(&doc)?)?
        }
        Emit::ResponseTemplate => {
            writeln!(stdout, "{}", serde_json::to_string_pretty(&parlance::response_template(&format)?)?)?
        }
    }
    Ok(())
}

/// Token-level check: the output tokenized as the model would have written it.
fn check_tokens(
    grammar: &parlance_grammar::Grammar,
    tokenizer: &parlance::Tokenizer,
    vocab: &Arc<TokenVocab>,
    output: &[u8],
) -> anyhow::Result<()> {
    let text = std::str::from_utf8(output).context("the output is not UTF-8")?;
    let ids = tokenizer.encode_rendered(text)?;
    let mut matcher = Matcher::new(Arc::new(CompiledGrammar::new(vocab.clone(), grammar)?))?;
    for (at, &id) in ids.iter().enumerate() {
        if !matcher.accept_token(id) {
            let before = tokenizer.decode(&ids[at.saturating_sub(8)..at])?;
            let token = tokenizer.decode(&ids[at..=at])?;
            bail!("refused token {at} (id {id}, {token:?}) after {before:?}");
        }
    }
    if !matcher.is_accepting() {
        bail!("the output is incomplete: it ends where the grammar expects more ({} tokens read)", ids.len());
    }
    Ok(())
}

/// Every byte a token, and an EOS: for checks and samples about the language, not a tokenizer.
fn byte_vocab() -> anyhow::Result<Arc<TokenVocab>> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(Vec::new());
    Ok(Arc::new(TokenVocab::new(tokens, &[], &[256])?))
}

/// One output drawn uniformly among the allowed tokens at each step, EOS among them once the
/// output is complete (xorshift64 on `state`). Special tokens are shown as their text.
fn sample(grammar: &Arc<CompiledGrammar>, vocab: &TokenVocab, state: &mut u64, max: usize) -> anyhow::Result<String> {
    let mut matcher = Matcher::new(grammar.clone())?;
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut out = Vec::new();
    for _ in 0..max {
        matcher.fill_next_token_bitmask(&mut mask)?;
        let allowed: Vec<u32> =
            (0..vocab.len() as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect();
        if allowed.is_empty() {
            break;
        }
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let pick = allowed[(*state % allowed.len() as u64) as usize];
        if vocab.eos_ids().contains(&pick) {
            break;
        }
        if !matcher.accept_token(pick) {
            bail!("the grammar's mask allowed token {pick}, which it then refused");
        }
        out.extend_from_slice(vocab.token_bytes(pick));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Exit status 0 when `grammar` accepts `output` whole; else an error naming the refused byte.
fn check(grammar: &parlance_grammar::Grammar, output: &[u8]) -> anyhow::Result<()> {
    let vocab = byte_vocab()?;
    let mut matcher = Matcher::new(Arc::new(CompiledGrammar::new(vocab, grammar)?))?;
    for (at, &byte) in output.iter().enumerate() {
        if !matcher.accept_bytes(&[byte]) {
            let before = String::from_utf8_lossy(&output[at.saturating_sub(40)..at]);
            let after = String::from_utf8_lossy(&output[at..(at + 40).min(output.len())]);
            bail!("refused at byte {at}: after {before:?}, at {after:?}");
        }
    }
    if !matcher.is_accepting() {
        bail!("the output is incomplete: it ends where the grammar expects more ({} bytes read)", output.len());
    }
    Ok(())
}
