#!/bin/sh
# Rebuilds the prebuilt libraries of fixtures/ctx_prebuilt_cuda from tests/binaries/quant.c (gcc only:
# the "CUDA" build just adds the .nv_fatbin section nvcc would). The outputs are committed so the tests
# need no compiler; rerun this only when quant.c changes, then regenerate the golden reports.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../fixtures/ctx_prebuilt_cuda/quantlib"
for v in 118 121; do
  gcc -O1 -shared -fPIC -DWITH_DEVICE_CODE -Wl,--build-id=none -o "$out/libquant_cuda$v.so" "$here/quant.c"
done
gcc -O1 -shared -fPIC -Wl,--build-id=none -o "$out/libquant_cpu.so" "$here/quant.c"
