package main

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRules runs the check on testdata/README.md, whose blocks break each
// rule once, and wants exactly the errors those breaks cause, at the
// README's lines.
func TestRules(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := filepath.Abs("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	n, err := run(&out, root, "examples/internal/readme", []string{readme})
	if err != nil {
		t.Fatal(err)
	}
	md := "scripts/internal/readmecheck/testdata/README.md"
	in := func(line int) string { return ` \(in the Go block at ` + md + ":" + strconv.Itoa(line) + `\)$` }
	want := []string{
		md + `:6:21: undefined: hello` + in(4),
		md + `:13:11: undefined: nosuch` + in(11),
		md + `:31:35: invalid operation: .*mismatched types.*` + in(30),
		md + `:37:27: undefined: undefinedThing` + in(34),
		md + `:41:4: missing condition in if statement` + in(40),
		md + `:42:3: expected .*` + in(40),
	}
	var got []string
	for l := range strings.Lines(out.String()) {
		if !strings.HasPrefix(l, "readmecheck: ") {
			got = append(got, strings.TrimSpace(l))
		}
	}
	res := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		res[i] = regexp.MustCompile("^" + w)
		if !slices.ContainsFunc(got, res[i].MatchString) {
			t.Errorf("no error matching %q", w)
		}
	}
	for _, g := range got {
		if !slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(g) }) {
			t.Errorf("unexpected error %q", g)
		}
	}
	if n != len(got) {
		t.Errorf("run counted %d errors, printed %d", n, len(got))
	}
	if t.Failed() {
		t.Logf("output:\n%s", out.String())
	}
}
