// Command demo serves a few rate-limited routes from memory, with no other
// service needed, and prints how to try them:
//
//	go -C examples run ./demo            # from the repository root
//	go -C examples run ./demo -addr :9000
//
// Drive it with several clients at once with ./loadgen.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/slidelog/ratelimit/examples/internal/demoapp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	if err := run(*addr); err != nil {
		log.Fatal(err)
	}
}

func run(addr string) error {
	app, err := demoapp.New()
	if err != nil {
		return err
	}
	defer app.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 5 * time.Second}
	printUsage(os.Stdout, "http://"+ln.Addr().String())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Print("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func printUsage(w io.Writer, base string) {
	limit, window := demoapp.AnonLimit, int(demoapp.AnonWindow/time.Second)
	fmt.Fprintf(w, `ratelimit demo listening on %[1]s  (Ctrl-C to stop)

Routes
  GET /, /api/hello   %[2]d requests per %[3]v per client IP (one quota for both)
  GET /api/v1/...     header %[4]s: %[5]s<anything>; %[6]d per %[7]v and %[8]d per %[9]v per key
  GET /healthz        not limited

Try
  curl -i %[1]s/api/hello
  for i in $(seq 7); do curl -s -o /dev/null -w '%%{http_code} ' %[1]s/api/hello; done; echo
      -> 200 200 200 200 200 429 429 (fewer 200s if you already used some)
  curl -i -H '%[4]s: %[5]salice' %[1]s/api/v1/hello

`, base, limit, demoapp.AnonWindow, demoapp.KeyHeader, demoapp.KeyPrefix,
		demoapp.KeyLimit, demoapp.KeyWindow, demoapp.BurstLimit, demoapp.BurstWindow)

	fmt.Fprintln(w, "Every limited response carries (values for the first request to /api/hello)")
	for _, h := range [][2]string{
		{fmt.Sprintf("X-Ratelimit-Limit: %d", limit), "the quota of the policy reported"},
		{fmt.Sprintf("X-Ratelimit-Remaining: %d", limit-1), "requests left in the window after this one"},
		{fmt.Sprintf("X-Ratelimit-Reset: %d", window), "seconds, rounded up, until the quota grows again"},
		{fmt.Sprintf(`Ratelimit-Policy: "%s";q=%d;w=%d`, demoapp.AnonName, limit, window), "IETF draft: quota q per w seconds"},
		{fmt.Sprintf(`Ratelimit: "%s";r=%d;t=%d`, demoapp.AnonName, limit-1, window), "IETF draft: r remaining, t seconds to reset"},
	} {
		fmt.Fprintf(w, "  %-40s %s\n", h[0], h[1])
	}
	fmt.Fprintf(w, "and a 429 also carries\n  %-40s %s\n", "Retry-After: 7", "whole seconds, rounded up, until a request fits")
	fmt.Fprintf(w, `
Load it from several clients at once, with a live view and an exactness check:
  go -C examples run ./loadgen -addr %s
`, base[len("http://"):])
}
