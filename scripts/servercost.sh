#!/usr/bin/env bash
# servercost.sh counts the instructions a Redis server spends per allowed
# decision: redisstore's take function for each algorithm (a set of one
# policy, 1000 a minute) beside go-redis/redis_rate's GCRA script, on a
# redis-server of its own run under valgrind --tool=callgrind. Unlike
# INFO commandstats' microseconds, the counts do not move with what else
# the machine runs. Needs valgrind, redis-server and redis-benchmark.
#
#   bash scripts/servercost.sh [calls]
set -euo pipefail
cd "$(dirname "$0")/../benchmarks"
calls=${1:-3000}
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.%p" \
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
	redis-cli -p "$port" ping >/dev/null 2>&1 && break
	sleep 0.2
done
cli() { redis-cli -p "$port" "$@"; }

# The store loads its library at its first call; redis_rate's script is
# loaded from its source.
REDIS_ADDR=127.0.0.1:$port go test -run '^$' -bench 'RedisDecision/keys=hot/callers=1/impl=store-nocache' -benchtime 1x . >/dev/null
take=$(cli FUNCTION LIST | grep -m1 -o 'ratelimit_take_[0-9a-f]*')
rr=$(go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)/lua.go
sha=$(sed -n '/^var allowN = redis.NewScript(`/,/^`)/p' "$rr" | sed '1s/.*`//;$d' | cli -x SCRIPT LOAD)

# irPerCall runs a command (__rand_int__ in its key) calls times after a
# warm-up and prints the server's instructions per call.
irPerCall() {
	redis-benchmark -p "$port" -q -n 2000 -c 4 -r 1000 "$@" >/dev/null
	callgrind_control -z "$server" >/dev/null 2>&1
	redis-benchmark -p "$port" -q -n "$calls" -c 4 -r 1000 "$@" >/dev/null
	callgrind_control -d "$server" >/dev/null 2>&1
	sleep 1
	local out
	out=$(ls -t "$tmp"/cg.* | head -1)
	callgrind_annotate "$out" | awk -v n="$calls" '/PROGRAM TOTALS/ { gsub(",", "", $1); printf "%.0f", $1 / n; exit }'
}

key='ratelimit:{ABCDEFGHIJKLMNOPQRSTUV}:abcdefghijk'
base=$(irPerCall EVALSHA "$sha" 1 rate:rr:__rand_int__ 1000 1000 60 1)
printf '%-33s %8s Ir/call  1.00x\n' "redis_rate (GCRA)" "$base"
for a in g:GCRA l:SlidingLog c:SlidingWindowCounter; do
	ir=$(irPerCall FCALL "$take" 1 "$key${a%%:*}:__rand_int__" 1 0 "${a%%:*}" 1000 60000000)
	printf '%-33s %8s Ir/call  %.2fx\n' "redisstore ${a#*:}" "$ir" "$(echo "$ir / $base" | bc -l)"
done
