"""Retrievers: one module each, behind :class:`ablate.retrievers.base.Retriever`."""
