// Command modcheck checks the go.mod files of the repository's modules for
// what would keep a stranger from installing a library module, or would
// make a build inside the repository use something else than the working
// tree:
//
//   - a requirement of the placeholder pseudo-version
//     v0.0.0-00010101000000-000000000000, which exists only through a
//     replace, and Go ignores a dependency's replace;
//   - a requirement of another module of the repository without a replace
//     of it by its directory, so that builds here would use a published
//     version instead of the working tree;
//   - a library module that requires a module that is never published
//     (examples, benchmarks, scripts);
//   - a library module without a LICENSE file of its own: a module's zip
//     holds only its own directory.
//
// The module directories are the arguments, relative to the current
// directory (the repository's root); -lib lists those that are published.
//
// Usage:
//
//	modcheck -lib ". redisstore" . redisstore examples benchmarks scripts
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
)

// placeholder is the pseudo-version that `go mod edit -replace` and
// `go get` of a replaced module write when no version exists.
const placeholder = "v0.0.0-00010101000000-000000000000"

func main() {
	lib := flag.String("lib", "", "the library modules' directories, separated by spaces")
	flag.Parse()
	problems, err := check(flag.Args(), strings.Fields(*lib))
	if err != nil {
		fmt.Fprintf(os.Stderr, "modcheck: %v\n", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Println("modcheck: " + p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

type mod struct {
	dir string
	f   *modfile.File
}

// check returns a line for each problem found in the modules of dirs.
func check(dirs, lib []string) ([]string, error) {
	var mods []mod
	byPath := map[string]string{} // module path -> directory
	for _, d := range dirs {
		d = filepath.Clean(d)
		name := filepath.Join(d, "go.mod")
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, b, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s has no module line", name)
		}
		mods = append(mods, mod{d, f})
		byPath[f.Module.Mod.Path] = d
	}
	libs := map[string]bool{}
	for _, l := range lib {
		l = filepath.Clean(l)
		if !slices.ContainsFunc(mods, func(m mod) bool { return m.dir == l }) {
			return nil, fmt.Errorf("library module %s is not among the modules", l)
		}
		libs[l] = true
	}
	isLib := func(d string) bool { return libs[d] }

	var problems []string
	for _, m := range mods {
		gomod := filepath.Join(m.dir, "go.mod")
		replaced := map[string]string{}
		for _, r := range m.f.Replace {
			if r.Old.Version == "" && r.New.Version == "" {
				replaced[r.Old.Path] = filepath.Clean(filepath.Join(m.dir, r.New.Path))
			}
		}
		for _, r := range m.f.Require {
			p, v := r.Mod.Path, r.Mod.Version
			if v == placeholder {
				problems = append(problems, fmt.Sprintf("%s requires %s at the placeholder %s, which exists only through a replace, and Go ignores a dependency's replaces: require a real version of it (see RELEASING.md) and keep the replace", gomod, p, v))
			}
			dir, ours := byPath[p]
			if !ours {
				continue
			}
			if got, ok := replaced[p]; !ok || got != dir {
				rel, _ := filepath.Rel(m.dir, dir)
				problems = append(problems, fmt.Sprintf("%s requires %s without `replace %s => %s`: builds in the repository would use a published version instead of the working tree", gomod, p, p, filepath.ToSlash(rel)))
			}
			if isLib(m.dir) && !isLib(dir) {
				problems = append(problems, fmt.Sprintf("%s: library module %s requires %s, which is never published", gomod, m.f.Module.Mod.Path, p))
			}
		}
		if isLib(m.dir) {
			if _, err := os.Stat(filepath.Join(m.dir, "LICENSE")); err != nil {
				problems = append(problems, fmt.Sprintf("library module %s (%s) has no LICENSE of its own; its zip holds only its directory: copy the root's LICENSE there", m.f.Module.Mod.Path, m.dir))
			}
		}
	}
	return problems, nil
}
