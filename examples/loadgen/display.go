package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// display draws the live view once a second: in place on a terminal, as
// one line a second otherwise.
type display struct {
	out      io.Writer
	live     bool
	url      string
	clients  []*client
	duration time.Duration
	width    int // columns a line of the live view may take
	nameW    int // columns of the client column
	patternW int // columns of the pattern column
	barW     int // columns of each bar
	drawn    int // lines drawn last time, to move back over them
}

const (
	// defaultWidth is the terminal's width when it cannot be read.
	defaultWidth = 80
	// The bars take what the other columns leave of the terminal's
	// width, up to maxBarWidth; narrower than minBarWidth they no longer
	// tell one client from another, and the live view gives way to the
	// plain one.
	maxBarWidth = 40
	minBarWidth = 10
	// countsW is the width of the totals after the bar: " %7d %7d %5d".
	countsW = 1 + 7 + 1 + 7 + 1 + 5
)

// newDisplay lays out the view for a terminal width columns wide (0 if
// unknown). It falls back to plain lines, whatever live says, when the
// live view's rows would not fit.
func newDisplay(out io.Writer, live bool, width int, url string, clients []*client, duration time.Duration) *display {
	d := &display{out: out, live: live, url: url, clients: clients, duration: duration, nameW: len("client"), patternW: len("pattern")}
	if width <= 0 {
		width = defaultWidth
	}
	// The last column stays empty: a line that fills it makes some
	// terminals wrap, and a wrapped line breaks the count of lines that
	// the next redraw moves back over, so the views stack up.
	d.width = width - 1
	for _, c := range clients {
		d.nameW = max(d.nameW, utf8.RuneCountInString(c.name))
		d.patternW = max(d.patternW, utf8.RuneCountInString(c.profile.String()))
	}
	d.barW = min(maxBarWidth, d.width-(d.nameW+1+d.patternW+1+countsW))
	if d.barW < minBarWidth {
		d.live = false
	}
	return d
}

// draw shows second sec, which has just ended, and the totals; elapsed
// drives the progress bar.
func (d *display) draw(sec int, elapsed time.Duration) {
	if !d.live {
		d.drawPlain(sec)
		return
	}

	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", d.drawn) // back to the top of the view
	}
	lines := 0
	line := func(format string, args ...any) {
		b.WriteString("\x1b[2K")
		b.WriteString(clip(fmt.Sprintf(format, args...), d.width))
		b.WriteByte('\n')
		lines++
	}
	frac := min(1, float64(elapsed)/float64(d.duration))
	done := int(frac * float64(d.barW))
	line("ratelimit loadgen -> %s", d.url)
	line("[%s%s] %4.1fs / %v", strings.Repeat("=", done), strings.Repeat(" ", d.barW-done), elapsed.Seconds(), d.duration)
	line("bars: the last second's 200s (#) and 429s (.)")
	line("%-*s %-*s %-*s %7s %7s %5s", d.nameW, "client", d.patternW, "pattern", d.barW, fmt.Sprintf("second %d", sec+1), "200", "429", "err")
	for _, c := range d.clients {
		s, t := c.snapshot(sec)
		line("%-*s %-*s %-*s %7d %7d %5d", d.nameW, c.name, d.patternW, c.profile, d.barW, bar(s.ok, s.limited, d.barW), t.ok, t.limited, t.other)
	}
	d.drawn = lines
	io.WriteString(d.out, b.String())
}

// drawPlain prints second sec as one line. It is never redrawn, so a line
// that wraps on a narrow terminal does no harm.
func (d *display) drawPlain(sec int) {
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
}

// clip cuts s to its first n characters, so that a long -addr or a
// count wider than its column cannot make a line wrap.
func clip(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// bar draws ok allowed and limited refused requests as '#' and '.',
// scaled down to fit width.
func bar(ok, limited, width int) string {
	if n := ok + limited; n > width {
		ok = (ok*width + n/2) / n
		if ok == 0 && n > 0 && limited < n {
			ok = 1
		}
		limited = width - ok
	}
	return strings.Repeat("#", ok) + strings.Repeat(".", limited)
}
