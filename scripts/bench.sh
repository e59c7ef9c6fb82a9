#!/usr/bin/env bash
# bench.sh runs the comparative benchmarks in benchmarks/ and writes
# benchmarks/RESULTS.md: machine, benchstat tables and ratelimit's ratio to
# the fastest peer library in the same run.
#
#   scripts/bench.sh                # full run, about 15 minutes on 2 cores
#   COUNT=6 BENCHTIME=1s scripts/bench.sh
#
# Leave the machine otherwise idle while it runs.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
NEWKEYS=${NEWKEYS:-200000x}   # fixed, so every peer inserts as many keys
MEMKEYS=${MEMKEYS:-100000x}   # keys filled for the bytes-per-key figures
if (( COUNT < 6 )); then
	echo "bench.sh: COUNT=$COUNT, want >= 6 for benchstat's confidence intervals" >&2
	exit 2
fi

benchstat=$(go env GOPATH)/bin/benchstat
if [[ ! -x $benchstat ]]; then
	go install golang.org/x/perf/cmd/benchstat@latest
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

ncpu=$(nproc)
cpus=1
for ((c = 2; c < ncpu; c *= 2)); do cpus+=",$c"; done
(( ncpu > 1 )) && cpus+=",$ncpu"

cd "$root/benchmarks"
# run appends one pass of go test to a results file. The passes are
# interleaved (every peer once, then again) rather than -count N in a row,
# so that a noisy spell on a shared machine hits all peers alike.
run() { # file, go test arguments...
	local f=$1
	shift
	echo "bench.sh: go test $*" >&2
	if ! go test -run '^$' "$@" . | tee -a "$out/$f" >&2; then
		echo "bench.sh: a benchmark failed; see above and RESULTS.md" >&2
		failed=1
	fi
}
failed=0
for ((i = 1; i <= COUNT; i++)); do
	run main.txt -bench '^Benchmark(Middleware|Store)$/^work=(HotKey|ManyKeys|Rejected)$' -benchtime "$BENCHTIME"
	run newkey.txt -bench '^BenchmarkMiddleware$/^work=NewKey$' -benchtime "$NEWKEYS"
	run scaling.txt -bench '^Benchmark(Middleware|Store)$/^work=(HotKey|Rejected)$' -benchtime "$BENCHTIME" -cpu "$cpus"
done
# Bytes per key barely vary between runs: one pass.
run memory.txt -bench '^BenchmarkMemory$' -benchtime "$MEMKEYS"
run floor.txt -bench '^BenchmarkMemoryFloor$' -benchtime "$MEMKEYS"

# A flood beside polite clients, over real TCP: the load generator's
# summary. Then redisstore's refusal cache, against the Redis at REDIS_ADDR
# (skipped, and said so, when none answers).
echo "bench.sh: go -C examples run ./loadgen -self -flood -plain -duration 20s" >&2
(cd "$root" && go -C examples run ./loadgen -self -flood -plain -duration 20s) > "$out/flood.txt" 2>&1 || failed=1
echo "bench.sh: redisstore: TestRefusalCacheFlood, BenchmarkRefused" >&2
redis=${REDIS_ADDR:-127.0.0.1:6379}
if ! (exec 3<>"/dev/tcp/${redis%:*}/${redis##*:}") 2>/dev/null; then
	echo "(no Redis answered at $redis: skipped)" > "$out/redis.txt"
elif ! (cd "$root/redisstore" &&
	go test -count=1 -run '^TestRefusalCacheFlood$' -v . &&
	go test -run '^$' -bench '^BenchmarkRefused$' -benchtime 2000x -count "$COUNT" .) > "$out/redis.txt" 2>&1; then
	echo "(FAILED: see bench.sh's output)" >> "$out/redis.txt"
	cat "$out/redis.txt" >&2
	failed=1
fi

# The fleet proof: 4 processes on a redis-server of its own, beside
# redis_rate (see benchmarks/fleet_test.go), about two minutes.
echo "bench.sh: FLEET=1 go test -run '^TestFleet$'" >&2
(cd "$root/benchmarks" &&
	FLEET=1 FLEET_OUT="$out/fleet.md" go test -count=1 -run '^TestFleet$' -timeout 15m .) > "$out/fleet.txt" 2>&1 || failed=1

ratios() { go run ./internal/ratios "$@"; }
stat() { "$benchstat" -col /peer "$@" | grep -v '^\(goos\|goarch\|pkg\|cpu\):'; }

{
	echo "# Benchmark results"
	echo
	echo "Written by \`scripts/bench.sh\` on $(date -u +%Y-%m-%d). Medians of $COUNT runs; ratios"
	echo "compare medians from this same run. Absolute times depend on the machine;"
	echo "the ratios are what to compare across machines."
	echo
	echo "- \`$(go version)\`"
	echo "- nproc: $ncpu; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "- benchstat: \`$benchstat\`; \`-benchtime $BENCHTIME\`, new keys \`$NEWKEYS\`, memory \`$MEMKEYS\`"
	echo
	echo "Every peer is configured for 300 requests per 60 s per key (token buckets: burst"
	echo "300, refill 300 per 60 s), except the hot-key workloads, which use 100,000 per"
	echo "millisecond so that the one key is never refused (sethvargo gets 10^9 per hour"
	echo "and throttled 10^7 per 100 ms, which their algorithms need for that; see"
	echo "\`workloads_test.go\` and \`peers_test.go\`). Requests are keyed by the"
	echo "\`X-Api-Key\` header, each peer reading it with a plain map lookup. ratelimit"
	echo "writes its full default header set (X-RateLimit-* and IETF RateLimit,"
	echo "RateLimit-Policy); xrate-map is the hand-rolled \`x/time/rate\` map, which writes"
	echo "no headers; baseline is no limiter at all. Each response gets a new header"
	echo "map, copied as its status is written, as net/http's server does, so that"
	echo "every peer pays for the headers it writes (see \`harness_test.go\`)."
	echo
	echo "## Ratios (ratelimit / fastest peer library; < 1 is faster)"
	echo
	echo "CPU time per request (cpu-ns/op: the process's user+system CPU time, GC"
	echo "included, per op). On a shared machine this is the steadier figure: wall time"
	echo "also counts the time other processes held the CPUs."
	echo
	cat "$out/main.txt" "$out/newkey.txt" | ratios -unit cpu-ns/op
	echo
	echo "Wall time per request (ns/op, all GOMAXPROCS goroutines in parallel):"
	echo
	cat "$out/main.txt" "$out/newkey.txt" | ratios
	echo
	echo "## Memory per key after ${MEMKEYS%x} keys (B/key; peers that store the key)"
	echo
	echo "One run, not medians: bytes per key barely vary between runs."
	echo
	ratios -unit B/key -libs ulule,sethvargo,throttled < "$out/memory.txt"
	echo
	echo "httprate keeps an xxh3 hash per key, not the key, and is not in the ratio."
	echo
	echo "## Memory floor (B/key after ${MEMKEYS%x} keys)"
	echo
	echo "One run, as above."
	echo
	echo "What a key costs in layouts stripped to their bones: a Go map from the key"
	echo "to a pointer, and what it points at (see \`floor_test.go\`). \`int64\` is"
	echo "throttled's layout; \`mutex+instant+log\` is the least an exact log with a"
	echo "lock per key can be; \`ratelimit\` is the memory store's layout, a map per"
	echo "set and policy keyed by the key to a 48-byte entry."
	echo
	echo "| key | layout | B/key |"
	echo "|---|---|---:|"
	awk '$1 ~ /^BenchmarkMemoryFloor\// {
		split($1, f, "/"); sub(/^prefix=/, "", f[2]); sub(/^layout=/, "", f[3]); sub(/-[0-9]+$/, "", f[3])
		for (i = 2; i < NF; i++) if ($(i+1) == "B/key") v = $i
		printf "| `%sclient-N` | %s | %s |\n", f[2], f[3], v
	}' "$out/floor.txt"
	echo
	echo "## Scaling of one key's requests, allowed and refused (-cpu $cpus)"
	echo
	echo '```'
	"$benchstat" -col /gomaxprocs "$out/scaling.txt" | grep -v '^\(goos\|goarch\|pkg\|cpu\):'
	echo '```'
	echo
	echo "## A flood beside polite clients"
	echo
	echo "\`go -C examples run ./loadgen -self -flood -plain -duration 20s\`: four polite"
	echo "clients of the demo's API, and from halfway through one more flooding one key"
	echo "with 16 requests in flight, all over real TCP in one process (so the flood's"
	echo "client and the server share the two cores). Its summary:"
	echo
	echo '```'
	sed -n '/^Summary:/,/^$/p' "$out/flood.txt"
	grep '^RESULT' "$out/flood.txt"
	echo '```'
	echo
	echo "## redisstore's refusal cache"
	echo
	echo "A client over its limit sending 5,000 requests (\`TestRefusalCacheFlood\`), and"
	echo "one refusal answered from the cache or through Redis (\`BenchmarkRefused\`,"
	echo "\`-benchtime 2000x -count $COUNT\`), against the Redis at \`\${REDIS_ADDR:-127.0.0.1:6379}\`:"
	echo
	echo '```'
	grep -E 'script calls|^Benchmark|skipped|FAILED' "$out/redis.txt"
	echo '```'
	echo
	if [[ -s $out/fleet.md ]]; then
		# Its headings one level down, under this file's own.
		sed -e 's/^## /### /' -e 's/^# .*/## redisstore across a fleet/' "$out/fleet.md"
	else
		echo "## redisstore across a fleet"
		echo
		echo '```'
		tail -20 "$out/fleet.txt"
		echo '```'
	fi
	for f in main newkey memory; do
		echo
		echo "## benchstat: $f"
		echo
		echo '```'
		stat "$out/$f.txt"
		echo '```'
	done
	if (( failed )); then
		echo
		echo "**A benchmark failed in this run: the figures above are incomplete.**"
	fi
} > "$root/benchmarks/RESULTS.md"
echo "bench.sh: wrote benchmarks/RESULTS.md" >&2
exit "$failed"
