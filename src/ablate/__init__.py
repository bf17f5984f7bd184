"""ablate: which part of a RAG retrieval stack helps, and by how much."""

__version__ = "0.1.0"
