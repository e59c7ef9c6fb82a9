// Command modpack packs module directories at a version into a module
// proxy laid out on disk, which the go command reads through
// GOPROXY=file:///path/to/proxy:
//
//	<module path>/@v/list            the versions, one a line
//	<module path>/@v/<version>.info  {"Version": ..., "Time": ...}
//	<module path>/@v/<version>.mod   the module's go.mod
//	<module path>/@v/<version>.zip   the module's files, as golang.org/x/mod/zip makes them
//
// Module paths and versions are escaped as the go command expects
// (module.EscapePath). The zip is what a proxy would serve for a tag of
// the same tree: nested modules, vendor directories and VCS metadata are
// left out, and any file that a module zip may not hold is an error.
//
// Usage:
//
//	modpack -version v0.1.0 -out /tmp/proxy dir...
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	version := flag.String("version", "", "the version to pack the modules at, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy's root directory (created if missing)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: modpack -version vX.Y.Z -out proxydir moduledir...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if !semver.IsValid(*version) || semver.Canonical(*version) != *version {
		fatalf("modpack: %q is not a canonical semantic version such as v0.1.0", *version)
	}
	for _, dir := range flag.Args() {
		path, err := pack(dir, *version, *out)
		if err != nil {
			fatalf("modpack: %s: %v", dir, err)
		}
		fmt.Printf("modpack: %s@%s\n", path, *version)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// pack writes the module in dir at version into the proxy at out, and
// returns its module path.
func pack(dir, version, out string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		return "", err
	}
	if mf.Module == nil {
		return "", errors.New("go.mod has no module line")
	}
	m := module.Version{Path: mf.Module.Mod.Path, Version: version}
	if err := module.Check(m.Path, m.Version); err != nil {
		return "", err
	}
	epath, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	evers, err := module.EscapeVersion(m.Version)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(epath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(vdir, evers)

	zf, err := os.Create(base + ".zip")
	if err != nil {
		return "", err
	}
	if err := modzip.CreateFromDir(zf, m, dir); err != nil {
		zf.Close()
		return "", fmt.Errorf("zip: %w", err)
	}
	if err := zf.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return "", err
	}
	return m.Path, addToList(filepath.Join(vdir, "list"), m.Version)
}

// addToList adds version to the proxy's list file, once.
func addToList(file, version string) error {
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(b))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
