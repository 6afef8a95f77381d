#!/usr/bin/env bash
# The GPU check: one run on a machine with an NVIDIA GPU, no internet and no apt, which carries
# Python torch (a CUDA build, LibTorch inside), CMake, ninja, a C++ compiler and nvcc. Prepare it
# here first (scripts/stage-offline-deps.sh; the tree must carry .offline), then on that machine:
#
#   scripts/gpu-check.sh [out_dir=$OUT or gpu-check-out]
#
# It builds ddplab against that torch with the staged dependencies, as the front door does (warnings
# recorded and reported by scripts/check-warnings.sh, not -Werror, so one warning costs no test
# step): ddplab and the bare loop first; the test binary then builds in the background while the GPU
# steps that time nothing run (2 replicas over gloo sharing the one GPU, one epoch each of bf16
# autocast and of bf16 gradient all-reduce, a stop and resume on cuda, the planner's check of the
# steps at the global batches of 4 and 8 replicas: scripts/gpu-plan-check.sh). Then, on a quiet
# machine: how the programs bound the C++ standard library, the GPU-only unit tests (NCCL included;
# none may skip), the quickstart on cuda (1 replica, its batches made on the GPU), the time from the
# start of training to a target test accuracy (99% on MNIST when .offline/data/mnist was staged,
# else 90% on Fashion-MNIST), the speed recipe over 5 seeds (its Fashion-MNIST twin without MNIST),
# eager and with its step captured in a CUDA graph (replicas.cuda_graph), seed 1 again without its
# prewarm (replicas.prewarm_steps), the GPU variant of bench/compare.sh (ddplab, eager and at batch
# 64 graphed, vs PyTorch's Python DDP vs the bare loop: steady images/s after one epoch of warm-up,
# and the seconds outside training) at batch 64 and 512, the compiler warnings and all unit tests,
# and last what explains the figures: the quickstart again with its batches made on the host, the
# bare loop eager vs captured in a CUDA graph, and a profile of 20 steady steps each of the
# quickstart, the speed recipe (eager and captured) and the bare loop (bench/step_profile.py; the
# traces are kept in <out_dir>). Everything goes to <out_dir>/gpu-check.txt, each step timed; its
# figures, as the tables of docs/performance.md take them, end the output and
# <out_dir>/gpu-summary.md (bench/gpu_summary.py). The data travels in .offline/data (that machine
# has no /usr/share/datasets). Each step runs even if an earlier one failed; the exit code says
# whether all passed.
#
# The whole check must end inside one call of the device tool (600 s at most, the build included):
# GPU_CHECK_BUDGET_S (570; 3600 in a dry run) is the time it may take. A step that would start with
# less of it left than the step needs is skipped and named at the end; a running step is stopped
# when the budget ends. Not timed on a GPU yet: the estimate is 9-10 minutes on 16 cores.
#
# GPU_CHECK_SKIP_BUILD=1 reuses the build directory as it is (a rerun on a machine that still holds
# it): no configure, no build.
#
# GPU_CHECK_DRY_RUN=1 checks the script itself on a machine without a GPU (with the CUDA wheel:
# PYTHON=.venv-cuda/bin/python GPU_CHECK_BUILD=build-cuda): every step, on device cpu over gloo,
# with short runs and a 50% accuracy target. Its figures mean nothing. DDPLAB_WERROR=ON keeps the
# configure of a build directory made by scripts/check-cuda-build.sh as it is.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
log="$out/gpu-check.txt"
: >"$log"
failed=() skipped=() skipped_diagnostics=()
budget=${GPU_CHECK_BUDGET_S:-570}
[ -n "${GPU_CHECK_DRY_RUN:-}" ] && budget=${GPU_CHECK_BUDGET_S:-3600}
# step NAME COMMAND...: runs a step, logs its output and time. NEED (seconds, 10 unless set for
# that call) is what it needs of the budget to start; a step that hangs is killed after STEP_LIMIT
# seconds (240 unless set) or at the budget's end, so the steps after it still run or are skipped.
# A step skipped for the budget fails the check, unless it is a diagnostic (DIAGNOSTIC=1: it
# explains figures rather than judging a target), which is listed apart.
step() {
  local name=$1 start=$SECONDS left=$((budget - SECONDS)) limit=${STEP_LIMIT:-240}
  shift
  if [ "$left" -lt "${NEED:-10}" ]; then
    echo "== $name: skipped, $left s of the budget left, it needs about ${NEED:-10} s" | tee -a "$log"
    if [ -n "${DIAGNOSTIC:-}" ]; then skipped_diagnostics+=("$name"); else skipped+=("$name"); fi
    return
  fi
  local why="its limit of $limit s"
  [ "$limit" -le "$left" ] || { limit=$left why="the end of the budget"; }
  echo "== $name" | tee -a "$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then echo "   ok ($((SECONDS - start)) s)" | tee -a "$log"; return; fi
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "   stopped at $why" | tee -a "$log"
  echo "   FAILED ($((SECONDS - start)) s)" | tee -a "$log"
  failed+=("$name")
}
python=${PYTHON:-python3}
build=${GPU_CHECK_BUILD:-build-gpu}
dev=cuda nccl=nccl extra=() rounds=3 limit64=30000 limit512=60000 fashion_target=0.90 plan_target=0.55 profile_from=100
test_jobs=12 tests_limit=300  # the unit tests on 16 cores
bare_modes="eager graph" bare_steps=500 bare_warmup=100
if [ -n "${GPU_CHECK_DRY_RUN:-}" ]; then
  dev=cpu nccl=gloo extra=(dataset.train_limit=3200 dataset.test_limit=500) rounds=1 limit64=3200 limit512=3200 fashion_target=0.50
  plan_target=1.0 profile_from=10 test_jobs=$(($(nproc) + 1)) tests_limit=600  # 12 at once oversubscribe a small machine past 300 s
  bare_modes=eager bare_steps=20 bare_warmup=5  # a CUDA graph needs a GPU
fi
runs=$(mktemp -d)
unset DDPLAB_REQUIRE_BROWSER  # no browser there: the browser tests skip

step "machine" sh -c "nvidia-smi; nproc; $python -c 'import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"gpus\", torch.cuda.device_count())'"
[ -d .offline/root/usr ] || { echo "no .offline/root: run scripts/stage-offline-deps.sh where apt works, and carry .offline" | tee -a "$log"; exit 2; }
fashion=/usr/share/datasets/fashion-mnist
[ -f $fashion/train-images-idx3-ubyte.gz ] || fashion=$PWD/.offline/data/fashion-mnist
[ -f "$fashion/train-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $fashion: run scripts/stage-offline-deps.sh and carry .offline" | tee -a "$log"; exit 2; }
data="dataset.root=$fashion"
prefix=$($python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
zlib=$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 /usr/lib64/libz.so.1 2>/dev/null | head -n 1)
cuda_root=${CUDA_HOME:-/usr/local/cuda}
# A toolkit without the math libraries' headers (cusparse.h, which ATen/cuda/CUDAContext.h
# includes) or without libnvrtc: take them from the torch wheel's nvidia packages, as
# scripts/check-cuda-build.sh does.
site=$($python -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
if [ ! -f "$cuda_root/include/cusparse.h" ]; then
  math_inc=$(find "$site/nvidia" -maxdepth 3 -name cusparse.h -printf '%h\n' 2>/dev/null | head -n 1)
  export CPLUS_INCLUDE_PATH="${math_inc}${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
fi
nvrtc=$(ls "$cuda_root"/lib64/libnvrtc.so* 2>/dev/null | head -n 1)
[ -n "$nvrtc" ] || nvrtc=$(find "$site/nvidia" -name 'libnvrtc.so*' 2>/dev/null | head -n 1)
tests_build=""  # the background build of the test binary, while it runs
if [ -n "${GPU_CHECK_SKIP_BUILD:-}" ] && [ -x "$build/bin/ddplab_tests" ]; then
  echo "== configure and build: skipped (GPU_CHECK_SKIP_BUILD; $build as it is)" | tee -a "$log"
else
  step "configure" cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DZLIB_LIBRARY="$zlib" -DZLIB_INCLUDE_DIR="$PWD/.offline/root/usr/include" \
    -DCUDAToolkit_ROOT="$cuda_root" -DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" \
    ${nvrtc:+-DCUDA_nvrtc_LIBRARY="$nvrtc"} -DDDPLAB_WERROR="${DDPLAB_WERROR:-OFF}"
  STEP_LIMIT=420 step "build: ddplab and the bare loop" cmake --build $build -j "$(nproc)" --target ddplab bare_loop
  # Two cores stay free for the GPU steps that run meanwhile; ninja's own log says what it built.
  timeout -k 10 $((budget - SECONDS > 0 ? budget - SECONDS : 1)) nice -n 10 \
    cmake --build $build -j "$(($(nproc) > 3 ? $(nproc) - 2 : 1))" >"$runs/build-tests.txt" 2>&1 &
  tests_build=$! tests_build_start=$SECONDS
fi
step "cuda compiled in" grep -q DDPLAB_WITH_CUDA $build/build.ninja
# Every run: the quickstart spec on the staged data (later overrides win), into $runs.
again=($build/bin/ddplab run experiments/quickstart.json "$data" "${extra[@]}" output="$runs")
quickstart=("${again[@]}" --force)

# ---- The GPU steps that time nothing: they may share the machine with the test binary's build.
# NCCL refuses two ranks on one GPU, so a 2-replica run on one GPU goes over gloo (NCCL itself is
# checked by Comm.NcclWorldOfOneOnCuda below).
step "quickstart cuda, 2 replicas sharing the GPU, gloo" "${quickstart[@]}" replicas.count=2 replicas.device=$dev \
  replicas.backend=gloo epochs=1 name=gpu_gloo2
step "quickstart cuda, bf16 autocast, 1 replica" "${quickstart[@]}" replicas.device=$dev precision=bf16 epochs=1 \
  name=gpu_bf16
step "quickstart cuda, 2 replicas, bf16 all-reduce over gloo" "${quickstart[@]}" replicas.count=2 replicas.device=$dev \
  replicas.backend=gloo replicas.grad_dtype=bf16 epochs=1 name=gpu_wire16
# A GPU run stopped mid-epoch resumes from its checkpoint (CUDA tensors, the CUDA dropout
# generator's state, pinned batches restarting mid-epoch): exit 143 at step 60, then done.
step "resume on cuda after a stop" bash -c 'dir=$1; shift
  "$@" --force debug.fault=stop debug.rank=0 debug.step=60; rc=$?
  [ $rc -eq 143 ] || { echo "the stopped run exited $rc, not 143"; exit 1; }
  "$@" && grep -q "\"status\": \"done\"" "$dir/manifest.json" && [ "$(wc -l <"$dir/epochs.jsonl")" -eq 2 ] &&
    grep -q "\"restarts\"" "$dir/manifest.json"' _ "$runs/gpu_resume/seed=1" "${again[@]}" replicas.device=$dev \
  replicas.backend=$nccl epochs=2 name=gpu_resume
# The planner: what one GPU can check of N = 4, 8 (the steps at their global batches, 256 and 512;
# docs/planner.md "Checking at N = 4, 8 on GPUs"): calibrate, plan, score 1-replica runs at 256, 512.
# Its timing runs share the machine with the build: the check scores the steps, not the times.
# The least needed step of all: it starts only if, after its limit of 120 s, the budget still
# holds the 325 s or so that the steps below need on 16 cores (estimated).
DIAGNOSTIC=1 NEED=445 STEP_LIMIT=120 step "planner: steps at the global batches of 4 and 8 replicas" env PLAN_TARGET_LOSS=$plan_target \
  scripts/gpu-plan-check.sh $build "$runs/plan-check" $dev "$fashion" "${extra[@]}"
if [ -n "$tests_build" ]; then
  echo "== build: the test binary (in the background since ddplab was built)" | tee -a "$log"
  if wait "$tests_build"; then echo "   ok ($((SECONDS - tests_build_start)) s since it began)" | tee -a "$log"
  else echo "   FAILED ($((SECONDS - tests_build_start)) s since it began)" | tee -a "$log"; failed+=("build: the test binary"); fi
  cat "$runs/build-tests.txt" >>"$log"
fi

# ---- On a quiet machine: the test binary's GPU steps, then everything that is timed.
# Which libstdc++ the toolchain links and where the programs' std::filesystem calls land
# (base/stdlib_binding.h): ddplab refuses to start when they land anywhere but libstdc++.so.6.
step "C++ standard library binding" bash -c 'b=$1; cxx=$(sed -n "s/^CMAKE_CXX_COMPILER:[A-Z]*=//p" $b/CMakeCache.txt)
  echo "compiler $cxx: libstdc++.so -> $($cxx -print-file-name=libstdc++.so), libstdc++.so.6 -> $($cxx -print-file-name=libstdc++.so.6)"
  for exe in $b/bin/ddplab $b/bin/ddplab_tests; do echo "$exe:"; readelf -d $exe | grep -E "NEEDED|RPATH|RUNPATH" | head -n 8
    ldd $exe | grep -E "libstdc|libtorch.so"; done
  $b/bin/ddplab --version && $b/bin/ddplab_tests --gtest_filter="StdlibBinding.*"' _ "$build"
# The GPU-only unit tests (CUDA streams, events, pinned copies, NCCL) skip themselves without a
# GPU, which ctest counts as passing: here a skip is a failure. With them the tests of
# replicas.cuda_graph, which capture and replay on a GPU (and run every step eagerly on a CPU).
step "GPU unit tests, none skipped" bash -c 'out=$("$1" --gtest_filter="*OnCuda*:GraphedStep.*:*CudaGraph*" 2>&1); rc=$?; echo "$out"
  [ $rc -eq 0 ] && { [ -n "$2" ] || ! grep -q "SKIPPED \]" <<<"$out"; }' _ "$build/bin/ddplab_tests" "${GPU_CHECK_DRY_RUN:-}"
# Batches made on the device (auto's choice on a GPU; named, so that the dry run takes that path too).
step "quickstart cuda, 1 replica" "${quickstart[@]}" replicas.device=$dev replicas.backend=$nccl dataset.placement=device \
  name=gpu_nccl1
step "records" sh -c "tail -n 1 $runs/gpu_nccl1/seed=1/epochs.jsonl $runs/gpu_gloo2/seed=1/epochs.jsonl \
  $runs/gpu_bf16/seed=1/epochs.jsonl $runs/gpu_wire16/seed=1/epochs.jsonl $runs/gpu_resume/seed=1/epochs.jsonl"
# Time to accuracy: the quickstart (1 replica) on MNIST to 99% if it was staged, else the
# Fashion-MNIST quickstart above to 90%; wall_s counts from the start of training.
target=$fashion_target target_run=$runs/gpu_nccl1
if [ -f .offline/data/mnist/train-images-idx3-ubyte.gz ] || [ -f .offline/data/mnist/train-images-idx3-ubyte ]; then
  target=0.99 target_run=$runs/gpu_mnist
  step "quickstart cuda on MNIST, 1 replica" "${quickstart[@]}" dataset.name=mnist dataset.root="$PWD/.offline/data/mnist" \
    replicas.device=$dev name=gpu_mnist
fi
step "time to $target test accuracy" bench/time_to_accuracy.py "$target_run" "$target"
# The speed recipe (experiments/mnist_speed.json; docs/performance.md "The speed recipe"), 5 seeds:
# issue 29's target is 99% MNIST test accuracy in under 1.0 s from the start of training, mean of
# the seeds, every seed's last epoch above 98.9%. Without MNIST, its Fashion-MNIST twin to 90%.
if [ "$target" = 0.99 ]; then
  speed=(experiments/mnist_speed.json dataset.root="$PWD/.offline/data/mnist") speed_check=(0.99 --floor 0.989 --within 1.0)
else
  speed=(experiments/fashion_speed.json "$data") speed_check=($fashion_target)
fi
speed_name=$(basename "${speed[0]}" .json)
NEED=30 step "speed recipe $speed_name, 5 seeds" bash -c '"${@:3}" && bench/time_to_accuracy.py "$1" $2' _ \
  "$runs/$speed_name" "${speed_check[*]}" $build/bin/ddplab run "${speed[@]}" "${extra[@]}" replicas.device=$dev \
  repeats=5 output="$runs" --force
# The same with the step captured in a CUDA graph (replicas.cuda_graph; docs/performance.md "A CUDA
# graph of the step"): its time to target beside the eager recipe's, same seeds, and seed 1's
# images/s per epoch beside the eager run's (their records differ in the last bits: the graph's
# optimizer reads the lr from the device).
NEED=30 step "speed recipe $speed_name with replicas.cuda_graph, 5 seeds" bash -c '"${@:4}" &&
  bench/time_to_accuracy.py "$1" $2 && { bench/same_records.py "$3/seed=1" "$1/seed=1" || true; }' _ \
  "$runs/${speed_name}_graph" "${speed_check[*]}" "$runs/$speed_name" $build/bin/ddplab run "${speed[@]}" \
  "${extra[@]}" replicas.device=$dev replicas.cuda_graph=true name=${speed_name}_graph repeats=5 output="$runs" --force
# What the recipe's prewarm (replicas.prewarm_steps; docs/performance.md "Warm before the clock")
# moves out of the training clock: seed 1 again without it, its time to target and its epochs'
# seconds from the start of training beside the prewarmed seed 1's (the records should not differ
# but for cuDNN's run-to-run rounding).
NEED=15 step "speed recipe $speed_name, seed 1 without prewarm" bash -c '"${@:4}" &&
  { bench/time_to_accuracy.py "$1" $2; bench/same_records.py "$3/seed=1" "$1/seed=1" || true; }' _ \
  "$runs/${speed_name}_cold" "${speed_check[0]}" "$runs/$speed_name" $build/bin/ddplab run "${speed[@]}" \
  "${extra[@]}" replicas.device=$dev replicas.prewarm_steps=0 name=${speed_name}_cold output="$runs" --force
# At batch 64, where issue 29 asks for 1.5x the peer, ddplab runs twice a round: eager, and with
# its step captured in a CUDA graph (GRAPH=1, the row "1+graph"), both against the same peer and
# bare loop (eager: what a user of either writes). At 512 (0.95 of the bare loop) eager only.
NEED=55 step "compare batch 64" env BATCH=64 DATA="$fashion" WORLDS=1 GRAPH=1 DEVICE=$dev BACKEND=$nccl BUILD=$build \
  PYTHON=$python bench/compare.sh $rounds $limit64
NEED=45 step "compare batch 512" env BATCH=512 DATA="$fashion" WORLDS=1 DEVICE=$dev BACKEND=$nccl \
  BUILD=$build PYTHON=$python bench/compare.sh $rounds $limit512
# The targets first, the diagnostics after them: the compiler warnings and all unit tests (a
# target of issue 29) come before the host-made batches, the bare loop's graph and the profile, so
# that a budget running short skips what explains the figures rather than what judges them.
step "compiler warnings" scripts/check-warnings.sh $build
# All but the GPU step's own tests (the gtest filter above, as ctest names them), which ran there.
NEED=60 STEP_LIMIT=$tests_limit step "unit tests (all)" ctest --test-dir $build -j $test_jobs --timeout 200 \
  --output-on-failure -E "ReportBrowser|Torchrun|OnCuda|GraphedStep[.]|CudaGraph"
# The same run with its batches made on the host (loader thread, pinned copies on a side stream):
# what making them on the GPU buys, in images/s. The batches are the same bit for bit (the
# *OnCuda* unit tests), so the records should be too, unless cuDNN's algorithms (not made
# deterministic) round differently from run to run: the step reports that and does not fail on it.
DIAGNOSTIC=1 step "quickstart cuda, 1 replica, batches made on the host" bash -c '"${@:3}" && { bench/same_records.py "$1" "$2" ||
  echo "(records differ: run-to-run rounding of cuDNN is the first suspect; the batches are equal bit for bit)"; }' _ \
  "$runs/gpu_nccl1/seed=1" "$runs/gpu_host1/seed=1" "${quickstart[@]}" replicas.device=$dev replicas.backend=$nccl \
  dataset.placement=host name=gpu_host1
# What a CUDA graph buys the bare loop, to set beside what replicas.cuda_graph buys ddplab
# (docs/performance.md, "A CUDA graph of the step"): launching each kernel vs replaying the step
# captured in one graph, at the quickstart's batch and the speed recipe's.
DIAGNOSTIC=1 step "bare loop: eager vs CUDA graph" bash -c 'build=$1 dev=$2 steps=$3 warmup=$4; shift 4
  rc=0; for b in 64 256; do for m in "$@"; do
    "$build/bin/bare_loop" mnist_cnn $b $steps "$(nproc)" $dev $warmup - $m || rc=1; done; done; exit $rc' _ \
  $build $dev $bare_steps $bare_warmup $bare_modes
# Where a step's time goes (log.profile_steps; docs/performance.md "Where the time goes"): 20
# steady steps of the quickstart at batch 64 and of the speed recipe (eager, and replayed from
# its CUDA graph), and 20 of the bare loop,
# traced; per step the host's time, operators and kernels and how busy the GPU was. A GPU well
# under 100% busy waits for the host: that is what a CUDA graph of the step would remove. The
# window starts at step $profile_from of an epoch: the speed recipe (batch 256) gets the images for
# 40 steps more, the quickstart's 12,800 are 200 steps at batch 64.
DIAGNOSTIC=1 NEED=25 step "profile: ddplab's steps vs the bare loop's" bash -c 'out=$1 build=$2 dev=$3 runs=$4 from=$5 speed=$6 speed_data=$7
  shift 7; profiled=(replicas.device=$dev epochs=1 dataset.train_limit=12800 log.profile_steps=20 log.profile_from_step=$from
    output="$runs" --force)
  "$build/bin/ddplab" run experiments/quickstart.json "$@" dataset.placement=device "${profiled[@]}" name=profile_quickstart &&
  "$build/bin/ddplab" run "$speed" "$@" "$speed_data" "${profiled[@]}" dataset.train_limit=$(((from + 40) * 256)) \
    name=profile_speed &&
  "$build/bin/ddplab" run "$speed" "$@" "$speed_data" "${profiled[@]}" dataset.train_limit=$(((from + 40) * 256)) \
    replicas.cuda_graph=true name=profile_speed_graph &&
  "$build/bin/bare_loop" mnist_cnn 64 200 "$(nproc)" $dev 100 "$out/bare_loop.pt.trace.json" &&
  cp "$runs/profile_quickstart/seed=1/profile-rank-0.pt.trace.json" "$out/quickstart.pt.trace.json" &&
  cp "$runs/profile_speed/seed=1/profile-rank-0.pt.trace.json" "$out/speed.pt.trace.json" &&
  cp "$runs/profile_speed_graph/seed=1/profile-rank-0.pt.trace.json" "$out/speed_graph.pt.trace.json" &&
  bench/step_profile.py "$out/quickstart.pt.trace.json" "$out/speed.pt.trace.json" "$out/speed_graph.pt.trace.json" \
    "$out/bare_loop.pt.trace.json" --ops 40' _ "$out" $build $dev "$runs" $profile_from "${speed[@]}" "$data" "${extra[@]}"
# The runs' records, logs and the planner's check, without weights and checkpoints (13 MB each for
# mnist_cnn), so that the archive stays a few MB: <out_dir> should hold few, small files.
tar czf "$out/gpu-runs.tgz" --exclude='*.pt' -C "$runs" . 2>/dev/null
list() { local IFS=';'; echo "${*:-none}" | sed 's/;/; /g'; }
echo "== failed: $(list "${failed[@]}")" | tee -a "$log"
echo "== skipped for the budget of $budget s: $(list "${skipped[@]}") ($SECONDS s in all)" | tee -a "$log"
echo "== skipped for the budget, diagnostics (the check passes without them): $(list "${skipped_diagnostics[@]}")" |
  tee -a "$log"
# The figures as the GPU tables of docs/performance.md take them, printed last.
python3 bench/gpu_summary.py "$log" | tee "$out/gpu-summary.md"
[ ${#failed[@]} -eq 0 ] && [ ${#skipped[@]} -eq 0 ]
