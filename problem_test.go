package ratelimit_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

// A client that asks for problem details gets the draft's quota-exceeded
// problem; any other gets the text body.
func TestProblemDetails(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 5, Window: time.Second}))
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	for _, c := range []struct {
		accept  string
		problem bool
	}{
		{"application/problem+json", true},
		{"application/json, application/problem+json;q=0.9", true},
		{"text/html, APPLICATION/PROBLEM+JSON", true},
		{"application/problem+json;q=0", false},
		{"application/problem+json;q=abc", false},
		{"application/json", false},
		{"*/*", false},
		{"", false},
	} {
		var hdr []string
		if c.accept != "" {
			hdr = []string{"Accept", c.accept}
		}
		w := get(h, "192.0.2.1:1", hdr...)
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("Accept %q: status %d, want 429", c.accept, w.Code)
		}
		ct := w.Header().Get("Content-Type")
		if !c.problem {
			if ct != "text/plain; charset=utf-8" {
				t.Errorf("Accept %q: Content-Type %q, want the text body", c.accept, ct)
			}
			continue
		}
		if ct != "application/problem+json" {
			t.Errorf("Accept %q: Content-Type %q, want application/problem+json", c.accept, ct)
		}
		var body struct {
			Type             string   `json:"type"`
			Title            string   `json:"title"`
			Status           int      `json:"status"`
			Detail           string   `json:"detail"`
			ViolatedPolicies []string `json:"violated-policies"`
		}
		dec := json.NewDecoder(w.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			t.Fatalf("Accept %q: body %q: %v", c.accept, w.Body.String(), err)
		}
		if body.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || body.Title == "" ||
			body.Status != 429 || body.Detail == "" || len(body.ViolatedPolicies) != 1 || body.ViolatedPolicies[0] != "default" {
			t.Errorf("Accept %q: problem %+v, want type quota-exceeded, status 429, violated-policies [default]", c.accept, body)
		}
		if w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
			t.Errorf("Accept %q: the problem details come without Retry-After or RateLimit", c.accept)
		}
	}
}
