"""Conformance tests every stage of a kind subclasses (:mod:`ablate.testing.contracts`)."""
