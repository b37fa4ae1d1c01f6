#!/usr/bin/env bash
# Fleet-scale figures of issue 17, each with its ratio to the figure it is
# compared with: the Nomad-identical scheduler benchmark against the
# fast-path one of the same run (Nomad publishes no figure for its
# BenchmarkServiceScheduler), the snapshot of 200,000 allocations and the
# node simulator's figures against their goals and the figures the issue
# measured before (a throwaway simulator, 10,000 nodes). The simulator's
# fleet is GPULAYER_NODESIM_NODES nodes (default 10,000) and
# GPULAYER_NODESIM_ALLOCS allocations (default 100,000): about 5 minutes
# on 2 cores.
set -euo pipefail
GO=${GO:-go}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# metric FILE BENCH-NAME-PREFIX UNIT: the value reported in UNIT by the
# first benchmark line whose name starts with the prefix.
metric() {
	awk -v name="$2" -v unit="$3" 'index($1, name) == 1 { for (i = 3; i < NF; i++) if ($(i+1) == unit) { print $i; exit } }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || a == "" || b == "") print "n/a"; else printf "%.3gx", a / b }'; }

$GO test -run='^$' -bench='^BenchmarkNomadShapedService$' -benchtime=10x ./server/scheduler/ | tee "$out/fast.txt"
$GO test -run='^$' -bench='^BenchmarkNomadServiceScheduler$' -benchtime=10x ./server/ | tee "$out/nomad.txt"
$GO test -run='^$' -bench='^BenchmarkSnapshot200kAllocs$' -benchtime=1x -timeout=20m ./server/fsm/ | tee "$out/snap.txt"
$GO test -run='^$' -bench='^BenchmarkNodeSim$' -benchtime=1x -timeout=40m ./agent/ | tee "$out/sim.txt"

echo
echo "== issue 17 fleet figures (ratio: this figure / the one compared with) =="
for n in 5000 10000; do
	fast=$(metric "$out/fast.txt" "BenchmarkNomadShapedService/${n}_nodes" placements/s)
	for case in "${n}_nodes_25_racks_1200_allocs" "${n}_nodes_12_of_25_racks_1200_allocs"; do
		v=$(metric "$out/nomad.txt" "BenchmarkNomadServiceScheduler/$case" placements/s)
		printf '%-58s %10.0f placements/s  %s of the fast path (%0.f/s, map-based fake state, 32,000 MHz nodes, %d nodes)\n' \
			"Nomad-identical scheduler, $case" "$v" "$(ratio "$v" "$fast")" "$fast" "$n"
	done
done
s=$(metric "$out/snap.txt" BenchmarkSnapshot200kAllocs snapshot-s)
r=$(metric "$out/snap.txt" BenchmarkSnapshot200kAllocs restore-s)
sc=$(metric "$out/snap.txt" BenchmarkSnapshot200kAllocs snapshot-cpu-s)
printf '%-58s %10.2f s  %s of the 5 s goal; %s of 26.1 s (format 1, this machine, before)\n' "FSM snapshot, 200,000 finished allocations" "$s" "$(ratio "$s" 5)" "$(ratio "$s" 26.1)"
printf '%-58s %10.2f CPU s (wall time above depends on the neighbours)\n' "  CPU time of that snapshot" "$sc"
printf '%-58s %10.2f s  %s of 9.6 s (format 1, before)\n' "FSM restore, 200,000 finished allocations" "$r" "$(ratio "$r" 9.6)"
f() { metric "$out/sim.txt" BenchmarkNodeSim "$1"; }
nodes=${GPULAYER_NODESIM_NODES:-10000} allocs=${GPULAYER_NODESIM_ALLOCS:-100000}
echo "node simulator: $nodes nodes of 8 GPUs, $allocs one-GPU allocations (the issue's figures are for 10,000 and 100,000)"
printf '%-58s %10.3f cores  %s of the issue'"'"'s 0.09\n' "server CPU, fleet idle, no allocations" "$(f idle-cores-empty)" "$(ratio "$(f idle-cores-empty)" 0.09)"
printf '%-58s %10.3f cores  %s of the 0.1 goal; %s of the issue'"'"'s 0.38\n' "server CPU, fleet idle, allocations finished and stored" "$(f idle-cores-finished)" "$(ratio "$(f idle-cores-finished)" 0.1)" "$(ratio "$(f idle-cores-finished)" 0.38)"
printf '%-58s %10.0f MiB  %s of the 1 GiB goal; %s of the issue'"'"'s 1.9-2.5 GiB (1,946-2,560 MiB)\n' "server RSS, nodes + finished allocations" "$(f rss-MiB)" "$(ratio "$(f rss-MiB)" 1024)" "$(ratio "$(f rss-MiB)" 2560)"
printf '%-58s %10.0f MiB anonymous (heap, stacks) + %.0f MiB mapped files (Raft log BoltDB)\n' "  of which" "$(f rss-anon-MiB)" "$(f rss-file-MiB)"
printf '%-58s %10.0f MiB after a forced GC; heap goal before it %.0f MiB (RSS follows the goal)\n' "  live heap" "$(f live-heap-MiB)" "$(f heap-goal-MiB)"
printf '%-58s %10.0f /s  %s of the 10,000/s goal; %s of the issue'"'"'s 1,454/s (server %.2f cores, simulator %.2f cores)\n' "end-to-end placements, one-GPU allocations via the API" "$(f placements/s)" "$(ratio "$(f placements/s)" 10000)" "$(ratio "$(f placements/s)" 1454)" "$(f server-cores)" "$(f sim-cores)"
printf '%-58s %10.2f s  %s of the issue'"'"'s 31 s at 106,789\n' "GET /v1/operator/snapshot with the finished allocations" "$(f snapshot-s)" "$(ratio "$(f snapshot-s)" 31)"
