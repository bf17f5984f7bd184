"""Generators: evidence -> an answer that cites it (the answer stage)."""
