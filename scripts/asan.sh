#!/usr/bin/env bash
# Builds ddplab (library, CLI, unit tests) with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-asan (gcc, the compiler of the normal build) and runs the tests under it. Not part of CI
# (the build takes as long as the normal one); run it after changing lib/ code that handles memory.
#
#   scripts/asan.sh                          the unit suites (below); exit status = the tests'
#   scripts/asan.sh --all                    every test, the multi-process integration suites too
#   scripts/asan.sh --gtest_filter=Spec.*    any gtest arguments instead
#
# Any sanitizer report fails the run: -fno-sanitize-recover=all makes UBSan abort like ASan.
set -euo pipefail
cd "$(dirname "$0")/.."

unit='Spec.*:SweepSpec.*:IdxReader.*:IdxWriter.*:Dataset*:*DatasetLimits*:Loader.*:Cifar.*:CifarDataset.*:Transform.*:RunLog.*:Report*:GradReducer.*:NoiseScale.*:ParamAverager.*:World.*:Models.*:*DropoutModes*:CifarTfCnn.*:ResNet20.*:BatchNorm.*:LrSchedule.*:Optimizer.*:Checkpoint.*:SimulatedReplicas.*:HostReadback.*:StreamTimer.*:Comm.*:Link.*'
args=(--gtest_filter="$unit")
if [ "${1:-}" = --all ]; then
  shift
  args=()
fi
[ $# -gt 0 ] && args=("$@")

build=build-asan
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# CXXFLAGS and LDFLAGS only count when CMake first configures build-asan.
CXXFLAGS="$sanitize -g1" LDFLAGS="$sanitize" DDPLAB_BUILD_DIR=$build scripts/bootstrap.sh
if ! grep -q '^CMAKE_CXX_FLAGS:STRING=.*-fsanitize=address' "$build/CMakeCache.txt"; then
  echo "asan: $build was configured without the sanitizers; remove it and run again" >&2
  exit 2
fi

# LibTorch (and OpenBLAS, gloo) are not instrumented, yet none of the usual workarounds is needed:
# - detect_leaks stays on: the tests leak nothing, and LibTorch's process-lifetime singletons are
#   still reachable at exit, which LeakSanitizer does not report;
# - detect_container_overflow cannot misfire: libstdc++ annotates std::vector only when
#   _GLIBCXX_SANITIZE_VECTOR is defined, which this build does not do, so containers shared with
#   LibTorch carry no annotations to disagree about;
# - the tests' child processes (build-asan/bin/ddplab in the integration suites) inherit these
#   options; a sanitizer report there fails the test through the child's exit status.
# print_stacktrace=1 gives UBSan reports a stack like ASan's.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
echo "asan: ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS"
exec "$build/bin/ddplab_tests" "${args[@]}"
