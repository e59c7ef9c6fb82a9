package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Transport is an http.RoundTripper that paces the requests it sends by
// what the servers' rate-limit headers say: before each request it waits
// until the request fits what the server last said was left (see the
// package documentation).
//
// The zero Transport is ready to use: it sends through
// http.DefaultTransport, keeps every origin's requests in one partition
// and retries nothing. A Transport is safe for simultaneous use by
// multiple goroutines, and must not be copied after its first use; share
// one among the goroutines that spend a quota, or they cannot pace each
// other.
type Transport struct {
	// Base sends the requests. If nil, http.DefaultTransport is used.
	Base http.RoundTripper

	// Partition, if set, names the quota a request spends among the
	// requests to its origin, for a client that calls a server on behalf
	// of several users that each have a quota of their own: return what
	// tells them apart (a user or tenant ID, say). Requests of different
	// partitions are paced apart. It also keeps apart quotas a server
	// counts by path, such as GitHub's search and core API resources
	// (return "search" for paths under /search/). If nil, the requests to
	// an origin share its quotas, and one user's or resource's spent
	// quota holds up the others. It must be fast and safe for
	// simultaneous use.
	Partition func(r *http.Request) string

	// MaxRetries is how many times a refused request is sent again: one
	// answered 429 Too Many Requests, or 503 Service Unavailable with a
	// Retry-After, whose answer says when to come back (a Retry-After, or
	// a quota with nothing left and its reset). The server did nothing
	// with a refused request, so it is retried if it can be sent again as
	// it was: if its body can be replayed (Request.GetBody), whatever its
	// method, or if it has no body and an idempotent method (GET, HEAD,
	// OPTIONS, TRACE, PUT, DELETE). It is not retried when the wait would
	// end at or after its context's deadline: the refusal is returned
	// then, also when answers to other requests that came while the
	// retry was decided on push its wait past the deadline, or when the
	// retry still waits (for answers in flight) at the deadline. Each
	// retry waits as a new request does; the body of the refusal it
	// replaces is read (up to 4 KiB, so that a small body frees its
	// connection) and closed when the retry is sent. The last refusal is
	// returned as it came. 0, the default, retries nothing.
	MaxRetries int

	servers servers
}

// RoundTrip implements http.RoundTripper. It waits until req fits the
// quotas its server last reported, sends it through Base, learns what the
// answer says, and may send it again (MaxRetries). A wait for a reset at
// or after the deadline of req's context is not begun: RoundTrip returns
// at once with an error that matches context.DeadlineExceeded
// (errors.Is). If the context is done while it waits, it returns the
// context's error. Either way it closes req's body, as a RoundTripper
// must.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base()
	k := serverKey{scheme: req.URL.Scheme, host: originHost(req.URL)}
	if t.Partition != nil {
		k.partition = t.Partition(req)
	}
	s := t.servers.get(k)
	r := req
	var refusal *http.Response // the refusal r is the retry of, if any
	for attempt := 0; ; attempt++ {
		var rep report
		resp, now, err := send(base, s, r, &rep, refusal)
		if err != nil {
			// A zero now: the retry was not sent, and its refusal is
			// still open (send closes it when the retry goes).
			if refusal != nil && now.IsZero() {
				// The retry's wait reached its deadline, or answers that
				// came since it was decided pushed the wait past it: the
				// refusal it would have replaced is the answer.
				if errors.Is(err, context.DeadlineExceeded) {
					return refusal, nil
				}
				closeBody(refusal)
			}
			return nil, err
		}
		next := t.again(req, resp, &rep, attempt, s, now)
		if next == nil {
			return resp, nil
		}
		refusal = keep(resp)
		r = next
	}
}

// originHost returns the host of u's origin: its host in lower case,
// without the port when it is the scheme's default, so that
// https://h and https://h:443 share their quotas.
func originHost(u *url.URL) string {
	host := strings.ToLower(u.Host)
	switch port := u.Port(); {
	case port == "443" && u.Scheme == "https", port == "80" && u.Scheme == "http":
		host = strings.TrimSuffix(host, ":"+port)
	}
	return host
}

// keep reads a little of a refusal's body, so that its connection may be
// reused while its retry waits, and no more: a refusal's body is the
// server's to size. The body then reads what was read, then the rest, so
// that the refusal can still be returned whole if the retry is not sent;
// send closes it when the retry goes. A Base may answer without a body,
// as http.Client allows.
func keep(resp *http.Response) *http.Response {
	if resp.Body != nil {
		var head bytes.Buffer
		io.CopyN(&head, resp.Body, 4<<10)
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(&head, resp.Body), resp.Body}
	}
	return resp
}

func closeBody(resp *http.Response) {
	if resp.Body != nil {
		resp.Body.Close()
	}
}

// send makes one attempt at r on s: it waits until r fits s's quotas,
// sends it through base, and settles it on s with what the answer says,
// which it reads into rep. It returns the answer and the instant it came,
// or the error of the wait (with the zero time: r was not sent) or of
// base. It exists so that RoundTrip reads as a loop of attempts, and so
// that every attempt, first or retry, is reserved and settled alike.
// refusal, for a retry, is the answer it replaces, whose body it closes
// once the retry goes.
func send(base http.RoundTripper, s *server, r *http.Request, rep *report, refusal *http.Response) (*http.Response, time.Time, error) {
	probe, err := s.reserve(r.Context())
	if err != nil {
		// A RoundTripper closes the body of the request it was given,
		// even on errors; a retry's body is its own.
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, time.Time{}, err
	}
	if refusal != nil {
		closeBody(refusal)
	}
	// wrote notes that Base wrote the request's headers, as net/http
	// does before a failed dial when it sends the request again on a new
	// connection (see unsent).
	var wrote atomic.Bool
	traced := r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }}))
	resp, err := roundTrip(base, traced, s, probe)
	now := time.Now()
	o := outcome{probe: probe, rep: rep}
	if err == nil {
		if resp.Request == traced {
			resp.Request = r
		}
		readReport(rep, resp.StatusCode, resp.Header, now)
		// A cache's answer is not the server's: it neither spent
		// quota nor says what came back after a reset.
		o.answered = !rep.cached
		o.free = rep.cached || resp.StatusCode == http.StatusTooManyRequests
	} else {
		// A request that never reached the server spent nothing; one
		// that failed later may have been counted before it failed.
		o.free = !wrote.Load() && unsent(err)
	}
	s.settle(o, now)
	if err != nil {
		return nil, now, err
	}
	return resp, now, nil
}

// roundTrip sends r, reserved on s, through base. If base panics, r is
// settled as a request that may have been sent before the panic goes on,
// so that it is not held in flight, nor a probe's turn held, forever: no
// later request to s could go. A Base that returns neither a response
// nor an error fails r, as http.Client fails such a round trip.
func roundTrip(base http.RoundTripper, r *http.Request, s *server, probe bool) (resp *http.Response, err error) {
	done := false
	defer func() {
		if !done {
			s.settle(outcome{probe: probe}, time.Now())
		}
	}()
	resp, err = base.RoundTrip(r)
	if resp == nil && err == nil {
		err = fmt.Errorf("ratelimit: client: %T returned a nil *Response with a nil error", base)
	}
	done = true
	return resp, err
}

// unsent reports whether err, from a Base, says that the request never
// left for the server: the dial of its connection failed (its DNS lookup
// included), or that of the proxy it goes through, or the TLS handshake
// did (a certificate not trusted, a server that does not speak TLS or
// refuses the handshake), as net/http and crypto/tls report them. Only if
// Base wrote none of it before: net/http sends a request again on a new
// connection when the one it reused closed before the answer, and the
// server may have counted what it read there.
func unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect" || op.Op == "remote error") {
		return true // "remote error": an alert the server sent in the handshake
	}
	var cert *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	return errors.As(err, &cert) || errors.As(err, &record)
}

// again returns the request to send after resp, the answer at now to
// attempt number attempt at req on s, or nil when resp is to be returned:
// when the retries are used up, the refusal is not one to retry (see
// MaxRetries), its wait, or that of s's quotas as other answers left
// them, would end at or after the deadline of req's context, or req's
// body cannot be had again. It owns every rule of
// whether to retry, so that RoundTrip only acts on its answer.
func (t *Transport) again(req *http.Request, resp *http.Response, rep *report, attempt int, s *server, now time.Time) *http.Request {
	if attempt >= t.MaxRetries || !retryable(req, resp.StatusCode, rep) {
		return nil
	}
	wait, ok := rep.wait()
	if !ok {
		return nil
	}
	// The retry waits for this answer's wait and for what other answers
	// said of the server's quotas, whichever ends later.
	if dl, ok := req.Context().Deadline(); ok && !dl.After(later(now.Add(wait), s.spentUntil(now))) {
		return nil
	}
	next, err := replay(req)
	if err != nil {
		return nil
	}
	return next
}

// CloseIdleConnections closes the idle connections of Base, if it has
// a CloseIdleConnections method, as http.Client.CloseIdleConnections
// expects of a transport.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if c, ok := t.base().(closeIdler); ok {
		c.CloseIdleConnections()
	}
}

// base returns the RoundTripper that sends the requests: Base, or
// http.DefaultTransport when it is nil.
func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

// retryable reports whether a request answered with status may be sent
// again: the server refused it, so it did nothing, and it can be sent
// again as it was.
func retryable(req *http.Request, status int, rep *report) bool {
	switch {
	case status == http.StatusTooManyRequests:
	case status == http.StatusServiceUnavailable && rep.retryAfter >= 0:
	default:
		return false
	}
	if req.GetBody != nil {
		return true
	}
	if req.Body != nil && req.Body != http.NoBody {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// wait returns the longest wait the report asks for, from its Retry-After
// and its spent quotas' resets, or false if it asks for none.
func (r *report) wait() (time.Duration, bool) {
	var w time.Duration
	ok := false
	for _, f := range r.figs[:r.n] {
		if f.remaining == 0 {
			w, ok = max(w, f.reset), true
		}
	}
	return w, ok
}

// replay returns a copy of req to send again, with a new body.
func replay(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}
