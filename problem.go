package ratelimit

import (
	"encoding/json"
	"mime"
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
	h.Set(hdrContentType, problemJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(append(body, '\n'))
}

// acceptsProblem reports whether an Accept header value asks for
// application/problem+json by name, with a quality above 0. A wildcard
// does not: a client gets problem details only if it says it reads them.
func acceptsProblem(accept []string) bool {
	for _, line := range accept {
		for _, part := range strings.Split(line, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != problemJSON {
				continue
			}
			if q, ok := params["q"]; ok {
				if v, err := strconv.ParseFloat(q, 64); err != nil || !(v > 0) {
					continue
				}
			}
			return true
		}
	}
	return false
}
