#!/usr/bin/env bash
# Runs one golden lowering test: compiles the fixed kernel and config that the check file's
# `// COMPILE:` line names with `tessera compile`, and holds the emitted IR against the file's
# FileCheck lines. A change in a strategy or a pass shows as a failed check line.
#   golden_test.sh TESSERA FILECHECK CHECK_FILE                  the IR must match
#   golden_test.sh TESSERA FILECHECK CHECK_FILE --mismatch ARGS  the negative control: the IR of the
#       `tessera compile ARGS` (another config) must compile and must NOT match, with FileCheck
#       naming the check line that failed (so a crash or a missing file never passes as a mismatch).
set -uo pipefail
tessera=$1 filecheck=$2 file=$3
shift 3
[ -x "$filecheck" ] || { echo "golden: FileCheck not found at '$filecheck' (Debian: llvm-22-tools; scripts/setup.sh)"; exit 1; }
read -ra args <<<"$(sed -n 's|^// COMPILE: ||p' "$file")"
[ ${#args[@]} -gt 0 ] || { echo "golden: $file has no '// COMPILE:' line"; exit 1; }
expect=match
if [ "${1:-}" = --mismatch ]; then
  expect=mismatch
  shift
  args=("$@")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$tessera" compile "${args[@]}" >"$tmp/ir.mlir" 2>"$tmp/compile.err"; then
  echo "golden: tessera compile ${args[*]} failed:"
  cat "$tmp/compile.err"
  exit 1
fi
"$filecheck" --input-file="$tmp/ir.mlir" "$file" >"$tmp/check.out" 2>&1
rc=$?
if [ $expect = match ]; then
  if [ $rc -ne 0 ]; then
    echo "golden: the IR of 'tessera compile ${args[*]}' no longer matches $file:"
    cat "$tmp/check.out"
    exit 1
  fi
  echo "golden: $(basename "$file") matches ($(grep -c '^// CHECK' "$file") check lines, $(wc -l <"$tmp/ir.mlir") lines of IR)"
  exit 0
fi
if [ $rc -eq 1 ] && grep -q "error: CHECK[A-Z-]*: expected" "$tmp/check.out"; then
  echo "golden: as it must, $(basename "$file") rejects the IR of 'tessera compile ${args[*]}':"
  grep -m1 "error: CHECK" "$tmp/check.out"
  exit 0
fi
echo "golden: $(basename "$file") accepted the IR of another config (exit $rc): its checks pin nothing"
cat "$tmp/check.out"
exit 1
