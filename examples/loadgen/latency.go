package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// latency summarizes round trips.
type latency struct {
	n             int
	p50, p99, max time.Duration
}

// summarize sorts rtts and summarizes them.
func summarize(rtts []time.Duration) latency {
	if len(rtts) == 0 {
		return latency{}
	}
	slices.Sort(rtts)
	return latency{len(rtts), rtts[len(rtts)/2], rtts[len(rtts)*99/100], rtts[len(rtts)-1]}
}

func (l latency) String() string {
	if l.n == 0 {
		return "no requests"
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v", l.p50.Round(time.Microsecond), l.p99.Round(time.Microsecond), l.max.Round(time.Microsecond))
}

// floodReport compares the polite clients' round trips without the flood
// and under it. A polite request counts as without it if sent before the
// flood started, under it if sent from then until the flood's last
// answer, and in neither if sent after that (the flood's share of
// -max-requests ran out before the end).
type floodReport struct {
	from, until   time.Duration // the flood's start, and its last answer
	requests      int           // what the flood sent
	ok, limited   int
	spent         bool // its share of -max-requests ran out
	without, with latency
}

// compareFlood splits the polite clients' round trips by the flood's
// time, from its start at from.
func compareFlood(clients []*client, flood *client, from time.Duration, spent bool) *floodReport {
	fr := &floodReport{from: from, until: from, spent: spent}
	flood.mu.Lock()
	fr.ok, fr.limited = len(flood.ok), len(flood.rejected)
	fr.requests = fr.ok + fr.limited + flood.errs
	for _, s := range flood.ok {
		fr.until = max(fr.until, s.recv)
	}
	for _, s := range flood.rejected {
		fr.until = max(fr.until, s.recv)
	}
	flood.mu.Unlock()

	var without, with []time.Duration
	add := func(s span) {
		switch {
		case s.sent < fr.from:
			without = append(without, s.recv-s.sent)
		case s.sent <= fr.until:
			with = append(with, s.recv-s.sent)
		}
	}
	for _, c := range clients {
		if c == flood {
			continue
		}
		c.mu.Lock()
		for _, s := range c.ok {
			add(s)
		}
		for _, s := range c.rejected {
			add(s.span)
		}
		c.mu.Unlock()
	}
	fr.without, fr.with = summarize(without), summarize(with)
	return fr
}

func (fr *floodReport) print(out io.Writer) {
	fmt.Fprintf(out, "flood: %d requests on one key (%d allowed, %d limited) from %s to %s",
		fr.requests, fr.ok, fr.limited, seconds(fr.from), seconds(fr.until))
	if fr.spent {
		fmt.Fprint(out, ", when its share of -max-requests ran out")
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "polite clients' round trip\trequests\tp50\tp99\tmax")
	for _, row := range []struct {
		name string
		l    latency
	}{
		{fmt.Sprintf("without the flood (sent before %s)", seconds(fr.from)), fr.without},
		{fmt.Sprintf("under the flood (sent %s to %s)", seconds(fr.from), seconds(fr.until)), fr.with},
	} {
		if row.l.n == 0 {
			fmt.Fprintf(tw, "  %s\t0\t-\t-\t-\n", row.name)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%v\t%v\t%v\n", row.name, row.l.n,
			row.l.p50.Round(time.Microsecond), row.l.p99.Round(time.Microsecond), row.l.max.Round(time.Microsecond))
	}
	tw.Flush()
}
