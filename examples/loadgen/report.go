package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// report is the summary of a run and its exactness check.
type report struct {
	url                string
	keys               string // the clients' API keys, as a pattern
	elapsed            time.Duration
	requests, answered int
	rtt                latency // the polite clients' round trips
	clients            []clientReport
	flood              *floodReport // with -flood
}

// clientReport is one client's summary.
type clientReport struct {
	name, pattern     string
	ok, limited, errs int
	checks            []policyCheck
	unjustified       int    // 429s no policy could justify; -1 when unknown
	firstUnfair       unfair // the first of them
	policyErr         error  // the RateLimit-Policy header was missing, unreadable or not the quotas checked
}

// policyCheck is one policy's bounds on the most 200s in one window.
type policyCheck struct {
	policy            policy
	certain, possible int
	certainAt         time.Duration // the end of a window holding certain
}

// newReport checks each client's answers against want, the quotas the
// server is configured with: never against the ones its RateLimit-Policy
// header advertises, which are part of what is checked.
func newReport(clients []*client, url string, elapsed time.Duration, want []policy) *report {
	r := &report{url: url, elapsed: elapsed}
	var rtts []time.Duration
	for _, c := range clients {
		c.mu.Lock()
		cr := clientReport{name: c.name, pattern: c.profile.String(), ok: len(c.ok), limited: len(c.rejected), errs: c.errs}
		r.requests += len(c.ok) + len(c.rejected) + c.errs
		r.answered += len(c.ok) + len(c.rejected)
		for _, s := range c.ok {
			if !c.flood {
				rtts = append(rtts, s.recv-s.sent)
			}
		}
		for _, s := range c.rejected {
			if !c.flood {
				rtts = append(rtts, s.recv-s.sent)
			}
		}
		answered := len(c.ok)+len(c.rejected) > 0
		advertised, err := parsePolicies(c.policies)
		switch {
		case c.policies == "" && !answered:
			err = nil // nothing answered: nothing to check
		case c.policies == "":
			err = errors.New("missing RateLimit-Policy: no answer carried one")
		case err != nil:
			err = fmt.Errorf("unreadable RateLimit-Policy: %w", err)
		case len(advertised) != len(want) || !all(want, func(p policy) bool { return slices.Contains(advertised, p) }):
			err = fmt.Errorf("RateLimit-Policy advertises %v, but the quotas are %v", advertised, want)
		}
		cr.policyErr = err
		ps := want
		if !answered {
			ps = nil
		}
		for _, p := range ps {
			certain, at := certainMax(c.ok, p.window)
			cr.checks = append(cr.checks, policyCheck{p, certain, possibleMax(c.ok, p.window), at})
		}
		// A lost answer may have been a 200 the server counted, which
		// could be what justified a 429: with errors, do not judge.
		cr.unjustified = -1
		if c.errs == 0 {
			cr.unjustified, cr.firstUnfair = unjustified(c.ok, c.rejected, ps)
		}
		c.mu.Unlock()
		r.clients = append(r.clients, cr)
	}
	r.rtt = summarize(rtts)
	return r
}

// all reports whether f holds for every element of s.
func all[T any](s []T, f func(T) bool) bool {
	return !slices.ContainsFunc(s, func(v T) bool { return !f(v) })
}

// failures says, a line each, what the run proved wrong: which client,
// policy and window, and which count against which limit.
func (r *report) failures() []string {
	var fs []string
	if r.answered == 0 {
		fs = append(fs, "no answers: nothing was checked")
	}
	for _, c := range r.clients {
		if c.policyErr != nil {
			fs = append(fs, fmt.Sprintf("%s: %v", c.name, c.policyErr))
		}
		if c.errs > 0 {
			// A lost answer may have been a 200 missing from the windows
			// above, or the one that justified a 429: neither was proved.
			fs = append(fs, fmt.Sprintf("%s: %d requests lost or answered with neither 200 nor 429, so its 429s were not judged",
				c.name, c.errs))
		}
		for _, pc := range c.checks {
			if pc.certain > pc.policy.limit {
				fs = append(fs, fmt.Sprintf("%s: policy %s admitted %d requests certainly inside the window ending at %s, over its limit of %d",
					c.name, pc.policy, pc.certain, seconds(pc.certainAt), pc.policy.limit))
			}
		}
		if c.unjustified > 0 {
			u := c.firstUnfair
			first := fmt.Sprintf("%s: %d of %d 429s unjustified; the first, sent at %s and answered at %s,",
				c.name, c.unjustified, c.limited, seconds(u.sent), seconds(u.recv))
			if u.policy == u.against.name {
				fs = append(fs, fmt.Sprintf("%s named policy %s, whose window held at most %d 200s then, under its limit of %d",
					first, u.against, u.possible, u.against.limit))
			} else {
				fs = append(fs, fmt.Sprintf("%s named policy %q, which was not advertised, and no advertised policy was full: the closest, %s, held at most %d 200s in its window then, under its limit of %d",
					first, u.policy, u.against, u.possible, u.against.limit))
			}
		}
	}
	return fs
}

// ok reports whether the run proved nothing wrong.
func (r *report) ok() bool { return len(r.failures()) == 0 }

// seconds formats an instant of the run, in seconds since its start.
func seconds(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

func (r *report) print(out io.Writer) {
	fmt.Fprintf(out, "\nSummary: %d requests (%d answered) in %.1fs over TCP to %s\n",
		r.requests, r.answered, r.elapsed.Seconds(), r.url)
	fmt.Fprintf(out, "client keys: %s\n", r.keys)
	if r.flood == nil {
		fmt.Fprintf(out, "round trip: %v\n\n", r.rtt)
	} else {
		fmt.Fprintf(out, "round trip of the polite clients: %v\n", r.rtt)
		r.flood.print(out)
		fmt.Fprintln(out)
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "client\tpattern\t200\t429\terr\tpolicy\tmost 200s in one window\tlimit\tverdict\tunjustified 429s")
	fmt.Fprintln(tw, "\t\t\t\t\t\tcertain .. possible\t\t\t")
	for _, c := range r.clients {
		unj := fmt.Sprint(c.unjustified)
		if c.unjustified < 0 {
			unj = "n/a (lost answers)"
		}
		head := fmt.Sprintf("%s\t%s\t%d\t%d\t%d", c.name, c.pattern, c.ok, c.limited, c.errs)
		if c.policyErr != nil {
			fmt.Fprintf(tw, "%s\t%v\t\t\tFAIL\t\n", head, c.policyErr)
			head = "\t\t\t\t"
		}
		if len(c.checks) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\n", head)
		}
		for i, pc := range c.checks {
			verdict := "ok"
			switch {
			case pc.certain > pc.policy.limit:
				verdict = "OVER LIMIT"
			case pc.certain == pc.policy.limit:
				verdict = "ok, full"
			}
			if i > 0 {
				head, unj = "\t\t\t\t", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%d .. %d\t%d\t%s\t%s\n", head, pc.policy, pc.certain, pc.possible, pc.policy.limit, verdict, unj)
		}
	}
	tw.Flush()

	fmt.Fprint(out, `
"certain" counts the 200s sent and received inside one window: the server
decided them in it, so an exact limiter keeps this at or under the limit,
with no tolerance. "possible" adds the 200s whose round trip straddles an
edge of the window; it may pass the limit by those, a tolerance that shrinks
with the round-trip time. A 429 is unjustified if no window ending during
its round trip could already have held the limit.
`)
	fs := r.failures()
	if len(fs) == 0 {
		fmt.Fprintln(out, "\nRESULT: exact. No window admitted more than its limit; every 429 was due.")
		return
	}
	fmt.Fprintln(out, "\nRESULT: FAILED.")
	for _, f := range fs {
		fmt.Fprintln(out, "  "+f)
	}
}
