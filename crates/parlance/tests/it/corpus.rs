//! Where the shared corpus, tokenizers and hostile inputs are: `PARLANCE_CORPUS` /
//! `PARLANCE_TOKENIZERS` / `PARLANCE_REPRO` (a
//! missing folder named there fails the test), else `../shared/...` beside the project (tests skip,
//! saying so, when it is absent).

use std::path::PathBuf;

fn shared(var: &str, leaf: &str) -> Option<PathBuf> {
    let (dir, explicit) = match std::env::var_os(var) {
        Some(dir) => (PathBuf::from(dir), true),
        None => (PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared").join(leaf), false),
    };
    if dir.is_dir() {
        Some(dir)
    } else if explicit {
        // A folder someone named (CI names both) that is not there is an error, not a skip.
        panic!("{var} is set to {}, which is not a folder", dir.display());
    } else {
        eprintln!("skipping: {leaf} not found at {} (set {var})", dir.display());
        None
    }
}

/// The hostile inputs that broke the project's promises (`shared/repro`), or `None` when absent.
pub fn repro() -> Option<PathBuf> {
    shared("PARLANCE_REPRO", "repro")
}

/// The chat-template corpus, or `None` (after saying so) when absent.
pub fn corpus() -> Option<PathBuf> {
    shared("PARLANCE_CORPUS", "corpus")
}

/// The tokenizers folder, or `None` (after saying so) when absent.
pub fn tokenizers() -> Option<PathBuf> {
    shared("PARLANCE_TOKENIZERS", "tokenizers")
}
