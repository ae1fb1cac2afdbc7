#!/usr/bin/env bash
# Size budget, dependency directions (docs/design.md) and references. Fails on a source file over 800 lines
# (warns over 600), on includes that cross the forbidden directions (server must not include models or
# backend, models must not include backend implementations or CUDA headers, backend must not include
# models), and on a tracked file that cites a path missing from the tree (see check_refs below).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
while IFS= read -r f; do
  n=$(wc -l <"$f")
  if [ "$n" -gt 800 ]; then echo "FAIL size: $f has $n lines (limit 800)"; fail=1
  elif [ "$n" -gt 600 ]; then echo "warn size: $f has $n lines (aim for 600)"; fi
done < <(git ls-files 'src/*.h' 'src/*.cpp' 'src/*.cu' 'src/*.cuh' 'tests/*.cpp' 'tools/*.py' 'bench/*.cpp' 'fuzz/*.cpp')

check() {  # dir, regex, description
  local hits
  hits=$(git ls-files "$1" | grep -E '\.(h|cpp|cu|cuh)$' | xargs -r grep -nE "$2" || true)
  if [ -n "$hits" ]; then echo "FAIL include direction ($3):"; echo "$hits"; fail=1; fi
}
check 'src/server/*' '#include *"(models|backend)/' 'server must not include models/ or backend/'
check 'src/models/*' '#include *(<cuda|<cublas|"backend/(cpu|cuda)/)' 'models must not name a backend or include CUDA headers'
check 'src/backend/*' '#include *"models/' 'backend must not include models/'
check 'src/runtime/*' '#include *"server/' 'runtime must not include server/'
check 'src/text/*' '#include *"(models|backend|runtime|server)/' 'text sits below models'
check 'src/image/*' '#include *"(models|backend|runtime|server)/' 'image sits below models'
check 'src/io/*' '#include *"(models|backend|runtime|server|text|image)/' 'io sits below text and image'

# References: a tracked file must not cite what a clone does not have. (1) Files outside the tree: the
# design notes and research sheets beside the repository (their facts live in docs/), ../shared. (2) Every
# repository path a text file mentions (src/..., tests/..., docs/..., or a source-relative C++ path such as
# backend/ops.h) must exist in the tree (also as its packed X.xz / X.gz), or be git-ignored (generated:
# fetched test data, node_modules). Only file names with an extension are checked (not directories, nor
# build outputs such as tests/test_backend); Transformers' own files (models/<family>/*.py) and paths with
# wildcards are skipped.
check_refs() {
  local texts hits tracked unresolved
  texts=$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' '*.py' '*.md' '*.sh' '*.mjs' '*.cmake' '*CMakeLists.txt' \
    '*.yml' '*.yaml' '.ci/*' | grep -v '^tests/golden/text/\|^tests/data/')
  hits=$(printf '%s\n' "$texts" | grep -v '^scripts/check_layout.sh$' |
    xargs -r grep -nE 'DESIGN\.md|(^|[^A-Za-z0-9_])research/|\.\./shared|/work/shared' || true)
  hits=$(printf '%s\n' "$hits" | grep -v '^docs/' | grep -v '^$' || true)
  if [ -n "$hits" ]; then echo "FAIL references outside the tree (move the facts into docs/ and cite those):"; echo "$hits"; fail=1; fi
  tracked=$(mktemp)
  { git ls-files; git ls-files | awk -F/ '{p=$1; for (i = 2; i < NF; i++) { print p; p = p "/" $i } if (NF > 1) print p}'; } |
    sort -u >"$tracked"
  unresolved=$(printf '%s\n' "$texts" | xargs -r grep -noE \
    '(^|[^A-Za-z0-9_./:-])((src|tests|tools|docs|scripts|bench|fuzz|examples|cmake|models)/[A-Za-z0-9_./-]*[A-Za-z0-9_]|(base|tensor|io|text|image|backend|runtime|server|cli)/[A-Za-z0-9_./-]*\.(h|cpp|cu|cuh))($|[^A-Za-z0-9_*{$-])' |
    awk -v tracked="$tracked" '
      BEGIN { while ((getline l < tracked) > 0) have[l] = 1 }
      {
        f = $0; sub(/:.*/, "", f); rest = substr($0, length(f) + 2); line = rest; sub(/:.*/, "", line)
        t = substr(rest, length(line) + 2)
        sub(/^[^A-Za-z0-9_]/, "", t); sub(/[^A-Za-z0-9_]$/, "", t); sub(/\/$/, "", t)
        if (t !~ /\/[^\/]*\.[A-Za-z0-9]+$/ || t ~ /^models\/[a-z0-9_]+\/[a-z0-9_]*\.py$/) next
        dir = f; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
        n = split(t "|src/" t "|" dir "/" t, cand, "|")
        for (i = 1; i <= n; i++) if ((cand[i] in have) || ((cand[i] ".xz") in have) || ((cand[i] ".gz") in have)) next
        print f ":" line ": " t
      }' | sort -u)
  rm -f "$tracked"
  if [ -n "$unresolved" ]; then
    unresolved=$(printf '%s\n' "$unresolved" | while IFS= read -r l; do
      { git check-ignore -q --no-index "${l##*: }" || git check-ignore -q --no-index "${l##*: }/"; } || printf '%s\n' "$l"
    done)
  fi
  if [ -n "$unresolved" ]; then echo "FAIL references to paths that are not in the tree:"; echo "$unresolved"; fail=1; fi
}
check_refs
exit $fail
