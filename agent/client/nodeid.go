package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// loadOrCreateID returns the ID stored in dir/name, creating it with a new
// UUID (mode 0600) the first time, so a restarted client keeps its identity.
func loadOrCreateID(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("%s is empty; remove it to get a new ID", p)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	id := structs.GenerateUUID()
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("rename %s: %w", tmp, err)
	}
	return id, nil
}
