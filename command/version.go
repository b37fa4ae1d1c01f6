package command

import (
	"runtime"
	"strings"

	"github.com/hashicorp/cli"
)

// Version is GPUlayer's version, without the leading "v".
var Version = "0.1.0"

// versionString is "GPUlayer v0.1.0".
func versionString() string { return "GPUlayer v" + Version }

// VersionCommand prints the version and the Go version it was built with.
type VersionCommand struct{ Meta *Meta }

// Help returns the command's usage.
func (c *VersionCommand) Help() string {
	return strings.TrimSpace(`
Usage: gpulayer version

  Prints the GPUlayer version and the Go version it was built with.
`)
}

// Synopsis returns a one-line description.
func (c *VersionCommand) Synopsis() string { return "Print the GPUlayer version" }

// Run prints the version.
func (c *VersionCommand) Run(args []string) int {
	if len(args) > 0 {
		c.Meta.UI.Error("This command takes no arguments")
		return cli.RunResultHelp
	}
	c.Meta.UI.Output(versionString() + " (" + runtime.Version() + ")")
	return 0
}
