#!/usr/bin/env bash
# The file protocol end to end (docs/verification.md): export the smoke subset with declared
# capabilities (D = 256 not supported: those cases are not applicable), run the pure-numpy
# reference kernel over it with the Python helper (verification/python/macv_files.py), grade
# it: PASS. Then a copy of the outputs with one output element of one case moved by 1 % of its
# head's norm grades FAIL in that case's family, an export with edited KV inputs grades that case
# ERROR, a plain decode kernel (decisions = 2) passes graded against exact attention, and
# --export-case writes one case.
# Usage: file_protocol.sh MAC_VERIFY PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
mv=$1 py=$2 src=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
cat > "$work/caps.txt" <<'CAPS'
name = numpy-reference
head_dims = 64, 128
kv_layouts = nhd
out_dtype = f32
ring_o_dtype = f32
reports_keys_read = 1
tight_tolerances = 1
CAPS
"$mv" --export "$work/export" --caps "$work/caps.txt" --subset smoke
"$py" "$src/verification/python/numpy_reference_kernel.py" "$work/export"

set +e
"$mv" --grade "$work/export" --out "$work/grade.h5" --quiet --no-summary
rc=$?
set -e
test "$rc" -eq 0 || { echo "file_protocol: grading the reference's outputs exited $rc" >&2; exit 1; }
grep -q '^# mac-verify certificate: PASS' "$work/grade.md"
grep -q '^| d256 | 0 | 0 | 0 | 0 | 2 |' "$work/grade.md"   # not applicable, counted apart
grep -q 'declared name, version | numpy-reference 1 |' "$work/grade.md"
grep -Eq 'implementation SHA-256 \| [0-9a-f]{64} \|' "$work/grade.md"

cp -r "$work/export/outputs" "$work/corrupt"
"$py" - "$work/corrupt/case-00016.h5" <<'PY'
import sys, h5py, numpy as np
# One element of one head-step moved by 1 % of that head's output norm: a relative L2 error of
# exactly 0.01 against the FP32 limit of about 1.2e-4, whatever the nonce made the inputs
# (scaling the element itself by 1.01 passes when the nonce makes it small).
with h5py.File(sys.argv[1], "r+") as f:
    o = f["o"][()]
    o[2, 0, 1, 5] += 0.01 * np.linalg.norm(o[2, 0, 1])
    f["o"][...] = o
PY
set +e
"$mv" --grade "$work/export" --outputs "$work/corrupt" --out "$work/corrupt.h5" --quiet --no-summary --max-repro 0
rc=$?
set -e
test "$rc" -eq 1 || { echo "file_protocol: grading corrupted outputs exited $rc, not 1" >&2; exit 1; }
grep -q '^| grid | 14 | 1 |' "$work/corrupt.md"
grep -q 'output rel L2' "$work/corrupt.md"

# Inputs that are not the case's leave nothing to grade: an ERROR naming them. One export
# with case 16's k_cache emptied (refused by its size before any comparison), one with one of
# its cached keys changed (the regenerated cache differs).
for edit in empty changed; do
  cp -r "$work/export" "$work/edit-$edit"
  "$py" - "$work/edit-$edit/inputs/case-00016.h5" "$edit" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    k = f["k_cache"][()]
    del f["k_cache"]
    if sys.argv[2] == "empty":
        f.create_dataset("k_cache", data=np.zeros(0, np.uint16))
    else:
        k.reshape(-1)[np.flatnonzero(k.reshape(-1) != 0x7FC0)[0]] ^= 1  # one cached key's last bit
        f.create_dataset("k_cache", data=k)
PY
  set +e
  "$mv" --grade "$work/edit-$edit" --out "$work/edit-$edit.h5" --quiet --no-summary --max-repro 0
  rc=$?
  set -e
  test "$rc" -eq 1 || { echo "file_protocol: grading with $edit KV exited $rc, not 1" >&2; exit 1; }
  grep -q '^| grid | 14 | 0 | 0 | 1 |' "$work/edit-$edit.md" ||
    { echo "file_protocol: $edit KV is not one ERROR in grid" >&2; exit 1; }
done
grep -q "\[ERROR\] case 16 .*dataset 'k_cache' has 0 elements, expected" "$work/edit-empty.md"
grep -q "\[ERROR\] case 16 .*the exported KV cache is not this case's" "$work/edit-changed.md"

# A plain decode kernel through the file protocol: no ring, no decisions, graded against exact
# attention; a policy case is applicable to it (exact attention does not depend on K or N).
cat > "$work/plain.txt" <<'CAPS'
name = numpy-plain
kv_layouts = nhd
out_dtype = f32
reports_keys_read = 1
tight_tolerances = 1
writes_ring = 0
decisions = 2
CAPS
"$mv" --export "$work/plain" --caps "$work/plain.txt" --case 0,5,16,858 | grep -q 'exported 4 case'
"$py" "$src/verification/python/numpy_reference_kernel.py" "$work/plain"
"$py" - "$work/plain/inputs/case-00016.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert "ring_q" not in f and int(f.attrs["decisions"]) == 2, "a plain export holds a ring"
PY
"$mv" --grade "$work/plain" --out "$work/plain.h5" --quiet --no-summary
grep -q '^# mac-verify certificate: PASS' "$work/plain.md"
grep -q 'graded against | exact attention' "$work/plain.md"
grep -q '^| policy | 1 | 0 | 0 | 0 | 0 |' "$work/plain.md"

"$mv" --export-case 404 --export "$work/one" --caps "$work/caps.txt" | grep -q 'exported 1 case'
test -f "$work/one/inputs/case-00404.h5"
echo "file_protocol: export, grade PASS, corrupted outputs FAIL, edited inputs ERROR, plain decode PASS, --export-case: all as expected"
