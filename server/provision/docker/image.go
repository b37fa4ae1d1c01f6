package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// ImageRepository is the repository of the images the provider builds;
// the tag is the first 12 hex digits of the binary's SHA-256.
const ImageRepository = "gpulayer-host"

// AgentPath is where the image holds the gpulayer binary.
const AgentPath = "/gpulayer"

// maxBuildOutput bounds what is read of the engine's build progress.
const maxBuildOutput = 16 << 20

// imageKey identifies a binary file by what stat says, so its digest is
// computed once per version of the file.
type imageKey struct {
	path  string
	size  int64
	mtime time.Time
}

// ensureImage returns the image to run: s.Image when the pool names one
// (it must exist on the engine: nothing is pulled), else the image built
// from the gpulayer binary, built now if the engine lacks it.
func (p *Provider) ensureImage(ctx context.Context, s Settings) (string, error) {
	if s.Image != "" {
		if _, err := p.api.ImageInspect(ctx, s.Image); err != nil {
			if cerrdefs.IsNotFound(err) {
				return "", fmt.Errorf("%w: %s: image %q is not on the engine, and the provider never pulls (build or load it first)", ErrConfig, KeyImage, s.Image)
			}
			return "", fmt.Errorf("docker provider: inspect image %q: %w", s.Image, err)
		}
		return s.Image, nil
	}
	bin := s.Binary
	if bin == "" {
		bin = p.cfg.Binary
	}
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("docker provider: find the gpulayer binary: %w (set %s)", err, KeyBinary)
		}
		bin = exe
	}
	// One build at a time; a waiter gives up at its deadline.
	select {
	case p.buildLock <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("docker provider: waiting for another image build: %w", ctx.Err())
	}
	defer func() { <-p.buildLock }()
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrConfig, KeyBinary, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s: %s is not a regular file", ErrConfig, KeyBinary, bin)
	}
	key := imageKey{bin, fi.Size(), fi.ModTime()}
	img, ok := p.images[key]
	if !ok {
		libs, err := libraries(bin)
		if err != nil {
			return "", err
		}
		sum, err := fileSHA256(bin)
		if err != nil {
			return "", fmt.Errorf("docker provider: hash %s: %w", bin, err)
		}
		if sum, err = imageDigest(sum, libs); err != nil {
			return "", err
		}
		img = builtImage{tag: ImageRepository + ":" + sum[:12], libs: libs}
	}
	if _, err := p.api.ImageInspect(ctx, img.tag); err == nil {
		p.images[key] = img
		return img.tag, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("docker provider: inspect image %s: %w", img.tag, err)
	}
	start := time.Now()
	if err := p.buildImage(ctx, bin, img); err != nil {
		return "", err
	}
	p.logger.Info("built host image", "image", img.tag, "binary", bin, "shared_libraries", len(img.libs), "duration", time.Since(start))
	p.images[key] = img
	return img.tag, nil
}

// builtImage is the image of one version of a binary: its tag and the
// files it holds beyond the binary.
type builtImage struct {
	tag  string
	libs []imageFile
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dockerfile builds the host image: the binary, a passwd and group with
// root and nobody (native tasks run as nobody by default), /tmp, and the
// directories the agent config and data go in.
const dockerfile = `FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/gpulayer"]
`

// buildImage sends the engine a tar context (streamed, the binary is
// not held in memory) and reads the build's progress to its end, failing
// on the first error it reports.
func (p *Provider) buildImage(ctx context.Context, bin string, img builtImage) error {
	tag := img.tag
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, bin, img.libs)) }()
	defer pr.Close()
	res, err := p.api.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Dockerfile: "Dockerfile",
		Labels: map[string]string{LabelManaged: "true"},
	})
	if err != nil {
		return fmt.Errorf("docker provider: build image %s: %w", tag, err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(io.LimitReader(res.Body, maxBuildOutput))
	var last string
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("docker provider: build image %s: read progress: %w", tag, err)
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			msg := m.ErrorDetail.Message
			if msg == "" {
				msg = m.Error
			}
			return fmt.Errorf("docker provider: build image %s: %s", tag, msg)
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			last = s
		}
	}
	if _, err := p.api.ImageInspect(ctx, tag); err != nil {
		return fmt.Errorf("docker provider: build image %s ended (%q) without the image: %w", tag, last, err)
	}
	return nil
}

// writeContext writes the build context: Dockerfile and rootfs/, with
// libs at their paths.
func writeContext(w io.Writer, bin string, libs []imageFile) error {
	tw := tar.NewWriter(w)
	now := time.Unix(0, 0)
	file := func(name string, mode int64, body string) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.WriteString(tw, body)
		return err
	}
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: mode, ModTime: now, Typeflag: tar.TypeDir})
	}
	steps := []func() error{
		func() error { return file("Dockerfile", 0o644, dockerfile) },
		func() error { return dir("rootfs/", 0o755) },
		func() error { return dir("rootfs/etc/", 0o755) },
		func() error { return dir("rootfs/etc/gpulayer/", 0o700) },
		func() error { return dir("rootfs/data/", 0o700) },
		func() error { return dir("rootfs/tmp/", 0o1777) },
		func() error {
			return file("rootfs/etc/passwd", 0o644, "root:x:0:0:root:/root:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n")
		},
		func() error { return file("rootfs/etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\nnobody:x:65534:\n") },
		func() error { return copyFile(tw, "rootfs"+AgentPath, bin, now) },
	}
	dirs := map[string]bool{"rootfs/": true, "rootfs/etc/": true, "rootfs/tmp/": true, "rootfs/data/": true}
	for _, l := range libs {
		// Parents first ("rootfs/lib/", "rootfs/lib/x86_64-linux-gnu/").
		var parents []string
		for d := filepath.Dir(l.path); d != "/" && d != "."; d = filepath.Dir(d) {
			parents = append([]string{"rootfs" + d + "/"}, parents...)
		}
		for _, d := range parents {
			if !dirs[d] {
				dirs[d] = true
				steps = append(steps, func() error { return dir(d, 0o755) })
			}
		}
		steps = append(steps, func() error { return copyFile(tw, "rootfs"+l.path, l.src, now) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyFile adds the regular file src to tw as name, mode 0755.
func copyFile(tw *tar.Writer, name, src string, mtime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: fi.Size(), ModTime: mtime, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}
