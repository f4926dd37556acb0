#!/usr/bin/env bash
# Builds and runs tests/outside-api, a program outside the workspace written against parlance's
# public turn API, on Qwen3's template and tokenizer from ../shared (or PARLANCE_CORPUS /
# PARLANCE_TOKENIZERS). It shares the workspace's target folder and lock file, so only the program
# itself is compiled after `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="${PARLANCE_CORPUS:-$PWD/../shared/corpus}"
tokenizers="${PARLANCE_TOKENIZERS:-$PWD/../shared/tokenizers}"
cp Cargo.lock tests/outside-api/Cargo.lock
CARGO_TARGET_DIR="$PWD/target" cargo run --quiet --manifest-path tests/outside-api/Cargo.toml -- \
    "$corpus/templates/Qwen-Qwen3-0.6B.jinja" "$tokenizers/qwen3"
