#!/usr/bin/env bash
# Every test (the README's test command): the Rust workspace's, then the Python package's.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test
bash scripts/test-python.sh
