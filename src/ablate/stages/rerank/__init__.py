"""stages/rerank"""
