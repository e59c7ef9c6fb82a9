package mdblocks

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	src := "# T\n" + // 1
		"\n" + // 2
		"<!-- quickstart -->\n" + // 3
		"```go\n" + // 4
		"a := 1\n" + // 5
		"```\n" + // 6
		"```sh\n" + // 7
		"go get x\n" + // 8
		"```\n" + // 9
		"<!-- snippets -->\n" + // 10
		"\n" + // 11
		"~~~~ golang extra\n" + // 12
		"b()\n" + // 13
		"```\n" + // 14: not the closing fence
		"~~~~\n" + // 15
		"<!-- prettier-ignore -->\n" + // 16
		"  ```Go\n" + // 17
		"    c()\n" + // 18
		"  ```\n" + // 19
		"text\n" + // 20
		"```go\n" + // 21
		"```\n" // 22
	got, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 5, Marker: QuickStart, Code: []string{"a := 1"}},
		{Line: 13, Marker: Snippets, Code: []string{"b()", "```"}},
		{Line: 18, Marker: None, Code: []string{"  c()"}},
		{Line: 22, Marker: None},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Line != w.Line || g.Marker != w.Marker || !slices.Equal(g.Code, w.Code) {
			t.Errorf("block %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestParseUnclosed(t *testing.T) {
	if _, err := Parse([]byte("x\n```go\na()\n")); err == nil {
		t.Error("an unclosed fence: no error, want one")
	}
}

func TestParagraphs(t *testing.T) {
	starts, paras := Paragraphs([]string{"", "a", "b", "", "", "c", " "})
	if !slices.Equal(starts, []int{1, 5}) || len(paras) != 2 ||
		!slices.Equal(paras[0], []string{"a", "b"}) || !slices.Equal(paras[1], []string{"c"}) {
		t.Errorf("got starts %v, paragraphs %q; want [1 5], [[a b] [c]]", starts, paras)
	}
}
