//! Constrained decoding from Python, shaped as XGrammar's API so a server switches by changing an
//! import: `TokenizerInfo` (a vocabulary), `GrammarCompiler` (JSON Schema, EBNF, regex, structural
//! tags, and a request's tools under a chat template's own syntax), `CompiledGrammar`,
//! `GrammarMatcher` (one per sequence) and the bitmask helpers (bit `id % 32` of word `id // 32`).
//!
//! Masks are written straight into the caller's array (numpy through `__array_struct__`, CPU
//! torch tensors through `data_ptr()`), checked for dtype, layout and shape first; fills release
//! the GIL, and a batch is filled in parallel in one call.

use std::sync::{Arc, Mutex, MutexGuard};

use parlance_grammar::{JsonSchemaOptions, Matcher, StructuralTagOptions, TokenVocab, Whitespace};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use serde_json::Value as Json;

use crate::{Format, parse_options, to_json};

pyo3::create_exception!(parlance, GrammarError, PyValueError, "A grammar, schema or structural tag failed to compile.");

/// A tokenizer's vocabulary as the grammar engine sees it: each token's bytes, special tokens kept
/// apart, and the ids that end generation.
#[pyclass(frozen, module = "parlance")]
pub(crate) struct TokenizerInfo {
    pub(crate) vocab: Arc<TokenVocab>,
}

/// A `parlance::Tokenizer` from a path (a `tokenizer.json` or its folder), a transformers tokenizer
/// (its `backend_tokenizer`) or a `tokenizers.Tokenizer`.
pub(crate) fn load_tokenizer(tokenizer: &Bound<'_, PyAny>) -> PyResult<parlance::Tokenizer> {
    let err = |e: parlance::TokenizerError| PyValueError::new_err(e.to_string());
    if let Ok(path) = tokenizer.extract::<std::path::PathBuf>() {
        return parlance::Tokenizer::from_path(&path).map_err(err);
    }
    let (backend, eos) = if tokenizer.hasattr("backend_tokenizer")? {
        let eos = tokenizer.getattr("eos_token")?;
        let eos = if eos.is_none() { None } else { Some(eos.str()?.to_string()) };
        (tokenizer.getattr("backend_tokenizer")?, eos)
    } else {
        (tokenizer.clone(), None)
    };
    if !backend.hasattr("to_str")? {
        return Err(PyTypeError::new_err(
            "tokenizer: a path, a transformers tokenizer with a fast backend, or a tokenizers.Tokenizer",
        ));
    }
    let json: String = backend.call_method0("to_str")?.extract()?;
    parlance::Tokenizer::from_json(&json, eos).map_err(err)
}

#[pymethods]
impl TokenizerInfo {
    /// From a transformers tokenizer, a `tokenizers.Tokenizer` or a path to `tokenizer.json` (or its
    /// folder). `eos_token_ids`: the ids that end generation (default: the tokenizer's EOS token).
    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_token_ids=None))]
    fn from_huggingface(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<u32>>,
    ) -> PyResult<TokenizerInfo> {
        let tokenizer = load_tokenizer(tokenizer)?;
        let eos = eos_token_ids.unwrap_or_default();
        let vocab = py.detach(|| tokenizer.token_vocab(&eos)).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(TokenizerInfo { vocab: Arc::new(vocab) })
    }

    /// Number of token ids (the width of a mask row is `ceil(vocab_size / 32)` words).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The ids that end generation.
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.vocab.eos_ids().to_vec()
    }

    /// The ids of special tokens by their text.
    #[getter]
    fn special_tokens(&self) -> Vec<(String, u32)> {
        self.vocab.special_tokens().map(|(text, id)| (text.to_owned(), id)).collect()
    }

    fn __repr__(&self) -> String {
        format!("TokenizerInfo(vocab_size={}, eos_token_ids={:?})", self.vocab.len(), self.vocab.eos_ids())
    }
}

/// A grammar compiled for one vocabulary; matchers share it.
#[pyclass(frozen, module = "parlance")]
pub(crate) struct CompiledGrammar {
    inner: Arc<parlance_grammar::CompiledGrammar>,
}

#[pymethods]
impl CompiledGrammar {
    fn __repr__(&self) -> String {
        "CompiledGrammar(...)".to_owned()
    }
}

/// The request arguments `compile_tools` and `structural_tag` share.
struct ToolRequest<'a, 'py> {
    tools: Option<&'a Bound<'py, PyAny>>,
    tool_choice: Option<&'a Bound<'py, PyAny>>,
    parallel_tool_calls: bool,
    thinking: Option<bool>,
    response_format: Option<&'a Bound<'py, PyAny>>,
    reasoning_budget: Option<u32>,
    strict: Option<bool>,
}

impl ToolRequest<'_, '_> {
    /// The parser's request and the derivation's options under `format`.
    fn read(
        self,
        py: Python<'_>,
        format: &parlance::Format,
    ) -> PyResult<(parlance::ParseOptions, parlance::constrain::ConstrainOptions)> {
        let auto = pyo3::types::PyString::new(py, "auto");
        let choice = self.tool_choice.cloned().unwrap_or_else(|| auto.into_any());
        let request = parse_options(py, format, self.tools, &choice, self.parallel_tool_calls, self.thinking, None)?;
        let response_format = self.response_format.filter(|r| !r.is_none()).map(|r| to_json(py, r, "response_format"));
        let options = parlance::constrain::ConstrainOptions {
            response_format: response_format.transpose()?,
            reasoning_budget: self.reasoning_budget,
            strict: self.strict,
            ..Default::default()
        };
        Ok((request, options))
    }
}

/// Compiles grammars for one vocabulary and keeps them in a cache (by source text) with a byte limit.
#[pyclass(frozen, module = "parlance")]
pub(crate) struct GrammarCompiler {
    inner: parlance_grammar::GrammarCompiler,
    /// Every compile's limits (only the threads differ from the defaults).
    limits: parlance_grammar::Limits,
}

fn compile_error(e: impl std::fmt::Display) -> PyErr {
    GrammarError::new_err(e.to_string())
}

/// A schema given as JSON text or as a Python value.
fn json_arg(py: Python<'_>, value: &Bound<'_, PyAny>, what: &str) -> PyResult<Json> {
    match value.extract::<String>() {
        Ok(text) => serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("{what}: not JSON: {e}"))),
        Err(_) => to_json(py, value, what),
    }
}

#[pymethods]
impl GrammarCompiler {
    /// `cache_limit_bytes`: the most the compiled-grammar cache holds (default 256 MiB; 0 disables
    /// it). `max_threads` (keyword only: XGrammar takes it second, parlance took the cache limit
    /// second first): threads one compile may use, the calling one included (default the
    /// machine's parallelism, at most 8).
    #[new]
    #[pyo3(signature = (tokenizer_info, cache_limit_bytes=None, *, max_threads=None))]
    fn new(
        tokenizer_info: &TokenizerInfo,
        cache_limit_bytes: Option<usize>,
        max_threads: Option<usize>,
    ) -> PyResult<GrammarCompiler> {
        let vocab = tokenizer_info.vocab.clone();
        let inner = match cache_limit_bytes {
            Some(bytes) => parlance_grammar::GrammarCompiler::with_cache_limit(vocab, bytes),
            None => parlance_grammar::GrammarCompiler::new(vocab),
        };
        let mut limits = parlance_grammar::Limits::default();
        match max_threads {
            Some(0) => return Err(PyValueError::new_err("max_threads: expected at least 1")),
            Some(n) => limits.compile_threads = n,
            None => {}
        }
        Ok(GrammarCompiler { inner, limits })
    }

    /// A JSON Schema (text or dict). `any_whitespace`: any JSON whitespace between tokens (else
    /// `separators`, default `(", ", ": ")`). `strict_mode`: objects without `additionalProperties`
    /// admit only their declared properties, as XGrammar reads them (else JSON Schema's default).
    #[pyo3(signature = (schema, *, any_whitespace=true, strict_mode=true, separators=None))]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        any_whitespace: bool,
        strict_mode: bool,
        separators: Option<(String, String)>,
    ) -> PyResult<CompiledGrammar> {
        let schema = json_arg(py, schema, "schema")?;
        let whitespace = match (any_whitespace, separators) {
            (true, None) => Whitespace::Flexible,
            (_, Some((item, key))) => Whitespace::Fixed { item, key },
            (false, None) => Whitespace::Fixed { item: ", ".into(), key: ": ".into() },
        };
        let options = JsonSchemaOptions {
            whitespace,
            strict_properties: strict_mode,
            limits: self.limits.clone(),
            ..JsonSchemaOptions::default()
        };
        let compiler = &self.inner;
        let inner = py.detach(|| compiler.compile_json_schema(&schema, &options)).map_err(compile_error)?;
        Ok(CompiledGrammar { inner })
    }

    /// A grammar in EBNF/GBNF (`root ::= …`, regex terminals `/…/`, XGrammar's `TagDispatch`).
    fn compile_grammar(&self, py: Python<'_>, ebnf: &str) -> PyResult<CompiledGrammar> {
        let grammar = parlance_grammar::Grammar::parse(ebnf).map_err(compile_error)?;
        let compiler = &self.inner;
        let inner = py.detach(|| compiler.compile_grammar_with(&grammar, &self.limits)).map_err(compile_error)?;
        Ok(CompiledGrammar { inner })
    }

    /// A regular expression the whole output must match.
    fn compile_regex(&self, py: Python<'_>, pattern: &str) -> PyResult<CompiledGrammar> {
        let grammar = parlance_grammar::Grammar::from_regex(pattern);
        let compiler = &self.inner;
        let inner = py.detach(|| compiler.compile_grammar_with(&grammar, &self.limits)).map_err(compile_error)?;
        Ok(CompiledGrammar { inner })
    }

    /// An XGrammar structural tag (JSON text or dict), as vLLM and SGLang receive it.
    fn compile_structural_tag(&self, py: Python<'_>, structural_tag: &Bound<'_, PyAny>) -> PyResult<CompiledGrammar> {
        let text = match structural_tag.extract::<String>() {
            Ok(text) => text,
            Err(_) => to_json(py, structural_tag, "structural_tag")?.to_string(),
        };
        let mut options = StructuralTagOptions {
            special_tokens: self.inner.vocab().special_tokens().map(|(t, id)| (t.to_owned(), id)).collect(),
            ..StructuralTagOptions::default()
        };
        options.json.limits = self.limits.clone();
        let compiler = &self.inner;
        let inner = py.detach(|| compiler.compile_structural_tag(&text, &options)).map_err(compile_error)?;
        Ok(CompiledGrammar { inner })
    }

    /// The grammar of an assistant turn under a chat template's own syntax (`Format`): reasoning,
    /// content and calls to `tools` as the template writes them, held to the request (`tool_choice`,
    /// `parallel_tool_calls`, thinking on or off, `response_format`, a reasoning budget in tokens;
    /// `strict`: hold arguments to their schemas, default each tool's `strict`, else true).
    #[pyo3(signature = (format, tools=None, tool_choice=None, parallel_tool_calls=true, thinking=None,
                        response_format=None, reasoning_budget=None, strict=None))]
    #[allow(clippy::too_many_arguments)]
    fn compile_tools(
        &self,
        py: Python<'_>,
        format: &Format,
        tools: Option<&Bound<'_, PyAny>>,
        tool_choice: Option<&Bound<'_, PyAny>>,
        parallel_tool_calls: bool,
        thinking: Option<bool>,
        response_format: Option<&Bound<'_, PyAny>>,
        reasoning_budget: Option<u32>,
        strict: Option<bool>,
    ) -> PyResult<CompiledGrammar> {
        let (request, options) = ToolRequest {
            tools,
            tool_choice,
            parallel_tool_calls,
            thinking,
            response_format,
            reasoning_budget,
            strict,
        }
        .read(py, &format.inner)?;
        let (compiler, format) = (&self.inner, &format.inner);
        let inner = py
            .detach(|| {
                let grammar = parlance::constrain::grammar_with(format, &request, compiler.vocab(), &options)
                    .map_err(|e| e.to_string())?;
                compiler.compile_grammar_with(&grammar, &self.limits).map_err(|e| e.to_string())
            })
            .map_err(GrammarError::new_err)?;
        Ok(CompiledGrammar { inner })
    }

    /// Bytes held by the compiled-grammar cache and the vocabulary's mask pool.
    fn get_cache_size_bytes(&self) -> usize {
        self.inner.cache_bytes()
    }

    /// Empties every cache; grammars compiled earlier stay valid.
    fn clear_cache(&self) {
        self.inner.clear();
    }
}

/// The structural tag (XGrammar JSON, a dict) of an assistant turn under a template's `Format`, for
/// a server's `response_format` (`{"type": "structural_tag", ...}`); arguments as `compile_tools`.
#[pyfunction]
#[pyo3(signature = (format, tools=None, tool_choice=None, parallel_tool_calls=true, thinking=None,
                    response_format=None, reasoning_budget=None, strict=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn structural_tag(
    py: Python<'_>,
    format: &Format,
    tools: Option<&Bound<'_, PyAny>>,
    tool_choice: Option<&Bound<'_, PyAny>>,
    parallel_tool_calls: bool,
    thinking: Option<bool>,
    response_format: Option<&Bound<'_, PyAny>>,
    reasoning_budget: Option<u32>,
    strict: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let (request, options) =
        ToolRequest { tools, tool_choice, parallel_tool_calls, thinking, response_format, reasoning_budget, strict }
            .read(py, &format.inner)?;
    let doc = parlance::constrain::structural_tag_with(&format.inner, &request, &options)
        .map_err(|e| GrammarError::new_err(e.to_string()))?;
    crate::from_json(py, &doc)
}

/// Follows one sequence through a compiled grammar: which tokens may come next, and what came.
#[pyclass(frozen, module = "parlance")]
pub(crate) struct GrammarMatcher {
    inner: Mutex<Matcher>,
    vocab: Arc<TokenVocab>,
}

impl GrammarMatcher {
    fn lock(&self) -> PyResult<MutexGuard<'_, Matcher>> {
        self.inner.lock().map_err(|_| PyRuntimeError::new_err("the matcher's lock is poisoned"))
    }
}

/// Where one mask row starts in a caller's bitmask array, and its width in words: a C-contiguous
/// int32 numpy array or CPU torch tensor of shape `(words,)` or `(batch, words)`, writable.
struct MaskRows {
    address: usize,
    rows: usize,
    words: usize,
}

/// numpy's C-level array description (`__array_struct__`, version 3 of the array interface
/// protocol): read instead of `__array_interface__`, whose dict costs more than a mask fill.
#[repr(C)]
struct ArrayInterface {
    two: i32,
    nd: i32,
    typekind: u8,
    itemsize: i32,
    flags: i32,
    shape: *const isize,
    strides: *const isize,
    data: *mut std::ffi::c_void,
    descr: *mut std::ffi::c_void,
}

const ARRAY_C_CONTIGUOUS: i32 = 0x1;
const ARRAY_ALIGNED: i32 = 0x100;
const ARRAY_NOTSWAPPED: i32 = 0x200;
const ARRAY_WRITEABLE: i32 = 0x400;

/// The data pointer and shape of a numpy array, from its `__array_struct__` capsule.
#[allow(unsafe_code)]
fn numpy_rows(capsule: &Bound<'_, PyAny>) -> PyResult<(usize, Vec<usize>)> {
    use pyo3::types::{PyCapsule, PyCapsuleMethods};
    let bad = |what: &str| PyValueError::new_err(format!("bitmask: {what}"));
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| bad("`__array_struct__` is not a capsule"))?;
    // numpy's capsule is unnamed.
    let pointer =
        capsule.pointer_checked(None).map_err(|_| bad("`__array_struct__` holds no array description"))?.as_ptr()
            as *const ArrayInterface;
    // SAFETY: numpy's `__array_struct__` capsule holds a `PyArrayInterface` (the layout above) that
    // lives as long as the capsule, which `capsule` keeps alive; `two == 2` checks the version, and
    // `shape` holds `nd` entries.
    let interface = unsafe { &*pointer };
    if interface.two != 2 {
        return Err(bad("unknown array interface version"));
    }
    let nd = usize::try_from(interface.nd).map_err(|_| bad("negative dimensions"))?;
    if !(1..=2).contains(&nd) {
        return Err(bad(&format!("{nd} dimensions, not (words,) or (batch, words)")));
    }
    if !matches!(interface.typekind, b'i' | b'u') || interface.itemsize != 4 {
        return Err(bad(&format!("dtype {}{}, not int32", interface.typekind as char, interface.itemsize)));
    }
    let flags = interface.flags;
    if flags & ARRAY_WRITEABLE == 0 {
        return Err(bad("read-only"));
    }
    if flags & ARRAY_C_CONTIGUOUS == 0 || flags & ARRAY_ALIGNED == 0 || flags & ARRAY_NOTSWAPPED == 0 {
        return Err(bad("not C-contiguous, aligned, native-endian"));
    }
    // SAFETY: as above, `shape` points to `nd` sizes.
    let shape = unsafe { std::slice::from_raw_parts(interface.shape, nd) };
    let shape = shape.iter().map(|&n| usize::try_from(n).map_err(|_| bad("negative size"))).collect::<PyResult<_>>()?;
    Ok((interface.data as usize, shape))
}

fn mask_rows(bitmask: &Bound<'_, PyAny>) -> PyResult<MaskRows> {
    let bad = |what: &str| PyValueError::new_err(format!("bitmask: {what}"));
    let (address, shape): (usize, Vec<usize>) = if let Ok(capsule) = bitmask.getattr("__array_struct__") {
        numpy_rows(&capsule)?
    } else if bitmask.hasattr("data_ptr")? {
        let device: String = bitmask.getattr("device")?.str()?.extract()?;
        if device != "cpu" {
            return Err(bad(&format!("on {device}; fill a CPU tensor and copy it over")));
        }
        let dtype: String = bitmask.getattr("dtype")?.str()?.extract()?;
        if dtype != "torch.int32" {
            return Err(bad(&format!("dtype {dtype}, not torch.int32")));
        }
        if !bitmask.call_method0("is_contiguous")?.extract::<bool>()? {
            return Err(bad("not contiguous"));
        }
        (bitmask.call_method0("data_ptr")?.extract()?, bitmask.getattr("shape")?.extract()?)
    } else {
        return Err(PyTypeError::new_err("bitmask: a numpy int32 array or a CPU torch.int32 tensor"));
    };
    let (rows, words) = match shape.as_slice() {
        [words] => (1, *words),
        [rows, words] => (*rows, *words),
        _ => return Err(bad(&format!("shape {shape:?}, not (words,) or (batch, words)"))),
    };
    if address == 0 && rows * words > 0 {
        return Err(bad("no data"));
    }
    Ok(MaskRows { address, rows, words })
}

/// The row `index` of a caller's bitmask as a mutable slice.
///
/// The caller keeps `bitmask` (whose layout `mask_rows` checked) alive and unaliased by Rust for as
/// long as the slice lives; Python code could still write to it from another thread meanwhile,
/// which only garbles that mask, as with any shared buffer.
#[allow(unsafe_code)]
fn row<'a>(rows: &MaskRows, index: usize) -> &'a mut [u32] {
    // SAFETY: `mask_rows` checked that the array holds `rows * words` contiguous, aligned, writable
    // 32-bit words at `address`, and `index < rows` is checked by every caller.
    unsafe { std::slice::from_raw_parts_mut((rows.address as *mut u32).add(index * rows.words), rows.words) }
}

#[pymethods]
impl GrammarMatcher {
    #[new]
    fn new(compiled: &CompiledGrammar) -> PyResult<GrammarMatcher> {
        let vocab = compiled.inner.vocab().clone();
        let inner = Matcher::new(compiled.inner.clone()).map_err(compile_error)?;
        Ok(GrammarMatcher { inner: Mutex::new(inner), vocab })
    }

    /// Accepts one token; `False` (and no change) when the grammar does not allow it. An EOS id is
    /// accepted where the output may end, and terminates the matcher.
    fn accept_token(&self, token_id: u32) -> PyResult<bool> {
        Ok(self.lock()?.accept_token(token_id))
    }

    /// Accepts text as bytes; `False` (and no change) when the grammar does not allow all of it.
    fn accept_string(&self, text: &str) -> PyResult<bool> {
        Ok(self.lock()?.accept_string(text))
    }

    /// Writes the allowed next tokens into row `index` of `bitmask` (see `allocate_token_bitmask`).
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&self, py: Python<'_>, bitmask: &Bound<'_, PyAny>, index: usize) -> PyResult<()> {
        let rows = mask_rows(bitmask)?;
        if index >= rows.rows {
            return Err(PyValueError::new_err(format!("index {index} out of a bitmask of {} rows", rows.rows)));
        }
        let mut guard = self.lock()?;
        let matcher: &mut Matcher = &mut guard;
        let row = row(&rows, index);
        py.detach(|| matcher.fill_next_token_bitmask(row)).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// How many tokens of a speculative draft the grammar accepts in order, without advancing.
    fn validate_tokens(&self, token_ids: Vec<u32>) -> PyResult<usize> {
        Ok(self.lock()?.validate_tokens(&token_ids))
    }

    /// Undoes the last `num_tokens` accepted tokens.
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&self, num_tokens: usize) -> PyResult<()> {
        self.lock()?.rollback(num_tokens).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The text the grammar forces next (jump-forward decoding), without advancing.
    fn find_jump_forward_string(&self) -> PyResult<String> {
        let bytes = self.lock()?.forced_bytes();
        // A forced run may stop inside a character: hand over whole characters only.
        let valid = match std::str::from_utf8(&bytes) {
            Ok(text) => text.len(),
            Err(e) => e.valid_up_to(),
        };
        Ok(String::from_utf8_lossy(&bytes[..valid]).into_owned())
    }

    /// Whether an EOS token has been accepted.
    fn is_terminated(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_terminated())
    }

    /// Whether the output so far may end here.
    fn is_accepting(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_accepting())
    }

    /// Back to the start of the grammar.
    fn reset(&self) -> PyResult<()> {
        self.lock()?.reset();
        Ok(())
    }

    /// An independent copy at the same point (for beam search, speculative branches).
    fn fork(&self) -> PyResult<GrammarMatcher> {
        Ok(GrammarMatcher { inner: Mutex::new(self.lock()?.fork()), vocab: self.vocab.clone() })
    }

    /// Mean time in µs of `n` fills of this matcher's next mask made in Rust, with no Python in
    /// between (for `bench/grammar_overhead.py`: Python's cost per call is the difference).
    fn _fill_timing_us(&self, py: Python<'_>, n: usize) -> PyResult<f64> {
        let mut guard = self.lock()?;
        let matcher: &mut Matcher = &mut guard;
        let mut mask = vec![0u32; self.vocab.mask_words()];
        py.detach(|| {
            let start = std::time::Instant::now();
            for _ in 0..n.max(1) {
                matcher.fill_next_token_bitmask(&mut mask).map_err(|e| PyValueError::new_err(e.to_string()))?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64)
        })
    }

    /// The ids that end generation (what a sequence whose grammar has ended may still sample).
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.vocab.eos_ids().to_vec()
    }

    /// Width of a mask row in 32-bit words for this matcher's vocabulary.
    #[getter]
    fn mask_words(&self) -> usize {
        self.vocab.mask_words()
    }
}

/// Fills row `i` of `bitmask` for `matchers[i]` (or row `indices[i]`), all in one call, in
/// parallel, without the GIL: one call per decode step for a whole batch.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None))]
pub(crate) fn batch_fill_next_token_bitmask(
    py: Python<'_>,
    matchers: Vec<Bound<'_, GrammarMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    use rayon::prelude::*;
    let rows = mask_rows(bitmask)?;
    let indices = indices.unwrap_or_else(|| (0..matchers.len()).collect());
    if indices.len() != matchers.len() {
        return Err(PyValueError::new_err(format!("{} indices for {} matchers", indices.len(), matchers.len())));
    }
    let mut seen = vec![false; rows.rows];
    for &i in &indices {
        match seen.get_mut(i) {
            Some(s) if !*s => *s = true,
            Some(_) => return Err(PyValueError::new_err(format!("row {i} named twice"))),
            None => return Err(PyValueError::new_err(format!("index {i} out of a bitmask of {} rows", rows.rows))),
        }
    }
    let mut guards = Vec::with_capacity(matchers.len());
    for matcher in &matchers {
        guards.push(matcher.get().lock()?);
    }
    // Distinct rows (checked above): each slice is written by one matcher only.
    let mut work: Vec<(&mut Matcher, &mut [u32])> =
        guards.iter_mut().zip(&indices).map(|(guard, &i)| (&mut **guard, row(&rows, i))).collect();
    let results: Vec<Result<(), String>> = py.detach(|| {
        work.par_iter_mut()
            .map(|(matcher, mask)| matcher.fill_next_token_bitmask(mask).map_err(|e| e.to_string()))
            .collect()
    });
    results.into_iter().collect::<Result<(), String>>().map_err(PyValueError::new_err)
}

/// Registers this module's classes and functions in the extension module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TokenizerInfo>()?;
    m.add_class::<GrammarCompiler>()?;
    m.add_class::<CompiledGrammar>()?;
    m.add_class::<GrammarMatcher>()?;
    m.add_function(wrap_pyfunction!(batch_fill_next_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(structural_tag, m)?)?;
    m.add("GrammarError", m.py().get_type::<GrammarError>())?;
    Ok(())
}
