"""ablate: which part of a RAG retrieval stack helps, and by how much."""

__version__ = (
    "0.8.0"  # the CHANGELOG's latest version; tests/test_architecture.py checks it against pyproject.toml
)
