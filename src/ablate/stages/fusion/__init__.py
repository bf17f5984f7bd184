"""stages/fusion"""
