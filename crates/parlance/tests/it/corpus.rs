//! Where the shared corpus and tokenizers are: `PARLANCE_CORPUS` / `PARLANCE_TOKENIZERS`, else
//! `../shared/...` beside the project.

use std::path::PathBuf;

fn shared(var: &str, leaf: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(var) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared").join(leaf),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {leaf} not found at {} (set {var})", dir.display());
        None
    }
}

/// The chat-template corpus, or `None` (after saying so) when absent.
pub fn corpus() -> Option<PathBuf> {
    shared("PARLANCE_CORPUS", "corpus")
}

/// The tokenizers folder, or `None` (after saying so) when absent.
pub fn tokenizers() -> Option<PathBuf> {
    shared("PARLANCE_TOKENIZERS", "tokenizers")
}
