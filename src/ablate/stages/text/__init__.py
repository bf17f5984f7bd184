"""stages/text"""
