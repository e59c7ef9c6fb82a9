package ratelimit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mwPadTo returns an Accept list element of n-2 bytes that is no media
// range, and the comma and space that end it: n bytes in all.
func mwPadTo(n int) string { return strings.Repeat("a", n-2) + ", " }

// mwProblemCases are Accept headers and whether they ask for problem
// details: a name for each, the lines, the answer.
var mwProblemCases = []struct {
	name  string
	lines []string
	want  bool
}{
	{"alone", []string{"application/problem+json"}, true},
	{"none", nil, false},
	{"empty", []string{""}, false},
	{"others", []string{"application/json, text/html"}, false},
	{"among others", []string{"application/json, application/problem+json, text/html"}, true},

	// Quality: a q above 0, by strconv.ParseFloat, as a token.
	{"q=0", []string{"application/problem+json;q=0"}, false},
	{"q=0.0", []string{"application/problem+json;q=0.0"}, false},
	{"q=0.000", []string{"application/problem+json; q=0.000"}, false},
	{"q=0.5", []string{"application/problem+json;q=0.5"}, true},
	{"q=1", []string{"application/problem+json;q=1"}, true},
	{"q=0.001", []string{"application/problem+json;q=0.001"}, true},
	{"Q=0.5", []string{"application/problem+json;Q=0.5"}, true},
	{"Q=0", []string{"application/problem+json;Q=0"}, false},
	{"q=-1", []string{"application/problem+json;q=-1"}, false},
	{"q=abc", []string{"application/problem+json;q=abc"}, false},
	{"q=NaN", []string{"application/problem+json;q=NaN"}, false},
	{"q empty", []string{"application/problem+json;q="}, false},
	{"q without a value", []string{"application/problem+json;q"}, false},
	{`quoted q`, []string{`application/problem+json;q="0.5"`}, false},
	{`quoted q=0`, []string{`application/problem+json;q="0"`}, false},
	{"q=0 elsewhere", []string{"application/problem+json, text/html;q=0"}, true},
	{"q=0 then q=1", []string{"application/problem+json;q=0, application/problem+json;q=1"}, true},

	// Wildcards do not name it.
	{"*/*", []string{"*/*"}, false},
	{"application/*", []string{"application/*"}, false},
	{"*/problem+json", []string{"*/problem+json"}, false},

	// Type and subtype are case-insensitive, but ASCII: a token has no
	// other letters, and "ſ" (U+017F) is no "s", though Unicode folds them.
	{"upper case", []string{"APPLICATION/PROBLEM+JSON"}, true},
	{"mixed case", []string{"Application/Problem+Json"}, true},
	{"long s", []string{"application/problem+j\u017fon"}, false},

	// Whitespace: OWS around elements and around ";", none inside.
	{"OWS", []string{" \tapplication/problem+json \t; \tq=0.5 \t, text/html"}, true},
	{"space in the type", []string{"application / problem+json"}, false},
	{"space before the value", []string{"application/problem+json;q= 1"}, false},
	{"no semicolon", []string{"application/problem+json q=1"}, false},
	{"other types", []string{"application/problem+jsonx, xapplication/problem+json, application/problem"}, false},

	// Parameters: optional ones, tokens and quoted strings with ";" and
	// "," in them, and the broken ones that make the element no match.
	{"empty parameters", []string{"application/problem+json;;q=0.5;"}, true},
	{"charset", []string{`application/problem+json; charset=utf-8`}, true},
	{"quoted ; and ,", []string{`application/problem+json; a="x;y,z"; q=1`}, true},
	{"quoted ; and , then q=0", []string{`application/problem+json; a="x;q=1,z"; q=0`}, false},
	{"quoted pair", []string{`application/problem+json; a="x\"y\\"`}, true},
	{"quoted element", []string{`text/plain; note="a, application/problem+json, b"`}, false},
	{"quoted element, escaped quote", []string{`text/plain; note="a\", application/problem+json"`}, false},
	{"escaped backslash closes", []string{`text/plain; note="a\\", application/problem+json`}, true},
	{"after a quoted element", []string{`text/plain; note="a, b", application/problem+json`}, true},
	{"unterminated quote", []string{`application/problem+json; a="x`}, false},
	{"unterminated quote swallows the rest", []string{`text/plain; a="x, application/problem+json`}, false},
	{"control byte in quotes", []string{"application/problem+json; a=\"x\x01\""}, false},
	{"obs-text in quotes", []string{"application/problem+json; a=\"caf\xe9\""}, true},
	{"no name", []string{"application/problem+json; =x"}, false},
	{"no value", []string{"application/problem+json; a"}, false},
	{"empty value", []string{"application/problem+json; a="}, false},
	{"two values", []string{"application/problem+json; a=b c"}, false},
	{"token after quotes", []string{`application/problem+json; a="b"c`}, false},
	{"a broken element leaves the others", []string{"text/html;q=, application/problem+json"}, true},

	// Lines: each is a list, and quotes do not run from one to the next.
	{"second line", []string{"text/html", "application/problem+json"}, true},
	{"empty lines", []string{"", "", "text/html"}, false},
	{"quote left open on the line before", []string{`text/plain; a="x`, "application/problem+json"}, true},

	// The 4 KiB cap, in all the lines: an element whose end (its comma,
	// or the end of its line) lies beyond it is not read.
	{"ends at the cap", []string{mwPadTo(4096-24) + "application/problem+json"}, true},
	{"cut by the cap", []string{mwPadTo(4096-23) + "application/problem+json"}, false},
	{"its comma beyond the cap", []string{mwPadTo(4096-24) + "application/problem+json, text/html"}, false},
	{"its comma within the cap", []string{mwPadTo(4096-25) + "application/problem+json, text/html"}, true},
	// What the cap leaves of an element would ask for problem details.
	{"its q=0 cut off by the cap", []string{mwPadTo(4096-24) + "application/problem+json;q=0"}, false},
	{"its quote cut by the cap", []string{mwPadTo(4096-25) + `application/problem+json;a="b,c", x/y`}, false},
	{"a line that ends at the cap", []string{mwPadTo(4096 - 24), "application/problem+json"}, true},
	{"a line cut by the cap", []string{mwPadTo(4096 - 23), "application/problem+json"}, false},
	{"a line after the cap", []string{mwPadTo(4096), "application/problem+json"}, false},
	{"first of a long line", []string{"application/problem+json, " + mwPadTo(1<<20)}, true},
}

func TestAcceptsProblem(t *testing.T) {
	require.Equal(t, 4096, maxAcceptBytes, "the cap the cases are built around")
	for _, c := range mwProblemCases {
		assert.Equal(t, c.want, acceptsProblem(c.lines), "%s: Accept %q", c.name, c.lines)
	}
}

// acceptsProblem reads a client's header in place: it allocates nothing,
// whatever it finds.
func TestAcceptsProblemAllocatesNothing(t *testing.T) {
	for _, c := range mwProblemCases {
		got := testing.AllocsPerRun(10, func() { acceptsProblem(c.lines) })
		assert.Zero(t, got, "%s: allocations", c.name)
	}
}
