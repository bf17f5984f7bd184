"""Labels that grow with the runs (``python -m ablate.label``): the pool of unjudged results, the journal of new
judgements, the grade legend a judge sees, and the workspace folder that holds them (``labels/<corpus>/``).

Pure data code: plain typed arguments, no MLflow, no Hydra. The entry points (``app/label*.py``) read runs and
settings and call these.
"""
