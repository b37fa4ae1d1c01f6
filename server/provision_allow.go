package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpulayer/gpulayer/server/provision/docker"
	provexec "github.com/gpulayer/gpulayer/server/provision/exec"
	"github.com/gpulayer/gpulayer/structs"
)

// checkPoolProvider refuses a pool whose provider config names a program,
// an image, a binary or a server environment variable to pass that this
// server's agent config does not list (ProvisionConfig.ExecCommands,
// DockerImages, DockerBinaries, ExecPassEnv). A pool is
// written through the API by anyone with operator write; what the leader
// then runs is the server operator's decision alone, so the API may only
// pick one of the entries the server config names. Errors wrap
// structs.ErrInvalid and name the key and the agent config setting.
func (pc *ProvisionConfig) checkPoolProvider(p *structs.NodePool) error {
	if p == nil || p.Scaling == nil {
		return nil
	}
	sp := p.Scaling
	refuse := func(key, v, setting string, list []string) error {
		if slices.Contains(list, v) {
			return nil
		}
		// The count, not the entries: what the server may run is its
		// operator's to know; the pool writer learns only that this one
		// is not among them.
		why := "lists none"
		switch len(list) {
		case 0:
		case 1:
			why = "lists 1 entry, and this is not it"
		default:
			why = fmt.Sprintf("lists %d entries, and this is none of them", len(list))
		}
		return fmt.Errorf("%w: node pool %q: scaling: config %q: %q is not allowed: the server's agent config (server.%s) %s",
			structs.ErrInvalid, p.Name, key, truncateForError(v), setting, why)
	}
	switch sp.Provider {
	case provexec.Name:
		if err := refuse(provexec.KeyCommand, sp.ProviderConfig[provexec.KeyCommand], "provision_exec_commands", pc.ExecCommands); err != nil {
			return err
		}
		for _, n := range strings.Split(sp.ProviderConfig[provexec.KeyPassEnv], ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			if err := refuse(provexec.KeyPassEnv, n, "provision_exec_pass_env", pc.ExecPassEnv); err != nil {
				return err
			}
		}
	case docker.Name:
		if v, ok := sp.ProviderConfig[docker.KeyImage]; ok {
			if err := refuse(docker.KeyImage, v, "provision_docker_images", pc.DockerImages); err != nil {
				return err
			}
		}
		if v, ok := sp.ProviderConfig[docker.KeyBinary]; ok {
			if err := refuse(docker.KeyBinary, v, "provision_docker_binaries", pc.DockerBinaries); err != nil {
				return err
			}
		}
	}
	return nil
}

func truncateForError(s string) string {
	const n = 128
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
