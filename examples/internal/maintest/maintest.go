// Package maintest runs an example's main in a child process, for tests of
// what a person who runs the example sees: its output and exit status.
package maintest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv carries, to the child process, the arguments to run main with.
const childEnv = "RATELIMIT_EXAMPLE_MAIN_ARGS"

// FailsOnTakenPort runs main with addrFlag (such as "-addr") set to an address
// another listener holds, and checks that it exits non-zero with the bind
// error, without first claiming to listen. Call it first in its test: the
// child process runs that test again, and main in it.
func FailsOnTakenPort(t *testing.T, main func(), addrFlag string, args ...string) {
	t.Helper()
	if runChild(main) {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	args = append([]string{addrFlag, ln.Addr().String()}, args...)

	out, code := run(t, args)
	if code == 0 {
		t.Errorf("main %s: exit status 0, want non-zero\noutput:\n%s", strings.Join(args, " "), out)
	}
	if !strings.Contains(out, "address already in use") {
		t.Errorf("main %s: output lacks the bind error\noutput:\n%s", strings.Join(args, " "), out)
	}
	if strings.Contains(strings.ToLower(out), "listening") {
		t.Errorf("main %s: claims to listen on a port it could not bind\noutput:\n%s", strings.Join(args, " "), out)
	}
}

// run runs the current test again in a child process, where runChild
// calls main with args, and returns its output and exit status.
func run(t *testing.T, args []string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	enc, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), childEnv+"="+string(enc))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit) && ctx.Err() == nil:
		return string(out), exit.ExitCode()
	}
	t.Fatalf("running main: %v\noutput:\n%s", err, out)
	return "", 0
}

// runChild, in the child process, runs main with the parent's arguments
// and exits with status 0 if main returns. It reports false in the
// parent.
func runChild(main func()) bool {
	enc, ok := os.LookupEnv(childEnv)
	if !ok {
		return false
	}
	var args []string
	if err := json.Unmarshal([]byte(enc), &args); err != nil {
		panic(err)
	}
	os.Args = append([]string{"example"}, args...)
	flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	main()
	os.Exit(0)
	return true
}
