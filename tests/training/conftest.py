from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A 200-pair TSV corpus: vocabularies build in a fraction of a second (synthetic: ~1.5 s)."""
    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text("".join(f"el gato {i} come pan\tthe cat {i} eats bread\n" for i in range(200)))
    return path
