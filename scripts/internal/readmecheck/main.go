// Command readmecheck type-checks every Go block of the README.md at the
// root of every module in the repository (found by their go.mod, so a new
// module's README is checked without a change here), and names the file
// and line of each error.
//
// How a block is compiled (the markers are HTML comments alone on the
// last non-blank line before the fence, invisible on GitHub; see package
// mdblocks):
//
//   - <!-- nocompile -->: not compiled. For pseudo-code; use sparingly.
//   - A block whose first code line starts with "package": a whole file,
//     compiled alone as its own package.
//   - <!-- quickstart -->: the module's quick start, the body of a main
//     function that must compile with nothing but the imports goimports
//     finds (no placeholders). scripts/release-check.sh also builds it in
//     a stranger's module against the packed release.
//   - A block that parses as top-level declarations (func, type, var,
//     const): compiled as such in the placeholder package (below).
//   - Any other block is a fragment: the body of a function in the
//     placeholder package, where it may use the names declared in
//     examples/internal/readme/placeholders.go (l, mux, hello, rdb...),
//     which stand for what the README declares elsewhere. With
//     <!-- snippets --> each paragraph (blank-line separated) of the block
//     is a scope of its own, so that independent snippets may reuse a name.
//
// Imports are resolved as goimports would, in the examples module (which
// requires every library module, with a replace), preferring those of
// placeholders.go (so echo is v4). Variables declared and not used are no
// error (a fragment often declares what it shows and stops there); every
// other type error is. The quick start is built for real, in a stranger's
// module, by scripts/release-check.sh.
//
// Usage (from scripts/readme-check.sh):
//
//	readmecheck [-root repo] [-pkg examples/internal/readme] [README.md...]
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/scanner"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/slidelog/ratelimit/scripts/internal/gofrag"
	"github.com/slidelog/ratelimit/scripts/internal/mdblocks"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	pkg := flag.String("pkg", "examples/internal/readme", "the placeholder package's directory, relative to -root")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: readmecheck [-root dir] [-pkg dir] [README.md...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	n, err := run(os.Stdout, *root, *pkg, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "readmecheck: %v\n", err)
		os.Exit(1)
	}
	if n > 0 {
		fmt.Printf("readmecheck: %d errors in README Go blocks.\n"+
			"A fragment may use the names declared in %s (add one there for a name the README declares elsewhere);\n"+
			"mark a block that is not meant to compile with <!-- nocompile -->. The rules are at the top of scripts/readme-check.sh.\n",
			n, filepath.Join(*pkg, "placeholders.go"))
		os.Exit(1)
	}
}

// A unit is one block and the Go file made of it.
type unit struct {
	md    string // the Markdown file, relative to the root
	block mdblocks.Block
	dir   string // the package directory the file goes in, absolute
	pkg   string // its package name
	decls string // its code after the package clause and imports
}

// run checks the READMEs, or those of every module if files is empty, and
// returns the number of errors it printed to out.
func run(out io.Writer, root, pkgRel string, files []string) (int, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return 0, err
	}
	pkgDir := filepath.Join(root, pkgRel)
	if len(files) == 0 {
		if files, err = moduleREADMEs(root); err != nil {
			return 0, err
		}
	}
	var (
		units   []unit
		nerrs   int
		counted = map[mdblocks.Marker]int{}
		total   int
	)
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return 0, err
		}
		src, err := os.ReadFile(abs)
		if err != nil {
			return 0, err
		}
		rel := relTo(root, abs)
		blocks, err := mdblocks.Parse(src)
		if err != nil {
			fmt.Fprintf(out, "%s:%v\n", rel, strings.TrimPrefix(err.Error(), "line "))
			nerrs++
		}
		for _, b := range blocks {
			total++
			counted[b.Marker]++
			u := unit{md: rel, block: b}
			lines := func(line int, code []string) string { return gofrag.Lines(abs, line, code) }
			switch {
			case b.Marker == mdblocks.NoCompile:
				continue
			case isFile(b.Code):
				// Compiled alone, in a directory of its own (only in the
				// overlay); gofrag.File writes the package clause.
				u.dir = filepath.Join(pkgDir, "zz_file"+strconv.Itoa(len(units)))
				i := slices.IndexFunc(b.Code, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "package ") })
				u.pkg = packageName(b.Code)
				u.decls = lines(b.Line+i+1, b.Code[i+1:])
			case b.Marker == mdblocks.QuickStart:
				u.dir, u.pkg = filepath.Join(pkgDir, "zz_quickstart"), "quickstart"
				u.decls = "func _() {\n" + lines(b.Line, b.Code) + "}\n"
			case isDecls(b.Code):
				u.dir, u.pkg = pkgDir, ""
				u.decls = lines(b.Line, b.Code)
			case b.Marker == mdblocks.Snippets:
				u.dir, u.pkg = pkgDir, ""
				var sb strings.Builder
				sb.WriteString("func _() {\n")
				starts, paras := mdblocks.Paragraphs(b.Code)
				for i, p := range paras {
					sb.WriteString("{\n" + lines(b.Line+starts[i], p) + "}\n")
				}
				sb.WriteString("}\n")
				u.decls = sb.String()
			default:
				u.dir, u.pkg = pkgDir, ""
				u.decls = "func _() {\n" + lines(b.Line, b.Code) + "}\n"
			}
			units = append(units, u)
		}
	}

	placeholderPkg, err := packageOf(pkgDir)
	if err != nil {
		return 0, err
	}
	// goimports resolves names in the module of the current directory.
	if err := os.Chdir(pkgDir); err != nil {
		return 0, err
	}
	overlay := map[string][]byte{}
	patterns := []string{"."}
	for i, u := range units {
		name := filepath.Join(u.dir, fmt.Sprintf("zz_readme%d.go", i))
		if u.pkg == "" {
			u.pkg = placeholderPkg
		}
		src, err := gofrag.File(name, u.pkg, u.decls)
		if list, ok := err.(scanner.ErrorList); ok {
			for _, e := range list {
				nerrs += report(out, root, units, e.Error())
			}
			continue
		}
		if err != nil {
			nerrs += report(out, root, units, err.Error())
			continue
		}
		overlay[name] = src
		if u.dir != pkgDir {
			patterns = append(patterns, "./"+filepath.Base(u.dir))
		}
	}
	cfg := &packages.Config{
		Mode:    packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes,
		Dir:     pkgDir,
		Overlay: overlay,
	}
	pkgs, err := packages.Load(cfg, slices.Compact(patterns)...)
	if err != nil {
		return 0, err
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			if strings.Contains(e.Msg, "declared and not used") {
				continue
			}
			// go list's compiler output ("# pkg" and the compiler's
			// errors) for a package in a directory that exists only in
			// the overlay: the type check reports the same errors.
			if e.Kind == packages.ListError && strings.HasPrefix(e.Msg, "# ") {
				continue
			}
			pos := e.Pos
			if pos == "" {
				pos = p.PkgPath
			}
			nerrs += report(out, root, units, pos+": "+e.Msg)
		}
	}
	fmt.Fprintf(out, "readmecheck: %d Go blocks in %s: %d nocompile, %d quickstart, %d snippets, %d errors\n",
		total, strings.Join(relAll(root, files), ", "), counted[mdblocks.NoCompile],
		counted[mdblocks.QuickStart], counted[mdblocks.Snippets], nerrs)
	return nerrs, nil
}

// report prints one error, with paths relative to the root, naming the
// block its position falls in; it returns 1.
func report(out io.Writer, root string, units []unit, msg string) int {
	msg = strings.ReplaceAll(msg, root+string(filepath.Separator), "")
	for _, u := range units {
		prefix := u.md + ":"
		if !strings.HasPrefix(msg, prefix) {
			continue
		}
		line, _, _ := strings.Cut(strings.TrimPrefix(msg, prefix), ":")
		n, err := strconv.Atoi(line)
		// From the first line of code to the closing fence.
		if err == nil && n >= u.block.Line && n <= u.block.Line+len(u.block.Code) {
			msg += fmt.Sprintf(" (in the Go block at %s:%d)", u.md, u.block.Line-1)
			break
		}
	}
	fmt.Fprintln(out, msg)
	return 1
}

// isFile reports whether a block is a whole file: its first line that is
// neither blank nor a comment starts with "package".
func isFile(code []string) bool {
	return packageName(code) != ""
}

func packageName(code []string) string {
	for _, l := range code {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		if f := strings.Fields(t); len(f) == 2 && f[0] == "package" {
			return f[1]
		}
		return ""
	}
	return ""
}

// isDecls reports whether a block parses as top-level declarations.
func isDecls(code []string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+strings.Join(code, "\n"), parser.SkipObjectResolution)
	return err == nil
}

// packageOf returns the name of the Go package in dir, from its first
// non-test Go file.
func packageOf(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, n), nil, parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		return f.Name.Name, nil
	}
	return "", fmt.Errorf("%s: no Go file declaring the placeholders", dir)
}

// moduleREADMEs returns the README.md of every module under root: every
// directory with a go.mod, outside testdata, vendor and hidden directories.
func moduleREADMEs(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		readme := filepath.Join(filepath.Dir(p), "README.md")
		if _, err := os.Stat(readme); err == nil {
			out = append(out, readme)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return out, err
}

func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func relAll(root string, ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = relTo(root, p)
	}
	return out
}
