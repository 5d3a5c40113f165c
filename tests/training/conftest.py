from pathlib import Path

import pytest

from tests.training.fork_server import ForkServer


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A 200-pair TSV corpus: vocabularies build in a fraction of a second (synthetic: ~1.5 s)."""
    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text("".join(f"el gato {i} come pan\tthe cat {i} eats bread\n" for i in range(200)))
    return path


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory):
    """Starts `keras-attn` processes for the tests that kill them (see FORK_SERVER)."""
    server = ForkServer(tmp_path_factory.mktemp("fork-server"))
    yield server
    server.close()
