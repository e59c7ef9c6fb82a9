// Command loadgen drives the demo server from several simulated clients,
// each with its own API key, over real TCP. It shows allowed and limited
// requests per second per client as they happen, then checks from the
// round-trip timestamps it recorded that no window ever admitted more than
// its limit and that no 429 came while the limit could not have been full.
//
//	go -C examples run ./loadgen -self            # starts the demo in-process
//	go -C examples run ./loadgen -addr 127.0.0.1:8080
//
// On a terminal it redraws a live view in place every second: a bar per
// client of the last second's allowed requests ('#') and limited ones
// ('.'), and the totals, as wide as the terminal allows. When its output
// is not a terminal (piped, redirected, in CI), is a terminal too narrow
// for the view (under 63 columns with -flood), or with -plain, it prints
// one line a second instead, with the numbers rather than bars,
// 200s/429s in that second per client:
//
//	3s  calm 3/0  steady 8/0  eager 10/20  bursty 0/0   (200/429 in that second)
//
// With -flood, another client joins halfway through -duration: the flood,
// one key sending as fast as the server answers (16 requests in flight),
// until -duration ends or its share of -max-requests runs out: what the
// polite clients' schedules leave, of 300000 by default with -flood. The
// summary then compares the polite clients' round trips, p50 and p99,
// sent without the flood and under it; the flood's 429s go through the
// same exactness check as every client's.
//
//	go -C examples run ./loadgen -self -flood
//
// Its requests are bounded by -duration and -max-requests, and go to
// -addr only, which should be a loopback address. When nothing has
// answered a second into the run (no server at -addr, or one that never
// answers), it stops there and says so.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/slidelog/ratelimit/examples/internal/demoapp"
	"golang.org/x/term"
)

type config struct {
	addr        string // host:port of the demo; ignored with self
	self        bool   // start the demo in-process on a free loopback port
	path        string
	duration    time.Duration
	maxRequests int
	live        bool // redraw in place (a terminal)
	width       int  // the terminal's columns; 0 if unknown
	profiles    []profile
	flood       bool   // add the flood client for the second half
	runID       string // in every client's key; a random one if empty

	// transport sends the requests; nil for one that dials -addr. Tests
	// set it to run without a network.
	transport http.RoundTripper
}

// demoPolicies are the quotas of the demo's API-key routes, as demoapp
// configures them. The run checks the answers against these, and checks
// that the header advertises them: a limiter that admitted 20 a second
// while advertising 20 a second would otherwise pass.
var demoPolicies = []policy{
	{demoapp.KeyName, demoapp.KeyLimit, demoapp.KeyWindow},
	{demoapp.BurstName, demoapp.BurstLimit, demoapp.BurstWindow},
}

// noAnswerWait is how long a run waits for its first answer before it
// gives up: the demo on loopback answers in well under a millisecond,
// and a run against nothing should not send for the whole -duration.
const noAnswerWait = time.Second

func main() {
	cfg := config{profiles: profiles}
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "address of a running demo server")
	flag.BoolVar(&cfg.self, "self", false, "start the demo server in-process instead of using -addr")
	flag.StringVar(&cfg.path, "path", "/api/v1/hello", "path to request (an API-key route of the demo)")
	flag.DurationVar(&cfg.duration, "duration", 15*time.Second, "how long to send requests")
	flag.IntVar(&cfg.maxRequests, "max-requests", 20000, fmt.Sprintf("most requests to send in all (%d with -flood, unless given)", floodMaxRequests))
	flag.BoolVar(&cfg.flood, "flood", false, "in the second half of -duration, add a client that floods one key as fast as it can, and compare the other clients' latency without and with it")
	plain := flag.Bool("plain", false, "print one line a second instead of redrawing (the default when not on a terminal)")
	flag.Parse()
	cfg.live = !*plain && isTerminal(os.Stdout)
	if cfg.live {
		cfg.width, _, _ = term.GetSize(int(os.Stdout.Fd()))
	}
	if cfg.flood && !flagSet("max-requests") {
		cfg.maxRequests = floodMaxRequests
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if !rep.ok() {
		os.Exit(1)
	}
}

// flagSet reports whether the flag named name was given.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// run drives the load, drawing the live view and then the summary on out.
func run(ctx context.Context, cfg config, out io.Writer) (*report, error) {
	if cfg.duration <= 0 || cfg.maxRequests < 1 || len(cfg.profiles) == 0 {
		return nil, errors.New("loadgen: need a positive -duration, -max-requests and at least one client")
	}
	addr := cfg.addr
	if cfg.self {
		a, stop, err := startDemo()
		if err != nil {
			return nil, err
		}
		defer stop()
		addr = a
	}
	url := "http://" + addr + cfg.path

	// Each run has keys of its own: a run that reused the last one's
	// would find their windows partly spent, and call the 429s that
	// follow unjustified.
	runID := cfg.runID
	if runID == "" {
		runID = newRunID()
	}
	clients := make([]*client, len(cfg.profiles))
	for i, p := range cfg.profiles {
		clients[i] = &client{profile: p, key: clientKey(p.name, runID)}
	}
	// The polite clients' budget is what their schedules need, within
	// -max-requests; the flood gets the rest, so it never starves them.
	var polite, flood budget
	polite.left.Store(int64(min(cfg.maxRequests, politeDemand(cfg.profiles, cfg.duration))))
	var fc *client
	if cfg.flood {
		fc = &client{profile: floodProfile, key: clientKey(floodProfile.name, runID)}
		clients = append(clients, fc)
		flood.left.Store(int64(cfg.maxRequests) - polite.left.Load())
	}

	hc := &http.Client{Timeout: 10 * time.Second, Transport: cfg.transport}
	if hc.Transport == nil {
		hc.Transport = &http.Transport{
			Proxy:               nil, // loopback only: never through a proxy from the environment
			MaxIdleConnsPerHost: maxInFlight * len(clients),
			IdleConnTimeout:     30 * time.Second,
		}
	}
	defer hc.CloseIdleConnections()
	d := newDisplay(out, cfg.live, cfg.width, url, clients, cfg.duration)

	// sending ends the clients' requests early, when nothing answers.
	sending, stopSending := context.WithCancel(ctx)
	defer stopSending()
	start := time.Now()
	end := start.Add(cfg.duration)
	floodFrom := cfg.duration / 2
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var wg sync.WaitGroup
		for _, c := range clients {
			if c == fc {
				wg.Go(func() { c.floodDrive(sending, hc, url, start, start.Add(floodFrom), end, &flood) })
				continue
			}
			wg.Go(func() { c.drive(sending, hc, url, start, end, &polite) })
		}
		wg.Wait()
	}()

	sec := d.follow(start, finished, stopSending)
	// Redraw the last whole second with the final totals: the answers
	// still in flight at the last tick have come in since.
	elapsed := time.Since(start)
	if d.live {
		d.draw(max(0, min(sec, int(cfg.duration/time.Second))-1), elapsed)
	}

	rep := newReport(clients, url, elapsed, demoPolicies)
	rep.keys = clientKey("<client>", runID)
	if fc != nil {
		rep.flood = compareFlood(clients, fc, floodFrom, flood.left.Load() <= 0)
	}
	if rep.answered == 0 {
		return rep, fmt.Errorf("loadgen: no answers from %s to %d requests in %.1fs: start the demo (go -C examples run ./demo) or pass -self", url, rep.requests, elapsed.Seconds())
	}
	if ctx.Err() != nil {
		fmt.Fprintln(out, "\ninterrupted: the requests cut short count as errors")
	}
	rep.print(out)
	return rep, nil
}

// follow draws the view each second until the clients have finished, and
// returns how many seconds it drew. If nothing has answered noAnswerWait
// into the run, it stops the clients with stop.
func (d *display) follow(start time.Time, finished <-chan struct{}, stop func()) int {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	noAnswer := time.NewTimer(noAnswerWait)
	defer noAnswer.Stop()
	sec := 0
	for {
		select {
		case <-tick.C:
			d.draw(sec, time.Since(start))
			sec++
		case <-noAnswer.C:
			if answered(d.clients) == 0 {
				stop()
			}
		case <-finished:
			return sec
		}
	}
}

// answered returns how many requests the clients have had answered, with
// a 200 or a 429, so far.
func answered(clients []*client) int {
	n := 0
	for _, c := range clients {
		_, t := c.snapshot(-1)
		n += t.ok + t.limited
	}
	return n
}

// newRunID returns 8 random hex digits.
func newRunID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clientKey returns the API key of the client named name in run runID.
func clientKey(name, runID string) string {
	return demoapp.KeyPrefix + name + "-" + runID
}

// startDemo serves the demo on a free loopback port until stop is called.
func startDemo() (addr string, stop func(), err error) {
	app, err := demoapp.New()
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		app.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		app.Close()
	}, nil
}
