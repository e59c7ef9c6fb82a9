// Package gofrag turns the Go blocks of a Markdown file into Go source
// whose positions point back at the Markdown, and resolves the imports
// that a block leaves out, as goimports would.
package gofrag

import (
	"fmt"
	"go/parser"
	"go/token"
	"strconv"
	"strings"

	"golang.org/x/tools/imports"
)

// Lines returns code preceded by a //line directive, so that the
// compiler, go vet and go/types report its first line as mdfile:line and
// the following ones in turn. mdfile should be absolute: the scanner
// takes a relative one as relative to the generated file's directory.
func Lines(mdfile string, line int, code []string) string {
	// With a column, positions on the lines that follow keep theirs.
	return "//line " + mdfile + ":" + strconv.Itoa(line) + ":1\n" + strings.Join(code, "\n") + "\n"
}

// File returns a Go file of package pkg holding decls (which may start
// with imports of its own), with the imports that goimports finds for the
// names decls uses without importing them.
// filename is where the file would be: goimports resolves names in the
// module of the current directory and prefers the imports of the
// package's other files in filename's directory. The result's positions
// are those of decls' //line directives, and so are those of a syntax
// error.
func File(filename, pkg, decls string) ([]byte, error) {
	// Syntax errors first, at the Markdown's positions.
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, filename, "package "+pkg+"\n\n"+decls, parser.AllErrors); err != nil {
		return nil, err
	}
	// goimports gets the source without its //line directives, which
	// would make it print positions of another file, and only its import
	// declaration is kept.
	var plain strings.Builder
	for l := range strings.Lines(decls) {
		if strings.HasPrefix(l, "//line ") {
			l = "//\n"
		}
		plain.WriteString(l)
	}
	src := "package " + pkg + "\n\n" + plain.String()
	out, err := imports.Process(filename, []byte(src), &imports.Options{Comments: true, TabIndent: true, TabWidth: 8})
	if err != nil {
		return nil, err
	}
	// Only the imports that goimports added: decls keeps its own.
	had := map[string]bool{}
	orig, err := parser.ParseFile(token.NewFileSet(), filename, src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	for _, s := range orig.Imports {
		had[s.Path.Value] = true
	}
	f, err := parser.ParseFile(token.NewFileSet(), filename, out, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	for _, s := range f.Imports {
		if had[s.Path.Value] {
			continue
		}
		b.WriteString("import ")
		if s.Name != nil {
			b.WriteString(s.Name.Name + " ")
		}
		b.WriteString(s.Path.Value + "\n")
	}
	b.WriteString("\n")
	b.WriteString(decls)
	return []byte(b.String()), nil
}
