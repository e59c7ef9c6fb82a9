package ratelimit

import (
	"regexp"
	"strings"
	"testing"
)

// The reference for acceptsProblem reads Accept the slow way, straight
// from RFC 9110's grammar: it splits each whole line into its list
// elements, keeps those whose end lies within the first 4 KiB of all the
// lines, and matches each against a regular expression of the media-range
// rule. acceptsProblem does it in one pass, in place, with no copies.

// The grammar's rules, over the bytes of a header each taken as the rune
// of the same number (see refLatin1), so that obs-text (0x80 to 0xff) is
// named as it is.
const (
	// token = 1*tchar
	refToken = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
	// quoted-string = DQUOTE *( qdtext / quoted-pair ) DQUOTE
	refQuoted = `"(?:[\t \x21\x23-\x5b\x5d-\x7e\x{80}-\x{ff}]|\\[\t \x21-\x7e\x{80}-\x{ff}])*"`
	// OWS = *( SP / HTAB )
	refOWS = `[ \t]*`
	// parameter = parameter-name "=" parameter-value
	refParam = `(` + refToken + `)=(` + refToken + `|` + refQuoted + `)`
)

var (
	// An element: OWS, then media-range = type "/" subtype
	// *( OWS ";" OWS [ parameter ] ), then OWS. The groups are the type,
	// the subtype and the parameters.
	refMediaRange = regexp.MustCompile(`^` + refOWS + `(` + refToken + `)/(` + refToken + `)` +
		`((?:` + refOWS + `;` + refOWS + `(?:` + refParam + `)?)*)` + refOWS + `$`)
	// One parameter of the parameters group: the first ";" a match can
	// start at is a parameter's, since a quoted value is consumed whole by
	// the match of its parameter.
	refParameter = regexp.MustCompile(`;` + refOWS + refParam)
)

// refLatin1 returns s with each byte as the rune of the same number.
func refLatin1(s string) string {
	r := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		r[i] = rune(s[i])
	}
	return string(r)
}

// refElement is a list element of a line, and where it ends: the index of
// the comma after it, or the line's length for the last.
type refElement struct {
	text string
	end  int
}

// refQvalue is RFC 9110's qvalue: 0 to 1 with at most three decimals.
var refQvalue = regexp.MustCompile(`^(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)$`)

// refElements splits line at its commas outside quoted strings. A quote
// opens a quoted string wherever it stands (an element where it may not
// stand breaks the grammar anyway), and a backslash inside one quotes the
// byte after it.
func refElements(line string) []refElement {
	var els []refElement
	start, quoted := 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			els = append(els, refElement{line[start:i], i})
			start = i + 1
		}
	}
	return append(els, refElement{line[start:], len(line)})
}

// refAsksProblem reports whether the element el is the media range
// application/problem+json (type and subtype case-insensitive) whose every
// q parameter is an RFC 9110 qvalue above 0.
func refAsksProblem(el string) bool {
	m := refMediaRange.FindStringSubmatch(refLatin1(el))
	if m == nil || strings.ToLower(m[1]) != "application" || strings.ToLower(m[2]) != "problem+json" {
		return false
	}
	for _, p := range refParameter.FindAllStringSubmatch(m[3], -1) {
		if strings.ToLower(p[1]) != "q" {
			continue
		}
		if strings.HasPrefix(p[2], `"`) {
			return false // q must be a token
		}
		if !refQvalue.MatchString(p[2]) || strings.Trim(p[2], "0.") == "" {
			return false
		}
	}
	return true
}

// refAcceptsProblem reports whether the Accept lines ask for problem
// details in an element whose end lies within the first 4 KiB of the
// lines: its comma read, or its line read to the end.
func refAcceptsProblem(lines []string) bool {
	budget := 4 << 10
	for _, line := range lines {
		read := min(len(line), budget)
		budget -= read
		for _, el := range refElements(line) {
			known := el.end < read || el.end == len(line) && read == len(line)
			if known && refAsksProblem(el.text) {
				return true
			}
		}
	}
	return false
}

// The reference agrees with the table of acceptsProblem's cases, so that a
// fuzzing failure is the parser's fault, not the reference's.
func TestRefAcceptsProblem(t *testing.T) {
	for _, c := range mwProblemCases {
		if got := refAcceptsProblem(c.lines); got != c.want {
			t.Errorf("%s: reference on Accept %q: %v, want %v", c.name, c.lines, got, c.want)
		}
	}
}

// FuzzAcceptsProblem compares acceptsProblem with the reference on Accept
// headers of the lines of accept, after pad spaces (up to 5000, to move
// elements across the 4 KiB cap).
func FuzzAcceptsProblem(f *testing.F) {
	for _, c := range mwProblemCases {
		if s := strings.Join(c.lines, "\n"); len(s) <= 8<<10 {
			f.Add(s, uint16(0))
		}
	}
	const pj = "application/problem+json"
	for _, seed := range []struct {
		accept string
		pad    int
	}{
		{pj, 4096 - len(pj)},     // ends at the cap
		{pj, 4096 - len(pj) + 1}, // cut by it
		{pj + ", x/y", 4096 - len(pj)},
		{pj + ", x/y", 4096 - len(pj) - 1},
		{pj + ";q=0", 4096 - len(pj)},
		{"x/y\n" + pj, 4096 - 3 - len(pj)},
		{"x/y\n" + pj, 4096 - 3 - len(pj) + 1},
		{"x/y\n\n" + pj, 4096 - 3},
		{`a/b;c="` + pj + `, d"` + ", " + pj, 4000},
		{pj + `;a="\"` + ", " + pj, 0},
		{pj + `;a="\\"` + ", x", 0},
		{"\t" + pj + " \t;\t q=1.0 \t", 0},
		{pj + ";q=1e-400", 0},
		{pj + ";q=0x1p-2", 0},
		{pj + ";q=Inf", 0},
		{pj + ";q=+0.5", 0},
		{"application/problem+JSON;Q=.5", 0},
		{"application/problem+json\xff", 0},
		{"application/problem+json;a=\"\x80\\\xff\"", 0},
		{"application/problem+json;a=\"\x00\"", 0},
	} {
		f.Add(seed.accept, uint16(seed.pad))
	}
	f.Fuzz(func(t *testing.T, accept string, pad uint16) {
		lines := strings.Split(strings.Repeat(" ", int(pad)%5000)+accept, "\n")
		if got, want := acceptsProblem(lines), refAcceptsProblem(lines); got != want {
			t.Errorf("acceptsProblem(%q) = %v, reference %v", lines, got, want)
		}
	})
}
