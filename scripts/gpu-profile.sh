#!/usr/bin/env bash
# One device call that profiles the kernels whose time the 2^27 partition spends, with Nsight
# Compute on the kernel bench narrowed to them (SNARKPIPE_BENCH_PARTS / _MIN_LOG / _MAX_LOG):
#   fpmul    the Fr and Fp multiplication microkernels the floors come from
#   g1       G1 2^24, random scalars: the histogram and the scatter
#   g1buckets  the same MSM's bucket phase and its fix-up
#   g1ones   G1 2^24, bits: the 0/1 batch sum
#   g2, g2ones  the same for G2 at 2^22 (bucket phase; 0/1 sum)
#   ntt      the NTT at 2^24: bit reversal and radix-8 passes
#   binned   G1 2^24, random: the binned scatter's two passes, every window of one MSM
#   direct   the same MSM's direct scatter launches (the bench's "direct scatter" variant)
# PROFILES picks which (default all, in that order). Each writes its details page as text,
# $OUT/prof-NAME.txt; KEEP_REPORTS=1 keeps the .ncu-rep files too (tens of MB each, more than a
# device call brings back). ncu leaves the clocks alone (--clock-control none,
# as the device's METHOD.md asks). Unpack the bundle first (scripts/gpu-final.sh says how).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
log=$out/profile.log
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine" | tee -a "$log"; exit 1; }
deadline=$((SECONDS + ${BUDGET:-420}))
profile() {  # profile NAME KERNEL_REGEX LAUNCHES PARTS MIN_LOG MAX_LOG
  local name=$1 kernels=$2 count=$3 left=$((deadline - SECONDS - 10))
  if [ "$left" -lt 20 ]; then echo "SKIPPED (out of time): $name" >>"$log"; return; fi
  echo "== $name ($(date -u +%T)): kernels $kernels, $count launches" >>"$log"
  local start=$SECONDS
  SNARKPIPE_BENCH_PARTS=$4 SNARKPIPE_BENCH_MIN_LOG=$5 SNARKPIPE_BENCH_MAX_LOG=$6 timeout "$left" \
    "$ncu" --clock-control none --set full --import-source no -k "regex:$kernels" -c "$count" \
    -o "$out/prof-$name" -f .gpu/cuda_kernels_bench >>"$log" 2>&1 || echo "FAILED: $name rc=$?" >>"$log"
  [ -f "$out/prof-$name.ncu-rep" ] && "$ncu" -i "$out/prof-$name.ncu-rep" --page details >"$out/prof-$name.txt" 2>&1
  [ "${KEEP_REPORTS:-0}" = 1 ] || rm -f "$out/prof-$name.ncu-rep"
  echo "   $name took $((SECONDS - start)) s" >>"$log"
}
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; "$ncu" --version; } >>"$log" 2>&1
for p in ${PROFILES:-fpmul g1 g1buckets g1ones g2 g2ones ntt}; do
  case $p in
    fpmul) profile fpmul '^ff_f[rp]_mul_rate$' 4 none 30 0 ;;
    g1) profile g1 '^msm_(digit_histogram|scatter)$' 8 g1 24 24 ;;
    g1buckets) profile g1buckets '^msm_g1_(buckets|bucket_fixup)$' 2 g1 24 24 ;;
    g1ones) profile g1ones '^msm_g1_sum_points$' 2 g1 24 24 ;;
    g2) profile g2 '^msm_g2_buckets$' 1 g2 22 22 ;;
    g2ones) profile g2ones '^msm_g2_sum_points$' 1 g2 22 22 ;;
    ntt) profile ntt '^ntt_(dit_pass|dit_stages|bit_reverse)$' 6 ntt 24 0 ;;
    binned) profile binned '^msm_bin_(scatter|place)$' 26 g1 24 24 ;;
    direct) profile direct '^msm_scatter_indexed$' 13 g1 24 24 ;;
  esac
done
grep -E "==|FAILED|SKIPPED|took|ERR" "$log"
