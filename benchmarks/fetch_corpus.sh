#!/usr/bin/env bash
# Fetch the library corpus: the unpacked sources of pinned PyTorch-ecosystem
# wheels (no dependencies, nothing installed) into benchmarks/corpus/.
# Usage: benchmarks/fetch_corpus.sh [PYTHON]      (default: python3)
# The corpus folder is ignored by git (benchmarks/.gitignore).
#
# Each package folder records the pin it was fetched at (corpus/<name>/.pin);
# a folder at another pin is fetched again, and folders of packages no longer
# in the list are removed, so the corpus always matches PACKAGES exactly.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${1:-python3}"
CORPUS="$HERE/corpus"
WHEELS="$HERE/.wheels"
PACKAGES=(
  "transformers==5.24.0"
  "diffusers==0.42.1"
  "timm==1.0.31"
  "torchtune==0.6.1"
  "torchao==0.18.0"
  "torchtitan==0.3.0"
  "accelerate==1.15.0"
)
mkdir -p "$WHEELS" "$CORPUS"
# the corpus stands for a repository of its own: without this marker the
# parent repository's .gitignore (which ignores corpus/) would hide every file
mkdir -p "$CORPUS/.git"

# drop packages that are no longer pinned
for dir in "$CORPUS"/*/; do
  [ -d "$dir" ] || continue
  name="$(basename "$dir")"
  keep=no
  for spec in "${PACKAGES[@]}"; do [ "${spec%%==*}" = "$name" ] && keep=yes; done
  if [ "$keep" = no ]; then echo "dropping $name (not pinned any more)"; rm -rf "${CORPUS:?}/$name" "${WHEELS:?}/$name"; fi
done

for spec in "${PACKAGES[@]}"; do
  name="${spec%%==*}"
  if [ -f "$CORPUS/$name/.pin" ] && [ "$(cat "$CORPUS/$name/.pin")" = "$spec" ]; then
    echo "have $spec"
    continue
  fi
  rm -rf "${CORPUS:?}/$name" "${WHEELS:?}/$name"
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
  find "$CORPUS/$name" -type d -empty -delete
  mkdir -p "$CORPUS/$name"
  echo "$spec" > "$CORPUS/$name/.pin"
  echo "got $spec: $(find "$CORPUS/$name" -name '*.py' | wc -l) files"
done
echo "corpus: $(find "$CORPUS" -name '*.py' | wc -l) files, $(find "$CORPUS" -name '*.py' -print0 | xargs -0 cat | wc -l) lines"
