# One entry point for the course. Every target makes the virtual environment when it is
# missing, and puts its bin/ first on PATH so that nbgrader finds `alembic` and the kernel
# without an activated venv.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(abspath $(VENV))/bin
PY     := $(BIN)/python
export PATH := $(BIN):$(PATH)
# pytest workers: the suite is sized for 2 cores.
JOBS   ?= 2

.PHONY: demo demo-all test lab student-kit release fmt coverage check venv clean docs

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "$(TORCH)" 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,docs]' 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import torch, nbgrader, solutions_lib"
	touch $@

## the main job: build release/, grade a sample class (two assignments, parallel workers), print the table
demo: venv
	$(PY) -m solutions_lib demo

## the same for every assignment of the course (says how long before it starts)
demo-all: venv
	$(PY) -m solutions_lib demo --all

## the whole test suite
test: venv
	$(PY) -m pytest -n $(JOBS) --dist loadgroup -q --durations=25

## the documentation site: build/docs/index.html (theory notebooks executed once, then cached)
docs: venv
	$(PY) tools/build_docs.py

## JupyterLab on the student notebooks (release/); extra arguments: make lab ARGS="--allow-root --ip=0.0.0.0"
ARGS ?=
lab: venv
	$(PY) -m jupyter lab --notebook-dir=release $(ARGS)

## the student edition of the kit (no reference answers): a wheel in dist/student/
student-kit: venv
	$(PY) -m solutions_lib student-kit dist/student

## rebuild release/ from source/ (always --force: a stale release is a bug)
release: venv
	$(PY) -m solutions_lib release

## normalise source notebooks (no outputs, stable JSON) before committing
fmt: venv
	$(PY) -m solutions_lib fmt

coverage: venv
	$(PY) -m solutions_lib coverage

## self-check a notebook: make check NB=path/to/notebook.ipynb
check: venv
	$(PY) -m solutions_lib check "$(NB)"

clean:
	rm -rf submitted feedback autograded/*/ gradebook.db grades.csv demo_report.* \
		grades_by_question.csv grades_by_student.csv flags.csv
