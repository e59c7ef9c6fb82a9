package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/slidelog/ratelimit/examples/internal/maintest"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	l, err := newLimiters()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	srv := httptest.NewServer(newMux(l, demoUsers))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, path string, form url.Values) int {
	t.Helper()
	res, err := http.PostForm(srv.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func attempt(t *testing.T, srv *httptest.Server, user, password string) int {
	t.Helper()
	return post(t, srv, "/login", url.Values{"user": {user}, "password": {password}})
}

// A user who types the right password after four wrong ones is not locked
// out, and starts afresh; a guesser is locked out after five.
func TestUserIsNotLockedOutWhileAGuesserIs(t *testing.T) {
	srv := newServer(t)
	var alice []int
	for _, pw := range []string{"1", "2", "3", "4", "wonderland", "5", "6", "7", "8"} {
		alice = append(alice, attempt(t, srv, "alice", pw))
	}
	if want := []int{401, 401, 401, 401, 200, 401, 401, 401, 401}; !slices.Equal(alice, want) {
		t.Errorf("alice: %v, want %v (the right password clears her failures)", alice, want)
	}
	var guesses []int
	for range 7 {
		guesses = append(guesses, attempt(t, srv, "bob", "guess"))
	}
	if want := []int{401, 401, 401, 401, 401, 429, 429}; !slices.Equal(guesses, want) {
		t.Errorf("the guesser on bob: %v, want %v", guesses, want)
	}
	if code := attempt(t, srv, "alice", "wonderland"); code != http.StatusOK {
		t.Errorf("alice while bob is guessed at: %d, want 200", code)
	}
}

// A guesser's five failures on an account lock it for its owner too: the
// limiter answers before the password is checked, so the right one is
// refused until the window passes or an admin resets the failures.
func TestGuesserLocksTheAccountForItsOwner(t *testing.T) {
	srv := newServer(t)
	for i := range 5 {
		if code := attempt(t, srv, "alice", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("guess %d on alice: %d, want 401", i+1, code)
		}
	}
	if code := attempt(t, srv, "alice", "wonderland"); code != http.StatusTooManyRequests {
		t.Errorf("alice's right password after five guesses: %d, want 429", code)
	}
	if code := post(t, srv, "/admin/failures/reset?user=alice", nil); code != http.StatusNoContent {
		t.Fatalf("reset: %d, want 204", code)
	}
	if code := attempt(t, srv, "alice", "wonderland"); code != http.StatusOK {
		t.Errorf("alice's right password after the reset: %d, want 200", code)
	}
}

// One client trying one password on many accounts meets the IP's limit.
func TestOneClientManyAccounts(t *testing.T) {
	srv := newServer(t)
	var codes []int
	for i := range 22 {
		codes = append(codes, attempt(t, srv, "user"+string(rune('a'+i)), "password1"))
	}
	if n := len(slices.DeleteFunc(slices.Clone(codes), func(c int) bool { return c != 401 })); n != 20 {
		t.Errorf("%d failures counted of 22 accounts tried from one IP, want 20, then 429: %v", n, codes)
	}
	if codes[20] != http.StatusTooManyRequests || codes[21] != http.StatusTooManyRequests {
		t.Errorf("after 20 failures from one IP: %v, want 429s", codes[20:])
	}
}

// Only failures count against the IP too: neither a user's successful
// logins nor the logins refused by the user's limit (429s, which the IP's
// limiter takes back) use up the IP's 20.
func TestIPCountsFailuresOnly(t *testing.T) {
	srv := newServer(t)
	for i := range 25 {
		if code := attempt(t, srv, "alice", "wonderland"); code != http.StatusOK {
			t.Fatalf("alice's login %d: %d, want 200", i+1, code)
		}
	}
	var bob []int
	for range 10 {
		bob = append(bob, attempt(t, srv, "bob", "guess"))
	}
	if want := []int{401, 401, 401, 401, 401, 429, 429, 429, 429, 429}; !slices.Equal(bob, want) {
		t.Fatalf("the guesser on bob: %v, want %v", bob, want)
	}
	// The IP has counted bob's 5 failures only: 15 more fit.
	var codes []int
	for i := range 16 {
		codes = append(codes, attempt(t, srv, "user"+string(rune('a'+i)), "password1"))
	}
	want := append(slices.Repeat([]int{401}, 15), 429)
	if !slices.Equal(codes, want) {
		t.Errorf("after 25 logins and bob's 5 failures and 5 refusals: %v, want %v", codes, want)
	}
}

// The admin endpoints peek at a user's failures and reset them.
func TestAdminPeeksAndResets(t *testing.T) {
	srv := newServer(t)
	standing := func() map[string]any {
		t.Helper()
		res, err := http.Get(srv.URL + "/admin/failures?user=bob")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for range 3 {
		attempt(t, srv, "bob", "guess")
	}
	for range 2 { // peeking counts nothing
		if m := standing(); m["failures_left"] != 2.0 || m["locked"] != false {
			t.Fatalf("bob after 3 failures: %v, want 2 left, not locked", m)
		}
	}
	attempt(t, srv, "bob", "guess")
	attempt(t, srv, "bob", "guess")
	if m := standing(); m["failures_left"] != 0.0 || m["locked"] != true || m["retry_after_s"].(float64) < 1 {
		t.Fatalf("bob after 5 failures: %v, want locked with a wait", m)
	}
	if code := post(t, srv, "/admin/failures/reset?user=bob", nil); code != http.StatusNoContent {
		t.Fatalf("reset: %d, want 204", code)
	}
	if m := standing(); m["failures_left"] != 5.0 {
		t.Errorf("bob after the reset: %v, want 5 left", m)
	}
	if code := attempt(t, srv, "bob", "builder"); code != http.StatusOK {
		t.Errorf("bob's login after the reset: %d, want 200", code)
	}
}

func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
