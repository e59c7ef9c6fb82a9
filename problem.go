package ratelimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The body of a refusal for clients that ask for RFC 9457 problem details,
// with the problem type that draft-ietf-httpapi-ratelimit-headers-10
// defines for it.

// quotaExceeded is the problem type of a refusal.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

const problemJSON = "application/problem+json"

// problem is the RFC 9457 body of a refusal.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// writeProblem answers a refusal with a problem details body naming the
// policy that refused it: the one whose wait is longest, which RateLimit
// reports too.
func writeProblem(w http.ResponseWriter, res Result) {
	wait := max(1, ceilSeconds(res.RetryAfter))
	body, _ := json.Marshal(problem{
		Type:             quotaExceeded,
		Title:            "Request cannot be satisfied as assigned quota has been exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           "Too many requests: retry after " + strconv.FormatInt(wait, 10) + " s.",
		ViolatedPolicies: []string{res.Policy},
	})
	h := w.Header()
	delete(h, "Content-Length")
	h.Set(hdrContentType, problemJSON) // no nosniff: see defaultDenied
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(append(body, '\n'))
}

// varyAccept adds Accept to the Vary of h, an answer whose form the
// request's Accept chose (RFC 9110, section 12.5.5), so that a shared
// cache never gives one client's form to another; unless a handler in
// front of the limiter has named Accept, or "*", there already. accept is
// the caller's []string{"Accept"}, so that the usual answer, without a
// Vary yet, allocates nothing here.
func varyAccept(h http.Header, accept []string) {
	lines := h["Vary"]
	for _, line := range lines {
		for line != "" {
			n, _ := elementLen(line)
			if name := trimOWS(line[:n]); name == "*" || asciiEqualFold(name, "Accept") {
				return
			}
			line = line[min(n+1, len(line)):]
		}
	}
	if len(lines) == 0 {
		h["Vary"] = accept
		return
	}
	// A full slice, so that append copies it rather than write into
	// spare room of a slice the earlier handler may still hold.
	h["Vary"] = append(lines[:len(lines):len(lines)], accept...)
}

// maxAcceptBytes is how much of a request's Accept lines acceptsProblem
// reads: many times any real Accept header, so that a refused client's
// megabyte of header costs no more than a short one.
const maxAcceptBytes = 4 << 10

// acceptsProblem reports whether the Accept header lines ask for
// application/problem+json by name, with a quality above 0. A wildcard
// does not: a client gets problem details only if it says it reads them.
// It reads the lines once, in order, up to maxAcceptBytes in all, and
// allocates nothing; a media range cut by that bound is ignored.
func acceptsProblem(lines []string) bool {
	budget := maxAcceptBytes
	for _, line := range lines {
		cut := len(line) > budget
		if cut {
			line = line[:budget]
		}
		budget -= len(line)
		for line != "" {
			n, whole := elementLen(line)
			if (whole || !cut) && asksProblem(line[:n]) {
				return true
			}
			line = line[min(n+1, len(line)):]
		}
		if budget == 0 {
			break
		}
	}
	return false
}

// elementLen returns the length of the list element that starts s: up to
// the first comma outside a quoted string, or all of s. whole reports
// whether a comma ended it.
func elementLen(s string) (n int, whole bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			return i, true
		}
	}
	return len(s), false
}

// asksProblem reports whether the media range s (RFC 9110, section 12.5.1)
// names application/problem+json with a quality above 0; false for one
// that breaks the grammar.
func asksProblem(s string) bool {
	s = trimOWS(s)
	n := strings.IndexByte(s, ';')
	if n < 0 {
		n = len(s)
	}
	if !asciiEqualFold(trimOWS(s[:n]), problemJSON) {
		return false
	}
	for s = s[n:]; s != ""; {
		// s is ';' followed by an optional parameter, then OWS.
		s = trimOWS(s[1:])
		if s == "" || s[0] == ';' {
			continue
		}
		name := tokenLen(s)
		if name == 0 || name == len(s) || s[name] != '=' {
			return false
		}
		rest := s[name+1:]
		var value int
		if rest != "" && rest[0] == '"' {
			value = quotedLen(rest)
		} else {
			value = tokenLen(rest)
		}
		if value == 0 {
			return false
		}
		if (s[0] == 'q' || s[0] == 'Q') && name == 1 && !positiveQvalue(rest[:value]) {
			return false
		}
		s = trimOWS(rest[value:])
		if s != "" && s[0] != ';' {
			return false
		}
	}
	return true
}

// asciiEqualFold reports whether s and t, ASCII, are equal under ASCII
// case folding: strings.EqualFold also folds Unicode, to which "ſ" is
// an "s", but a token is ASCII.
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// positiveQvalue reports whether v is an RFC 9110 qvalue above 0:
// "0" or "1", then optionally "." and at most three digits, not more than
// 1. It parses v itself, since strconv.ParseFloat allocates its error for
// a value that is no number, and a client can send many.
func positiveQvalue(v string) bool {
	if v == "" || v[0] != '0' && v[0] != '1' {
		return false
	}
	frac := v[1:]
	if frac != "" {
		if frac[0] != '.' || len(frac) > 4 {
			return false
		}
		frac = frac[1:]
	}
	nonzero := v[0] == '1'
	for i := 0; i < len(frac); i++ {
		switch c := frac[i]; {
		case c < '0' || c > '9' || v[0] == '1' && c != '0':
			return false
		case c != '0':
			nonzero = true
		}
	}
	return nonzero
}
