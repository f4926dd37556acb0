#!/usr/bin/env bash
# Every test (the README's test command): the Rust workspace's, the Python package's, then a program
# outside the workspace built against the public turn API.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test
bash scripts/test-python.sh
bash scripts/check-outside-api.sh
