//! The shared corpus for benches: `$PARLANCE_CORPUS`, else `../shared/corpus` beside the workspace.

use std::path::{Path, PathBuf};

/// The corpus folder, or `None` (after saying so) when it is absent.
pub fn corpus() -> Option<PathBuf> {
    let dir = match std::env::var_os("PARLANCE_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: corpus not found at {} (set PARLANCE_CORPUS)", dir.display());
        None
    }
}
