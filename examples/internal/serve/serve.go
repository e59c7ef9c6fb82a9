// Package serve runs the examples' servers until SIGINT or SIGTERM, then
// shuts them down gracefully, so that each example's main is only its
// wiring.
package serve

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Run serves h on addr until an interrupt, then waits up to 5 s for the
// requests in flight. It binds addr before it says it is listening, and
// returns the error that stopped it (at once, if addr cannot be bound),
// for main to exit non-zero with.
func Run(addr string, h http.Handler) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("listening on http://%s (Ctrl-C to stop)", ln.Addr())
	return Serve(ctx, ln, h)
}

// Serve serves h on ln until ctx ends, then waits up to 5 s for the
// requests in flight. It returns nil after a graceful shutdown, and
// otherwise the error that stopped it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
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
