package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// displayClients are the demo's clients and the flood, whose pattern is
// the widest, with more errors in their totals than their column holds.
func displayClients() []*client {
	var cs []*client
	for i, p := range append(append([]profile(nil), profiles...), floodProfile) {
		cs = append(cs, &client{
			profile: p,
			ok:      make([]span, 12345*i),
			errs:    123456,
			seconds: []counts{{ok: 10 * i, limited: 300 * i}, {ok: 7, limited: 1}},
		})
	}
	return cs
}

var cursorUp = regexp.MustCompile(`^\x1b\[(\d+)A`)

// TestDisplayFitsTerminal draws the live view twice at several widths, as
// a run does, and checks that no line reaches the terminal's last column,
// so that none wraps, and that the second frame moves back over exactly
// the lines of the first: together, that the view redraws in place
// instead of stacking up. Below the width the view needs, it must fall
// back to plain lines, which are never redrawn.
func TestDisplayFitsTerminal(t *testing.T) {
	tests := []struct {
		width    int // 0: unknown, taken as 80
		wantLive bool
		wantBar  int // columns of each bar
	}{
		{0, true, 27},
		{80, true, 27},
		{63, true, minBarWidth},
		{62, false, 0},
		{40, false, 0},
		{92, true, maxBarWidth - 1},
		{93, true, maxBarWidth},
		{130, true, maxBarWidth},
	}
	for _, tt := range tests {
		var out strings.Builder
		d := newDisplay(&out, true, tt.width, "http://127.0.0.1:8080/api/v1/hello", displayClients(), 15*time.Second)
		d.draw(0, time.Second)
		first := out.String()
		out.Reset()
		d.draw(1, 2*time.Second)
		second := out.String()

		if !tt.wantLive {
			if d.live || strings.Contains(first+second, "\x1b") {
				t.Errorf("width %d: live view drawn, want the plain one: %q", tt.width, first+second)
			}
			continue
		}
		if !d.live {
			t.Errorf("width %d: plain view, want the live one", tt.width)
			continue
		}
		if d.barW != tt.wantBar {
			t.Errorf("width %d: bars %d columns wide, want %d", tt.width, d.barW, tt.wantBar)
		}
		width := tt.width
		if width == 0 {
			width = defaultWidth
		}
		lines := strings.Split(strings.TrimSuffix(first, "\n"), "\n")
		for i, l := range lines {
			l = strings.TrimPrefix(l, "\x1b[2K")
			if n := utf8.RuneCountInString(l); n >= width {
				t.Errorf("width %d: line %d is %d columns, want at most %d: %q", width, i+1, n, width-1, l)
			}
			if strings.Contains(l, "\x1b") {
				t.Errorf("width %d: line %d holds an escape sequence past its start: %q", width, i+1, l)
			}
		}
		m := cursorUp.FindStringSubmatch(second)
		if m == nil {
			t.Errorf("width %d: second frame does not move back up: %q", width, second)
			continue
		}
		if up, _ := strconv.Atoi(m[1]); up != len(lines) {
			t.Errorf("width %d: second frame moves up %d lines, the first drew %d", width, up, len(lines))
		}
		// The bars show the second drawn: flood, the last client, had 40
		// of 1200 requests allowed in the first, 7 of 8 in the second.
		wantBar := bar(7, 1, d.barW)
		if last := lines[len(lines)-1]; !strings.Contains(last, bar(40, 1200, d.barW)) {
			t.Errorf("width %d: flood's row %q lacks its bar %q", width, last, bar(40, 1200, d.barW))
		}
		if !strings.Contains(second, " "+wantBar+" ") {
			t.Errorf("width %d: second frame lacks the bar %q: %q", width, wantBar, second)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abcdef", 3, "abc"},
		{"héllo", 2, "hé"},
		{"abc", 0, ""},
	} {
		if got := clip(tt.s, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
