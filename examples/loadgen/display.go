package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// display draws the live view once a second: in place on a terminal, as
// one line a second otherwise.
type display struct {
	out      io.Writer
	live     bool
	url      string
	clients  []*client
	duration time.Duration
	drawn    int // lines drawn last time, to move back over them
}

const barWidth = 40

// draw shows second sec, which has just ended, and the totals; elapsed
// drives the progress bar.
func (d *display) draw(sec int, elapsed time.Duration) {
	if !d.live {
		var b strings.Builder
		fmt.Fprintf(&b, "%3ds", sec+1)
		for _, c := range d.clients {
			s, _ := c.snapshot(sec)
			fmt.Fprintf(&b, "  %s %d/%d", c.name, s.ok, s.limited)
			if s.other > 0 {
				fmt.Fprintf(&b, "/%d err", s.other)
			}
		}
		fmt.Fprintln(d.out, b.String(), "  (200/429 in that second)")
		return
	}

	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", d.drawn) // back to the top of the view
	}
	lines := 0
	line := func(format string, args ...any) {
		b.WriteString("\x1b[2K")
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
		lines++
	}
	frac := min(1, float64(elapsed)/float64(d.duration))
	done := int(frac * barWidth)
	line("ratelimit loadgen -> %s", d.url)
	line("[%s%s] %4.1fs / %v", strings.Repeat("=", done), strings.Repeat(" ", barWidth-done), elapsed.Seconds(), d.duration)
	line("")
	line("%-8s %-24s %-*s %7s %7s %5s", "client", "pattern", barWidth, fmt.Sprintf("second %d: 200 # / 429 .", sec+1), "200", "429", "err")
	for _, c := range d.clients {
		s, t := c.snapshot(sec)
		line("%-8s %-24s %-*s %7d %7d %5d", c.name, c.profile, barWidth, bar(s.ok, s.limited), t.ok, t.limited, t.other)
	}
	d.drawn = lines
	io.WriteString(d.out, b.String())
}

// bar draws ok allowed and limited refused requests as '#' and '.',
// scaled down to fit barWidth.
func bar(ok, limited int) string {
	if n := ok + limited; n > barWidth {
		ok = (ok*barWidth + n/2) / n
		if ok == 0 && n > 0 && limited < n {
			ok = 1
		}
		limited = barWidth - ok
	}
	return strings.Repeat("#", ok) + strings.Repeat(".", limited)
}
