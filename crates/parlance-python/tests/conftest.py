import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def shared(var: str, leaf: str) -> pathlib.Path:
    """`PARLANCE_CORPUS` / `PARLANCE_TOKENIZERS` (a missing folder named there fails), else `../shared`."""
    named = os.environ.get(var)
    path = pathlib.Path(named) if named else HERE.parents[3] / "shared" / leaf
    if not path.is_dir():
        if named:
            raise RuntimeError(f"{var} is set to {path}, which is not a folder")
        pytest.skip(f"{leaf} not found at {path} (set {var})")
    return path


@pytest.fixture(scope="session")
def corpus() -> pathlib.Path:
    return shared("PARLANCE_CORPUS", "corpus")


@pytest.fixture(scope="session")
def tokenizers() -> pathlib.Path:
    return shared("PARLANCE_TOKENIZERS", "tokenizers")
