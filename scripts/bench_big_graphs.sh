#!/usr/bin/env bash
# How compile and build costs grow with the graph: for deep models (a transformer
# encoder of 6, 12, 24 and 48 layers, a ResNet-style CNN of 75, 150, 300 and 600 blocks; made by
# scripts/make_edge_models.py --big) next to the nine zoo models (testdata/<zoo>/model.onnx),
# prints a table: ONNX nodes, Kiln's steps, `kiln compile` time and peak memory, the
# generated module's size, and the release build time and peak memory (rustc's, the
# largest process cargo ran) of a crate that includes the module.
#
#   scripts/bench_big_graphs.sh [MODEL_NAME ...]      # default: all
#
# A shell script rather than a cargo bench: what it measures is `kiln` and `cargo` as
# processes (wall time and peak RSS through /usr/bin/time -v), not a function in a loop.
# Weights are loaded at run time (--weights-at-runtime), so the build measures the code,
# not include_bytes! of up to 550 MB. The crate's dependencies (kiln-runtime, faer) are
# built once before the first timed build; each timed build compiles only the crate
# that includes the module (release profile: opt-level 3, 16 codegen units).
# Results also go to target/bench-big/results.md. The machine may be shared: say so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$root/target/bench-big"
mkdir -p "$work/gen"
[ -x /usr/bin/time ] || { echo "bench_big_graphs.sh: needs /usr/bin/time (GNU time)" >&2; exit 1; }

echo "== building kiln (release)" >&2
cargo build --release -q -p kiln-compiler --bin kiln
kiln="$root/target/release/kiln"
echo "== test data" >&2
.venv/bin/python scripts/make_edge_models.py --big >&2

models=()
for n in transformer6 transformer12 transformer24 transformer48 resnet75 resnet150 resnet300 resnet600; do
  models+=("$n=testdata/big/$n/model.onnx")
done
for z in alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512; do
  models+=("$z=testdata/$z/model.onnx")
done
if [ $# -gt 0 ]; then
  wanted=("$@"); models=($(for m in "${models[@]}"; do for w in "${wanted[@]}"; do if [ "${m%%=*}" = "$w" ]; then echo "$m"; fi; done; done))
fi

# The crate that includes a module: standalone (its own [workspace]), kiln-runtime by
# path, the workspace's Cargo.lock so the same dependency versions build offline.
crate="$work/crate"
mkdir -p "$crate/src"
cat > "$crate/Cargo.toml" <<TOML
[package]
name = "kiln-bench-big"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
kiln-runtime = { path = "$root/runtime-support" }

[workspace]
TOML
cp "$root/Cargo.lock" "$crate/Cargo.lock"
export CARGO_TARGET_DIR="$work/target"
echo "pub fn nothing() {}" > "$crate/src/lib.rs"
echo "== building the crate's dependencies once" >&2
(cd "$crate" && cargo build --release -q --offline)

# "Elapsed (wall clock) time" h:mm:ss or m:ss.ss -> seconds; "Maximum resident" KB -> MiB.
secs() { awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; printf "%.1f", s}' "$1"; }
mib() { awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$1"; }

out="$work/results.md"
{
  echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores ($(uptime | sed 's/.*load average/load average/'))"
  echo
  echo "| model | ONNX nodes | steps | compile s | compile MiB | module KiB | module lines | build s | rustc MiB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} > "$out"
cat "$out"
for m in "${models[@]}"; do
  name="${m%%=*}"; model="${m#*=}"
  if [ ! -f "$model" ]; then echo "| $name | (missing $model) |" | tee -a "$out"; continue; fi
  nodes=$(.venv/bin/python -c "import onnx,sys; print(len(onnx.load(sys.argv[1]).graph.node))" "$model")
  /usr/bin/time -v -o "$work/gen/$name.compile.time" \
    "$kiln" compile "$model" -o "$work/gen" --name "$name" --weights-at-runtime > /dev/null
  rs="$work/gen/$name.rs"
  steps=$(sed -n '2s#^// \([0-9]*\) steps.*#\1#p' "$rs")
  kib=$(( $(stat -c %s "$rs") / 1024 ))
  lines=$(wc -l < "$rs")
  printf 'pub mod %s {\n    include!("%s");\n}\n' "$name" "$rs" > "$crate/src/lib.rs"
  /usr/bin/time -v -o "$work/gen/$name.build.time" \
    bash -c "cd '$crate' && cargo build --release -q --offline"
  echo "| $name | $nodes | $steps | $(secs "$work/gen/$name.compile.time") | $(mib "$work/gen/$name.compile.time") | $kib | $lines | $(secs "$work/gen/$name.build.time") | $(mib "$work/gen/$name.build.time") |" | tee -a "$out"
done
echo >&2
echo "results in $out" >&2
