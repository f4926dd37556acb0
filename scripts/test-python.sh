#!/usr/bin/env bash
# The Python package's tests: the package built from source into a venv under target/ (maturin,
# pytest, tokenizers and numpy from PyPI; transformers and jinja2, the reference of the render
# differential, pinned), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${PARLANCE_VENV:-$PWD/target/pyenv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# The build backend runs the `maturin` command: the venv's own, first on the path.
export PATH="$venv/bin:$PATH"
"$venv/bin/pip" install --quiet --disable-pip-version-check maturin pytest tokenizers numpy \
    "transformers==5.24.0" "jinja2==3.1.6"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps crates/parlance-python
"$venv/bin/python" -m pytest -q crates/parlance-python/tests
