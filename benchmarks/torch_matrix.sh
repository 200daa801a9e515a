#!/usr/bin/env bash
# The torch release matrix (issue 28): for each release, a venv of its own,
# every trace script recorded again under it (the guard texts and the trace
# format of that release), then the classifier's and the trace modes' tests
# on those recordings, and the runtime proofs (goldens, realworld, trace
# recall) on that torch.  Not CI's job: each release takes 10-20 minutes
# (a CUDA build of 2.14.1 is several GB to install).
#
#   benchmarks/torch_matrix.sh [RELEASE ...]      default: 2.9.1 2.11.0 2.13.0 2.14.1
#
# Prints one line per release and step: "<release> <step>: ok" or "FAILED"
# (the logs stay in $MATRIX_DIR, default /tmp/fix-recompiles-matrix).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MATRIX_DIR=${MATRIX_DIR:-/tmp/fix-recompiles-matrix}
mkdir -p "$MATRIX_DIR"
RELEASES=("$@")
[ ${#RELEASES[@]} -eq 0 ] && RELEASES=(2.9.1 2.11.0 2.13.0 2.14.1)
# which steps (all by default): record trace-tests runtime-proofs trace-recall
STEPS=${STEPS:-"record trace-tests runtime-proofs trace-recall"}
# the test extra pins torch==2.13.0: every other test dependency, without it
DEPS=$(python3 - <<'PY'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]
print(" ".join(d for d in deps if not d.startswith("torch")))
PY
)
TRACE_TESTS="tests/test_trace.py tests/test_trace_causes.py tests/test_trace_evidence.py tests/test_trace_guard.py
  tests/test_trace_mark_dynamic.py tests/test_trace_mark_unbacked.py tests/test_trace_layout.py tests/test_trace_ranks.py
  tests/test_data_driven_loop.py tests/test_run_output.py tests/test_trace_alias.py tests/test_trace_float_state.py
  tests/test_trace_scalar_capture.py tests/test_trace_idle_fix.py"
step() {  # step RELEASE NAME COMMAND...
  local release=$1 name=$2; shift 2
  case " $STEPS " in *" $name "*) ;; *) return ;; esac
  local log="$MATRIX_DIR/$release-$name.log"
  if "$@" >"$log" 2>&1; then echo "$release $name: ok ($(tail -1 "$log"))"; else echo "$release $name: FAILED (see $log: $(tail -1 "$log"))"; fi
}
for release in "${RELEASES[@]}"; do
  venv="$MATRIX_DIR/venv-$release"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "torch==$release" >"$MATRIX_DIR/$release-install.log" 2>&1 || { echo "$release install: FAILED (see $MATRIX_DIR/$release-install.log)"; continue; }
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q -e . $DEPS >>"$MATRIX_DIR/$release-install.log" 2>&1 || { echo "$release install: FAILED"; continue; }
  fi
  echo "$release: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  # the tests fork warm torch processes (tests/warm_python.py); from 2.14 a
  # fork after autograd's threads started refuses backward(): new processes
  if [ "$release" != 2.13.0 ]; then export FIX_RECOMPILES_COLD_PROBES=1; else unset FIX_RECOMPILES_COLD_PROBES; fi
  fixtures="$MATRIX_DIR/fixtures-$release"
  # recorded again only by the record step: a run of the other steps alone keeps them
  case " $STEPS " in *" record "*) rm -rf "$fixtures" && mkdir -p "$fixtures" ;; esac
  names=$(cd tests/trace_fixtures && ls ./*.log | sed 's|^\./||; s|\.log$||')
  # shellcheck disable=SC2086
  step "$release" record env FIX_RECOMPILES_FIXTURES="$fixtures" "$venv/bin/python" tests/trace_fixtures/trim.py record $names
  # shellcheck disable=SC2086
  step "$release" trace-tests env FIX_RECOMPILES_FIXTURES="$fixtures" "$venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider $TRACE_TESTS
  step "$release" runtime-proofs "$venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider tests/test_golden.py tests/test_realworld.py
  step "$release" trace-recall "$venv/bin/python" benchmarks/trace_recall.py
done
