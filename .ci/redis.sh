#!/bin/sh
# Makes sure a real Redis answers on 127.0.0.1:6379 for redisstore's tests,
# installing Debian's redis-server (and redis-cli, which the cluster test
# needs) and starting it when needed. scripts/test.sh then runs the tests
# with RATELIMIT_REQUIRE_REDIS=1, so an unreachable Redis fails them
# instead of skipping them: CI can never pass by skipping.
set -eu
cd "$(dirname "$0")/.."

addr_host=127.0.0.1
addr_port=6379

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	sudo=sudo
fi

# redis-server also brings redis-tools (redis-cli), which the cluster
# test needs.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	$sudo apt-get update
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y redis-server
fi

if ! redis-cli -h "$addr_host" -p "$addr_port" ping >/dev/null 2>&1; then
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$addr_port" --save "" --appendonly no
	i=0
	until redis-cli -h "$addr_host" -p "$addr_port" ping >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -ge 100 ]; then
			echo "redis.sh: redis-server did not answer on $addr_host:$addr_port" >&2
			exit 1
		fi
		sleep 0.1
	done
fi
echo "redis.sh: $(redis-server --version) answering on $addr_host:$addr_port"
