package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

// captureLog sends the standard logger's output to a buffer until the
// test ends.
func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	w, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(w); log.SetFlags(flags) })
	return &buf
}

func TestRunTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	logged := captureLog(t)

	err = Run(ln.Addr().String(), http.NotFoundHandler())
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Run on a taken port: %v, want EADDRINUSE", err)
	}
	if strings.Contains(logged.String(), "listening") {
		t.Errorf("Run on a taken port logged %q, want no claim to listen", logged.String())
	}
}

func TestServeUntilCanceled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}))
	}()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("body %q, want ok", body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after a graceful shutdown: %v, want nil", err)
	}
}

func TestServeBrokenListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := Serve(context.Background(), ln, http.NotFoundHandler()); err == nil {
		t.Error("Serve on a closed listener: nil, want its error")
	}
}
