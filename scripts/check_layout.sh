#!/usr/bin/env bash
# Size budget and dependency directions (DESIGN.md). Fails on a source file over 800 lines (warns
# over 600) and on includes that cross the forbidden directions:
#   server -> models/backend, models -> backend implementations or CUDA headers, backend -> models.
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
exit $fail
