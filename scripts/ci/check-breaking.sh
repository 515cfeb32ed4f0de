#!/usr/bin/env bash
# buf breaking (FILE rules) against every earlier commit that changed proto/, so a break can not
# slip in through a series of commits. The first commit with protos has nothing to compare with.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
commits=$(git log --format=%H -n 50 HEAD~1 -- proto buf.yaml 2>/dev/null || true)
if [ -z "$commits" ]; then
  echo "buf breaking: no earlier commit with protos; nothing to compare"
  exit 0
fi
for c in $commits; do
  if git cat-file -e "$c:buf.yaml" 2>/dev/null; then
    npx buf breaking --against ".git#ref=$c"
    echo "buf breaking: no break against $(git log -1 --format='%h %s' "$c")"
  fi
done
