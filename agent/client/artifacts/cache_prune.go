package artifacts

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// DefaultCacheMaxBytes bounds the client's cache: 20 GiB. Past it the
// least recently used blobs go first (a blob's mtime is set on every
// use).
const DefaultCacheMaxBytes = 20 << 30

// staleFetchAge is how old a temporary download must be before Prune
// removes it (an interrupted fetch; a running one writes to it).
const staleFetchAge = time.Hour

func (c *Cache) cacheMax() int64 {
	if c.MaxCacheBytes > 0 {
		return c.MaxCacheBytes
	}
	return DefaultCacheMaxBytes
}

// touch marks the blob want as just used.
func (c *Cache) touch(want string) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(c.Dir, want), now, now)
}

// Prune removes the least recently used blobs until the cache holds at
// most MaxCacheBytes (keep is never removed: it is the blob in use), and
// temporary downloads older than an hour. It returns how many bytes it
// freed. Errors are ignored: what is left is only disk space.
func (c *Cache) Prune(keep string) int64 {
	ents, err := os.ReadDir(c.Dir)
	if err != nil {
		return 0
	}
	type blob struct {
		name  string
		size  int64
		mtime time.Time
	}
	var blobs []blob
	var total, freed int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		name := e.Name()
		if strings.HasPrefix(name, ".fetch-") {
			if time.Since(fi.ModTime()) > staleFetchAge && os.Remove(filepath.Join(c.Dir, name)) == nil {
				freed += fi.Size()
			}
			continue
		}
		if !structs.ValidDigest(name) {
			continue
		}
		blobs = append(blobs, blob{name, fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].mtime.Before(blobs[j].mtime) })
	for _, b := range blobs {
		if total <= c.cacheMax() {
			break
		}
		if b.name == keep {
			continue
		}
		if os.Remove(filepath.Join(c.Dir, b.name)) == nil {
			total -= b.size
			freed += b.size
		}
	}
	return freed
}
