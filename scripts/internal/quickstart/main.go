// Command quickstart writes a module README's quick start as a Go program:
// the Go block marked <!-- quickstart --> (see package mdblocks), wrapped
// in package main and func main unless it is a whole program, with the
// imports goimports finds for it
// in the module of -dir. Compiler and vet messages about the program name
// the README's lines.
//
// Usage:
//
//	quickstart -dir consumer -o consumer/main.go path/to/README.md
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/slidelog/ratelimit/scripts/internal/gofrag"
	"github.com/slidelog/ratelimit/scripts/internal/mdblocks"
)

func main() {
	dir := flag.String("dir", ".", "the module whose requirements resolve the imports")
	out := flag.String("o", "main.go", "the file to write, relative to -dir")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: quickstart [-dir module] [-o main.go] README.md")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *dir, *out); err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
		os.Exit(1)
	}
}

func run(readme, dir, out string) error {
	readme, err := filepath.Abs(readme)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(readme)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing: a library module needs a README with a quick start, its Go block marked <!-- quickstart -->", readme)
	}
	if err != nil {
		return err
	}
	blocks, err := mdblocks.Parse(src)
	if err != nil {
		return fmt.Errorf("%s: %v", readme, err)
	}
	var qs []mdblocks.Block
	for _, b := range blocks {
		if b.Marker == mdblocks.QuickStart {
			qs = append(qs, b)
		}
	}
	switch len(qs) {
	case 0:
		return fmt.Errorf("%s has no quick start: mark its Go block with a line <!-- quickstart --> right before the fence", readme)
	case 1:
	default:
		return fmt.Errorf("%s: %d Go blocks are marked <!-- quickstart -->, want one (lines %d and %d)", readme, len(qs), qs[0].Line, qs[1].Line)
	}
	if err := os.Chdir(dir); err != nil {
		return err
	}
	// The quick start is the body of main, or a whole program.
	decls := "func main() {\n" + gofrag.Lines(readme, qs[0].Line, qs[0].Code) + "}\n"
	for i, l := range qs[0].Code {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "//") {
			continue
		} else if strings.HasPrefix(t, "package ") {
			decls = gofrag.Lines(readme, qs[0].Line+i+1, qs[0].Code[i+1:])
		}
		break
	}
	file, err := gofrag.File(filepath.Join(".", out), "main", decls)
	if err != nil {
		return fmt.Errorf("quick start of %s: %v", readme, err)
	}
	return os.WriteFile(out, file, 0o644)
}
