#!/usr/bin/env bash
# The Python integration tests that need the servers' packages (torch, transformers, vLLM, SGLang): too
# large for CI (several GB), so run by hand; pytest skips them where the packages are missing. Builds a
# venv under target/ with torch (CPU is enough), transformers 5.24, and vLLM 0.33.0's and SGLang 0.5.23's
# parser, protocol and grammar-backend modules (each installed without its dependencies, then the few
# those modules import).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${PARLANCE_INTEGRATIONS_VENV:-$PWD/target/pyenv-integrations}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
export PATH="$venv/bin:$PATH"
pip() { "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"; }
pip maturin pytest numpy tokenizers torch "transformers==5.24.0"
pip --no-deps "vllm==0.33.0" "sglang==0.5.23"
pip openai cbor2 psutil pyzmq urllib3 aiohttp requests openai_harmony fastapi pillow pybase64 cachetools \
    prometheus_client msgspec cloudpickle uvloop py-cpuinfo partial_json_parser xgrammar==0.2.8 orjson IPython
pip --no-build-isolation --force-reinstall --no-deps crates/parlance-python
# Outside the checkout, so `import vllm` is the installed package.
cd /tmp && "$venv/bin/python" -m pytest -q "$OLDPWD/crates/parlance-python/tests"
