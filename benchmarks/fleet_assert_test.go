package benchmarks

// The fleet proof's assertions beside the window checks (see
// TestFleetChecks), each fed what breaks what the issue asks for: they
// must fail it.

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFleetRecoveryChecks: decisions go through Redis within 100 ms of
// it answering again, after every outage, for every process.
func TestFleetRecoveryChecks(t *testing.T) {
	const bound = 100 * time.Millisecond
	base := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	// Three outages: down at 0 s, 3 s, 6 s for 1.5 s; Redis answers 10 ms
	// after each start.
	stops := []time.Time{at(0), at(3 * time.Second), at(6 * time.Second)}
	var starts, answers []time.Time
	for _, s := range stops {
		starts = append(starts, s.Add(1500*time.Millisecond))
		answers = append(answers, s.Add(1510*time.Millisecond))
	}
	back := func(k int, d time.Duration) int64 { return answers[k].Add(d).UnixNano() }

	t.Run("one slow outage", func(t *testing.T) {
		// Back within 5 ms after outages 1 and 3, after 900 ms after outage 2.
		w := workerResult{Recovered: []int64{back(0, 5*time.Millisecond), back(1, 900*time.Millisecond), back(2, 5*time.Millisecond)}}
		recs := recoveries([]workerResult{w, w}, stops, starts, answers)
		if errs := recoveryErrors(recs, bound); len(errs) == 0 {
			t.Errorf("a 900 ms return to Redis after outage 2 passes: %v", recs)
		}
	})
	t.Run("back to the fallback after the first call", func(t *testing.T) {
		// The process decides once through Redis 5 ms after it answers,
		// then locally again (a failed call) until 700 ms: the worker
		// notes each return from the fallback.
		var rec []int64
		for k := range stops {
			rec = append(rec, back(k, 5*time.Millisecond), back(k, 700*time.Millisecond))
		}
		recs := recoveries([]workerResult{{Recovered: rec}}, stops, starts, answers)
		if errs := recoveryErrors(recs, bound); len(errs) == 0 {
			t.Errorf("local decisions until 700 ms after Redis answers pass: %v", recs)
		}
	})
	t.Run("all back within 10 ms", func(t *testing.T) {
		var rec []int64
		for k := range stops {
			rec = append(rec, back(k, -time.Millisecond), back(k, 10*time.Millisecond))
		}
		recs := recoveries([]workerResult{{Recovered: rec}, {Recovered: rec}}, stops, starts, answers)
		if errs := recoveryErrors(recs, bound); len(errs) > 0 {
			t.Errorf("fails a prompt recovery: %v", errs)
		}
	})
	t.Run("never back", func(t *testing.T) {
		w := workerResult{Recovered: []int64{back(0, time.Millisecond), back(1, time.Millisecond)}}
		if errs := recoveryErrors(recoveries([]workerResult{w}, stops, starts, answers), bound); len(errs) == 0 {
			t.Errorf("a process never back after outage 3 passes")
		}
	})
}

// TestFleetLeaseCallsCheck: at most 0.05 script calls per allowed
// request on the hot key with leases, every script call counted.
func TestFleetLeaseCallsCheck(t *testing.T) {
	for _, tt := range []struct {
		name    string
		stats   map[string]cmdStat
		allowed int64
		fail    bool
	}{
		{"0.030 per allowed", map[string]cmdStat{"fcall": {calls: 360}}, 12_000, false},
		{"0.15 per allowed", map[string]cmdStat{"fcall": {calls: 1_800}}, 12_000, true},
		// 0.045 FCALL, plus read-only calls and loads of the library:
		// 0.0575 script calls per allowed request.
		{"FCALL_RO and FUNCTION LOAD count", map[string]cmdStat{"fcall": {calls: 540}, "fcall_ro": {calls: 120}, "function|load": {calls: 30}}, 12_000, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := leaseCallsCheck(tt.name, tt.stats, tt.allowed)
			if (err != nil) != tt.fail {
				t.Errorf("error %v, want one: %v", err, tt.fail)
			}
		})
	}
}

// TestFleetAnswerInstant: the instant the parent takes for "Redis
// answers again", which FailLocal's recovery is timed from, is within
// a few polls of redis-server listening, however long it was down. It
// times real processes, so it runs with the fleet (FLEET=1), on a machine
// left to it, not in the test command.
func TestFleetAnswerInstant(t *testing.T) {
	if os.Getenv("FLEET") != "1" {
		t.Skip("times real processes: runs with the fleet, FLEET=1")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	addr, err := spareLoopback()
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan time.Time, 1)
	go func() {
		if err := waitAnswer(addr, 10*time.Second); err != nil {
			t.Error(err)
		}
		answered <- time.Now()
	}()
	// Down for 400 ms of polls (more refused dials than go-redis's pool
	// size), then up.
	time.Sleep(400 * time.Millisecond)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--logfile", "")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// An independent witness: a new connection per try.
	var listening time.Time
	for listening.IsZero() && time.Since(started) < 5*time.Second {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			listening = time.Now()
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	at := <-answered
	if late := at.Sub(listening); late > 100*time.Millisecond {
		t.Errorf("the parent saw Redis answer %v after it listened (%v after redis-server started)", late, at.Sub(started))
	}
}
