# The bundle examples' shared steps (run.sh, range.sh, range_rows.sh, range_seq.sh, range_gpu.sh):
# where tessera and the work folder are, the step and failure lines, a refusal check, building a
# bundle with a demo program, and reading a rule's arch. Each example sources it after `set -euo
# pipefail` and HERE, naming its default work folder under build/examples:
#   . "$HERE/common.sh" bundle_range "$@"
EXAMPLE=$(basename "$0")
T=${2:-$HERE/../../build/cli/tessera}
WORK=${3:-$HERE/../../build/examples/$1}
T=$(cd "$(dirname "$T")" && pwd)/$(basename "$T")
CC=${CC:-cc}
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
step() { echo "== $*"; }
die() { echo "$EXAMPLE: $*" >&2; exit 1; }
# refused WHAT COMMAND...: the command must exit with code 2 and say why in exactly one line.
refused() {
  local what=$1
  shift
  set +e
  "$@" > out.txt 2> err.txt
  local rc=$?
  set -e
  [ "$rc" = 2 ] || die "$what: exit $rc, expected 2 ($(cat err.txt))"
  [ "$(wc -l < err.txt)" = 1 ] || die "$what: expected one line on stderr, got: $(cat err.txt)"
}
# build_demo BUNDLE DEMO.c PROGRAM [strict]: the bundle's library with make, then the demo against
# it with a plain $CC (strict: every warning is an error).
build_demo() {
  local dir=$1 src=$2 out=$3 warn=()
  if [ "${4:-}" = strict ]; then warn=(-Wall -Wextra -Werror); fi
  if [ ${#warn[@]} -gt 0 ]; then make -s -C "$dir" CC="$CC" CFLAGS="-O2 ${warn[*]}"; else make -s -C "$dir" CC="$CC"; fi
  # shellcheck disable=SC2046  # link.flags holds several flags
  "$CC" -std=c11 -O2 "${warn[@]}" "$HERE/$src" -I"$dir" "$dir/libtessera_bundle.a" $(cat "$dir/link.flags") -lm -o "$out"
}
# rule_field RULE NAME: the first string field NAME of a dispatch rule (its arch, its kernel).
rule_field() { grep -o "\"$2\": \"[^\"]*\"" "$1" | head -1 | sed 's/.*: "//; s/"$//'; }
