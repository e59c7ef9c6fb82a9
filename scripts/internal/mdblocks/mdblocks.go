// Package mdblocks finds the Go code blocks of a Markdown file, with the
// marker comment that may stand before each, for the README checks in
// scripts/.
//
// A Go block is a fenced code block (``` or ~~~) whose info string starts
// with "go" or "golang". Its marker is an HTML comment alone on the last
// non-blank line before the opening fence, such as
//
//	<!-- quickstart -->
//
// GitHub shows neither the comment nor any trace of it, and keeps the
// block's highlighting. The markers the checks know are the Marker
// constants; any other comment there is no marker.
package mdblocks

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// A Marker says how a block is to be compiled.
type Marker string

// The markers the README checks know.
const (
	// None: a block without a marker (or with an unknown comment).
	None Marker = ""
	// QuickStart marks a module's quick start: the body of a main
	// function that compiles with nothing but its imports, which are
	// resolved by goimports.
	QuickStart Marker = "quickstart"
	// Snippets marks a block of independent snippets, one a paragraph
	// (separated by blank lines), each compiled in a scope of its own,
	// so that they may reuse names.
	Snippets Marker = "snippets"
	// NoCompile marks a block that is not meant to compile (pseudo-code,
	// an excerpt with elisions). Use it sparingly.
	NoCompile Marker = "nocompile"
)

// A Block is one Go code block.
type Block struct {
	// Line is the 1-based line, in the Markdown file, of the block's
	// first line of code (the line after the opening fence).
	Line int
	// Marker is the block's marker, None if it has none.
	Marker Marker
	// Code is the block's text, one line each, without the fences and
	// without the fence's own indentation.
	Code []string
}

var (
	fenceRE  = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})[ \t]*([^ \t`]*)")
	markerRE = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)
)

// Parse returns the Go blocks of the Markdown text src, in order. It
// fails on a fence left open at the end of the file.
func Parse(src []byte) ([]Block, error) {
	var (
		blocks   []Block
		lastText string // the last non-blank line outside blocks
		inside   bool
		isGo     bool
		fence    string // the opening fence's characters
		indent   int    // the opening fence's indentation
		cur      Block
		openLine int
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if !inside {
			m := fenceRE.FindStringSubmatch(line)
			if m == nil {
				if strings.TrimSpace(line) != "" {
					lastText = line
				}
				continue
			}
			// A backtick fence's info string may not hold a backtick.
			if m[2][0] == '`' && strings.Contains(line[len(m[0]):], "`") {
				lastText = line
				continue
			}
			inside, fence, indent, openLine = true, m[2], len(m[1]), n
			lang := strings.ToLower(m[3])
			isGo = lang == "go" || lang == "golang"
			cur = Block{Line: n + 1, Marker: markerOf(lastText)}
			continue
		}
		if t := strings.TrimLeft(line, " "); len(line)-len(t) <= 3 &&
			strings.HasPrefix(t, fence[:1]) && strings.TrimRight(t, fence[:1]+" \t") == "" &&
			len(strings.TrimRight(t, " \t")) >= len(fence) {
			if isGo {
				blocks = append(blocks, cur)
			}
			inside, lastText = false, line
			continue
		}
		if isGo {
			cur.Code = append(cur.Code, dedent(line, indent))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inside {
		return blocks, fmt.Errorf("line %d: code fence %s is never closed", openLine, fence)
	}
	return blocks, nil
}

// markerOf returns the marker named by an HTML comment line, or None.
func markerOf(line string) Marker {
	m := markerRE.FindStringSubmatch(line)
	if m == nil {
		return None
	}
	switch mk := Marker(m[1]); mk {
	case QuickStart, Snippets, NoCompile:
		return mk
	}
	return None
}

// dedent removes up to n leading spaces, as CommonMark does with the lines
// of a fenced block whose fence is indented by n.
func dedent(line string, n int) string {
	for i := 0; i < n && strings.HasPrefix(line, " "); i++ {
		line = line[1:]
	}
	return line
}

// Paragraphs splits a block's code into runs of non-blank lines, each
// with the offset of its first line in code.
func Paragraphs(code []string) (starts []int, paras [][]string) {
	start := -1
	for i := 0; i <= len(code); i++ {
		blank := i == len(code) || strings.TrimSpace(code[i]) == ""
		switch {
		case !blank && start < 0:
			start = i
		case blank && start >= 0:
			starts = append(starts, start)
			paras = append(paras, code[start:i])
			start = -1
		}
	}
	return starts, paras
}
