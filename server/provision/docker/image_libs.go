package docker

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// maxLibraries bounds how many shared libraries a binary may pull into
// the image.
const maxLibraries = 64

// imageFile is a file of the image beyond the binary: a dynamically
// linked binary's interpreter or one of its shared libraries, at the path
// it has on this host (where the interpreter's own search path finds it in
// the image too), copied from src (the symlinks resolved).
type imageFile struct {
	path string
	src  string
}

// libDirs is where a library named without a slash is looked for, in the
// order of the glibc loader's system search path (there is no
// ld.so.cache in the image, and Go binaries carry no RPATH).
func libDirs() []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// libraries returns what a FROM-scratch image needs to run bin: nothing
// for a static binary (CGO_ENABLED=0); for a dynamically linked one (a
// default cgo build) its interpreter and every shared library it needs,
// transitively. Errors wrap ErrConfig: not an ELF file, or a library
// that cannot be found (then build with CGO_ENABLED=0).
func libraries(bin string) ([]imageFile, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s is not an ELF executable: %v", ErrConfig, KeyBinary, bin, err)
	}
	defer f.Close()
	interp := ""
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, min(prog.Filesz, 4096))
		if _, err := prog.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("%w: %s: read the interpreter of %s: %v", ErrConfig, KeyBinary, bin, err)
		}
		interp = string(bytes.TrimRight(b, "\x00"))
	}
	if interp == "" {
		return nil, nil
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: read the libraries %s needs: %v", ErrConfig, KeyBinary, bin, err)
	}
	var files []imageFile
	seen := map[string]bool{}
	add := func(path, neededBy string) error {
		if seen[path] {
			return nil
		}
		seen[path] = true
		src, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("%w: %s: %s (needed by %s): %v; build gpulayer with CGO_ENABLED=0 or name an %q",
				ErrConfig, KeyBinary, path, neededBy, err, KeyImage)
		}
		files = append(files, imageFile{path: path, src: src})
		if len(files) > maxLibraries {
			return fmt.Errorf("%w: %s: %s needs more than %d shared libraries; build it with CGO_ENABLED=0", ErrConfig, KeyBinary, bin, maxLibraries)
		}
		return nil
	}
	if !filepath.IsAbs(interp) {
		return nil, fmt.Errorf("%w: %s: %s names the interpreter %q, not an absolute path", ErrConfig, KeyBinary, bin, interp)
	}
	if err := add(interp, bin); err != nil {
		return nil, err
	}
	type want struct{ name, by string }
	queue := make([]want, 0, len(needed))
	for _, n := range needed {
		queue = append(queue, want{n, bin})
	}
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		path := ""
		if strings.Contains(w.name, "/") {
			path = w.name
		} else {
			for _, d := range libDirs() {
				if fi, err := os.Stat(filepath.Join(d, w.name)); err == nil && fi.Mode().IsRegular() {
					path = filepath.Join(d, w.name)
					break
				}
			}
		}
		if path == "" {
			return nil, fmt.Errorf("%w: %s: shared library %s (needed by %s) is in none of %s; build gpulayer with CGO_ENABLED=0 or name an %q",
				ErrConfig, KeyBinary, w.name, w.by, strings.Join(libDirs(), ", "), KeyImage)
		}
		if seen[path] {
			continue
		}
		if err := add(path, w.by); err != nil {
			return nil, err
		}
		lf, err := elf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s (needed by %s) is not an ELF library: %v", ErrConfig, KeyBinary, path, w.by, err)
		}
		more, err := lf.ImportedLibraries()
		lf.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: read the libraries %s needs: %v", ErrConfig, KeyBinary, path, err)
		}
		for _, n := range more {
			queue = append(queue, want{n, path})
		}
	}
	return files, nil
}

// imageDigest is the hex SHA-256 the image's tag is cut from: the
// binary's own digest for a static binary, else a digest over the
// binary's and each library's path and digest, so a changed library gets
// a new image.
func imageDigest(binSum string, libs []imageFile) (string, error) {
	if len(libs) == 0 {
		return binSum, nil
	}
	h := sha256.New()
	h.Write([]byte(binSum))
	for _, l := range libs {
		sum, err := fileSHA256(l.src)
		if err != nil {
			return "", fmt.Errorf("docker provider: hash %s: %w", l.src, err)
		}
		fmt.Fprintf(h, "\x00%s\x00%s", l.path, sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
