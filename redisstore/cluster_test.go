package redisstore_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// startCluster forms a Redis Cluster of three masters on loopback ports and
// returns a client of it. It skips t (fails it under
// RATELIMIT_REQUIRE_REDIS=1) when redis-cli is missing.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		skipOrFail(t, "redisstore: redis-cli not installed: %v", err)
	}
	var addrs []string
	for range 3 {
		s := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		addrs = append(addrs, s.addr)
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		n := redis.NewClient(&redis.Options{Addr: a})
		waitFor(t, 20*time.Second, "cluster_state:ok on "+a, func() bool {
			info, err := n.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		n.Close()
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCluster spreads 10,000 keys, each checked against three policies of
// the three algorithms in one script, over a three-master cluster: no
// CROSSSLOT or other error, every master holds some, each client's keys
// share a slot whatever the set, and every key has a TTL.
func TestCluster(t *testing.T) {
	c := startCluster(t)
	st, err := redisstore.New(c, redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pol := policySet(t,
		ratelimit.Policy{Name: "default", Limit: 10, Window: time.Minute},
		ratelimit.Policy{Name: "hour", Limit: 100, Window: time.Hour, Algorithm: counter},
		ratelimit.Policy{Name: "day", Limit: 1000, Window: 24 * time.Hour, Algorithm: gcra},
	)
	other := policySet(t, ratelimit.Policy{Name: "default", Limit: 10, Window: time.Minute})
	const keys = 10_000
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < keys; i += 8 {
				res, err := st.Take(context.Background(), "client-"+strconv.Itoa(i), pol, 1)
				if err != nil {
					t.Errorf("key %d: %v", i, err)
					return
				}
				if !res.Allowed {
					t.Errorf("key %d: refused", i)
				}
			}
		})
	}
	wg.Wait()
	var mu sync.Mutex
	perMaster := map[string]int64{}
	err = c.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
		size, err := n.DBSize(ctx).Result()
		mu.Lock()
		perMaster[n.Options().Addr] = size
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("keys per master: %v", perMaster)
	var total int64
	for a, n := range perMaster {
		if n == 0 {
			t.Errorf("master %s holds no keys", a)
		}
		total += n
	}
	if len(perMaster) != 3 || total != 3*keys {
		t.Errorf("%d masters holding %d keys, want 3 holding %d", len(perMaster), total, 3*keys)
	}
	for _, i := range []int{0, 4242, keys - 1} {
		k := "client-" + strconv.Itoa(i)
		slots := map[int64]bool{}
		for _, name := range []string{"default", "hour", "day"} {
			slots[c.ClusterKeySlot(context.Background(), stateKey(redisstore.DefaultPrefix, k, pol, name)).Val()] = true
		}
		slots[c.ClusterKeySlot(context.Background(), stateKey(redisstore.DefaultPrefix, k, other, "default")).Val()] = true
		if len(slots) != 1 {
			t.Errorf("%s: keys in slots %v, want one", k, slots)
		}
	}
	checkTTLs(t, c, redisstore.DefaultPrefix, func(k string) ratelimit.Policy {
		for i := range pol.Len() {
			if strings.HasSuffix(k, ":"+pol.At(i).Name) {
				return pol.At(i)
			}
		}
		t.Fatalf("key %q of no policy", k)
		return ratelimit.Policy{}
	})
}

// TestClusterNewMaster moves a slot to a master that has just joined the
// cluster, as redis-cli --cluster reshard does: while the slot migrates,
// a client key not yet on the old master is answered by the new one
// (ASK), which lacks the library. The store must load it there and
// decide, as it does on any server that lacks it.
func TestClusterNewMaster(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	st, err := redisstore.New(c, redisstore.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol := policySet(t, ratelimit.Policy{Name: "default", Limit: 10, Window: time.Minute})
	takeOK(t, st, "warm-up", pol, 1) // the library is on every master

	// A fourth node joins, empty, without the library.
	n := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000")
	fresh := redis.NewClient(&redis.Options{Addr: n.addr})
	defer fresh.Close()
	freshID, err := fresh.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const key = "client-moving"
	src, err := c.MasterForKey(ctx, stateKey(redisstore.DefaultPrefix, key, pol, "default"))
	if err != nil {
		t.Fatal(err)
	}
	srcAddr := src.Options().Addr
	host, port, _ := strings.Cut(srcAddr, ":")
	if err := fresh.ClusterMeet(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the new node known to its peer", func() bool {
		a, err1 := src.ClusterNodes(ctx).Result()
		b, err2 := fresh.ClusterNodes(ctx).Result()
		return err1 == nil && err2 == nil && knows(a, freshID) && knows(b, srcID)
	})
	waitFor(t, 20*time.Second, "cluster_state:ok on the new node", func() bool {
		info, err := fresh.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})

	slot := c.ClusterKeySlot(ctx, stateKey(redisstore.DefaultPrefix, key, pol, "default")).Val()
	if err := fresh.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", freshID).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := st.Take(ctx, key, pol, 1)
	if err != nil {
		t.Fatalf("Take during the migration to a new master: %v", err)
	}
	if !res.Allowed {
		t.Fatalf("Take during the migration to a new master: refused: %+v", res)
	}
	var exists *redis.IntCmd
	_, err = fresh.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "asking")
		exists = p.Exists(ctx, stateKey(redisstore.DefaultPrefix, key, pol, "default"))
		return nil
	})
	if got, _ := exists.Result(); err != nil || got != 1 {
		t.Errorf("the new master holds %d of the key (%v), want 1", got, err)
	}
}

// knows reports whether the CLUSTER NODES output nodes lists id past its
// handshake.
func knows(nodes, id string) bool {
	for line := range strings.SplitSeq(nodes, "\n") {
		if strings.HasPrefix(line, id+" ") && !strings.Contains(line, "handshake") && !strings.Contains(line, "noaddr") {
			return true
		}
	}
	return false
}
