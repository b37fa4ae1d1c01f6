#!/usr/bin/env bash
# gpu-smoke: on a Linux host with an NVIDIA GPU and driver, build gpulayer,
# start `agent -dev -dev-gpus=0` (real GPUs only), print the fingerprinted
# devices, run a job whose task calls `nvidia-smi -L` for the one GPU it was
# given, and check the task saw exactly its assigned UUID.
#
#   scripts/gpu-smoke.sh            # exits 0 on success
#
# Needs: go, gcc (cgo for NVML), nvidia-smi, curl. Uses a temporary data dir
# and HTTP port 24656 (GPU_SMOKE_PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
port=${GPU_SMOKE_PORT:-24656}
work=$(mktemp -d)
addr="http://127.0.0.1:$port"
export GPULAYER_ADDR=$addr

command -v nvidia-smi >/dev/null || { echo "gpu-smoke: nvidia-smi not found: this host has no NVIDIA driver" >&2; exit 1; }
echo "==> host GPUs (nvidia-smi -L)"
nvidia-smi -L

echo "==> building (cgo, NVML)"
CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go build -o "$work/gpulayer" .

"$work/gpulayer" agent -dev -dev-gpus=0 -data-dir="$work/data" -http-port="$port" -raft-port=$((port + 1)) >"$work/agent.log" 2>&1 &
agent=$!
trap 'kill $agent 2>/dev/null; wait $agent 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 150); do
  curl -fsS "$addr/v1/status/health" >/dev/null 2>&1 && break
  kill -0 $agent 2>/dev/null || { echo "agent exited:"; cat "$work/agent.log"; exit 1; }
  sleep 0.2
done

echo "==> fingerprinted devices"
node=$(curl -fsS "$addr/v1/nodes" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ID"])')
curl -fsS "$addr/v1/node/$node" | python3 -c '
import json, sys
n = json.load(sys.stdin)
print("memory_model:", n.get("MemoryModel"), " availability:", n.get("Availability"))
for g in n["NodeResources"]["Devices"] or []:
    attrs = {k: (v.get("Int") or v.get("String") or v.get("Bool") or v.get("Float")) for k, v in g["Attributes"].items()}
    print(f"{g[\"Vendor\"]}/{g[\"Type\"]}/{g[\"Name\"]}  {attrs}")
    for i in g["Instances"]:
        print(f"  {i[\"ID\"]}  healthy={i[\"Healthy\"]}  {i.get(\"Locality\", \"\")}")
'

cat >"$work/smoke.hcl" <<'HCL'
job "gpu-smoke" {
  type = "batch"
  group "smoke" {
    task "smi" {
      driver = "native"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo visible=$CUDA_VISIBLE_DEVICES; nvidia-smi -L -i \"$CUDA_VISIBLE_DEVICES\""]
      }
      resources {
        cpu    = 100
        memory = 128
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
HCL
echo "==> running a one-GPU job"
"$work/gpulayer" job run "$work/smoke.hcl"
alloc=$(curl -fsS "$addr/v1/job/gpu-smoke/allocations" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ID"])')
for _ in $(seq 1 100); do
  status=$(curl -fsS "$addr/v1/allocation/$alloc" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ClientStatus"])')
  [[ $status == complete || $status == failed ]] && break
  sleep 0.2
done
assigned=$(curl -fsS "$addr/v1/allocation/$alloc" | python3 -c '
import json, sys
a = json.load(sys.stdin)
print(",".join(i for t in a["AllocatedResources"]["Tasks"].values() for d in t["Devices"] or [] for i in d["DeviceIDs"]))')
out=$("$work/gpulayer" alloc logs "$alloc" smi)
echo "$out"
echo "==> assigned: $assigned (alloc $alloc, $status)"
seen=$(grep -c '^GPU ' <<<"$out" || true)
if [[ $status != complete || $seen -ne 1 || $out != *"visible=$assigned"* || $out != *"UUID: $assigned"* ]]; then
  echo "gpu-smoke: FAIL: the task did not see exactly its assigned GPU $assigned" >&2
  exit 1
fi
echo "gpu-smoke: OK: the task saw exactly $assigned"
