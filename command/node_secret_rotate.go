package command

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpulayer/gpulayer/nomadish/api"
)

// NodeSecretRotateCommand gives a node a new secret.
type NodeSecretRotateCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *NodeSecretRotateCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer node secret rotate [options] NODE
       gpulayer node secret rotate [options] -self

  Gives a node a new node secret. The node's own client agent asks the
  servers for it with its current secret, stores it and keeps working;
  from then on the old secret is refused. The CLI looks the node's HTTP
  address up through -address (node read rights) and asks that agent
  (with -self, the agent at -address). The agent requires the node's
  current secret, read from -secret-file (the agent's
  <data_dir>/client/node-secret, readable by the agent's user only): no
  ACL token is enough. The secret is never printed.
` + generalOptions + `
Rotate Options:

  -self
    Rotate the secret of the node of the agent at -address.

  -secret-file=<path>
    The node's current secret: the agent's <data_dir>/client/node-secret
    file. Required.
`)
}

// Synopsis returns a one-line description.
func (c *NodeSecretRotateCommand) Synopsis() string { return "Rotate a node's secret" }

// Run asks the node's agent to rotate.
func (c *NodeSecretRotateCommand) Run(args []string) int {
	fs := c.Meta.flagSet("node secret rotate", false)
	var self bool
	var secretFile string
	fs.BoolVar(&self, "self", false, "")
	fs.StringVar(&secretFile, "secret-file", "", "")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if secretFile == "" {
		return c.Meta.errorf("Error: -secret-file is required: the node's <data_dir>/client/node-secret file")
	}
	nodeSecret, err := readNodeSecretFile(secretFile)
	if err != nil {
		return c.Meta.errorf("Error reading -secret-file: %v", err)
	}
	client, err := c.Meta.client()
	if err != nil {
		return c.Meta.errorf("Error initializing client: %v", err)
	}
	id, code := c.Meta.resolveNodeArg(client, self, fs.Args())
	if id == "" {
		return code
	}
	target := client
	if !self {
		node, _, err := client.Nodes().Info(id, nil)
		if err != nil {
			return c.Meta.errorf("Error reading node %s: %v", id, err)
		}
		if node.HTTPAddr == "" {
			return c.Meta.errorf("Node %s has no HTTP address to reach its agent", id)
		}
		// The node's agent gets the node's secret only, never the
		// operator's token: HTTPAddr is whatever the node registered.
		if target, err = api.NewClient(&api.Config{Address: node.HTTPAddr}); err != nil {
			return c.Meta.errorf("Error initializing client for node %s at %s: %v", id, node.HTTPAddr, err)
		}
	}
	got, err := target.Nodes().RotateNodeSecret(nodeSecret, nil)
	if err != nil {
		return c.Meta.errorf("Error rotating the secret of node %s: %v", id, err)
	}
	if got != "" && got != id && !strings.HasPrefix(got, id) {
		return c.Meta.errorf("Error: the agent reached rotated node %s, not %s", got, id)
	}
	c.Meta.UI.Output(fmt.Sprintf("Node %s has a new secret; the old one is refused", got))
	return 0
}

// maxNodeSecretFile bounds the node secret file read by -secret-file.
const maxNodeSecretFile = 4 << 10

// readNodeSecretFile returns the trimmed content of path, a node secret
// file of at most 4 KiB. Errors name the path.
func readNodeSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxNodeSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxNodeSecretFile {
		return "", fmt.Errorf("%s: larger than %d bytes, not a node secret", path, maxNodeSecretFile)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s: empty", path)
	}
	return secret, nil
}
