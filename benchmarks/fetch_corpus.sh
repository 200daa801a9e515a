#!/usr/bin/env bash
# Fetch the benchmark corpus: the unpacked sources of pinned PyTorch-ecosystem
# wheels (no dependencies, nothing installed) into benchmarks/corpus/.
# Usage: benchmarks/fetch_corpus.sh [PYTHON]      (default: python3)
# The corpus folder is ignored by git (benchmarks/.gitignore).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${1:-python3}"
CORPUS="$HERE/corpus"
WHEELS="$HERE/.wheels"
PACKAGES=(
  "transformers==4.53.2"
  "diffusers==0.31.0"
  "timm==1.0.11"
  "torchtune==0.4.0"
  "torchao==0.7.0"
  "torchtitan==0.1.0"
  "accelerate==1.1.1"
  "peft==0.13.2"
  "lightning==2.4.0"
  "torchvision==0.20.1"
  "nemo_toolkit==2.0.0"
  "monai==1.4.0"
  "torchmetrics==1.6.0"
)
mkdir -p "$WHEELS" "$CORPUS"
# the corpus stands for a repository of its own: without this marker the
# parent repository's .gitignore (which ignores corpus/) would hide every file
mkdir -p "$CORPUS/.git"
for spec in "${PACKAGES[@]}"; do
  name="${spec%%==*}"
  if [ -d "$CORPUS/$name" ]; then echo "have $name"; continue; fi
  "$PY" -m pip download --quiet --no-deps --dest "$WHEELS/$name" "$spec"
  mkdir -p "$CORPUS/$name"
  for f in "$WHEELS/$name"/*; do
    case "$f" in
      *.whl|*.zip) "$PY" -m zipfile -e "$f" "$CORPUS/$name" ;;
      *.tar.gz) tar -xzf "$f" -C "$CORPUS/$name" ;;
    esac
  done
  # keep the Python sources only
  find "$CORPUS/$name" -type f ! -name '*.py' -delete
  echo "got $spec: $(find "$CORPUS/$name" -name '*.py' | wc -l) files"
done
echo "corpus: $(find "$CORPUS" -name '*.py' | wc -l) files, $(find "$CORPUS" -name '*.py' -print0 | xargs -0 cat | wc -l) lines"
