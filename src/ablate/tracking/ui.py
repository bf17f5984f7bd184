"""Where a sweep's runs table is in MLflow's UI.

MLflow's UI (3.17) opens an experiment on the tab its *workflow type* names: the URL's ``workflowType`` parameter,
else the one the browser last chose, else ``genai``, whose first pages (GenAI overview, traces) are empty for ablate's
runs; an experiment's ``mlflow.experimentKind`` tag does not decide it. So the URL names the runs tab and
``workflowType=machine_learning``; the UI keeps that parameter as one moves between its pages.
"""

from __future__ import annotations

#: the MLflow UI's workflow type whose pages are the runs, their charts and models (the other, ``genai``, is its default)
WORKFLOW = "machine_learning"
#: where ``mlflow ui`` and ``make ui`` listen unless told otherwise
LOCAL_UI = "http://127.0.0.1:5000"


def runs_table_url(base: str, experiment_id: str) -> str:
    """The URL of an experiment's runs table in MLflow's UI (its single-page app routes after ``#``)."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType={WORKFLOW}"


def where_to_compare(tracking_uri: str, experiment_id: str) -> str:
    """The console's pointer to a sweep's runs table: the server's page, or how to open a file store's."""
    if tracking_uri.startswith(("http://", "https://")):
        return runs_table_url(tracking_uri, experiment_id)
    return (
        f"mlflow ui --backend-store-uri {tracking_uri}, then open {runs_table_url(LOCAL_UI, experiment_id)}"
    )
