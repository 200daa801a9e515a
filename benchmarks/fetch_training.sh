#!/usr/bin/env bash
# Fetch the training corpus: the .py files of seven pinned public training
# repositories (the commits of REALREPOS.md) into benchmarks/training/<name>/.
#
# Usage: benchmarks/fetch_training.sh [NAME ...]        (default: all seven)
#
# Two sources, per repository:
#  (a) a local bare git directory: with MIRRORS=/some/dir set, the repository
#      OWNER/REPO is read from $MIRRORS/OWNER+REPO/repo (the layout of the
#      mirrors on the development machine: MIRRORS=/work/.mirror).  The .py
#      files of the pinned commit are exported blob by blob: `git archive`
#      fails on these mirrors when a large non-source blob is absent.
#  (b) otherwise, a partial clone from github.com (no blobs), a sparse
#      checkout of '*.py' at the pinned commit (fetches those blobs only),
#      then the same export.  NOT TESTED against github.com: the development
#      machine has no network access to it.  The same steps were tested with
#      GIT_BASE=file:///some/dir (a bare copy of a mirror at
#      /some/dir/OWNER/REPO.git with uploadpack.allowFilter and
#      uploadpack.allowAnySHA1InWant set); GIT_BASE defaults to https://github.com.
#
# A repository already exported at its pin (training/<name>/.commit) is
# skipped.  The training folder is ignored by git (benchmarks/.gitignore).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/training"

#     name            owner/repo                  commit
REPOS="
nanochat        karpathy/nanochat           92d63d4e8bb4df75c3b71618f31ddde2378b2bcd
modded-nanogpt  KellerJordan/modded-nanogpt f411b3d346aa52d3504324ca93c230fd84c6c07f
torchtune       pytorch/torchtune           bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1
ao              pytorch/ao                  36027d82d1ad9949597ea16002ff4940374b1b94
torchtitan      pytorch/torchtitan          b5bcd76c66d0acb1a08b176d9639425bc55e0b2a
litgpt          Lightning-AI/litgpt         26857050fe3ff627cd714fe92f5838f51a3d5efa
gpt-fast        pytorch-labs/gpt-fast       32971d3129541c5bfb4f715abc33d1c5f408d204
"

# export_py GIT_DIR COMMIT DEST: write every regular .py file of COMMIT under DEST
# (symbolic links and submodules are skipped)
export_py() {
  local gitdir="$1" sha="$2" dest="$3"
  git --git-dir="$gitdir" ls-tree -r "$sha" |
    awk -F'\t' '$2 ~ /\.py$/ { split($1, a, " "); if (a[1] == "100644" || a[1] == "100755") print a[3] "\t" $2 }' |
    while IFS=$'\t' read -r blob path; do
      mkdir -p "$dest/$(dirname "$path")"
      git --git-dir="$gitdir" cat-file blob "$blob" > "$dest/$path"
    done
}

# clone_sparse OWNER/REPO COMMIT WORKDIR: prints the git dir holding COMMIT's .py blobs
clone_sparse() {
  local slug="$1" sha="$2" work="$3"
  git init -q "$work"
  git -C "$work" remote add origin "${GIT_BASE:-https://github.com}/$slug.git"
  git -C "$work" fetch -q --depth 1 --filter=blob:none origin "$sha"
  git -C "$work" sparse-checkout set --no-cone '*.py'
  git -C "$work" checkout -q --detach "$sha"   # fetches the .py blobs in one batch
  echo "$work/.git"
}

mkdir -p "$OUT"
# the training folder stands for a repository of its own: without this marker
# the parent repository's .gitignore (which ignores training/) would hide every
# file from fix-recompiles and ruff
mkdir -p "$OUT/.git"

wanted=("$@")
echo "$REPOS" | while read -r name slug sha; do
  [ -n "$name" ] || continue
  if [ ${#wanted[@]} -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then continue; fi
  dest="$OUT/$name"
  if [ -f "$dest/.commit" ] && [ "$(cat "$dest/.commit")" = "$sha" ]; then
    echo "have $name @ ${sha:0:12}"
    continue
  fi
  tmp="$(mktemp -d)"
  mirror="${MIRRORS:+$MIRRORS/${slug/\//+}/repo}"
  if [ -n "$mirror" ] && [ -d "$mirror" ]; then
    gitdir="$mirror"
    how="mirror $mirror"
  else
    [ -z "${MIRRORS:-}" ] || echo "no mirror of $slug under $MIRRORS: cloning from github.com"
    gitdir="$(clone_sparse "$slug" "$sha" "$tmp/clone")"
    how="${GIT_BASE:-https://github.com}/$slug"
  fi
  export_py "$gitdir" "$sha" "$tmp/export"
  echo "$sha" > "$tmp/export/.commit"
  rm -rf "${dest:?}"
  mv "$tmp/export" "$dest"
  rm -rf "$tmp"
  echo "got $name @ ${sha:0:12} from $how: $(find "$dest" -name '*.py' | wc -l) files"
done
echo "training: $(find "$OUT" -name '*.py' | wc -l) files, $(find "$OUT" -name '*.py' -print0 | xargs -0 cat | wc -l) lines"
